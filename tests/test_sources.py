"""Several rating sources in one training set: per-(source, lp) normalisation on hand-made
tables, each source's share of the dev set, weights, the model card, the source-group sampler."""

import json

import numpy as np
import pytest
from scipy import stats
from scipy.special import ndtri

from lightning_metrics.data.batching import SourceGroupSampler
from lightning_metrics.data.modules import RatingsDataModule
from lightning_metrics.data.sources import normalise_scores, parallel_corpus, row_weights
from lightning_metrics.errors import LightningMetricsError
from lightning_metrics.training.export import _data_line


def test_z_normalisation_per_group_uses_training_statistics():
    scores = [1.0, 3.0, 10.0, 30.0, 50.0]
    groups = ["a", "a", "b", "b", "b"]
    out = normalise_scores(scores, groups, "z")
    assert out[:2] == pytest.approx([-1.0, 1.0])
    assert out[2:] == pytest.approx((np.array([10, 30, 50]) - 30) / np.std([10, 30, 50]))
    val = normalise_scores([2.0, 70.0], ["a", "b"], "z", train_scores=scores, train_groups=groups)
    assert val == pytest.approx([0.0, (70 - 30) / np.std([10, 30, 50])])


def test_rank_normalisation_gives_ties_one_value_and_tames_the_tail():
    mqm = [0.0, 0.0, 0.0, 0.0, -1.0, -2.0, -25.0, -5.0]  # mostly zeros, a heavy tail
    out = normalise_scores(mqm, ["m"] * 8, "rank")
    # mid-ranks: -25 -> 0.5/8, -5 -> 1.5/8, -2 -> 2.5/8, -1 -> 3.5/8, the four zeros -> (4 + 4/2)/8
    expected = ndtri(np.array([6, 6, 6, 6, 3.5, 2.5, 0.5, 1.5]) / 8)
    assert out == pytest.approx(expected)
    assert stats.kendalltau(out, mqm)[0] == pytest.approx(1.0)
    assert out[6] == pytest.approx(ndtri(0.5 / 8))  # the worst is one quantile step below the next, not 20 points
    unseen = normalise_scores(
        [3.0], ["new"], "rank", train_scores=mqm, train_groups=["m"] * 8, pooled={"new": "s", "m": "s"}
    )
    assert unseen == pytest.approx([ndtri(1 - 0.5 / 8)])  # above every training value: clipped to the top quantile
    with pytest.raises(LightningMetricsError, match="normalise must be one of"):
        normalise_scores([1.0], ["a"], "minmax")


def test_row_weights_by_source_and_count():
    w = row_weights(["da", "da", "mqm", "mqm"], {"da": 1.0, "mqm": 0.5}, [1, 3, None, None])
    raw = np.array([1.0 * 0.5, 1.0 * 1.5, 0.5, 0.5])
    assert w == pytest.approx(raw / raw.mean())


