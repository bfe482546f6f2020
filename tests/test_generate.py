"""`generate`: determinism, shards, parallel corpora, signals, recipes and bad input; `probe`."""

import hashlib
import json
import re
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from data_gen import wordnet
from data_gen.pipeline import Recipe, generate, load_recipe
from data_gen.probe import probe
from lightning_metrics.cli.main import main
from lightning_metrics.metrics import score_many

REPO = Path(__file__).resolve().parents[1]
LEXICAL = str(REPO / "configs" / "data_gen" / "lexical.yaml")


def sha(path):
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def gen(tmp_path, name, *extra):
    out = tmp_path / name
    assert main(["generate", "--out", str(out), "--recipe", LEXICAL, *extra]) == 0
    return sorted(out.glob("data-*.parquet"))


def test_same_seed_same_bytes_other_seed_differs(tmp_path, capsys):
    args = ["--max-sentences", "2000", "--pairs-per-sentence", "2"]
    first = gen(tmp_path, "a", *args, "--seed", "3", "--num-proc", "1")
    second = gen(tmp_path, "b", *args, "--seed", "3", "--num-proc", "2")
    other = gen(tmp_path, "c", *args, "--seed", "4", "--num-proc", "2")
    assert sha(first[0]) == sha(second[0]) != sha(other[0])
    table = pq.read_table(first[0]).to_pydict()
    assert len(table["mt"]) == 4000
    assert set(table) >= {
        "ref",
        "mt",
        "perturbations",
        "severity",
        "score",
        "bleu",
        "chrf",
        "rouge1",
        "rouge2",
        "rougeL",
    }
    out = capsys.readouterr().out
    assert re.search(r"^negation\s+\d+\s+0\.100", out, re.M) and "4000 pairs from 2000 sentences" in out


def test_shards_together_equal_one_run(tmp_path):
    whole = pq.read_table(gen(tmp_path, "whole", "--max-sentences", "300", "--seed", "1")[0]).to_pydict()
    parts = [
        pq.read_table(
            gen(tmp_path, "shards", "--max-sentences", "300", "--seed", "1", "--shard", f"{i}/3")[i]
        ).to_pydict()
        for i in range(3)
    ]
    for column in ("mt", "ref", "score", "chrf"):
        assert [v for p in parts for v in p[column]] == whole[column]
    summary = json.loads((tmp_path / "shards" / "data-00001-of-00003.json").read_text())
    assert summary["shard"] == [1, 3] and summary["seed"] == 1


def test_parallel_corpus_keeps_src_and_datasets_loads_it(tmp_path):
    import datasets

    corpus = tmp_path / "parallel.tsv"
    corpus.write_text(
        "src\tref\nDer Hund biss den Mann.\tThe dog bit the man.\nDie Suppe ist heiß.\tThe soup is hot.\n",
        encoding="utf-8",
    )
    out = tmp_path / "out"
    assert (
        main(["generate", "--corpus", str(corpus), "--out", str(out), "--recipe", LEXICAL, "--pairs-per-sentence", "3"])
        == 0
    )
    ds = datasets.Dataset.from_parquet(str(out / "data-00000-of-00001.parquet"))
    assert ds.num_rows == 6
    for row in ds:
        assert (
            row["src"]
            == {"The dog bit the man.": "Der Hund biss den Mann.", "The soup is hot.": "Die Suppe ist heiß."}[
                row["ref"]
            ]
        )


def test_bertscore_signals_with_a_tiny_encoder(tiny_encoder):
    recipe = Recipe(
        signals=["chrf", "bertscore_f", "bertscore_p"],
        bertscore={"model": str(tiny_encoder)},
        perturbations={"identity": 1.0, "deletion": 1.0},
        compound_prob=0.0,
    )
    refs = ["The cat sat on the mat.", "A dog ran fast across the green field.", "She left her umbrella on the bus."]
    columns = generate(refs, recipe, pairs_per_sentence=4, seed=0, progress=False)
    assert set(columns) >= {"bertscore_f", "bertscore_p", "chrf"} and "bertscore_r" not in columns
    for applied, f1, score in zip(columns["perturbations"], columns["bertscore_f"], columns["score"]):
        if applied == ["identity"]:
            assert f1 == pytest.approx(1.0, abs=1e-5) and score == 1.0
        else:
            assert f1 < 1.0 and score == pytest.approx(0.6)


