"""Where users already are: ``MetricScore`` inside a Lightning training loop (two spawned processes equal
one), hub ids through a real Hugging Face cache layout, and sacrebleu's tokenizers."""

from __future__ import annotations

import json

import numpy as np
import pytest
import pytorch_lightning as pl
import sacrebleu
import torch
from conftest import TINY_CORPUS, export_tiny
from torch.utils.data import DataLoader

from lightning_metrics.integrations.torchmetrics import MetricScore
from lightning_metrics.models import CometEstimator

ROWS = [
    {"mt": TINY_CORPUS[i], "ref": TINY_CORPUS[(i * 5 + 1) % len(TINY_CORPUS)], "src": TINY_CORPUS[i][::-1]}
    for i in range(12)
] * 2  # fmt: skip  (24 rows: two processes take 12 each, no padding)


class Validating(pl.LightningModule):
    """A module that only validates: each validation batch updates every MetricScore; rank 0 writes them."""

    def __init__(self, specs: dict[str, str], out: str):
        super().__init__()
        self.layer = torch.nn.Linear(1, 1)
        self.metrics = torch.nn.ModuleDict({k: MetricScore(v) for k, v in specs.items()})
        self.out = out

    def validation_step(self, batch, i):
        for metric in self.metrics.values():
            metric.update(batch["mt"], batch["ref"], batch["src"])

    def on_validation_epoch_end(self):
        values = {k: float(m.compute()) for k, m in self.metrics.items()}
        segments = {k: m.segment_scores().tolist() for k, m in self.metrics.items()}
        if self.trainer.is_global_zero:
            with open(self.out, "w") as f:
                json.dump({"values": values, "segments": segments}, f)
        for metric in self.metrics.values():
            metric.reset()


def columns(rows: list[dict]) -> dict:
    return {k: [r[k] for r in rows] for k in rows[0]}


def loader():
    return DataLoader(ROWS, batch_size=4, collate_fn=columns)


def test_metric_score_under_ddp_equals_one_process(tmp_path, tiny_encoder, write_csv, da_rows):
    learned = export_tiny(
        CometEstimator(encoder=str(tiny_encoder)),
        tiny_encoder,
        write_csv(tmp_path / "r.csv", da_rows[:32]),
        tmp_path,
        "m",
    )
    specs = {"bleu": "bleu", "chrf": "chrf:word_order=2", "learned": str(learned)}
    module = Validating(specs, str(tmp_path / "ddp.json"))
    trainer = pl.Trainer(accelerator="cpu", devices=2, strategy="ddp_spawn", logger=False, enable_progress_bar=False,
                         enable_model_summary=False, enable_checkpointing=False)  # fmt: skip
    trainer.validate(module, loader())
    ddp = json.loads((tmp_path / "ddp.json").read_text())
    mt, ref, src = ([r[k] for r in ROWS] for k in ("mt", "ref", "src"))
    for name, spec in specs.items():
        single = MetricScore(spec)
        single.update(mt, ref, src)
        assert ddp["values"][name] == pytest.approx(float(single.compute()), abs=1e-6)
        assert sorted(ddp["segments"][name]) == pytest.approx(sorted(single.segment_scores().tolist()), abs=1e-6)
    # corpus scores, as sacrebleu computes them over all 24 rows: not a mean of sentence scores
    assert ddp["values"]["bleu"] == pytest.approx(sacrebleu.corpus_bleu(mt, [ref]).score, abs=1e-9)
    chrf = sacrebleu.metrics.CHRF(word_order=2).corpus_score(mt, [ref]).score
    assert ddp["values"]["chrf"] == pytest.approx(chrf, abs=1e-9)
    assert ddp["values"]["bleu"] != pytest.approx(np.mean(ddp["segments"]["bleu"]), abs=1e-3)


def test_a_learned_metric_is_no_part_of_the_module(tmp_path, tiny_encoder, write_csv, da_rows):
    learned = export_tiny(
        CometEstimator(encoder=str(tiny_encoder)),
        tiny_encoder,
        write_csv(tmp_path / "r.csv", da_rows[:32]),
        tmp_path,
        "m",
    )
    module = Validating({"learned": str(learned)}, str(tmp_path / "x.json"))
    assert set(module.state_dict()) == {"layer.weight", "layer.bias"}
    assert [n for n, _ in module.named_parameters()] == ["layer.weight", "layer.bias"]
    metric = module.metrics["learned"]
    metric.update(["The cat sat."], ["The cat is on the mat."], ["x"])
    scores = metric.segment_scores()
    assert not scores.requires_grad and metric.higher_is_better is True


def hub_snapshot(home, repo: str, source, revision: str = "0123456789abcdef0123456789abcdef01234567"):
    """``source``'s files as a cached snapshot of ``repo`` in the layout huggingface_hub keeps
    (``hub/models--org--name/snapshots/REV/``, ``refs/main`` naming REV)."""
    import shutil

    root = home / "hub" / f"models--{repo.replace('/', '--')}"
    shutil.copytree(source, root / "snapshots" / revision)
    (root / "refs").mkdir(parents=True, exist_ok=True)
    (root / "refs" / "main").write_text(revision)
    return revision


