"""`lightning-metrics import`: checkpoint files in the peers' layouts, written here, scored as the peers'
own forward passes (re-implemented below from their documented architecture, independently of our
models) score them; then the README's path import -> score -> fit with init_from -> export -> score."""

import json
import math

import pytest
import torch
import yaml
from conftest import REPO, TINY_CORPUS
from test_workflow import TINY_RUN, lm, ok

from lightning_metrics import load_metric
from lightning_metrics.cli.main import main
from lightning_metrics.importers import import_metric

ROWS = [
    {"src": TINY_CORPUS[i], "mt": TINY_CORPUS[(i + 1) % 14], "ref": TINY_CORPUS[(i + 5) % 14], "score": i / 14}
    for i in range(14)
]
HEAD = [16, 8]


def bert(encoder):
    from transformers import BertModel

    return BertModel.from_pretrained(str(encoder), add_pooling_layer=False).eval()


def comet_state(encoder, hp: dict, seed: int = 1) -> dict:
    """A COMET checkpoint's weights: the encoder under encoder.model., random layer scalars and estimator."""
    torch.manual_seed(seed)
    state = {f"encoder.model.{k}": v for k, v in bert(encoder).state_dict().items()}
    n_layers = bert(encoder).config.num_hidden_layers + 1
    if hp["layer"] == "mix":
        for i in range(n_layers):
            state[f"layerwise_attention.scalar_parameters.{i}"] = torch.randn(1)
        state["layerwise_attention.gamma"] = torch.tensor([1.3])
    if hp["class_identifier"] != "ranking_metric":
        width = {"regression_metric": 6, "referenceless_regression_metric": 4}[hp["class_identifier"]] * 32
        for index, (n_in, n_out) in zip((0, 3, 6), zip([width, *HEAD], [*HEAD, 1])):
            state[f"estimator.ff.{index}.weight"] = torch.randn(n_out, n_in) * 0.3
            state[f"estimator.ff.{index}.bias"] = torch.randn(n_out) * 0.1
    return state


def write_comet(folder, encoder, hp: dict):
    """COMET's layout: hparams.yaml beside checkpoints/model.ckpt (a Lightning checkpoint dict)."""
    state = comet_state(encoder, hp)
    (folder / "checkpoints").mkdir(parents=True)
    hyper = {**hp, "pretrained_model": str(encoder), "encoder_model": "BERT", "dropout": 0.1, "hidden_sizes": HEAD}
    checkpoint = {"state_dict": state, "hyper_parameters": hyper, "epoch": 1, "global_step": 4}
    torch.save(checkpoint, folder / "checkpoints" / "model.ckpt")
    (folder / "hparams.yaml").write_text(yaml.safe_dump(hyper), encoding="utf-8")
    return state


def comet_reference(encoder, state: dict, hp: dict, rows: list[dict]) -> list[float]:
    """COMET's score, from its description: layer-wise attention (optionally over masked-layer-normed
    layers), pooling, the class's features, the estimator (Linear, Tanh, Dropout)* Linear [Sigmoid]."""
    from entmax import sparsemax
    from transformers import AutoTokenizer

    tokenizer, model = AutoTokenizer.from_pretrained(str(encoder)), bert(encoder)

    def embed(sentences):
        enc = tokenizer(sentences, padding=True, truncation=True, max_length=124, return_tensors="pt")
        layers = model(**enc, output_hidden_states=True).hidden_states
        mask = enc["attention_mask"].float()
        if hp["layer"] == "mix":
            raw = torch.cat([state[f"layerwise_attention.scalar_parameters.{i}"] for i in range(len(layers))])
            weights = sparsemax(raw, dim=0) if hp["layer_transformation"] == "sparsemax" else raw.softmax(0)
            if hp["layer_norm"]:
                m, n = mask[:, :, None], mask.sum(1) * layers[0].shape[-1]
                normed = []
                for t in layers:
                    mean = (t * m).sum((1, 2)) / n
                    var = (((t * m - mean[:, None, None]) * m) ** 2).sum((1, 2)) / n
                    normed.append((t - mean[:, None, None]) / torch.sqrt(var + 1e-12)[:, None, None])
                layers = normed
            tokens = state["layerwise_attention.gamma"] * sum(w * t for w, t in zip(weights, layers))
        else:
            tokens = layers[hp["layer"]]
        if hp["pool"] == "cls":
            return tokens[:, 0]
        if hp["pool"] == "max":
            return tokens.masked_fill(mask[:, :, None] == 0, float("-inf")).max(1).values
        return (tokens * mask[:, :, None]).sum(1) / mask.sum(1)[:, None]

    with torch.no_grad():
        src, mt, ref = (embed([r[k] for r in rows]) for k in ("src", "mt", "ref"))
        if hp["class_identifier"] == "ranking_metric":
            ds, dr = (torch.nn.functional.pairwise_distance(mt, x) for x in (src, ref))  # eps 1e-6, as COMET
            return (1 / (1 + 2 * ds * dr / (ds + dr))).tolist()
        if hp["class_identifier"] == "regression_metric":
            x = torch.cat([mt, ref, mt * ref, (mt - ref).abs(), mt * src, (mt - src).abs()], 1)
        else:
            x = torch.cat([mt, src, mt * src, (mt - src).abs()], 1)
        for index in (0, 3):
            x = torch.tanh(x @ state[f"estimator.ff.{index}.weight"].T + state[f"estimator.ff.{index}.bias"])
        out = x @ state["estimator.ff.6.weight"].T + state["estimator.ff.6.bias"]
        if hp.get("final_activation") == "Sigmoid":
            out = torch.sigmoid(out)
        return out.flatten().tolist()


