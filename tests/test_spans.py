"""Error spans: the MQM annotation reader on hand-worked rows, span F1 on a hand-computed example, and
the unified family trained on spans, exported, and scoring spans."""

from __future__ import annotations

import logging

import numpy as np
import pytest
from conftest import export_tiny

from lightning_metrics.data.mqm import merge_spans, read_mqm, strip_markup
from lightning_metrics.errors import InputError
from lightning_metrics.evaluation.spans import (
    mark_every_character,
    mark_every_word,
    mark_nothing,
    span_counts,
    span_scores,
)
from lightning_metrics.spans import word_spans

HEADER = "system\tdoc\tdoc_id\tseg_id\trater\tsource\ttarget\tcategory\tseverity\n"


def mqm_file(path, rows: list[tuple]) -> str:
    """An MQM TSV (TED layout) from ``(system, doc, seg, rater, source, target, category, severity)`` rows."""
    lines = [HEADER] + [f"{s}\t{d}\t1\t{g}\t{r}\t{src}\t{t}\t{c}\t{v}\n" for s, d, g, r, src, t, c, v in rows]
    path.write_text("".join(lines), encoding="utf-8")
    return str(path)


WORKED = [
    # segment 1 of sysA: rater1 a major and a minor punctuation error, rater2 a minor overlapping the major
    ("sysA", "talk.1", 1, "rater1", "Quelle", "The <v>cat</v> sat.", "Accuracy/Mistranslation", "Major"),
    ("sysA", "talk.1", 1, "rater1", "Quelle", "The cat sat<v>.</v>", "Fluency/Punctuation", "Minor"),
    ("sysA", "talk.1", 1, "rater2", "Quelle", "The c<v>at sat</v>.", "Style/Awkward", "Minor"),
    # segment 1 of sysB: no error; a source error kept apart
    ("sysB", "talk.1", 1, "rater1", "Quelle", "A cat sat.", "No-error", "No-error"),
    ("sysB", "talk.1", 1, "rater2", "<v>Quelle</v>", "A cat sat.", "Source error", "Minor"),
    # segment 2 of sysA: non-translation, and an attention check that is no annotation
    ("sysA", "talk.2", 2, "rater1", "Zweite", "<v>Zweite Zeile</v>", "Non-translation!", "Major"),
    ("sysA", "talk.2", 2, "rater1", "Zweite", "Zweite Zeile", "Found", "HOTW-test"),
]


def test_reader_on_hand_worked_rows(tmp_path):
    table = read_mqm(mqm_file(tmp_path / "mqm_ted_deen.tsv", WORKED))
    c = table.columns
    assert c["mt"] == ["The cat sat.", "A cat sat.", "Zweite Zeile"]
    assert c["lp"] == ["de-en"] * 3 and c["system"] == ["sysA", "sysB", "sysA"] and c["raters"] == [2, 2, 1]
    # rater1: 5 + 0.1, rater2: 1 -> -(5.1 + 1) / 2; sysB: rater1 0, rater2 1 (a source error still weighs) -> -0.5
    assert c["score"] == pytest.approx([-3.05, -0.5, -25.0])
    # merged: rater1's "cat" (4-7) major wins over rater2's "at sat" (5-11) minor; then 7-11 and "." minor
    assert c["spans"][0] == [
        {"start": 4, "end": 7, "severity": "major"},
        {"start": 7, "end": 12, "severity": "minor"},
    ]
    assert c["spans"][1] == [] and c["source_spans"][1] == [
        {"start": 0, "end": 6, "severity": "minor", "rater": "rater2"}
    ]
    assert c["spans"][2] == [{"start": 0, "end": 12, "severity": "major"}]
    assert c["rater_spans"][0][2] == {
        "rater": "rater2",
        "start": 5,
        "end": 11,
        "severity": "minor",
        "category": "Style/Awkward",
    }
    assert table.skipped == {"HOTW-test rows": 1}


