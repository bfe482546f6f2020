"""`lightning-metrics import` of unbabel-comet's unified models (``UnifiedMetric``: the CometKiwi layout
and the full layout with the word-level tagger; ``XCOMETMetric``): checkpoints in COMET's layout, written
here, scored and their spans decoded as COMET's own forward pass and ``decode`` do (re-implemented below,
row by row and unpadded, from its code's description, independently of our model)."""

import pytest
import torch
import yaml
from conftest import TINY_CORPUS
from test_import import ROWS, bert

from lightning_metrics import load_metric
from lightning_metrics.importers import import_metric
from lightning_metrics.spans import word_spans

HEAD = [16, 8]
CASES = {
    "cometkiwi-mt-src": {"class_identifier": "unified_metric", "input_segments": ["mt", "src"],
                         "word_level_training": False},
    "unified-full-word-level": {"class_identifier": "unified_metric", "input_segments": ["mt", "src", "ref"],
                                "word_level_training": True, "error_labels": ["minor", "major"], "word_layer": 1},
    "xcomet": {"class_identifier": "xcomet_metric", "input_segments": ["mt", "src", "ref"],
               "word_level_training": True, "error_labels": ["minor", "major", "critical"], "word_layer": 2},
}  # fmt: skip
LONG = {k: " ".join(TINY_CORPUS[i:] + TINY_CORPUS[:i]) * 2 for k, i in (("mt", 0), ("src", 3), ("ref", 6))}
COMMON = {"sent_layer": "mix", "layer": "mix", "layer_transformation": "softmax", "layer_norm": False}


def write_unified(folder, encoder, hp: dict, seed: int = 3) -> dict:
    """A unified checkpoint in COMET's layout: the encoder under ``encoder.model.``, random layer scalars,
    an estimator on the first token's vector (hidden 32), and for word-level models the tagger ``hidden2tag``."""
    torch.manual_seed(seed)
    state = {f"encoder.model.{k}": v for k, v in bert(encoder).state_dict().items()}
    for i in range(3):
        state[f"layerwise_attention.scalar_parameters.{i}"] = torch.randn(1)
    state["layerwise_attention.gamma"] = torch.tensor([1.3])
    for index, (n_in, n_out) in zip((0, 3, 6), zip([32, *HEAD], [*HEAD, 1])):
        state[f"estimator.ff.{index}.weight"] = torch.randn(n_out, n_in) * 0.3
        state[f"estimator.ff.{index}.bias"] = torch.randn(n_out) * 0.1
    if hp["word_level_training"]:
        n = 1 + len(hp["error_labels"])
        state["hidden2tag.weight"] = torch.randn(n, 32)
        state["hidden2tag.bias"] = torch.tensor([1.0] + [0.0] * (n - 1))  # OK a little more likely
        state["wordloss.weight"] = torch.ones(n)  # the loss's class weights: a buffer in COMET's checkpoints
    (folder / "checkpoints").mkdir(parents=True)
    hyper = {**hp, "pretrained_model": str(encoder), "encoder_model": "BERT", "dropout": 0.1, "hidden_sizes": HEAD}
    torch.save({"state_dict": state, "hyper_parameters": hyper}, folder / "checkpoints" / "model.ckpt")
    (folder / "hparams.yaml").write_text(yaml.safe_dump(hyper), encoding="utf-8")
    return state