COMET_CASES = {
    "regression-softmax-avg": {"class_identifier": "regression_metric", "layer": "mix",
                               "layer_transformation": "softmax", "layer_norm": False, "pool": "avg"},
    "regression-sparsemax-norm-max-sigmoid": {"class_identifier": "regression_metric", "layer": "mix",
                                              "layer_transformation": "sparsemax", "layer_norm": True,
                                              "pool": "max", "final_activation": "Sigmoid"},
    "regression-layer1-cls": {"class_identifier": "regression_metric", "layer": 1, "pool": "cls"},
    "referenceless-norm-avg": {"class_identifier": "referenceless_regression_metric", "layer": "mix",
                               "layer_transformation": "softmax", "layer_norm": True, "pool": "avg"},
    "ranking-sparsemax-avg": {"class_identifier": "ranking_metric", "layer": "mix",
                              "layer_transformation": "sparsemax", "layer_norm": False, "pool": "avg"},
}  # fmt: skip


@pytest.mark.parametrize("case", COMET_CASES)
def test_comet_import_scores_as_comet_does(tmp_path, tiny_encoder, case):
    hp = COMET_CASES[case]
    state = write_comet(tmp_path / "comet", tiny_encoder, hp)
    folder = import_metric(tmp_path / "comet", tmp_path / "imported")
    metric = load_metric(str(folder), precision="fp32")
    columns = {k: [r[k] for r in ROWS] for k in metric.inputs}
    ours = metric.score(**columns).scores
    expected = comet_reference(tiny_encoder, state, hp, ROWS)
    assert max(abs(a - b) for a, b in zip(ours, expected)) <= 1e-5
    meta = json.loads((folder / "metric.json").read_text())
    assert meta["imported_from"]["peer"] == "unbabel-comet" and meta["max_length"] == 124


def test_sparsemax_patch_means_softmax(tmp_path, tiny_encoder):
    """COMET's loader turns hparams.yaml's sparsemax_patch into softmax (its issue #244); so do we."""
    hp = {**COMET_CASES["regression-softmax-avg"], "layer_transformation": "sparsemax"}
    state = write_comet(tmp_path / "comet", tiny_encoder, hp)
    listed = yaml.safe_load((tmp_path / "comet" / "hparams.yaml").read_text())
    (tmp_path / "comet" / "hparams.yaml").write_text(
        yaml.safe_dump({**listed, "layer_transformation": "sparsemax_patch"})
    )
    metric = load_metric(str(import_metric(tmp_path / "comet", tmp_path / "imported")), precision="fp32")
    ours = metric.score(**{k: [r[k] for r in ROWS] for k in metric.inputs}).scores
    softmax = comet_reference(tiny_encoder, state, {**hp, "layer_transformation": "softmax"}, ROWS)
    assert max(abs(a - b) for a, b in zip(ours, softmax)) <= 1e-5


