"""COMET-style models: feature layouts, the ranking score, unique-sentence batches, overfitting,
relative ranks from DA, synthetic ranking, sparsemax layer mixing and DDP validation."""

import csv
import json

import pytest
import pytorch_lightning as pl
import torch
from scipy import stats

from lightning_metrics.cli.main import main
from lightning_metrics.correlation import darr_kendall
from lightning_metrics.data.batching import SentencesCollate
from lightning_metrics.data.modules import RatingsDataModule
from lightning_metrics.data.ranking import RankingDataModule, relative_ranks
from lightning_metrics.encoders.loading import load_tokenizer
from lightning_metrics.models import CometEstimator, CometRanker, CometReferenceless
from lightning_metrics.models.modules import LayerMix
from lightning_metrics.models.ranking import ranking_score


def trainer(**kwargs):
    defaults = dict(
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
    )
    return pl.Trainer(**{**defaults, **kwargs})


@pytest.fixture(scope="module")
def ratings(tmp_path_factory, da_rows, write_csv):
    folder = tmp_path_factory.mktemp("comet-ratings")
    return {
        "64": write_csv(folder / "r64.csv", da_rows[:64]),
        "train": write_csv(folder / "train.csv", da_rows[:48]),
        "val": write_csv(folder / "val.csv", da_rows[100:131]),
    }


@pytest.fixture(scope="module")
def da_pairs(tmp_path_factory, write_csv):
    """64 DARR pairs (src, ref, pos, neg) derived from the real DA file, as a CSV."""
    from conftest import DA_FILE

    if not DA_FILE.exists():
        pytest.skip(f"{DA_FILE} is absent; real-data checks need ../shared/data")
    with DA_FILE.open(encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))[:3000]
    columns = {k: [r[k] for r in rows] for k in ("lp", "src", "mt", "ref")}
    columns["raw"] = [float(r["raw"]) for r in rows]
    pairs = relative_ranks(columns, "raw", 25.0)
    keep = [{k: pairs[k][i] for k in ("src", "ref", "pos", "neg")} for i in range(64)]
    return write_csv(tmp_path_factory.mktemp("pairs") / "pairs.csv", keep)


def test_feature_widths_and_layout(tiny_encoder):
    estimator = CometEstimator(encoder=str(tiny_encoder), head={"hidden_sizes": (16,)})
    free = CometReferenceless(encoder=str(tiny_encoder), head={"hidden_sizes": (16,)})
    h = estimator.hidden_size
    assert estimator.head[0].in_features == 6 * h
    assert free.head[0].in_features == 4 * h
    src, mt, ref = torch.tensor([[1.0, -2.0]]), torch.tensor([[3.0, 5.0]]), torch.tensor([[2.0, 7.0]])
    assert CometEstimator.features(src, mt, ref).tolist() == [[3, 5, 2, 7, 6, 35, 1, 2, 3, -10, 2, 7]]
    assert CometReferenceless.features(src, mt).tolist() == [[3, 5, 1, -2, 3, -10, 2, 7]]
    assert CometEstimator.inputs == ("src", "mt", "ref") and CometReferenceless.inputs == ("src", "mt")


def test_ranking_score_formula():
    mt = torch.tensor([[0.0, 0.0], [1.0, 1.0], [2.0, 0.0]])
    src = torch.tensor([[3.0, 4.0], [1.0, 1.0], [2.0, 3.0]])  # distances 5, 0, 3
    ref = torch.tensor([[0.0, 1.0], [4.0, 5.0], [2.0, 1.0]])  # distances 1, 5, 1
    # harmonic means 2*5*1/6 = 5/3, 0, 2*3*1/4 = 1.5 -> 1/(1+hm)
    assert ranking_score(mt, src, ref).tolist() == pytest.approx([1 / (1 + 5 / 3), 1.0, 1 / 2.5], abs=1e-7)


def test_darr_kendall_counts_ties_as_discordant():
    assert darr_kendall([3, 2, 1, 5], [1, 2, 3, 4]) == pytest.approx((2 - 2) / 4)
    assert darr_kendall([1, 1], [0, 0]) == 1.0


def test_relative_ranks_from_ratings():
    rows = {
        "lp": ["a-en"] * 5 + ["b-en"],
        "src": ["s1"] * 4 + ["s2", "s1"],
        "ref": ["r1"] * 4 + ["r2", "r1"],
        "mt": ["x", "y", "z", "x", "w", "v"],
        "raw": [90.0, 60.0, 65.0, 20.0, 10.0, 0.0],
    }
    pairs = relative_ranks(rows, "raw", 25.0)
    got = sorted(zip(pairs["pos"], pairs["neg"]))
    # s1 in a-en: x(90)>y(60) 30, x>z 25 (not > 25), x(90) vs x(20) identical text, y>x(20) 40, z>x(20) 45;
    # s2 and s1 in b-en are alone in their groups
    assert got == [("x", "y"), ("y", "x"), ("z", "x")]
    assert set(pairs["lp"]) == {"a-en"} and set(pairs["src"]) == {"s1"}


