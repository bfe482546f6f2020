"""Export and load: round trip in a fresh offline process, atomic writes, no pickles, bad folders."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest
import pytorch_lightning as pl
import torch

from lightning_metrics import load_metric
from lightning_metrics.cli.main import main
from lightning_metrics.data.modules import RatingsDataModule
from lightning_metrics.errors import InputError, LightningMetricsError
from lightning_metrics.models import BleurtRegressor
from lightning_metrics.storage.artifact import _manifest_of

MT = ["The cat sat on the mat.", "A dog ran fast.", "She left her umbrella on the bus.", "Prices went up."]
REF = [
    "The cat is on the mat.",
    "A dog ran fast across the field.",
    "She left her umbrella on the bus.",
    "Prices went up five percent.",
]


@pytest.fixture(scope="module")
def trained(tmp_path_factory, tiny_encoder, da_rows, write_csv):
    folder = tmp_path_factory.mktemp("trained")
    data = write_csv(folder / "r.csv", da_rows[:48])
    pl.seed_everything(0)
    dm = RatingsDataModule(train=str(data), val=str(data), encoder=str(tiny_encoder), batches={"batch_size": 16})
    model = BleurtRegressor(encoder=str(tiny_encoder), optim={"lr_encoder": 1e-3, "lr_head": 1e-3})
    trainer = pl.Trainer(
        max_epochs=2, logger=False, enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False
    )
    trainer.fit(model, dm)
    trainer.save_checkpoint(folder / "model.ckpt")
    model.eval()
    import torch

    from lightning_metrics.data.batching import CrossEncoderCollate

    batch = CrossEncoderCollate(dm.tokenizer, 128, [], {}, {})(
        [{"mt": m, "ref": r, "index": i} for i, (m, r) in enumerate(zip(MT, REF))]
    )
    with torch.no_grad():
        in_memory = model.scores_from(model(batch)).tolist()
    return folder / "model.ckpt", in_memory


def test_round_trip_in_a_fresh_offline_process(trained, tmp_path, capsys):
    ckpt, in_memory = trained
    out = tmp_path / "checkpoints" / "tiny"
    assert main(["export", str(ckpt), "--out", str(out)]) == 0
    assert {"README.md", "config.json", "manifest.json", "metric.json", "model.safetensors"} <= {
        p.name for p in out.iterdir()
    }
    meta = json.loads((out / "metric.json").read_text())
    assert meta["format_version"] == 2 and meta["family"] == "BleurtRegressor" and meta["inputs"] == ["mt", "ref"]
    code = (
        "from lightning_metrics import load_metric; import json; "
        f"print(json.dumps(load_metric({str(out)!r}).score(mt={MT!r}, ref={REF!r}).scores))"
    )
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    loaded = json.loads(proc.stdout.strip().splitlines()[-1])
    assert loaded == pytest.approx(in_memory, abs=1e-6)
    result = load_metric(str(out)).score(mt=MT, ref=REF)
    assert load_metric(str(out)).score(mt=MT * 3, ref=REF * 3, devices=2, batch_size=2).scores == pytest.approx(
        loaded * 3, abs=1e-6
    )
    assert result.signature.startswith("tiny|hash:") and result.system_score == pytest.approx(
        sum(loaded) / len(loaded), abs=1e-6
    )
    capsys.readouterr()
    (tmp_path / "h.txt").write_text("\n".join(MT) + "\n")
    (tmp_path / "r.txt").write_text("\n".join(REF) + "\n")
    assert main(["score", "--model", str(out), "-t", str(tmp_path / "h.txt"), "-r", str(tmp_path / "r.txt")]) == 0
    assert f"h.txt\tSegment 0\tscore: {loaded[0]:.4f}" in capsys.readouterr().out


def test_a_planted_pickle_is_never_loaded(trained, tmp_path):
    ckpt, _ = trained
    out = tmp_path / "m"
    assert main(["export", str(ckpt), "--out", str(out)]) == 0
    marker = tmp_path / "pwned"

    class Evil:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    import pickle

    for name in ("pytorch_model.bin", "training_args.bin", "tokenizer.pkl", "optimizer.pt"):
        (out / name).write_bytes(pickle.dumps(Evil()))
    load_metric(str(out)).score(mt=MT, ref=REF)
    assert not marker.exists()


def test_export_killed_midway_leaves_nothing_at_the_target(trained, tmp_path):
    ckpt, _ = trained
    target = tmp_path / "atomic"
    proc = subprocess.Popen(
        [sys.executable, "-m", "lightning_metrics.cli", "export", str(ckpt), "--out", str(target)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.time() + 120
    while (
        proc.poll() is None
        and time.time() < deadline
        and not any(p.name.startswith(".atomic.tmp") for p in tmp_path.iterdir())
    ):
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    if target.exists():  # the rename had already happened: then the folder is complete
        load_metric(str(target)).score(mt=MT[:1], ref=REF[:1])
    else:
        assert not target.exists()
    assert main(["export", str(ckpt), "--out", str(target), "--force", "true"]) == 0
    assert (target / "metric.json").is_file()


def test_bad_folders(trained, tmp_path, capsys):
    ckpt, _ = trained
    (tmp_path / "plain").mkdir()
    with pytest.raises(InputError, match="not an exported metric folder"):
        load_metric(str(tmp_path / "plain"))
    out = tmp_path / "future"
    assert main(["export", str(ckpt), "--out", str(out)]) == 0
    meta = json.loads((out / "metric.json").read_text())
    meta["format_version"] = 99
    (out / "metric.json").write_text(json.dumps(meta))
    (out / "manifest.json").write_text(json.dumps(_manifest_of(out)))  # a consistent folder from a future version
    with pytest.raises(InputError, match="format version 99 is newer than this code reads"):
        load_metric(str(out))
    assert main(["score", "--model", str(tmp_path / "plain"), "-t", __file__, "-r", __file__]) == 2
    assert "not an exported metric folder (no metric.json and no manifest.json)" in capsys.readouterr().err


def test_fine_tuning_can_start_from_an_export(trained, tmp_path, tiny_encoder):
    ckpt, _ = trained
    out = tmp_path / "base"
    assert main(["export", str(ckpt), "--out", str(out)]) == 0
    exported = load_metric(str(out)).model
    tuned = BleurtRegressor(encoder=str(tiny_encoder), init_from=str(out))
    for name, value in exported.state_dict().items():
        if name.startswith(("encoder.", "head.", "layer_mix.")):
            assert torch.equal(tuned.state_dict()[name], value), name


def test_an_export_as_encoder_brings_the_architecture_and_init_from_every_weight(trained, tmp_path):
    ckpt, _ = trained
    out = tmp_path / "base"
    assert main(["export", str(ckpt), "--out", str(out)]) == 0
    exported = load_metric(str(out)).model.state_dict()
    tuned = BleurtRegressor(encoder=str(out), init_from=str(out)).state_dict()
    assert all(torch.equal(tuned[k], v) for k, v in exported.items() if not k.startswith(("target_", "stats_")))
    with pytest.raises(InputError, match="give the same folder as model.init_from"):
        BleurtRegressor(encoder=str(out))


def test_l2_to_start_pulls_the_weights_back_to_the_start(trained, tmp_path, tiny_encoder):
    """Trained on the same rows for the same steps, a strong pull ends nearer the start than none does;
    the penalty is the squared distance itself (0 at the start)."""
    ckpt, _ = trained
    data = ckpt.parent / "r.csv"
    out = tmp_path / "base"
    assert main(["export", str(ckpt), "--out", str(out)]) == 0
    drift = {}
    for strength in (0.0, 10.0):
        pl.seed_everything(0)
        model = BleurtRegressor(
            encoder=str(tiny_encoder), init_from=str(out), objective={"l2_to_start": strength}, optim={"lr_head": 1e-2}
        )
        if strength:
            assert model.distance_to_start().item() == 0.0
        trainer = pl.Trainer(max_steps=8, logger=False, enable_checkpointing=False, enable_progress_bar=False,
                             enable_model_summary=False, limit_val_batches=0)  # fmt: skip
        dm = RatingsDataModule(train=str(data), val=str(data), encoder=str(tiny_encoder), batches={"batch_size": 16})
        trainer.fit(model, dm)
        start = load_metric(str(out)).model.state_dict()
        drift[strength] = sum((v.float() - start[k].float()).pow(2).sum().item()
                              for k, v in model.state_dict().items() if k.startswith("head."))  # fmt: skip
    assert drift[10.0] < 0.5 * drift[0.0]
    with pytest.raises(LightningMetricsError, match="l2_to_start needs model.init_from"):
        BleurtRegressor(encoder=str(tiny_encoder), objective={"l2_to_start": 1.0}).distance_to_start()
