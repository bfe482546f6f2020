"""Is system B really better than system A? Paired significance tests for any metric.

- **Paired bootstrap resampling** (Koehn 2004), as sacrebleu's ``--paired-bs`` runs it: one set of
  ``n`` resamples of the segment indices (``numpy.random.default_rng(seed).choice``), shared by
  every system; each resample's system score is the metric's own (corpus BLEU and chrF from
  summed statistics, the mean of the segment scores otherwise). The p-value is sacrebleu's:
  with ``d = |B - A|`` and ``s_i = |B_i - A_i|`` over the resamples,
  ``p = (#{s_i - mean(s) > d} + 1) / (n + 1)``. The 95% interval of ``B - A`` is the 2.5th and
  97.5th percentile of ``B_i - A_i``.
- **Paired t-test** on the segment scores (``scipy.stats.ttest_rel``), as COMET's ``comet-compare``.

The winner at ``alpha`` is the higher-scoring system when the bootstrap p-value is below it,
else a tie.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from itertools import combinations

import numpy as np

from lightning_metrics.errors import LightningMetricsError
from lightning_metrics.metrics.base import Metric, ScoreResult


@dataclass
class PairComparison:
    """One pair of systems: scores, ``delta = score_b - score_a`` with its interval, p-values, winner."""

    system_a: str
    system_b: str
    score_a: float
    score_b: float
    delta: float
    ci_low: float
    ci_high: float
    p_bootstrap: float
    p_ttest: float
    winner: str

    def as_dict(self) -> dict:
        return asdict(self)


def resample_indices(n_segments: int, n_resamples: int, seed: int) -> np.ndarray:
    """``[n_resamples, n_segments]`` indices drawn with replacement (sacrebleu's draw for the same seed)."""
    if n_resamples < 1:
        raise LightningMetricsError(f"--bootstrap must be at least 1, got {n_resamples}")
    return np.random.default_rng(seed).choice(n_segments, size=(n_resamples, n_segments), replace=True)


def compare_systems(
    metric: Metric,
    results: dict[str, ScoreResult],
    columns: dict[str, dict[str, list[str]]],
    n_resamples: int = 1000,
    seed: int = 0,
    alpha: float = 0.05,
) -> list[PairComparison]:
    """Every pair of ``results`` (system -> its scores, in input order), tested both ways above.

    ``columns`` holds each system's inputs (as :meth:`Metric.columns` gives them), which BLEU and
    chrF resample through their corpus statistics.
    """
    from scipy import stats

    names = list(results)
    if len(names) < 2:
        raise LightningMetricsError("compare needs at least two systems")
    lengths = {len(results[n].scores) for n in names}
    if len(lengths) != 1:
        raise LightningMetricsError(
            "systems differ in segment count: " + ", ".join(f"{n} {len(results[n].scores)}" for n in names)
        )
    idx = resample_indices(lengths.pop(), n_resamples, seed)
    resampled = {n: metric.resampled_system_scores(results[n].scores, columns[n], idx) for n in names}
    out = []
    for a, b in combinations(names, 2):
        score_a, score_b = results[a].system_score, results[b].system_score
        sample = np.abs(resampled[b] - resampled[a])
        p_boot = (int(np.sum(sample - sample.mean() > abs(score_b - score_a))) + 1) / (len(sample) + 1)
        delta = resampled[b] - resampled[a]
        seg_a, seg_b = np.asarray(results[a].scores), np.asarray(results[b].scores)
        p_t = float(stats.ttest_rel(seg_b, seg_a).pvalue) if np.any(seg_a != seg_b) else 1.0
        better_b = score_b > score_a if metric.higher_is_better else score_b < score_a  # MetricX: lower is better
        winner = (b if better_b else a) if p_boot < alpha and score_a != score_b else "tie"
        out.append(
            PairComparison(
                a,
                b,
                float(score_a),
                float(score_b),
                float(score_b - score_a),
                float(np.percentile(delta, 2.5)),
                float(np.percentile(delta, 97.5)),
                float(p_boot),
                p_t,
                winner,
            )
        )
    return out


def format_comparisons(
    pairs: list[PairComparison], results: dict[str, ScoreResult], n_resamples: int, seed: int, alpha: float
) -> str:
    """The table ``compare`` prints: system scores, then one line per pair."""
    width = max(12, *(len(n) for n in results))
    lines = [f"{'system':<{width}}  {'score':>10}"] + [
        f"{n:<{width}}  {r.system_score:>10.4f}" for n, r in results.items()
    ]
    lines += [
        "",
        f"{'A':<{width}}  {'B':<{width}}  {'B - A':>9}  {'95% CI':>21}  {'p (bootstrap)':>13}  {'p (t-test)':>10}  "
        "winner",
        "-" * (2 * width + 75),
    ]
    for p in pairs:
        ci = f"[{p.ci_low:+.4f}, {p.ci_high:+.4f}]"
        lines.append(
            f"{p.system_a:<{width}}  {p.system_b:<{width}}  {p.delta:>+9.4f}  {ci:>21}  {_p(p.p_bootstrap):>13}  "
            f"{_p(p.p_ttest):>10}  {p.winner}"
        )
    lines += [
        "",
        f"paired bootstrap: {n_resamples} resamples, seed {seed}; winner at alpha {alpha} (bootstrap p); "
        f"signature: {next(iter(results.values())).signature}",
    ]
    return "\n".join(lines)


def _p(value: float) -> str:
    return "<0.0001" if value < 1e-4 else f"{value:.4f}"