def test_google_weights_minor_non_translation_critical_and_the_rater_of_an_attention_check(tmp_path):
    rows = [
        ("s", "d", 1, "r1", "Quelle", "<v>Quelle</v>", "Non-translation!", "Minor"),  # minor: 1, not 25
        ("s", "d", 1, "r2", "Quelle", "<v>Quelle</v>", "Non-translation!", "Major"),  # major: 25
        ("s", "d", 2, "r1", "Zwei", "Two <v>x</v>", "Accuracy/Mistranslation", "Critical"),  # none in Google's
        ("s", "d", 2, "r1", "Zwei", "Two x", "Fluency/Punctuation", "Minor"),  # 0.1
        ("s", "d", 2, "r2", "Zwei", "Two y", "Found", "HOTW-test"),  # r2 still counts, with 0
    ]
    path = mqm_file(tmp_path / "mqm_ted_ende.tsv", rows)
    scores = dict(zip(read_mqm(path).columns["seg_id"], read_mqm(path).columns["score"]))
    assert scores == {"1": pytest.approx(-(1 + 25) / 2), "2": pytest.approx(-0.1 / 2)}
    critical = dict(zip(*(read_mqm(path, weighting="google+critical").columns[k] for k in ("seg_id", "score"))))
    assert critical["2"] == pytest.approx(-(10 + 0.1) / 2)


@pytest.mark.parametrize(
    "target, severity, problem",
    [
        ("The <v>cat sat.", "Major", "unclosed <v>"),
        ("The cat</v> sat.", "Major", "a </v> closes no <v>"),
        ("The <v>c<v>a</v>t</v> sat.", "Major", "a <v> opens inside another <v>"),
        ("The <v>dog</v> sat.", "Major", "differs from the segment's text"),
        ("The <v>cat</v> sat.", "Catastrophic", "unknown severity 'Catastrophic'"),
    ],
)
def test_bad_markup_names_file_and_row(tmp_path, target, severity, problem):
    rows = [WORKED[0], ("sysA", "talk.1", 1, "rater2", "Quelle", target, "Accuracy/Mistranslation", severity)]
    path = mqm_file(tmp_path / "bad.tsv", rows)
    with pytest.raises(InputError) as e:
        read_mqm(path)
    assert str(e.value).startswith(f"{path}: row 2: ") and problem in str(e.value)


def test_skipping_bad_rows_counts_and_says(tmp_path, caplog):
    rows = [WORKED[0], ("sysA", "talk.1", 1, "rater2", "Quelle", "The <v>cat sat.", "Style/Awkward", "Minor")]
    with caplog.at_level(logging.WARNING):
        table = read_mqm(mqm_file(tmp_path / "bad.tsv", rows), on_invalid="skip")
    assert table.skipped == {"invalid rows": 1} and table.columns["raters"] == [1]
    assert "skipped 1 invalid rows (row 2: unclosed <v>)" in caplog.text


def test_markup_offsets_and_merge():
    assert strip_markup("a <v>bc</v> d<v>e</v>", "f", 1) == ("a bc de", [(2, 4), (6, 7)])
    merged = merge_spans(
        [[{"start": 0, "end": 3, "severity": "minor"}], [{"start": 2, "end": 5, "severity": "major"}]], 8
    )
    assert merged == [{"start": 0, "end": 2, "severity": "minor"}, {"start": 2, "end": 5, "severity": "major"}]
    # omissions (zero-length spans) are kept, one per position at its highest severity, after the others
    omissions = [[{"start": 4, "end": 4, "severity": "minor"}], [{"start": 4, "end": 4, "severity": "major"}]]
    assert merge_spans([*omissions, [{"start": 0, "end": 1, "severity": "minor"}]], 8) == [
        {"start": 0, "end": 1, "severity": "minor"},
        {"start": 4, "end": 4, "severity": "major"},
    ]


def test_reader_keeps_an_omission_as_a_zero_length_span(tmp_path):
    rows = [("sysA", "talk.1", 1, "r1", "Quelle", "The cat<v></v> sat.", "Accuracy/Omission", "Major")]
    table = read_mqm(mqm_file(tmp_path / "mqm_ted_deen.tsv", rows))
    assert table.columns["spans"] == [[{"start": 7, "end": 7, "severity": "major"}]]
    assert table.columns["score"] == [-5.0] and table.skipped == {}


