"""`lightning-metrics quickstart`: the whole product on the embedded defaults, in minutes on a CPU.

1. ``generate`` synthetic pairs from WordNet's example sentences (every signal);
2. pre-train a BLEURT-style regressor on them (default encoder, one epoch);
3. export it to ``checkpoints/quickstart``;
4. score example pairs with it next to BLEU, chrF and BERTScore, and evaluate all four on the
   project's 24 hand-rated example translations;
5. ``probe`` the new metric per perturbation.

With ``--ratings FILE`` it then fine-tunes the pre-trained metric on those human ratings
(document split) and evaluates it against the baselines on the held-out documents, exporting
``checkpoints/quickstart-finetuned``. Every setting is a flag; ``configs/quickstart.yaml`` lists them
(``lightning-metrics quickstart --config configs/quickstart.yaml``).
"""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

EXAMPLES = [  # (candidate, reference): what a reader can judge at a glance
    ("The cat is on the mat.", "The cat is on the mat."),
    ("The cat sits on the mat.", "The cat is on the mat."),
    ("The cat is not on the mat.", "The cat is on the mat."),
    ("The mat is on the cat.", "The cat is on the mat."),
    ("The train to Berlin is twenty minutes late today.", "The train to Berlin is running twenty minutes late today."),
    ("The train to Berlin is early today.", "The train to Berlin is running twenty minutes late today."),
    ("Prices rose by five percent this year.", "Prices went up five percent this year."),
    ("Bananas are yellow.", "Prices went up five percent this year."),
]


@dataclass
class QuickstartSettings:
    """Budgets and hyper-parameters (flags of the same names; ``configs/quickstart.yaml`` mirrors the defaults)."""

    sentences: int = 6000
    pairs_per_sentence: int = 2
    max_length: int = 96
    batch_size: int = 32
    lr_encoder: float = 5e-5
    lr_head: float = 3e-4
    pretrain_epochs: int = 1
    finetune_steps: int = 300
    probe_sentences: int = 100
    num_proc: int = 2


def _trainer(root: Path, **kwargs):
    import pytorch_lightning as pl

    from lightning_metrics.encoders.inference import training_precision
    from lightning_metrics.training.resume import AtomicCheckpointIO

    return pl.Trainer(
        default_root_dir=root,
        logger=pl.loggers.CSVLogger(root, name="logs"),
        precision=training_precision(bf16_on_cpu=True),
        plugins=[AtomicCheckpointIO()],
        num_sanity_val_steps=0,
        gradient_clip_val=1.0,
        enable_model_summary=False,
        **kwargs,
    )


def run(
    out: str = "runs/quickstart",
    checkpoints: str = "checkpoints",
    ratings: Optional[str] = None,
    settings: Optional[QuickstartSettings] = None,
    seed: int = 0,
) -> dict:
    """The quickstart; returns the exported folders and timings."""
    from lightning_metrics.training.export import export_checkpoint

    s = settings or QuickstartSettings()
    root, times = Path(out), {}
    shutil.rmtree(root / "ckpt", ignore_errors=True)  # a previous run's best checkpoint must not compete
    root.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    n_pairs = generate_pairs(root, s, seed)
    times["generate"] = time.perf_counter() - started
    mark = time.perf_counter()
    best = pretrain(root, n_pairs, s, seed)
    times["pretrain"] = time.perf_counter() - mark

    print(f"[3/5] export -> {checkpoints}/quickstart", flush=True)
    folder = export_checkpoint(best, Path(checkpoints) / "quickstart", force=True)

    print("[4/5] score examples", flush=True)
    mark = time.perf_counter()
    print(example_table(str(folder)))
    print(examples_evaluation(str(folder), root, seed))
    times["score"] = time.perf_counter() - mark
    mark = time.perf_counter()
    probe_metric(str(folder), s, seed)
    times["probe"] = time.perf_counter() - mark
    result = {"pretrained": str(folder)}
    if ratings:
        mark = time.perf_counter()
        result["finetuned"] = str(finetune(ratings, best, root, Path(checkpoints), s, seed))
        times["finetune + evaluate"] = time.perf_counter() - mark
    times["total"] = time.perf_counter() - started
    print("wall times: " + ", ".join(f"{k} {v:.0f} s" for k, v in times.items()))
    print(
        f'\nLoad it in Python:  from lightning_metrics import load_metric; load_metric("{folder}").score(mt=[...], '
        "ref=[...])"
    )
    return {**result, "times": times}


def generate_pairs(root: Path, s: QuickstartSettings, seed: int) -> int:
    """Step 1: perturbed pairs of WordNet's example sentences, written to ``root/synthetic``; their count."""
    from data_gen.pipeline import Recipe, generate, write_dataset
    from data_gen.wordnet import example_sentences

    print(f"[1/5] generate: {s.sentences} WordNet example sentences x {s.pairs_per_sentence} perturbations", flush=True)
    columns = generate(
        example_sentences()[: s.sentences], Recipe(), s.pairs_per_sentence, seed, num_proc=s.num_proc, progress=True
    )
    write_dataset(columns, root / "synthetic", (0, 1), {"seed": seed})
    return len(columns["mt"])


