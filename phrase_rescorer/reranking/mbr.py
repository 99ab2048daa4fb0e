"""Minimum Bayes risk choice of each sentence's hypothesis, as Moses' decoder makes it (``-mbr``).

The weighted sums of an n-best list's features, scaled, are the log-probabilities of its
hypotheses up to a constant: p(h) = exp(scale * w . f(h)) / sum over the list. The hypothesis
chosen is the one of least expected loss 1 - BLEU(h, h') against the other hypotheses h' of the
sentence, weighted by p(h'): the translation the others agree with most, rather than the one
the weights rank first. Moses' ``moses/mbr.cpp`` (``doMBR``) does this over the decoder's
``-mbr-size`` best distinct hypotheses (``manager.CalcNBest(nBestSize, nBestList, true)``)
with ``-mbr-scale`` (``UntransformScore(mbr_scale * path.GetScoreBreakdown()->GetWeightedScore()
- maxScore)``); here it runs over a list's lines, so that it follows reranking by the added
features. On a distinct list with the decoder's own weights it chooses what the decoder's
``-mbr`` does (tests/integration/test_rerank_moses.py).

The loss is Moses' ``calculate_score``, kept exactly: BLEU of order 4 between two hypotheses,
one taken as the reference; the unigram precision unsmoothed (no unigram in common: BLEU 0),
the precisions of orders 2 to 4 add-one smoothed (``log(m + 1) - log(t + 1)``), the brevity
penalty of the reference's length against the hypothesis's. A hypothesis is not compared with
itself (``if ( i != j)``); the first of equal risks is chosen (``weightedLossCumul <
minMBRLoss``).

The clipped n-gram matches of every pair of a sentence's hypotheses come from matrix products:
min(a, b) of two counts is the number of k >= 1 with a >= k and b >= k, so the matches of one
order are the sum over k of B_k B_k^T, B_k the 0/1 matrix "hypothesis has the n-gram at least k
times". Counts are small integers, and so are the products: exact in float32.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

#: BLEU's order in Moses' MBR (``BLEU_ORDER = 4``).
ORDER = 4
#: Moses' ``-mbr-size`` and ``-mbr-scale`` defaults (``moses/parameters/MBR_Options.cpp``:
#: ``param.SetParameter<size_t>(size, "mbr-size", 200);``, ``param.SetParameter(scale,
#: "mbr-scale", 1.0f);``; ``moses --help`` says the same).
DEFAULT_SIZE = 200
DEFAULT_SCALE = 1.0


@dataclass(frozen=True)
class Mbr:
    """The MBR decision rule: among the ``size`` hypotheses of highest weighted sum, with
    probabilities exp(``scale`` * weighted sum) normalised."""

    scale: float = DEFAULT_SCALE
    size: int = DEFAULT_SIZE

    def __post_init__(self) -> None:
        if not (self.scale >= 0 and np.isfinite(self.scale)):
            raise ValueError(f"MBR scale must be a finite number >= 0, not {self.scale}")
        if self.size < 1:
            raise ValueError(f"MBR size must be at least 1, not {self.size}")


def _match_counts(tokens: Sequence[Sequence[str]]) -> np.ndarray:
    """[ORDER, hyps, hyps] clipped n-gram matches of every pair (module docstring). Each n-gram
    is an integer: the number of its first n - 1 words as an (n-1)-gram (numbered 0, 1, 2, ... in
    the order of their values), times the vocabulary's size + 1, plus its last word's number. An
    n-gram of one hypothesis only matches nothing but itself, so its column is left out and the
    diagonal set to each hypothesis's own n-gram count, its matches with itself."""
    count = len(tokens)
    lengths = np.asarray([len(words) for words in tokens], dtype=np.int64)
    vocab: dict[str, int] = {}
    ids = np.asarray([vocab.setdefault(w, len(vocab) + 1) for words in tokens for w in words], dtype=np.int64)
    base = len(vocab) + 1
    hyp_of = np.repeat(np.arange(count, dtype=np.int64), lengths)
    left = np.repeat(lengths, lengths) - (np.arange(len(ids)) - np.repeat(np.cumsum(lengths) - lengths, lengths))
    matches = np.zeros((ORDER, count, count), dtype=np.float64)
    keys = np.zeros(len(ids), dtype=np.int64)  # the number of the n-gram that starts at each position
    for n in range(1, ORDER + 1):
        at = np.flatnonzero(left >= n)  # positions where an n-gram starts
        diagonal = np.maximum(lengths - (n - 1), 0)
        if len(at):
            grams, column = np.unique(keys[at] * base + ids[at + n - 1], return_inverse=True)
            column = column.reshape(-1)
            keys[at] = column  # below the positions' count: the next order's keys stay small
            pairs, times = np.unique(hyp_of[at] * len(grams) + column, return_counts=True)
            rows, cols = pairs // len(grams), pairs % len(grams)
            shared = np.bincount(cols, minlength=len(grams)) > 1  # in two hypotheses or more
            keep = shared[cols]
            rows, cols, times = rows[keep], cols[keep], times[keep]
            kept = np.cumsum(shared) - 1  # a shared n-gram's column among the shared ones
            for k in range(1, int(times.max(initial=0)) + 1):
                at_least = times >= k
                b = np.zeros((count, int(shared.sum())), dtype=np.float32)
                b[rows[at_least], kept[cols[at_least]]] = 1.0
                matches[n - 1] += b @ b.T
        matches[n - 1][np.diag_indices(count)] = diagonal
    return matches