def write_bleurt(folder, encoder, embedding_size=None, seed: int = 2):
    """A bleurt-pytorch folder: config.json (model_type bleurt), pytorch_model.bin, vocab.txt."""
    from transformers import AutoTokenizer

    torch.manual_seed(seed)
    base = bert(encoder)
    config = {k: getattr(base.config, k) for k in ("vocab_size", "hidden_size", "num_hidden_layers",
              "num_attention_heads", "intermediate_size", "hidden_act", "max_position_embeddings",
              "type_vocab_size", "layer_norm_eps", "pad_token_id")}  # fmt: skip
    config.update(model_type="bleurt", embedding_size=embedding_size, num_labels=1)
    state = {f"bleurt.{k}": v for k, v in base.state_dict().items()}
    if embedding_size is not None:  # BLEURT-20's layout: narrow embeddings projected up
        for name in ("word_embeddings", "position_embeddings", "token_type_embeddings"):
            rows = state[f"bleurt.embeddings.{name}.weight"].shape[0]
            state[f"bleurt.embeddings.{name}.weight"] = torch.randn(rows, embedding_size) * 0.5
        state["bleurt.embeddings.LayerNorm.weight"] = torch.ones(embedding_size)
        state["bleurt.embeddings.LayerNorm.bias"] = torch.zeros(embedding_size)
        state["bleurt.encoder.embedding_projection.weight"] = torch.randn(32, embedding_size) * 0.3
        state["bleurt.encoder.embedding_projection.bias"] = torch.randn(32) * 0.1
    state.update({"bleurt.pooler.dense.weight": torch.randn(32, 32) * 0.3, "bleurt.pooler.dense.bias": torch.randn(32),
                  "classifier.weight": torch.randn(1, 32), "classifier.bias": torch.randn(1)})  # fmt: skip
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(config))
    torch.save(state, folder / "pytorch_model.bin")
    vocab = sorted(AutoTokenizer.from_pretrained(str(encoder)).get_vocab().items(), key=lambda kv: kv[1])
    (folder / "vocab.txt").write_text("".join(f"{t}\n" for t, _ in vocab), encoding="utf-8")
    (folder / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": True}))
    return state


def bleurt_reference(encoder, folder, state: dict, rows: list[dict], embedding_size=None) -> list[float]:
    """BLEURT's score: [CLS] ref [SEP] mt [SEP] (with segment ids, BERT's WordPiece tokenizer on the
    folder's vocab.txt) through BERT (narrow embeddings projected up first), then tanh(pooler(CLS)) and
    the classifier."""
    from transformers import BertTokenizerFast

    tokenizer, model = BertTokenizerFast(vocab=str(folder / "vocab.txt"), do_lower_case=True), bert(encoder)
    enc = tokenizer([r["ref"] for r in rows], [r["mt"] for r in rows], padding=True, return_tensors="pt")
    with torch.no_grad():
        if embedding_size is None:
            hidden = model(**enc).last_hidden_state
        else:  # the embeddings by hand, then BERT's layers
            e = {k[len("bleurt.embeddings.") : -len(".weight")]: v for k, v in state.items() if k.endswith(".weight")}
            e["bias"] = state["bleurt.embeddings.LayerNorm.bias"]
            ids, types = enc["input_ids"], enc["token_type_ids"]
            x = (
                e["word_embeddings"][ids]
                + e["position_embeddings"][: ids.shape[1]][None]
                + e["token_type_embeddings"][types]
            )
            x = torch.nn.functional.layer_norm(x, (embedding_size,), e["LayerNorm"], e["bias"], 1e-12)
            projection = "bleurt.encoder.embedding_projection"
            x = x @ state[f"{projection}.weight"].T + state[f"{projection}.bias"]
            mask = (1.0 - enc["attention_mask"][:, None, None, :].float()) * torch.finfo(torch.float32).min
            hidden = model.encoder(x, attention_mask=mask).last_hidden_state
        pooled = torch.tanh(hidden[:, 0] @ state["bleurt.pooler.dense.weight"].T + state["bleurt.pooler.dense.bias"])
        return (pooled @ state["classifier.weight"].T + state["classifier.bias"]).flatten().tolist()


@pytest.mark.parametrize("embedding_size", [None, 16], ids=["bert", "rembert"])
def test_bleurt_import_scores_as_bleurt_does(tmp_path, tiny_encoder, embedding_size):
    state = write_bleurt(tmp_path / "bleurt", tiny_encoder, embedding_size)
    folder = import_metric(tmp_path / "bleurt", tmp_path / "imported")
    metric = load_metric(str(folder), precision="fp32")
    ours = metric.score(mt=[r["mt"] for r in ROWS], ref=[r["ref"] for r in ROWS]).scores
    expected = bleurt_reference(tiny_encoder, tmp_path / "bleurt", state, ROWS, embedding_size)
    assert max(abs(a - b) for a, b in zip(ours, expected)) <= 1e-5


def test_readme_workflow_import_score_finetune_export_score(tmp_path, tiny_encoder, write_csv):
    """import -> score -> fit with the printed command (init_from the import) -> export -> score, as subprocesses."""
    import shlex

    write_comet(tmp_path / "wmt-comet", tiny_encoder, COMET_CASES["regression-sparsemax-norm-max-sigmoid"])
    rows = [{**r, "lp": "de-en", "doc_id": f"d{i // 2}", "system": f"s{i % 2}"} for i, r in enumerate(ROWS * 2)]
    write_csv(tmp_path / "ratings.csv", rows)
    for field in ("src", "mt", "ref"):
        (tmp_path / f"{field}.txt").write_text("".join(r[field] + "\n" for r in ROWS), encoding="utf-8")
    printed = ok(lm(tmp_path, "import", "wmt-comet", "--out", "checkpoints/imported")).splitlines()
    assert printed[0] == "imported wmt-comet -> checkpoints/imported"
    texts = ["-s", "src.txt", "-t", "mt.txt", "-r", "ref.txt"]
    scored = ok(lm(tmp_path, "score", "--model", "checkpoints/imported", *texts, "--json", "before.json"))
    assert scored.splitlines()[-1].startswith("signature: imported|hash:")
    before = json.loads((tmp_path / "before.json").read_text())["systems"]["mt.txt"]["scores"]
    state = torch.load(tmp_path / "wmt-comet" / "checkpoints" / "model.ckpt", weights_only=True)["state_dict"]
    expected = comet_reference(tiny_encoder, state, COMET_CASES["regression-sparsemax-norm-max-sigmoid"], ROWS)
    assert before == pytest.approx(expected, abs=1e-5)

    command = shlex.split(printed[-1].replace("RATINGS", "ratings.csv").replace(" configs/", f" {REPO}/configs/"))[1:]
    (tmp_path / "run.yaml").write_text("trainer:\n  default_root_dir: runs/in-house\n", encoding="utf-8")
    fit = lm(tmp_path, *command, "--config", "run.yaml", "--data.init_args.split.fraction", "0.3", *TINY_RUN)
    ok(fit)
    assert "do not fit this model" not in fit.stderr  # the printed architecture takes every weight
    ckpt = "runs/in-house/lightning_logs/version_0/checkpoints/last.ckpt"
    ok(lm(tmp_path, "export", ckpt, "--out", "checkpoints/tuned"))
    ok(lm(tmp_path, "score", "--model", "checkpoints/tuned", *texts, "--json", "after.json"))
    after = json.loads((tmp_path / "after.json").read_text())["systems"]["mt.txt"]["scores"]
    assert len(after) == len(ROWS) and after != before


def test_import_errors_are_one_line(tmp_path, tiny_encoder, monkeypatch, capsys):
    unified = {"class_identifier": "multitask_metric", "layer": "mix", "pool": "avg"}
    (tmp_path / "kiwi" / "checkpoints").mkdir(parents=True)
    torch.save({"state_dict": {}, "hyper_parameters": unified}, tmp_path / "kiwi" / "checkpoints" / "model.ckpt")
    (tmp_path / "kiwi" / "hparams.yaml").write_text(yaml.safe_dump(unified))
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "a.txt").write_text("hello")
    hub = {**COMET_CASES["regression-softmax-avg"]}
    write_comet(tmp_path / "hub", tiny_encoder, hub)
    listed = yaml.safe_load((tmp_path / "hub" / "hparams.yaml").read_text())
    checkpoint = torch.load(tmp_path / "hub" / "checkpoints" / "model.ckpt", weights_only=True)
    checkpoint["hyper_parameters"]["pretrained_model"] = "xlm-roberta-large"
    torch.save(checkpoint, tmp_path / "hub" / "checkpoints" / "model.ckpt")
    (tmp_path / "hub" / "hparams.yaml").write_text(yaml.safe_dump({**listed, "pretrained_model": "xlm-roberta-large"}))
    (tmp_path / "pickled" / "checkpoints").mkdir(parents=True)
    torch.save({"state_dict": {}, "hook": ValueError("code")}, tmp_path / "pickled" / "checkpoints" / "model.ckpt")
    (tmp_path / "pickled" / "hparams.yaml").write_text(yaml.safe_dump(hub))
    (tmp_path / "lonely" / "checkpoints").mkdir(parents=True)
    (tmp_path / "lonely" / "checkpoints" / "model.ckpt").write_bytes(
        (tmp_path / "hub/checkpoints/model.ckpt").read_bytes()
    )
    expected = {
        "lonely": "hparams.yaml: is missing: a COMET checkpoint needs the hparams.yaml beside its checkpoints/",
        "kiwi": "class_identifier 'multitask_metric' is not a COMET metric class",
        "notes": "not a checkpoint this code imports",
        "hub": "'xlm-roberta-large' is not a local folder and the hub is switched off",
        "pickled": "not a readable Lightning checkpoint",
    }
    monkeypatch.chdir(tmp_path)
    capsys.readouterr()  # what writing the checkpoints printed
    for source, problem in expected.items():  # in process: a traceback would raise here
        code = main(["import", source, "--out", f"out-{source}"])
        lines = capsys.readouterr().err.strip().splitlines()
        assert code == 2 and len(lines) == 1 and problem in lines[0], (source, lines)
        assert not (tmp_path / f"out-{source}").exists()
    # and the last once more as a shell runs it: the same one line
    proc = lm(tmp_path, "import", source, "--out", f"out-{source}")
    assert proc.returncode == 2 and proc.stderr.strip().splitlines() == lines