def pretrain(root: Path, n_pairs: int, s: QuickstartSettings, seed: int) -> str:
    """Step 2: a BLEURT-style metric pre-trained on the synthetic pairs; the best checkpoint's path."""
    import pytorch_lightning as pl

    from lightning_metrics.data.base import Batching
    from lightning_metrics.data.modules import PRETRAIN_TARGETS, PretrainDataModule
    from lightning_metrics.encoders.inference import training_precision
    from lightning_metrics.models import BleurtRegressor
    from lightning_metrics.models.options import Objective, Optimisation

    print(
        f"[2/5] pre-train a BLEURT-style metric on {n_pairs} pairs ({training_precision(bf16_on_cpu=True)})", flush=True
    )
    pl.seed_everything(seed)
    batches = Batching(batch_size=s.batch_size, max_length=s.max_length)
    dm = PretrainDataModule(data=str(root / "synthetic"), batches=batches, seed=seed)
    model = BleurtRegressor(
        targets=list(PRETRAIN_TARGETS),
        objective=Objective(loss_weights={"score": 2.0}),
        optim=Optimisation(
            lr_encoder=s.lr_encoder, lr_head=s.lr_head, keep_embeddings_frozen=True, nr_frozen_epochs=0.1
        ),
    )
    saver = pl.callbacks.ModelCheckpoint(
        dirpath=root / "ckpt", filename="pretrain", save_last=False, save_top_k=1, monitor="val_kendall", mode="max"
    )
    _trainer(root / "pretrain", max_epochs=s.pretrain_epochs, callbacks=[saver]).fit(model, dm)
    return saver.best_model_path


def probe_metric(folder: str, s: QuickstartSettings, seed: int) -> None:
    """Step 5: the new metric's response to each perturbation family."""
    from data_gen.probe import format_probe, probe
    from data_gen.wordnet import example_sentences
    from lightning_metrics.metrics import load_metric

    print("[5/5] probe the new metric", flush=True)
    metric = load_metric(folder)
    print(
        format_probe(
            probe(
                lambda mt, ref: metric.score(mt=mt, ref=ref).scores,
                example_sentences(),
                n_sentences=s.probe_sentences,
                seed=seed,
            ),
            folder,
        )
    )


def example_table(folder: str) -> str:
    """Scores of :data:`EXAMPLES` with the new metric, BLEU, chrF and BERTScore, side by side."""
    from lightning_metrics.metrics import score_many

    mt, ref = [m for m, _ in EXAMPLES], [r for _, r in EXAMPLES]
    columns = score_many([folder, "bleu", "chrf", "bertscore"], mt, ref)
    columns["quickstart"] = columns.pop(folder)
    columns = {k: columns[k] for k in ("quickstart", "bleu", "chrf", "bertscore")}
    width = max(len(m) for m in mt)
    lines = [f"{'candidate':<{width}}  " + "  ".join(f"{n:>10}" for n in columns), "-" * (width + 12 * len(columns))]
    for i, m in enumerate(mt):
        lines.append(f"{m:<{width}}  " + "  ".join(f"{columns[n][i]:>10.4f}" for n in columns))
    refs = list(dict.fromkeys(ref))
    lines.append(f"references: {' | '.join(refs)}")
    return "\n".join(lines)


def examples_evaluation(folder: str, root: Path, seed: int) -> str:
    """Correlation of the new metric and the baselines with the 24 hand-rated example translations."""
    from importlib import resources

    from lightning_metrics.data.readers import read_ratings
    from lightning_metrics.evaluation.evaluate import evaluate, format_table

    example = root / "example_ratings.csv"
    example.write_bytes(resources.files("lightning_metrics.resources").joinpath("example_ratings.csv").read_bytes())
    ev = evaluate(
        read_ratings(example),
        [folder, "bleu", "chrf", "bertscore"],
        group=None,
        bootstrap=200,
        seed=seed,
        source=str(example),
    )
    return f"\n{example} (24 translations rated by this project):\n{format_table(ev)}"


def finetune(ratings: str, pretrained: str, root: Path, checkpoints: Path, s: QuickstartSettings, seed: int) -> Path:
    """Fine-tune the pre-trained metric on ``ratings`` (document split) and evaluate it on the held-out documents."""
    import pytorch_lightning as pl

    from lightning_metrics.data.base import Batching
    from lightning_metrics.data.modules import RatingsDataModule, Split
    from lightning_metrics.evaluation.evaluate import evaluate, format_table
    from lightning_metrics.models import BleurtRegressor
    from lightning_metrics.models.options import Optimisation
    from lightning_metrics.training.export import export_checkpoint

    print(f"[+] fine-tune on {ratings} for {s.finetune_steps} steps (document split, 10% dev)", flush=True)
    pl.seed_everything(seed)
    batches = Batching(batch_size=s.batch_size, max_length=s.max_length)
    dm = RatingsDataModule(train=ratings, split=Split(fraction=0.1), batches=batches, seed=seed)
    optim = Optimisation(lr_encoder=3e-5, lr_head=3e-4, nr_frozen_epochs=0.05, keep_embeddings_frozen=True)
    model = BleurtRegressor(init_from=pretrained, optim=optim)
    saver = pl.callbacks.ModelCheckpoint(dirpath=root / "ckpt", filename="finetuned", save_top_k=0, save_last=False)
    trainer = _trainer(
        root / "finetune", max_epochs=1, limit_train_batches=s.finetune_steps, limit_val_batches=0, callbacks=[saver]
    )
    trainer.fit(model, dm)
    trainer.save_checkpoint(root / "ckpt" / "finetuned.ckpt")
    folder = export_checkpoint(root / "ckpt" / "finetuned.ckpt", checkpoints / "quickstart-finetuned", force=True)
    dev = {k: v for k, v in dm.val_rows.items()}
    group = "lp" if "lp" in dev else None
    ev = evaluate(
        dev,
        [str(folder), "bleu", "chrf", "bertscore"],
        group=group,
        bootstrap=200,
        seed=seed,
        source=ratings,
        num_proc=os.cpu_count() or 1,
    )
    print(f"\nHeld-out documents of {ratings} ({len(dev['mt'])} rows):\n{format_table(ev)}")
    return folder
