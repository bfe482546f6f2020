"""`generate`: corpus -> perturbed pairs -> signals -> a Parquet dataset, reproducibly.

Each sentence gets its own random generator, seeded from ``(seed, sentence index)``, so the
output does not depend on ``--num-proc`` or on how ``--shard i/n`` splits the corpus: the
shards of a corpus together hold exactly the rows of an unsharded run.
"""

from __future__ import annotations

import os
import random
import time
from collections import defaultdict
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Sequence

from data_gen.perturbations import REGISTRY, Compound, build, combined_severity, names
from data_gen.signals import (
    ALL_SIGNALS,
    BERTSCORE_SIGNALS,
    LEXICAL_SIGNALS,
    bertscore_signals,
    lexical_signals,
    score_from_severity,
)
from lightning_metrics.atomic import atomic_path, write_json
from lightning_metrics.errors import InputError, LightningMetricsError
from lightning_metrics.parallel import map_chunks

ANCHORS = ("identity", "unrelated")
BLOCK = 2000  # sentences per block: bounds memory and drives the progress bar
DEFAULT_WEIGHTS = {
    "deletion": 1.0,
    "span_deletion": 0.7,
    "synonym": 1.0,
    "antonym": 1.0,
    "negation": 1.0,
    "adjacent_swap": 0.5,
    "np_swap": 0.5,
    "clause_move": 0.5,
    "identity": 0.4,
    "unrelated": 0.4,
}


@dataclass
class Recipe:
    """How pairs are made (``configs/data_gen/default.yaml`` documents each field and equals these defaults)."""

    perturbations: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_WEIGHTS))
    compound_prob: float = 0.3
    max_steps: int = 3
    signals: list[str] = field(default_factory=lambda: list(ALL_SIGNALS))
    bertscore: dict = field(default_factory=lambda: {"model": "default", "batch_size": 64})
    max_words: int = 200
    max_attempts: int = 10


def load_recipe(path: str | os.PathLike | None) -> Recipe:
    """Read a recipe YAML; unknown keys, perturbations or signals are errors naming the file."""
    import yaml

    if path is None:
        return Recipe()
    try:
        raw = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as e:
        raise InputError(str(path), f"cannot read recipe: {str(e).splitlines()[0]}") from None
    known = set(Recipe.__dataclass_fields__)
    unknown = sorted(set(raw) - known)
    if unknown:
        raise InputError(str(path), f"unknown recipe key(s) {unknown}; known: {sorted(known)}")
    recipe = Recipe(**raw)
    bad = sorted(set(recipe.perturbations) - set(REGISTRY))
    if bad:
        raise InputError(str(path), f"unknown perturbation(s) {bad}; known: {', '.join(names())}")
    bad = sorted(set(recipe.signals) - set(ALL_SIGNALS))
    if bad:
        raise InputError(str(path), f"unknown signal(s) {bad}; known: {', '.join(ALL_SIGNALS)}")
    if not any(w > 0 for w in recipe.perturbations.values()):
        raise InputError(str(path), "no perturbation has a positive weight")
    return recipe


def parse_shard(text: str | None) -> tuple[int, int]:
    """``"i/n"`` -> ``(i, n)`` with ``0 <= i < n``; None -> ``(0, 1)``."""
    if not text:
        return 0, 1
    try:
        i, n = (int(x) for x in text.split("/"))
    except ValueError:
        raise LightningMetricsError(f"--shard must look like i/n (for example 0/4), got {text!r}") from None
    if not 0 <= i < n:
        raise LightningMetricsError(f"--shard {text}: need 0 <= i < n")
    return i, n