def test_hub_ids_resolve_from_the_cache_offline(tmp_path, tiny_encoder, write_csv, da_rows, monkeypatch, capsys):
    import subprocess
    import sys

    from test_import import COMET_CASES, write_bleurt, write_comet
    from test_import_unified import CASES, COMMON, write_unified
    from test_workflow import OFFLINE

    from lightning_metrics.cli.main import main
    from lightning_metrics.importers import import_metric
    from lightning_metrics.metrics import load_metric

    home = tmp_path / "hf"
    monkeypatch.setenv("HF_HOME", str(home))
    export = export_tiny(
        CometEstimator(encoder=str(tiny_encoder)),
        tiny_encoder,
        write_csv(tmp_path / "r.csv", da_rows[:32]),
        tmp_path,
        "m",
    )
    hub_snapshot(home, "org/tiny-export", export)
    rows = {
        "mt": [r["mt"] for r in da_rows[:6]],
        "ref": [r["ref"] for r in da_rows[:6]],
        "src": [r["src"] for r in da_rows[:6]],
    }
    assert load_metric("org/tiny-export").score(**rows).scores == load_metric(str(export)).score(**rows).scores
    (tmp_path / "t.txt").write_text("The cat sat.\n")
    env = {**OFFLINE, "HF_HOME": str(home)}
    rev = "@0123456789abcdef0123456789abcdef01234567"
    command = ["score", "--model", f"org/tiny-export{rev}", *("-t", "t.txt", "-r", "t.txt", "-s", "t.txt")]
    done = subprocess.run([sys.executable, "-m", "lightning_metrics.cli", *command], capture_output=True, text=True,
                          env=env, cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    peers = {"comet": lambda f: write_comet(f, tiny_encoder, COMET_CASES["regression-softmax-avg"]),
             "bleurt": lambda f: write_bleurt(f, tiny_encoder),
             "unified": lambda f: write_unified(f, tiny_encoder, {**COMMON, **CASES[next(iter(CASES))]})}  # fmt: skip
    for name, write in peers.items():
        write(tmp_path / name)
        revision = hub_snapshot(home, f"org/{name}-tiny", tmp_path / name)
        by_id = import_metric(f"org/{name}-tiny", tmp_path / f"{name}-by-id")
        by_folder = import_metric(tmp_path / name, tmp_path / f"{name}-by-folder")
        fields = {f: rows[f] for f in load_metric(str(by_folder)).inputs}
        assert load_metric(str(by_id)).score(**fields).scores == load_metric(str(by_folder)).score(**fields).scores
        meta = json.loads((by_id / "metric.json").read_text())
        assert meta["imported_from"]["hub"] == {"id": f"org/{name}-tiny", "revision": revision}
    capsys.readouterr()
    assert main(["score", "--model", "org/nothing", "-t", str(tmp_path / "t.txt"), "-r", str(tmp_path / "t.txt")]) != 0
    err = capsys.readouterr().err.strip()
    assert (
        len(err.splitlines()) == 1
        and "org/nothing" in err
        and str(home / "hub") in err
        and "huggingface-cli download" in err
    )
    assert main(["import", "org/comet-tiny@deadbeef", "--out", str(tmp_path / "o")]) != 0
    assert "org/comet-tiny@deadbeef" in capsys.readouterr().err


JAPANESE = (
    ["猫がマットの上に座った。", "ベルリン行きの列車は今日二十分遅れている。"],
    ["猫はマットの上にいる。", "ベルリン行きの電車は今日二十分遅れています。"],
)
KOREAN = (
    ["고양이가 매트 위에 앉았다.", "베를린행 기차가 오늘 20분 늦는다."],
    ["고양이는 매트 위에 있다.", "베를린으로 가는 기차는 오늘 20분 늦어진다."],
)


@pytest.mark.parametrize("tokenize, texts, module", [("ja-mecab", JAPANESE, "MeCab"), ("ko-mecab", KOREAN, "mecab_ko")])
def test_cjk_tokenizers_equal_sacrebleu(tmp_path, tokenize, texts, module, capsys):
    pytest.importorskip(module, reason=f"{tokenize} needs lightning-metrics[cjk] (make test installs it)")
    from lightning_metrics.cli.main import main
    from lightning_metrics.metrics import load_metric

    hyps, refs = texts
    theirs = sacrebleu.metrics.BLEU(tokenize=tokenize)
    result = load_metric(f"bleu:tokenize={tokenize}").score(mt=hyps, ref=refs)
    assert result.system_score == pytest.approx(theirs.corpus_score(hyps, [refs]).score, abs=1e-9)
    sentence = sacrebleu.metrics.BLEU(tokenize=tokenize, effective_order=True)
    assert result.scores == pytest.approx([sentence.sentence_score(h, [r]).score for h, r in zip(hyps, refs)], abs=1e-9)
    (tmp_path / "h.txt").write_text("\n".join(hyps) + "\n")
    (tmp_path / "r.txt").write_text("\n".join(refs) + "\n")
    assert (
        main(
            [
                "score",
                "--model",
                f"bleu:tokenize={tokenize}",
                "-t",
                str(tmp_path / "h.txt"),
                "-r",
                str(tmp_path / "r.txt"),
            ]
        )
        == 0
    )
    assert f"tok:{tokenize}" in capsys.readouterr().out


def test_a_tokenizer_that_cannot_be_set_up_is_one_line(monkeypatch, capsys, tmp_path):
    from lightning_metrics.cli.main import main

    monkeypatch.setenv("HOME", str(tmp_path))  # no cached SentencePiece model; this machine has no network
    (tmp_path / "h.txt").write_text("a b c\n")
    assert (
        main(
            [
                "score",
                "--model",
                "bleu:tokenize=flores200",
                "-t",
                str(tmp_path / "h.txt"),
                "-r",
                str(tmp_path / "h.txt"),
            ]
        )
        != 0
    )
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "bleu:tokenize=flores200 fetches its SentencePiece model" in err