def test_span_f1_hand_computed():
    mt = ["abcdefghij", "klmnop"]
    gold = [[{"start": 0, "end": 4, "severity": "major"}], [{"start": 2, "end": 6, "severity": "minor"}]]
    pred = [
        [{"start": 2, "end": 6, "severity": "major"}],  # 2 of its 4 chars hit (c, d), severity right
        [{"start": 0, "end": 4, "severity": "major"}],  # 2 of 4 hit (m, n), severity wrong
    ]
    counts = span_counts(pred, gold, mt)
    # WMT23: c, d (major on major) 1 each; m, n (major on minor) 1/2 each
    assert counts.tolist() == [[2, 2, 4, 4, 2, 4, 4], [2, 0, 4, 4, 1, 4, 4]]
    scores = span_scores(counts, resamples=200)
    ignored, matched = scores.values["severity ignored"], scores.values["severity must match"]
    assert (ignored["precision"], ignored["recall"], ignored["f1"]) == (0.5, 0.5, 0.5)  # 4/8 and 4/8
    assert (matched["precision"], matched["recall"], matched["f1"]) == (0.25, 0.25, 0.25)  # 2/8
    assert ignored["f1_low"] <= 0.5 <= ignored["f1_high"]
    nothing = span_scores(span_counts(mark_nothing(mt), gold, mt), resamples=10).values["severity ignored"]
    assert nothing["f1"] == 0.0
    words = span_counts(mark_every_word(["ab cd"]), [[{"start": 3, "end": 5, "severity": "minor"}]], ["ab cd"])
    assert words.tolist()[0][:4] == [2, 2, 4, 2]  # 4 marked characters (the space is not), both of "cd" hit
    # the whole text, space included: recall 1 over its 5 characters
    assert span_counts(mark_every_character(["ab cd"]), [[{"start": 1, "end": 4, "severity": "minor"}]], ["ab cd"])[
        0
    ].tolist()[:4] == [3, 3, 5, 3]


def test_wmt23_span_f1_by_hand():
    """WMT23's rule (its task2_evaluate.py): a severity mismatch is half a point, an omission (a zero-length
    span) is the one position it marks (the end of the text too), a character both severities annotate
    counts in full for either, critical counts as major."""
    mt = ["abcdef", "xyz"]
    gold = [
        [
            {"start": 0, "end": 2, "severity": "major"},  # a, b
            {"start": 1, "end": 3, "severity": "minor"},  # b (both severities), c
            {"start": 6, "end": 6, "severity": "minor"},  # an omission at the end: position 6
        ],
        [{"start": 1, "end": 1, "severity": "critical"}],  # an omission before y: position 1, as major
    ]
    pred = [
        [{"start": 0, "end": 4, "severity": "minor"}, {"start": 6, "end": 6, "severity": "minor"}],
        [{"start": 0, "end": 2, "severity": "major"}],
    ]
    counts = span_counts(pred, gold, mt)
    # row 1: a (minor on major) 1/2, b (minor where both) 1, c (minor on minor) 1, d false, omission 6 hit: 3.5
    #        of 5 predicted positions (a-d, 6) and 4 annotated (a, b, c, 6)
    # row 2: y (major on the critical omission at 1) 1, x false: 1 of 2 predicted, 1 annotated
    assert counts[:, 4:].tolist() == [[3.5, 5, 4], [1, 2, 1]]
    assert counts[:, :4].tolist() == [[3, 1, 4, 3], [0, 0, 2, 0]]  # the other variants ignore omissions
    wmt23 = span_scores(counts, resamples=10).values["WMT23"]
    assert (wmt23["precision"], wmt23["recall"]) == (4.5 / 7, 4.5 / 5)


def test_span_bootstrap_over_documents():
    mt = ["ab"] * 4
    gold = [[{"start": 0, "end": 2, "severity": "minor"}]] * 4
    pred = [gold[0], gold[0], [], []]  # the first document's rows all found, the second's none
    counts = span_counts(pred, gold, mt)
    by_row = span_scores(counts, resamples=400, seed=1).values["severity ignored"]
    by_doc = span_scores(counts, resamples=400, seed=1, clusters=["d1", "d1", "d2", "d2"]).values["severity ignored"]
    assert by_row["f1"] == by_doc["f1"] == pytest.approx(2 / 3)
    # a document draw takes both of its rows: recall is 0, 1/2 or 1, and F1 0, 2/3 or 1 only
    assert {round(by_doc["f1_low"], 4), round(by_doc["f1_high"], 4)} <= {0.0, round(2 / 3, 4), 1.0}