def _table(path, rows):
    import csv

    with path.open("w", encoding="utf-8", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return path


@pytest.fixture()
def two_sources(tmp_path):
    da = [
        {
            "lp": "de-en",
            "src": f"s{d}-{k}",
            "mt": f"out {d} {k} {j}",
            "ref": f"ref {d} {k}",
            "score": float(j - 1) + d / 10,
            "doc_id": f"d{d}",
            "annotators": 1 + j,
            "system": f"sys{j}",
        }
        for d in range(10)
        for k in range(2)
        for j in range(3)
    ]
    mqm = [
        {
            "lp": "zh-en",
            "src": f"z{k}",
            "mt": f"cand {k} {j}",
            "ref": f"zref {k}",
            "score": -float(j * j) if k % 3 else 0.0,
            "seg_id": k,
            "system": f"m{j}",
        }
        for k in range(20)
        for j in range(3)
    ]
    return _table(tmp_path / "da.csv", da), _table(tmp_path / "mqm.csv", mqm)


def test_mixed_sources_are_normalised_split_and_recorded(two_sources, tiny_encoder):
    da, mqm = two_sources
    dm = RatingsDataModule(
        train=[{"path": str(da), "name": "da"}, {"path": str(mqm), "name": "mqm", "split_by": "seg_id", "weight": 0.5}],
        ratings={"normalise": "rank", "weight_by": "annotators"},
        split={"fraction": 0.2},
        encoder=str(tiny_encoder),
    )
    dm.setup("fit")
    tr, va = dm.train_rows, dm.val_rows
    for source, n_total in (("da", 60), ("mqm", 60)):  # every source keeps its own share of the dev set
        n_val = sum(s == source for s in va["source"])
        assert 0.2 * n_total <= n_val < 0.2 * n_total + 6 and n_val + sum(s == source for s in tr["source"]) == n_total
    assert not {(s, d) for s, d in zip(tr["src"], tr["source"])} & {(s, d) for s, d in zip(va["src"], va["source"])}
    assert dm.lp_names == ["da:de-en", "mqm:zh-en"]
    for source in ("da", "mqm"):  # each (source, lp) of the training rows: the rank normal scores of its raw scores
        sel = [i for i, s in enumerate(tr["source"]) if s == source]
        raw = np.array([tr["score_raw"][i] for i in sel])
        expected = normalise_scores(raw, ["g"] * len(raw), "rank")
        assert np.array([tr["score"][i] for i in sel]) == pytest.approx(expected)
    w = np.array(tr["weight"])
    da_rows = [i for i, s in enumerate(tr["source"]) if s == "da"]
    mqm_rows = [i for i, s in enumerate(tr["source"]) if s == "mqm"]
    assert w.mean() == pytest.approx(1.0) and len(set(np.round(w[mqm_rows], 9))) == 1  # MQM has no annotator column
    assert w[mqm_rows][0] == pytest.approx(0.5 * np.mean(w[da_rows]))  # the source weight; DA's count factors average 1
    assert len(set(np.round(w[da_rows], 9))) == 3  # 1, 2 or 3 annotators
    summary = dm.summary()
    assert [s["name"] for s in summary["sources"]] == ["da", "mqm"] and summary["normalise"] == "rank"
    assert summary["sources"][1]["weight"] == 0.5 and summary["sources"][1]["val_rows"] == sum(
        s == "mqm" for s in va["source"]
    )
    card = _data_line(summary)  # the model card's training-data line names every source
    assert (
        all(f"source `{name}`: {path}" in card for name, path in (("da", da), ("mqm", mqm)))
        and "normalised per source and language pair: rank" in card
    )


def test_one_source_stays_as_it_was(two_sources, tiny_encoder):
    da, _ = two_sources
    dm = RatingsDataModule(train=str(da), split={"fraction": 0.2}, encoder=str(tiny_encoder))
    dm.setup("fit")
    assert dm.lp_names == ["de-en"] and "score_raw" not in dm.train_rows and set(dm.train_rows["weight"]) == {1.0}


def test_bad_sources(two_sources, tiny_encoder):
    da, mqm = two_sources
    with pytest.raises(LightningMetricsError, match="distinct names"):
        RatingsDataModule(train=[str(da), str(da)], encoder=str(tiny_encoder))
    with pytest.raises(LightningMetricsError, match="unknown rating-source key"):
        RatingsDataModule(train=[{"path": str(da), "wieght": 2}], encoder=str(tiny_encoder))
    dm = RatingsDataModule(train=[{"path": str(da)}, {"path": str(mqm)}], encoder=str(tiny_encoder))
    with pytest.raises(LightningMetricsError, match="no column 'doc_id' to split validation by"):
        dm.setup("fit")
    # every row in one document: the validation split takes it all, and the error says so (not "row weights")
    one_doc = _table(
        da.parent / "one.csv",
        [{"lp": "de-en", "src": f"s{i}", "mt": f"m{i}", "ref": f"r{i}", "score": i, "doc_id": "d"} for i in range(9)],
    )
    with pytest.raises(
        LightningMetricsError,
        match=r"one\.csv: the validation split took all 1 document\(s\) \(doc_id\): nothing is left to train on",
    ):
        RatingsDataModule(train=str(one_doc), encoder=str(tiny_encoder)).setup("fit")
    # a source's column mapping names a column the file lacks: an error naming it, never the file's own score column
    dm = RatingsDataModule(train=[{"path": str(da), "columns": {"score": "quality_z"}}], encoder=str(tiny_encoder))
    with pytest.raises(
        LightningMetricsError,
        match=r"da\.csv: mapped column\(s\) not found: score -> 'quality_z'; the file's columns are",
    ):
        dm.setup("fit")


def test_source_group_sampler_keeps_a_source_together():
    groups = [g for g in range(40) for _ in range(5)]
    sampler = SourceGroupSampler(groups, lengths=[g % 7 for g in groups], batch_size=10, seed=3)
    order = list(sampler)
    assert sorted(order) == list(range(200))
    runs = sum(1 for a, b in zip(order, order[1:]) if groups[a] != groups[b]) + 1
    assert runs == 40  # each group's rows are contiguous
    sampler.set_epoch(1)
    assert list(sampler) != order and sorted(sampler) == list(range(200))
    assert list(SourceGroupSampler(groups, [0] * 200, 10, seed=3)) == list(
        SourceGroupSampler(groups, [0] * 200, 10, seed=3)
    )


def test_parallel_corpus_holds_each_pair_once(two_sources, tmp_path):
    da, mqm = two_sources
    extra = _table(
        tmp_path / "more.csv",
        [
            {"lp": "ja-en", "src": "s0-0", "mt": "x", "ref": "ref 0 0", "score": 0.0},  # a pair da has
            {"lp": "fr-en", "src": "f", "mt": "y", "ref": "fref", "score": 0.0},
        ],
    )
    corpus = parallel_corpus(
        [str(da), {"path": str(mqm), "lps": ["zh-en"]}, {"path": str(extra), "exclude_lps": ["fr-en"]}]
    )
    expected = [(f"s{d}-{k}", f"ref {d} {k}") for d in range(10) for k in range(2)] + [
        (f"z{k}", f"zref {k}") for k in range(20)
    ]
    assert list(zip(corpus["src"], corpus["ref"])) == expected
    with pytest.raises(LightningMetricsError, match="no rows left"):
        parallel_corpus([{"path": str(mqm), "lps": ["de-en"]}])


def test_a_checkpoint_is_chosen_on_one_source_alone(two_sources, tiny_encoder, tmp_path):
    """``val_kendall/da`` is logged beside the all-source mean; monitoring it, the export keeps the
    epoch whose DA dev pairs rank best, whatever the MQM pairs did."""
    import pytorch_lightning as pl

    from lightning_metrics.models import CometEstimator
    from lightning_metrics.training.export import ExportBest

    class Record(pl.Callback):
        def __init__(self):
            self.seen = []

        def on_validation_end(self, trainer, pl_module):
            m = trainer.callback_metrics
            self.seen.append((trainer.global_step, *(float(m[k]) for k in ("val_kendall/da", "val_kendall"))))

    da, mqm = two_sources
    pl.seed_everything(0)
    model = CometEstimator(
        encoder=str(tiny_encoder), head={"hidden_sizes": (16,)}, optim={"lr_encoder": 3e-4, "lr_head": 3e-4}
    )
    dm = RatingsDataModule(
        train=[{"path": str(da), "name": "da"}, {"path": str(mqm), "name": "mqm", "split_by": "seg_id"}],
        split={"fraction": 0.3},
        batches={"batch_size": 8},
        encoder=str(tiny_encoder),
        layout=model.batch_layout,
    )
    saver = pl.callbacks.ModelCheckpoint(dirpath=tmp_path / "ckpt", monitor="val_kendall/da", mode="max")
    record = Record()
    pl.Trainer(
        max_epochs=6,
        num_sanity_val_steps=0,
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=[saver, ExportBest(str(tmp_path / "export")), record],
    ).fit(model, dm)
    step, best, _ = max(record.seen, key=lambda x: x[1])
    assert step != max(record.seen, key=lambda x: x[2])[0]  # the all-source mean would have kept another epoch
    meta = json.loads((tmp_path / "export" / "metric.json").read_text())
    assert meta["dev_correlations"] == {"val_kendall/da": pytest.approx(best)}
    assert meta["trained"]["global_step"] == step