def test_each_unique_sentence_is_encoded_once(tiny_encoder):
    tok = load_tokenizer(str(tiny_encoder))
    rows = [
        {"src": "The cat sat on the mat.", "ref": "The cat is on the mat.", "mt": m, "index": i, "score": 0.0}
        for i, m in enumerate(["A cat sat.", "The cat is on the mat.", "A dog ran."])
    ]
    batch = SentencesCollate(tok, 64, ("src", "mt", "ref"), ["score"], {}, {})(rows)
    groups = batch["inputs"]
    assert sum(g["input_ids"].shape[0] for g in groups) == 4  # 9 fields, 4 distinct sentences
    sequences = [ids[mask.bool()].tolist() for g in groups for ids, mask in zip(g["input_ids"], g["attention_mask"])]
    assert [len(s) for s in sequences] == sorted(len(s) for s in sequences)  # padded in groups sorted by length
    for field in ("src", "mt", "ref"):
        for row, position in zip(rows, batch["positions"][field].tolist()):
            assert sequences[position] == tok(row[field])["input_ids"]
    model = CometEstimator(encoder=str(tiny_encoder), head={"hidden_sizes": (16,)}).eval()
    with torch.no_grad():
        together = model(batch)
        alone = torch.cat(
            [model(SentencesCollate(tok, 64, ("src", "mt", "ref"), ["score"], {}, {})([r])) for r in rows]
        )
    assert torch.allclose(together, alone, atol=1e-5)


@pytest.mark.parametrize("family", [CometEstimator, CometReferenceless])
def test_overfits_64_rows(tiny_encoder, ratings, family):
    pl.seed_everything(0)
    model = family(
        encoder=str(tiny_encoder),
        head={"hidden_sizes": (64,), "dropout": 0.0},
        optim={"lr_encoder": 3e-3, "lr_head": 3e-3, "layerwise_decay": 1.0, "warmup_ratio": 0.0, "weight_decay": 0.0},
    )
    dm = RatingsDataModule(
        train=str(ratings["64"]),
        val=str(ratings["64"]),
        encoder=str(tiny_encoder),
        batches={"batch_size": 16},
        layout=model.batch_layout,
    )
    t = trainer(max_epochs=60, check_val_every_n_epoch=60)
    t.fit(model, dm)
    assert t.callback_metrics["val_pearson"] > 0.9
    model.eval()
    with torch.no_grad():
        preds = torch.cat([model.predict_scores(b) for b in dm.val_dataloader()]).numpy()
    assert stats.pearsonr(preds, dm.val_rows["score"])[0] == pytest.approx(
        float(t.callback_metrics["val_pearson"]), abs=1e-5
    )


def test_ranker_overfits_darr_pairs(tiny_encoder, da_pairs):
    pl.seed_everything(0)
    dm = RankingDataModule(
        train=str(da_pairs), val=str(da_pairs), encoder=str(tiny_encoder), batches={"batch_size": 16}
    )
    model = CometRanker(
        encoder=str(tiny_encoder),
        optim={"lr_encoder": 3e-3, "lr_head": 3e-3, "layerwise_decay": 1.0, "warmup_ratio": 0.0, "weight_decay": 0.0},
    )
    untrained = trainer().validate(model, dm, verbose=False)[0]["val_kendall"]
    t = trainer(max_epochs=40, check_val_every_n_epoch=40)
    t.fit(model, dm)
    kendall = float(t.callback_metrics["val_kendall"])
    assert kendall > 0.7 > untrained
    # the logged number is DARR Kendall of the model's own scores for pos and neg
    model.eval()
    pos = model.predict_scores(
        SentencesCollate(dm.tokenizer, 128, ("src", "mt", "ref"), [], {}, {})(
            [
                {"src": s, "ref": r, "mt": p, "index": i}
                for i, (s, r, p) in enumerate(zip(dm.val_rows["src"], dm.val_rows["ref"], dm.val_rows["pos"]))
            ]
        )
    )
    neg = model.predict_scores(
        SentencesCollate(dm.tokenizer, 128, ("src", "mt", "ref"), [], {}, {})(
            [
                {"src": s, "ref": r, "mt": n, "index": i}
                for i, (s, r, n) in enumerate(zip(dm.val_rows["src"], dm.val_rows["ref"], dm.val_rows["neg"]))
            ]
        )
    )
    assert darr_kendall(pos.detach().numpy(), neg.detach().numpy()) == pytest.approx(kendall, abs=1e-6)