def test_word_spans_on_word_boundaries():
    text = "Die Orchideen sind fantastische Blumen, wirklich."
    token_spans = [
        {"start": 4, "end": 11, "severity": "major", "confidence": 0.8},  # "Orchide|en"
        {"start": 19, "end": 30, "severity": "major", "confidence": 0.6},  # "fantastisch|e"
        {"start": 30, "end": 31, "severity": "minor", "confidence": 0.2},  # "e": the word keeps major
        {"start": 32, "end": 34, "severity": "major", "confidence": 0.4},  # "Bl|umen": joins "fantastische"
        {"start": 41, "end": 45, "severity": "major", "confidence": 0.9},  # "wirk|lich" after ", ": stays apart
    ]
    assert word_spans(token_spans, text) == [
        {"start": 4, "end": 13, "severity": "major", "confidence": pytest.approx(0.8)},
        {"start": 19, "end": 38, "severity": "major", "confidence": pytest.approx((12 * 0.6 + 6 * 0.4) / 18)},
        {"start": 40, "end": 48, "severity": "major", "confidence": pytest.approx(0.9)},
    ]
    # neighbours of different severities stay apart; CJK characters are words of their own
    assert word_spans(
        [{"start": 0, "end": 1, "severity": "minor"}, {"start": 3, "end": 4, "severity": "major"}], "ab cd"
    ) == [
        {"start": 0, "end": 2, "severity": "minor"},
        {"start": 3, "end": 5, "severity": "major"},
    ]
    assert word_spans([{"start": 2, "end": 3, "severity": "minor"}], "我们喜欢花") == [
        {"start": 2, "end": 3, "severity": "minor"}
    ]
    assert word_spans([], "text") == []


def test_unified_model_learns_spans_and_exports(tmp_path, tiny_encoder):
    """Overfit a tiny unified model on spans; its export scores offline and finds the spans."""
    import pytorch_lightning as pl

    from lightning_metrics.metrics import load_metric
    from lightning_metrics.models import UnifiedMetric

    rows = []
    words = ["cat", "dog", "mat", "train", "window", "museum"]
    for i, w in enumerate(words):  # the word "bad" is always a major error, "odd" a minor one
        rows.append((f"s{i}", f"talk.{i}", i, "r1", f"the {w}", f"the <v>bad</v> {w} is here", "Accuracy", "Major"))
        rows.append((f"t{i}", f"talk.{i}", i, "r1", f"the {w}", f"the {w} <v>odd</v> now", "Style", "Minor"))
        rows.append((f"u{i}", f"talk.{i}", i, "r1", f"the {w}", f"the {w} is here", "No-error", "No-error"))
    data = mqm_file(tmp_path / "mqm_ted_ende.tsv", rows)
    pl.seed_everything(0)
    model = UnifiedMetric(
        encoder=str(tiny_encoder),
        segments=["mt", "src"],
        readout={"pooling": "cls"},
        word_weight=1.0,
        optim={"lr_encoder": 3e-3, "lr_head": 3e-3, "warmup_ratio": 0.0},
    )
    folder = export_tiny(model, tiny_encoder, data, tmp_path, "unified", steps=120, batch_size=18)
    metric = load_metric(str(folder))
    assert metric.inputs == ("mt", "src")
    result = metric.score(
        mt=["the bad cat is here", "the dog odd now", "the mat is here"], src=["the cat", "the dog", "the mat"]
    )
    spans = result.extra["spans"]
    assert [(s["start"], s["end"], s["severity"]) for s in spans[0]] == [(4, 7, "major")]
    assert [(s["start"], s["end"], s["severity"]) for s in spans[1]] == [(8, 11, "minor")]
    assert spans[2] == [] and all(0.25 < s["confidence"] <= 1 for s in spans[0] + spans[1])
    assert result.scores[2] > result.scores[1] > result.scores[0]  # MQM -0, -1, -5


def test_alignment_baseline_marks_unmatched_tokens(tiny_encoder):
    """A token identical in both texts (same context) matches itself with similarity 1; a threshold above
    every similarity marks the whole mt as one span; the dev choice picks the threshold that scores best."""
    from lightning_metrics.baselines.bertscore import BERTScorer
    from lightning_metrics.evaluation.span_baselines import alignment_spans, choose_threshold, token_matches

    scorer = BERTScorer(str(tiny_encoder))
    mt = ["the cat sat on the mat.", "the dog ran fast."]
    matches = token_matches(scorer, mt, ["the cat sat on the mat.", "prices went up."])
    assert [mt[0][a:b] for a, b in matches.offsets[0]] == ["the", "cat", "sat", "on", "the", "mat", "."]
    assert np.allclose(matches.best[0], 1.0, atol=1e-5) and matches.best[1].max() < 0.9999
    assert alignment_spans(matches, 0.9999)[0] == []
    whole = alignment_spans(matches, 1.5, "major")
    assert whole == [[{"start": 0, "end": 23, "severity": "major"}], [{"start": 0, "end": 17, "severity": "major"}]]
    gold = [[], [{"start": 0, "end": 17, "severity": "major"}]]
    assert choose_threshold(matches, gold, mt, [0.9999, 1.5]) == (0.9999, "major", 1.0)