def perturb_sentence(index: int, ref: str, recipe: Recipe, seed: int, pairs: int, pool: Sequence[str]) -> list[dict]:
    """``pairs`` perturbed rows for one reference; seeded by ``(seed, index)`` alone."""
    rng = random.Random(f"{seed}:{index}")
    singles = {n: w for n, w in recipe.perturbations.items() if w > 0}
    steps_pool = {n: w for n, w in singles.items() if n not in ANCHORS}
    cache = {n: build(n, pool=pool) if n == "unrelated" else build(n) for n in singles}
    rows = []
    for _ in range(pairs):
        for _attempt in range(recipe.max_attempts):
            if steps_pool and recipe.max_steps > 1 and rng.random() < recipe.compound_prob:
                k = rng.randint(2, recipe.max_steps)
                chosen = rng.choices(list(steps_pool), weights=list(steps_pool.values()), k=k)
                out = Compound([cache[n] for n in chosen]).apply(ref, rng)
            else:
                name = rng.choices(list(singles), weights=list(singles.values()))[0]
                text = cache[name].apply(ref, rng)
                out = None if text is None else (text, [name], combined_severity([cache[name].severity]))
            if out is not None:
                text, applied, severity = out
                rows.append(
                    {
                        "sentence_id": index,
                        "ref": ref,
                        "mt": text,
                        "perturbations": applied,
                        "severity": round(severity, 6),
                        "score": round(score_from_severity(severity), 6),
                    }
                )
                break
    return rows


def _perturb_block(
    items: list[tuple[int, str]], recipe: Recipe, seed: int, pairs: int, pool: Sequence[str]
) -> list[dict]:
    rows = [row for index, ref in items for row in perturb_sentence(index, ref, recipe, seed, pairs, pool)]
    lexical = [s for s in recipe.signals if s in LEXICAL_SIGNALS]
    if lexical and rows:
        values = lexical_signals([r["ref"] for r in rows], [r["mt"] for r in rows], lexical)
        for name, column in values.items():
            for row, value in zip(rows, column):
                row[name] = value
    return rows


def validate_corpus(source: str, sentences: Sequence[str], max_words: int) -> None:
    """Errors for an empty corpus and for empty or over-long lines (naming the row)."""
    if not sentences:
        raise InputError(source, "empty corpus: no sentences")
    for i, s in enumerate(sentences):
        if not s.strip():
            raise InputError(source, "empty line", row=i + 1)
        if len(s.split()) > max_words:
            raise InputError(
                source, f"line has {len(s.split())} words; the recipe's max_words is {max_words}", row=i + 1
            )


def generate(
    refs: Sequence[str],
    recipe: Recipe,
    pairs_per_sentence: int = 4,
    seed: int = 0,
    srcs: Sequence[str] | None = None,
    num_proc: int = 1,
    shard: tuple[int, int] = (0, 1),
    progress: bool = True,
    bertscore_scorer=None,
) -> dict[str, list]:
    """Columns of the synthetic dataset for shard ``shard`` of ``refs`` (see module doc)."""
    i, n = shard
    lo, hi = len(refs) * i // n, len(refs) * (i + 1) // n
    columns: dict[str, list] = defaultdict(list)
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=hi - lo, desc="generate", unit="sentence")
    pool = list(refs)
    if set(recipe.perturbations) - set(ANCHORS):
        from data_gen.wordnet import load_wordnet

        load_wordnet()  # once here, shared by forked workers, rather than once per worker
    worker = partial(_perturb_block, recipe=recipe, seed=seed, pairs=pairs_per_sentence, pool=pool)
    for start in range(lo, hi, BLOCK):
        items = [(k, refs[k]) for k in range(start, min(start + BLOCK, hi))]
        rows = map_chunks(worker, items, num_proc, min_chunk=200)
        for row in rows:
            if srcs is not None:
                row["src"] = srcs[row["sentence_id"]]
            for key, value in row.items():
                columns[key].append(value)
        if bar is not None:
            bar.update(len(items))
    if bar is not None:
        bar.close()
    if any(s in BERTSCORE_SIGNALS for s in recipe.signals) and columns.get("mt"):
        if bertscore_scorer is None:
            from lightning_metrics.baselines.bertscore import BERTScorer

            bertscore_scorer = BERTScorer(**{"progress": progress, **recipe.bertscore})
        for name, values in bertscore_signals(columns["ref"], columns["mt"], bertscore_scorer).items():
            if name in recipe.signals:
                columns[name] = values
    return dict(columns)