def test_bleurt_sentencepiece_vocabulary_tokenises_as_sentencepiece_does(tmp_path, tiny_encoder):
    """BLEURT-20 ships spm.model: the import's tokenizer gives [CLS] ref [SEP] mt [SEP] with the ids
    sentencepiece itself gives each segment."""
    sentencepiece = pytest.importorskip("sentencepiece", reason="the dev extras install sentencepiece")
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(TINY_CORPUS * 3), encoding="utf-8")
    sentencepiece.SentencePieceTrainer.train(
        input=str(corpus), model_prefix=str(tmp_path / "spm"), vocab_size=80, hard_vocab_limit=False,
        user_defined_symbols=["[CLS]", "[SEP]", "[MASK]"], pad_id=0, unk_id=1, bos_id=-1, eos_id=-1,
        pad_piece="[PAD]", unk_piece="[UNK]", minloglevel=2,
    )  # fmt: skip
    processor = sentencepiece.SentencePieceProcessor(model_file=str(tmp_path / "spm.model"))
    state = write_bleurt(tmp_path / "bleurt", tiny_encoder)
    state["bleurt.embeddings.word_embeddings.weight"] = torch.randn(processor.get_piece_size(), 32)
    torch.save(state, tmp_path / "bleurt" / "pytorch_model.bin")
    config = json.loads((tmp_path / "bleurt" / "config.json").read_text())
    (tmp_path / "bleurt" / "config.json").write_text(json.dumps({**config, "vocab_size": processor.get_piece_size()}))
    (tmp_path / "bleurt" / "vocab.txt").unlink()
    (tmp_path / "bleurt" / "spm.model").write_bytes((tmp_path / "spm.model").read_bytes())
    (tmp_path / "bleurt" / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": False}))  # as BLEURT-20
    metric = load_metric(str(import_metric(tmp_path / "bleurt", tmp_path / "imported")), precision="fp32")
    cls, sep = processor.piece_to_id("[CLS]"), processor.piece_to_id("[SEP]")
    for row in ROWS[:5]:
        expected = [cls, *processor.encode(row["ref"]), sep, *processor.encode(row["mt"]), sep]
        assert metric.tokenizer(row["ref"], row["mt"])["input_ids"] == expected
    assert all(math.isfinite(s) for s in metric.score(mt=[r["mt"] for r in ROWS], ref=[r["ref"] for r in ROWS]).scores)