def test_default_recipe_file_equals_builtin_defaults():
    assert load_recipe(REPO / "configs" / "data_gen" / "default.yaml") == Recipe()


@pytest.mark.parametrize(
    "recipe, message",
    [
        ("perturbations: {shuffle: 1.0}\n", "unknown perturbation(s) ['shuffle']"),
        ("perturbation: {deletion: 1.0}\n", "unknown recipe key(s) ['perturbation']"),
        ("signals: [bleurt]\n", "unknown signal(s) ['bleurt']"),
    ],
)
def test_bad_recipe(tmp_path, capsys, recipe, message):
    path = tmp_path / "r.yaml"
    path.write_text(recipe)
    assert main(["generate", "--out", str(tmp_path / "o"), "--recipe", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: {path}: ") and message in err and "\n" not in err


@pytest.mark.parametrize(
    "body, message",
    [
        ("", "empty file: no sentences"),
        ("One sentence.\n\nAnother one.\n", "row 2: empty line"),
        ("Short.\n" + "word " * 300 + "\n", "row 2: line has 300 words; the recipe's max_words is 200"),
    ],
)
def test_bad_corpus(tmp_path, capsys, body, message):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(body, encoding="utf-8")
    assert main(["generate", "--corpus", str(corpus), "--out", str(tmp_path / "o"), "--recipe", LEXICAL]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"error: {corpus}: {message}"
    assert not (tmp_path / "o").exists() or not list((tmp_path / "o").glob("*.parquet"))


def test_bad_shard(tmp_path, capsys):
    assert main(["generate", "--out", str(tmp_path / "o"), "--shard", "3/3"]) == 2
    assert "need 0 <= i < n" in capsys.readouterr().err


def test_debian_wordnet_folder_gets_a_lexnames_file(tmp_path, monkeypatch):
    if not (wordnet.DEBIAN_DIR / "data.noun").is_file():
        pytest.skip("Debian's wordnet-base is not installed")
    import nltk
    from nltk.corpus.reader.wordnet import WordNetCorpusReader

    monkeypatch.setenv("LIGHTNING_METRICS_CACHE", str(tmp_path))
    root = wordnet._debian_as_nltk_data(wordnet.DEBIAN_DIR)
    lexnames = (root / "corpora" / "wordnet" / "lexnames").read_text().splitlines()
    assert len(lexnames) == 45 and lexnames[0] == "00\tadj.all\t3" and lexnames[44] == "44\tadj.ppl\t3"
    monkeypatch.setattr(nltk.data, "path", [*nltk.data.path, str(root)])
    reader = WordNetCorpusReader(str(root / "corpora" / "wordnet"), None)
    assert "cold" in {a.name() for s in reader.synsets("hot", "a") for lemma in s.lemmas() for a in lemma.antonyms()}


def test_default_corpus_is_wordnet_examples():
    sentences = wordnet.example_sentences()
    assert len(sentences) > 20000 and all(s[0].isupper() and s[-1] in ".!?" for s in sentences[:500])


def test_probe_chrf_sees_every_edit(capsys):
    corpus = wordnet.example_sentences()[:400]
    rows = {
        r.perturbation: r for r in probe(lambda mt, ref: score_many(["chrf"], mt, ref)["chrf"], corpus, n_sentences=60)
    }
    assert "identity" not in rows
    assert rows["deletion"].n > 30 and rows["deletion"].fraction_below == 1.0 and rows["deletion"].mean_drop > 5
    assert rows["unrelated"].mean_drop > rows["synonym"].mean_drop
    assert main(["probe", "--metric", "bleu", "--n", "40"]) == 0
    assert re.search(r"^negation\s+0\.90\s+\d+\s+1\.000", capsys.readouterr().out, re.M)