def comet_unified(encoder, state: dict, hp: dict, row: dict) -> tuple[float, list[dict]]:
    """One row's score and spans as COMET computes them."""
    from transformers import AutoTokenizer

    tokenizer, model = AutoTokenizer.from_pretrained(str(encoder)), bert(encoder)
    cls, sep = tokenizer.cls_token_id, tokenizer.sep_token_id
    # COMET cuts each segment to its encoder's positions - 6 tokens, the joined sequence to positions - 2
    limit = model.config.max_position_embeddings
    pieces = {k: tokenizer(row[k], add_special_tokens=False)["input_ids"][: limit - 6] for k in ("mt", "src", "ref")}
    segments = hp["input_segments"] if hp["class_identifier"] == "unified_metric" else ["mt", "src", "ref"]
    views = [["mt", "src"], ["mt", "ref"], ["mt", "src", "ref"]] if len(segments) == 3 else [segments]
    scalars = torch.cat([state[f"layerwise_attention.scalar_parameters.{i}"] for i in range(3)]).softmax(0)
    scores, probs = [], []
    for view in views:
        ids = ([cls] + [t for k in view for t in pieces[k] + [sep]])[: limit - 2]
        types = [0] * (len(pieces["mt"]) + 2) + [1] * (len(ids) - len(pieces["mt"]) - 2)
        with torch.no_grad():
            layers = model(torch.tensor([ids]), token_type_ids=torch.tensor([types]), output_hidden_states=True)
            layers = layers.hidden_states
            x = (state["layerwise_attention.gamma"] * sum(w * h for w, h in zip(scalars, layers)))[0, 0]
            for index in (0, 3):
                x = torch.tanh(x @ state[f"estimator.ff.{index}.weight"].T + state[f"estimator.ff.{index}.bias"])
            scores.append(float(x @ state["estimator.ff.6.weight"].T + state["estimator.ff.6.bias"]))
            if hp["word_level_training"]:
                tags = layers[hp["word_layer"]][0] @ state["hidden2tag.weight"].T + state["hidden2tag.bias"]
                probs.append(tags.softmax(-1)[: len(pieces["mt"]) + 2])
    if not probs:
        return sum(scores) / len(scores), []
    weights = [0.1667, 0.3333, 0.5] if len(views) == 3 else [1.0]
    spans = comet_decode(
        sum(w * p for w, p in zip(weights, probs)), tokenizer(row["mt"], return_offsets_mapping=True), hp
    )
    if hp["class_identifier"] == "unified_metric":
        return sum(scores) / len(scores), spans
    penalty = min(25, sum({"minor": 1, "major": 5, "critical": 10}[s["severity"]] for s in spans))
    return sum(w * min(s, 1.0) for w, s in zip([0.12, 0.33, 0.33], scores)) + 0.22 * (25 - penalty) / 25, spans


def comet_decode(probs, encoding, hp) -> list[dict]:
    """COMET's ``decode``: a span opens at an error tag, takes its severity, closes at the next OK tag."""
    out, span = [], None
    for (start, end), p in zip(encoding["offset_mapping"], probs):
        value, tag = p.max(0)
        if tag > 0 and span is None:
            span = {"start": start, "end": end, "severity": hp["error_labels"][tag - 1], "p": [value]}
        elif tag > 0:
            span["end"], span["p"] = end, span["p"] + [value]
        elif span is not None:
            out.append(
                {k: v for k, v in span.items() if k != "p"} | {"confidence": float(torch.stack(span["p"]).mean())}
            )
            span = None
    return out


SPLIT = {  # words the tiny vocabulary does not hold, cut into pieces
    "mt": "Orchideen und Schmetterlinge sind fantastische Geschöpfe.",
    "src": "Orchids and butterflies are fantastic creatures.",
    "ref": "Orchideen und Schmetterlinge sind wunderbar.",
}


@pytest.mark.parametrize("case", CASES)
def test_unified_import_scores_and_spans_as_comet(tmp_path, tiny_encoder, case):
    hp = {**COMMON, **CASES[case]}
    state = write_unified(tmp_path / "comet", tiny_encoder, hp)
    folder = import_metric(tmp_path / "comet", tmp_path / "imported", raw_spans=True)  # COMET's own token spans
    metric = load_metric(str(folder), precision="fp32")
    assert metric.inputs == tuple(hp["input_segments"] if case != "xcomet" else ["mt", "src", "ref"])
    rows = ROWS + [LONG, SPLIT]
    result = metric.score(**{k: [r[k] for r in rows] for k in metric.inputs}, batch_size=5)
    assert result.truncated == 1  # the long row, cut as COMET cuts it
    expected = [comet_unified(tiny_encoder, state, hp, r) for r in rows]
    assert max(abs(a - e[0]) for a, e in zip(result.scores, expected)) <= 1e-5
    ours = [[(s["start"], s["end"], s["severity"]) for s in row] for row in result.extra["spans"]]
    assert ours == [[(s["start"], s["end"], s["severity"]) for s in e[1]] for e in expected]
    if hp["word_level_training"]:  # random taggers mark something, and confidences agree too
        assert sum(map(len, ours)) >= 3
        got = [s["confidence"] for row in result.extra["spans"] for s in row]
        assert max(abs(a - s["confidence"]) for a, s in zip(got, [s for e in expected for s in e[1]])) <= 1e-5
    # imported without --raw-spans: the same scores, and the same spans on word boundaries
    words = load_metric(str(import_metric(tmp_path / "comet", tmp_path / "words")), precision="fp32")
    on_words = words.score(**{k: [r[k] for r in rows] for k in metric.inputs}, batch_size=5)
    assert on_words.scores == result.scores
    assert on_words.extra["spans"] == [word_spans(s, r["mt"]) for s, r in zip(result.extra["spans"], rows)]
    if hp["word_level_training"]:  # the tiny vocabulary cuts SPLIT's words, and a span ends inside one
        assert on_words.extra["spans"] != result.extra["spans"]