def words(hypothesis: str) -> list[str]:
    """A hypothesis's words as Moses has them: split at spaces only (a no-break space is part of
    a word; the decoder writes its words joined by single spaces)."""
    return [w for w in hypothesis.split(" ") if w]


def pair_bleu(tokens: Sequence[Sequence[str]]) -> np.ndarray:
    """[hyps, hyps]: entry (i, j) is Moses' MBR BLEU of hypothesis i against hypothesis j as the
    reference (``calculate_score(sents, j, i, ...)``)."""
    lengths = np.asarray([len(words) for words in tokens], dtype=np.float64)
    matches = _match_counts(tokens)
    log_bleu = np.zeros((len(tokens), len(tokens)), dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        for n in range(1, ORDER + 1):
            totals = np.maximum(lengths - (n - 1), 0.0)[:, None]  # the hypothesis's (row's) n-grams
            if n == 1:
                log_bleu += np.log(matches[0]) - np.log(totals)
            else:
                log_bleu += np.log(matches[n - 1] + 1.0) - np.log(totals + 1.0)
        log_bleu /= ORDER
        brevity = 1.0 - lengths[None, :] / lengths[:, None]  # 1 - ref length / hyp length
        log_bleu += np.where(brevity < 0.0, brevity, 0.0)
        bleu = np.exp(log_bleu)
    return np.where(matches[0] == 0, 0.0, bleu)  # no unigram in common (or an empty hypothesis): 0


def mbr_choice(hypotheses: Sequence[str], totals: np.ndarray, rule: Mbr) -> int:
    """The index, into ``hypotheses``, of the hypothesis of least expected loss among the
    ``rule.size`` of highest ``totals`` (their weighted sums; the first of equal totals first)."""
    if len(hypotheses) == 0:
        raise ValueError("no hypotheses to choose from")
    order = np.argsort(-np.asarray(totals, dtype=np.float64), kind="stable")[: rule.size]
    kept = np.asarray(totals, dtype=np.float64)[order]
    probs = np.exp(rule.scale * (kept - kept.max()))  # Moses' scale * total - max: the same, never inf - inf
    probs /= probs.sum()
    loss = 1.0 - pair_bleu([words(hypotheses[i]) for i in order])
    np.fill_diagonal(loss, 0.0)  # a hypothesis is not compared with itself
    risk = loss @ probs
    return int(order[int(np.argmin(risk))])  # argmin: the first of equal risks
