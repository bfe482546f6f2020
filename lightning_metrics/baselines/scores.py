"""The one route from a baseline's name to its segment scores.

Built-in metrics (``metrics.builtin``), the signals a hybrid model reads or ``generate`` records
(:mod:`.signals`) all compute here, so a signal named ``chrf`` is exactly the built-in ``chrf``.

Names: ``bleu`` and ``chrf`` (0-100, sacrebleu), ``rouge1``/``rouge2``/``rougeL`` (F-measure 0-1,
rouge-score), ``bertscore_p``/``bertscore_r``/``bertscore_f`` (:mod:`.bertscore`). Names computed
together form a family (ROUGE-1/2/L; BERTScore P/R/F), computed once however many of its members
are asked for. ``ref`` holds one reference per row or a list per row: each family then uses them
as its own package does (BERTScore takes the best reference for each of P, R and F).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from lightning_metrics.baselines import lexical
from lightning_metrics.encoders.inference import ScoreOptions
from lightning_metrics.errors import LightningMetricsError

FAMILIES = {
    "bleu": ("bleu",),
    "chrf": ("chrf",),
    "rouge": lexical.ROUGE_TYPES,
    "bertscore": ("bertscore_p", "bertscore_r", "bertscore_f"),
}
FAMILY_OF = {name: family for family, names in FAMILIES.items() for name in names}
LEXICAL = ("bleu", "chrf", *lexical.ROUGE_TYPES)
BERTSCORE = FAMILIES["bertscore"]


def family_of(name: str) -> str:
    """The family a baseline name belongs to; one line naming the known names otherwise."""
    if name not in FAMILY_OF:
        raise LightningMetricsError(f"unknown baseline {name!r}; choose from {list(FAMILY_OF)}")
    return FAMILY_OF[name]


def family_scores(
    family: str,
    mt: Sequence[str],
    ref: Sequence,
    settings: dict | None = None,
    options: ScoreOptions | None = None,
    num_proc: int = 1,
    scorer=None,
) -> dict[str, list[float]]:
    """Segment scores of every member of ``family`` with these ``settings`` (the keyword arguments of
    :mod:`.lexical`'s functions, or of :class:`~.bertscore.BERTScorer`). ``scorer``: a ready
    BERTScorer to use instead of building one from ``settings``."""
    settings, options = dict(settings or {}), options or ScoreOptions(device="cpu")
    mt, ref = list(mt), list(ref)
    if family == "bleu":
        return {"bleu": lexical.sentence_bleu(mt, ref, num_proc=num_proc, **settings)}
    if family == "chrf":
        return {"chrf": lexical.sentence_chrf(mt, ref, num_proc=num_proc, **settings)}
    if family == "rouge":
        scores = lexical.sentence_rouge(mt, ref, num_proc=num_proc, **settings)
        return {t: scores[t]["fmeasure"] for t in lexical.ROUGE_TYPES}
    if family == "bertscore":
        if scorer is None:
            from lightning_metrics.baselines.bertscore import BERTScorer

            device = options.on_device().device
            scorer = BERTScorer(**settings, device=device, batch_size=options.batch_size, progress=options.progress)
        return bertscore_with_references(scorer, mt, ref, batch_size=options.batch_size, progress=options.progress)
    raise LightningMetricsError(f"unknown baseline family {family!r}; choose from {list(FAMILIES)}")


def bertscore_with_references(scorer, mt: list[str], ref: list, **run) -> dict[str, list[float]]:
    """BERTScore P, R and F per row; with several references per row each takes the best, as bert-score does.
    ``run`` (``batch_size``, ``progress``) goes to this call of the scorer."""
    if all(isinstance(r, str) for r in ref):
        return scorer.score(mt, ref, **run).as_dict()
    refs = [[r] if isinstance(r, str) else list(r) for r in ref]
    flat = scorer.score([m for m, rs in zip(mt, refs) for _ in rs], [r for rs in refs for r in rs], **run).as_dict()
    bounds = np.cumsum([0, *map(len, refs)])
    return {k: [float(np.max(v[a:b])) for a, b in zip(bounds[:-1], bounds[1:])] for k, v in flat.items()}


def baseline_scores(
    names: Sequence[str],
    mt: Sequence[str],
    ref: Sequence,
    settings: dict[str, dict] | None = None,
    options: ScoreOptions | None = None,
    num_proc: int = 1,
) -> dict[str, list[float]]:
    """Segment scores per baseline name (keys as given), each family computed once with its
    ``settings[family]`` (default settings where none are given)."""
    wanted = {family_of(n) for n in names}
    computed: dict[str, list[float]] = {}
    for family in sorted(wanted):
        computed.update(family_scores(family, mt, ref, (settings or {}).get(family), options, num_proc))
    return {n: list(computed[n]) for n in names}
