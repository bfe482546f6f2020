"""The export folder's manifest: every damaged file is one line naming the folder and the file,
never a traceback and never a silent score; version-1 folders load with a warning."""

import json
import logging
import shutil
import subprocess
import sys

import pytest
import pytorch_lightning as pl

from lightning_metrics import load_metric
from lightning_metrics.cli.main import main
from lightning_metrics.data.modules import RatingsDataModule
from lightning_metrics.errors import InputError
from lightning_metrics.models import CometEstimator
from lightning_metrics.storage.artifact import MANIFEST, METADATA, read_export
from lightning_metrics.training.export import export_checkpoint

MT, REF, SRC = ["The cat sat on the mat."], ["The cat is on the mat."], ["Le chat est sur le tapis."]


@pytest.fixture(scope="module")
def export(tmp_path_factory, tiny_encoder, da_rows, write_csv):
    folder = tmp_path_factory.mktemp("artifact")
    data = write_csv(folder / "r.csv", da_rows[:16])
    pl.seed_everything(0)
    model = CometEstimator(encoder=str(tiny_encoder), head={"hidden_sizes": (16,)})
    dm = RatingsDataModule(
        train=str(data), val=str(data), encoder=str(tiny_encoder), batches={"batch_size": 8}, layout=model.batch_layout
    )
    trainer = pl.Trainer(
        max_epochs=1, logger=False, enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False
    )
    trainer.fit(model, dm)
    trainer.save_checkpoint(folder / "m.ckpt")
    return export_checkpoint(folder / "m.ckpt", folder / "clean")


def _truncate(path):
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _flip_byte(path):
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))


def _unlist(name):
    def damage(folder):
        manifest = json.loads((folder / MANIFEST).read_text())
        del manifest["files"][name]
        (folder / MANIFEST).write_text(json.dumps(manifest))
        (folder / name).unlink()

    return damage


# damage -> the problem the one-line error states after "error: <folder>: "
DAMAGES = {
    "metric.json deleted": (lambda f: (f / "metric.json").unlink(), "metric.json is missing (the manifest lists it)"),
    "weights deleted": (
        lambda f: (f / "model.safetensors").unlink(),
        "model.safetensors is missing (the manifest lists it)",
    ),
    "encoder config deleted": (
        lambda f: (f / "config.json").unlink(),
        "config.json is missing (the manifest lists it)",
    ),
    "tokenizer deleted": (
        lambda f: (f / "tokenizer.json").unlink(),
        "tokenizer.json is missing (the manifest lists it)",
    ),
    "tokenizer config deleted": (
        lambda f: (f / "tokenizer_config.json").unlink(),
        "tokenizer_config.json is missing (the manifest lists it)",
    ),
    "model card deleted": (lambda f: (f / "README.md").unlink(), "README.md is missing (the manifest lists it)"),
    "manifest deleted": (
        lambda f: (f / MANIFEST).unlink(),
        "manifest.json is missing, so the folder cannot be verified (format version 2 writes one)",
    ),
    "weights truncated": (
        lambda f: _truncate(f / "model.safetensors"),
        "model.safetensors is damaged: {size} bytes, the manifest says {full} (truncated or altered)",
    ),
    "tokenizer truncated": (
        lambda f: _truncate(f / "tokenizer.json"),
        "tokenizer.json is damaged: {size} bytes, the manifest says {full} (truncated or altered)",
    ),
    "weights altered": (
        lambda f: _flip_byte(f / "model.safetensors"),
        "model.safetensors is damaged: its sha256 differs from the manifest (altered)",
    ),
    "encoder config altered": (
        lambda f: (f / "config.json").write_text(
            (f / "config.json").read_text().replace('"hidden_size": 32', '"hidden_size": 64')
        ),
        "config.json is damaged: its sha256 differs from the manifest (altered)",
    ),
    "metadata altered": (
        lambda f: _flip_byte(f / "metric.json"),
        "metric.json is damaged: its sha256 differs from the manifest (altered)",
    ),
    "manifest not JSON": (lambda f: _truncate(f / MANIFEST), "manifest.json is not readable JSON ({detail})"),
    "manifest entry and file removed": (
        _unlist("tokenizer.json"),
        "tokenizer.json is required by metric.json but not listed in manifest.json",
    ),
    "every file removed": (
        lambda f: [p.unlink() for p in f.iterdir()],
        "not an exported metric folder (no metric.json and no manifest.json)",
    ),
}