def test_ranker_learns_synthetic_severity(tiny_encoder, tmp_path, write_csv):
    """Trained briefly on synthetic triplets, the ranker orders held-back synthetic pairs by severity
    well above chance (DARR 0), and training lowered its triplet loss."""
    from conftest import TINY_CORPUS

    from data_gen.pipeline import run

    corpus = [{"src": f"Quelle {i}: " + s.lower(), "ref": s} for i, s in enumerate(TINY_CORPUS * 3)]
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(
        json.dumps(
            {
                "perturbations": {"deletion": 1.0, "span_deletion": 1.0, "adjacent_swap": 1.0, "unrelated": 1.0},
                "signals": ["bleu"],
            }
        )
    )
    run(
        corpus=str(write_csv(tmp_path / "parallel.csv", corpus)),
        out=str(tmp_path / "syn"),
        recipe_path=str(recipe),
        pairs_per_sentence=4,
        seed=0,
        num_proc=1,
        shard_text=None,
        progress=False,
    )
    pl.seed_everything(0)
    dm = RankingDataModule(
        train=str(tmp_path / "syn"),
        split={"fraction": 0.25, "by": "sentence_id"},
        pairs={"score_column": "score", "threshold": 0.1},
        encoder=str(tiny_encoder),
        batches={"batch_size": 16},
    )
    model = CometRanker(encoder=str(tiny_encoder), optim={"lr_encoder": 1e-3, "lr_head": 1e-3, "warmup_ratio": 0.0})
    dm.setup("fit")
    loss_before = _mean_triplet_loss(model, dm)
    t = trainer(max_epochs=8, check_val_every_n_epoch=8)
    t.fit(model, dm)
    held_back = float(t.callback_metrics["val_kendall"])
    assert not set(dm.val_rows["src"]) & set(dm.train_rows["src"])  # whole sentences held back
    assert held_back > 0.3  # chance is 0: as many pairs ordered right as wrong
    assert _mean_triplet_loss(model, dm) < 0.8 * loss_before


def _mean_triplet_loss(model, dm) -> float:
    """The ranker's training loss over all training pairs, in eval mode."""
    fields = ("src", "ref", "pos", "neg")
    rows = [{**{f: dm.train_rows[f][i] for f in fields}, "index": i} for i in range(len(dm.train_rows["pos"]))]
    batch = SentencesCollate(dm.tokenizer, 128, fields, [], {}, {})(rows)
    model.eval()
    with torch.no_grad():
        e = model.field_embeddings(batch)
        loss = sum(
            torch.nn.functional.triplet_margin_loss(e[a], e["pos"], e["neg"], margin=model.hparams.margin)
            for a in ("src", "ref")
        )
    return float(loss)


def test_sparsemax_layer_mix_can_pick_one_layer():
    layers = [torch.full((1, 2, 3), float(i)) for i in range(3)]
    sparse, soft = LayerMix(3, transform="sparsemax"), LayerMix(3)
    with torch.no_grad():
        sparse.weights.copy_(torch.tensor([0.0, 0.0, 2.0]))
        soft.weights.copy_(torch.tensor([0.0, 0.0, 2.0]))
    assert torch.equal(sparse(layers), layers[2])  # exactly layer 2: the others get weight 0
    assert not torch.equal(soft(layers), layers[2])
    with pytest.raises(ValueError, match="sparsemax"):
        LayerMix(3, transform="entmax15")


def test_ddp_validation_equals_single_process(tiny_encoder, ratings, tmp_path):
    config = {
        "seed_everything": 0,
        "model": {
            "class_path": "lightning_metrics.models.CometEstimator",
            "init_args": {
                "encoder": str(tiny_encoder),
                "optim": {"lr_encoder": 1e-3, "lr_head": 1e-3},
                "head": {"hidden_sizes": [32]},
                "readout": {"layer_transform": "sparsemax"},
            },
        },
        "data": {
            "class_path": "lightning_metrics.data.modules.RatingsDataModule",
            "init_args": {
                "train": str(ratings["train"]),
                "val": str(ratings["val"]),
                "encoder": str(tiny_encoder),
                "batches": {"batch_size": 8},
            },
        },
        "trainer": {
            "max_epochs": 1,
            "accelerator": "cpu",
            "devices": 2,
            "strategy": "ddp_spawn",
            "default_root_dir": str(tmp_path),
            "val_check_interval": 1.0,  # the shared trainer defaults validate twice an epoch
            "enable_progress_bar": False,
            "num_sanity_val_steps": 0,
            "enable_model_summary": False,
            "logger": [
                {
                    "class_path": "pytorch_lightning.loggers.CSVLogger",
                    "init_args": {"save_dir": str(tmp_path), "name": "csv"},
                }
            ],
            "callbacks": [
                {
                    "class_path": "pytorch_lightning.callbacks.ModelCheckpoint",
                    "init_args": {"dirpath": str(tmp_path / "ckpt"), "save_last": True, "save_top_k": 0},
                }
            ],
        },
    }
    (tmp_path / "config.yaml").write_text(json.dumps(config))
    assert main(["fit", "--config", str(tmp_path / "config.yaml")]) == 0
    with (tmp_path / "csv" / "version_0" / "metrics.csv").open() as f:
        ddp_kendall = float([row for row in csv.DictReader(f) if row.get("val_kendall")][-1]["val_kendall"])
    model = CometEstimator.load_from_checkpoint(tmp_path / "ckpt" / "last.ckpt", weights_only=True)
    dm = RatingsDataModule(
        train=str(ratings["train"]),
        val=str(ratings["val"]),
        encoder=str(tiny_encoder),
        batches={"batch_size": 8},
        layout=model.batch_layout,
    )
    single = trainer(accelerator="cpu", devices=1).validate(model, dm, verbose=False)[0]["val_kendall"]
    assert single == pytest.approx(ddp_kendall, abs=1e-6)