def write_dataset(columns: dict[str, list], out_dir: str | os.PathLike, shard: tuple[int, int], metadata: dict) -> Path:
    """Write ``data-iiiii-of-nnnnn.parquet`` and its ``.json`` summary atomically into ``out_dir``."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    i, n = shard
    stem = f"data-{i:05d}-of-{n:05d}"
    target = out / f"{stem}.parquet"
    with atomic_path(target) as tmp:
        pq.write_table(pa.table(columns), tmp)
    write_json(out / f"{stem}.json", metadata, sort_keys=True)
    return target


def summary_table(columns: dict[str, list], signals: Sequence[str]) -> str:
    """Count per perturbation and the mean of each signal, as an aligned table (chains of
    several perturbations share one row, ``compound``)."""
    groups: dict[str, list[int]] = defaultdict(list)
    for k, applied in enumerate(columns.get("perturbations", [])):
        groups[applied[0] if len(applied) == 1 else "compound"].append(k)
    shown = ["score", *[s for s in signals if s in columns]]
    header = ["perturbation", "pairs", *shown]
    rows = []
    for name in sorted(groups, key=lambda g: (g == "compound", g)):
        idx = groups[name]
        rows.append([name, str(len(idx)), *(f"{sum(columns[s][k] for k in idx) / len(idx):.3f}" for s in shown)])
    widths = [max(len(r[c]) for r in [header, *rows]) for c in range(len(header))]
    fmt = lambda r: "  ".join(x.ljust(w) if c == 0 else x.rjust(w) for c, (x, w) in enumerate(zip(r, widths)))  # noqa: E731
    return "\n".join([fmt(header), "  ".join("-" * w for w in widths), *map(fmt, rows)])


def remove_stale(out_dir: Path) -> None:
    """Drop temp files a crashed run left behind (never finished shards)."""
    for tmp in Path(out_dir).glob(".data-*.tmp-*"):
        tmp.unlink(missing_ok=True)


def run(
    corpus: str | None,
    out: str,
    recipe_path: str | None,
    pairs_per_sentence: int,
    seed: int,
    num_proc: int,
    shard_text: str | None,
    column: str | None = None,
    progress: bool = True,
    max_sentences: int | None = None,
) -> tuple[Path, str]:
    """The `generate` command: read, validate, generate, write; returns the file and the summary."""
    from lightning_metrics.data.readers import read_corpus_with_sources

    recipe = load_recipe(recipe_path)
    shard = parse_shard(shard_text)
    srcs = None
    if corpus is None:
        from data_gen.wordnet import example_sentences

        refs, source = example_sentences(), "WordNet example sentences"
    else:
        refs, srcs, source = *read_corpus_with_sources(corpus, column), corpus
    if max_sentences is not None:
        refs, srcs = refs[:max_sentences], None if srcs is None else srcs[:max_sentences]
    validate_corpus(source, refs, recipe.max_words)
    started = time.perf_counter()
    columns = generate(refs, recipe, pairs_per_sentence, seed, srcs, num_proc, shard, progress)
    if not columns:
        raise LightningMetricsError(f"{source}: no perturbation applied to any sentence of shard {shard[0]}/{shard[1]}")
    metadata = {
        "corpus": source,
        "n_sentences": len(refs),
        "shard": list(shard),
        "seed": seed,
        "pairs_per_sentence": pairs_per_sentence,
        "n_pairs": len(columns["mt"]),
        "recipe": recipe.__dict__,
    }
    remove_stale(Path(out))
    path = write_dataset(columns, out, shard, metadata)
    table = summary_table(columns, recipe.signals)
    elapsed = time.perf_counter() - started
    return (
        path,
        f"{table}\n{len(columns['mt'])} pairs from {len(refs)} sentences ({source}) in {elapsed:.1f} s -> {path}",
    )