@pytest.mark.parametrize("damage", list(DAMAGES))
def test_damaged_export_is_one_line_naming_folder_and_file(export, tmp_path, capsys, damage):
    folder = tmp_path / "est"
    shutil.copytree(export, folder)
    name = next((n for n in ("model.safetensors", "tokenizer.json") if n in DAMAGES[damage][1]), None)
    full = (folder / name).stat().st_size if name else 0
    apply, problem = DAMAGES[damage]
    apply(folder)
    size = (folder / name).stat().st_size if name and (folder / name).exists() else 0
    for name_ in ("hyp", "ref", "src"):
        (tmp_path / f"{name_}.txt").write_text({"hyp": MT, "ref": REF, "src": SRC}[name_][0] + "\n")
    code = main(
        [
            "score",
            "--model",
            str(folder),
            "-t",
            str(tmp_path / "hyp.txt"),
            "-r",
            str(tmp_path / "ref.txt"),
            "-s",
            str(tmp_path / "src.txt"),
        ]
    )
    captured = capsys.readouterr()
    assert code == 2 and "Segment" not in captured.out
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in captured.err
    expected = f"error: {folder}: " + problem.format(size=size, full=full, detail="")
    if "{detail}" in problem:
        assert lines[0].startswith(expected[:-2])
    else:
        assert lines[0] == expected
    with pytest.raises(InputError):  # Python users get the same error
        load_metric(str(folder))


def test_a_damaged_export_fails_in_a_fresh_process_without_traceback(export, tmp_path):
    folder = tmp_path / "est"
    shutil.copytree(export, folder)
    _flip_byte(folder / "model.safetensors")
    (tmp_path / "h.txt").write_text("a b\n")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "lightning_metrics.cli",
            "score",
            "--model",
            str(folder),
            "-t",
            str(tmp_path / "h.txt"),
            "-r",
            str(tmp_path / "h.txt"),
            "-s",
            str(tmp_path / "h.txt"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.strip().splitlines() == [
        f"error: {folder}: model.safetensors is damaged: its sha256 differs from the manifest (altered)"
    ]


def test_init_from_reads_through_the_same_checks(export, tmp_path, tiny_encoder):
    folder = tmp_path / "est"
    shutil.copytree(export, folder)
    _truncate(folder / "model.safetensors")
    with pytest.raises(InputError, match="model.safetensors is damaged"):
        CometEstimator(encoder=str(tiny_encoder), init_from=str(folder))


def test_manifest_lists_every_file_with_its_hash(export):
    manifest = json.loads((export / MANIFEST).read_text())
    on_disk = sorted(p.name for p in export.iterdir() if p.name != MANIFEST)
    assert sorted(manifest["files"]) == on_disk
    meta = json.loads((export / METADATA).read_text())
    assert meta["format_version"] == 2 and meta["requires"] == [n for n in on_disk if n != METADATA]
    assert read_export(export).verified


def test_version_1_folders_load_with_a_warning(export, tmp_path, caplog):
    folder = tmp_path / "old"
    shutil.copytree(export, folder)
    (folder / MANIFEST).unlink()
    meta = json.loads((folder / METADATA).read_text())
    meta["format_version"] = 1
    del meta["requires"]
    (folder / METADATA).write_text(json.dumps(meta))
    with caplog.at_level(logging.WARNING, logger="lightning_metrics.storage.artifact"):
        old = load_metric(str(folder)).score(mt=MT, ref=REF, src=SRC).scores
    assert f"{folder}: format version 1 has no manifest; its files cannot be verified" in caplog.text
    assert old == load_metric(str(export)).score(mt=MT, ref=REF, src=SRC).scores
    assert not read_export(folder).verified


def test_evaluate_hashes_each_export_file_once(export, tmp_path, da_rows, write_csv, monkeypatch, capsys):
    from lightning_metrics.storage import artifact

    hashed, real = [], artifact.sha256_of
    monkeypatch.setattr(artifact, "sha256_of", lambda path: hashed.append(path.name) or real(path))
    data = write_csv(tmp_path / "r.csv", da_rows[:8])
    assert main(["evaluate", "--data", str(data), "--metrics", str(export), "--bootstrap", "0", "--quiet", "true"]) == 0
    listed = json.loads((export / MANIFEST).read_text())["files"]
    assert sorted(hashed) == sorted(listed)  # the load's one check, nothing hashed to learn what it reads
