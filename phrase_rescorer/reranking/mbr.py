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
times". Counts are small integers, and so are the products: exact in float32. They are computed
for a block of rows at a time, each product over a block of the n-grams (:data:`BLOCK`), so that
the memory a list needs grows with its length, not with its square; sums of the same integers,
the matches and the choice are the same whatever the blocks. A hypothesis's words are those
Moses reads (``moses.words.split_words``: split at spaces and tabs only).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..moses.words import split_words

#: BLEU's order in Moses' MBR (``BLEU_ORDER = 4``).
ORDER = 4
#: Moses' ``-mbr-size`` and ``-mbr-scale`` defaults (``moses/parameters/MBR_Options.cpp``:
#: ``param.SetParameter<size_t>(size, "mbr-size", 200);``, ``param.SetParameter(scale,
#: "mbr-scale", 1.0f);``; ``moses --help`` says the same).
DEFAULT_SIZE = 200
DEFAULT_SCALE = 1.0
#: The entries of the pair matrices (hypotheses x hypotheses) computed at a time: the rows of a
#: sentence's list in blocks of BLOCK // hypotheses, the shared n-grams of each product
#: BLOCK // hypotheses at a time. The largest arrays then hold BLOCK entries each, about a dozen
#: of them at once (8 bytes an entry: about 200 MB) besides the n-grams of the list (tens of
#: bytes a word), whatever the list's length: a 6,000-best list no longer needs the 1.2 GB of its
#: matches of every pair. A list of up to sqrt(BLOCK) hypotheses (1,448) is one block.
BLOCK = 1 << 21


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


@dataclass(frozen=True)
class _Ngrams:
    """The n-grams of a sentence's hypotheses that two hypotheses or more share, per order: for
    each occurrence count, the hypothesis (row) and the n-gram's number (column), sorted by
    column where they are more than one product takes (``width``)."""

    count: int  # hypotheses
    lengths: np.ndarray  # [hyps] words
    width: int  # shared n-grams per product
    # per order: (rows, columns, times the hypothesis has the n-gram, number of shared n-grams)
    orders: tuple[tuple[np.ndarray, np.ndarray, np.ndarray, int], ...]


def _shared_ngrams(tokens: Sequence[Sequence[str]], block: int) -> _Ngrams:
    """Each n-gram is an integer: the number of its first n - 1 words as an (n-1)-gram (numbered
    0, 1, 2, ... in the order of their values), times the vocabulary's size + 1, plus its last
    word's number. An n-gram of one hypothesis only matches nothing but itself: left out."""
    count = len(tokens)
    width = max(1, block // max(count, 1))
    lengths = np.asarray([len(words) for words in tokens], dtype=np.int64)
    vocab: dict[str, int] = {}
    ids = np.asarray([vocab.setdefault(w, len(vocab) + 1) for words in tokens for w in words], dtype=np.int64)
    base = len(vocab) + 1
    hyp_of = np.repeat(np.arange(count, dtype=np.int64), lengths)
    left = np.repeat(lengths, lengths) - (np.arange(len(ids)) - np.repeat(np.cumsum(lengths) - lengths, lengths))
    keys = np.zeros(len(ids), dtype=np.int64)  # the number of the n-gram that starts at each position
    orders = []
    for n in range(1, ORDER + 1):
        at = np.flatnonzero(left >= n)  # positions where an n-gram starts
        if not len(at):
            orders.append((np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64), 0))
            continue
        grams, column = np.unique(keys[at] * base + ids[at + n - 1], return_inverse=True)
        column = column.reshape(-1)
        keys[at] = column  # below the positions' count: the next order's keys stay small
        pairs, times = np.unique(hyp_of[at] * len(grams) + column, return_counts=True)
        rows, cols = pairs // len(grams), pairs % len(grams)
        shared = np.bincount(cols, minlength=len(grams)) > 1  # in two hypotheses or more
        keep = shared[cols]
        kept = np.cumsum(shared) - 1  # a shared n-gram's column among the shared ones
        rows, cols, times = rows[keep], kept[cols[keep]], times[keep]
        if int(shared.sum()) > width:  # several products: each takes a slice of the columns
            by_column = np.argsort(cols, kind="stable")
            rows, cols, times = rows[by_column], cols[by_column], times[by_column]
        orders.append((rows, cols, times, int(shared.sum())))
    return _Ngrams(count, lengths, width, tuple(orders))


def _match_rows(grams: _Ngrams, start: int, stop: int) -> np.ndarray:
    """[ORDER, stop - start, hyps] clipped n-gram matches of hypotheses ``start`` to ``stop`` - 1
    with every hypothesis (module docstring), the n-grams taken ``grams.width`` at a time; the
    diagonal is each hypothesis's own n-gram count. Sums of 0/1 products: the same integers
    whatever the blocks."""
    count, width = grams.count, grams.width
    matches = np.zeros((ORDER, stop - start, count), dtype=np.float64)
    for n, (rows, cols, times, shared) in enumerate(grams.orders):
        for k in range(1, int(times.max(initial=0)) + 1):
            at_least = times >= k
            r, c = rows[at_least], cols[at_least]  # still sorted by column, where there are several products
            for first in range(0, shared, width):
                lo, hi = (0, len(c)) if shared <= width else np.searchsorted(c, (first, first + width))
                if lo == hi:
                    continue
                b = np.zeros((count, min(width, shared - first)), dtype=np.float32)
                b[r[lo:hi], c[lo:hi] - first] = 1.0
                matches[n] += b[start:stop] @ b.T
        own = np.maximum(grams.lengths[start:stop] - n, 0)
        matches[n][np.arange(stop - start), np.arange(start, stop)] = own
    return matches


def _bleu_rows(grams: _Ngrams, start: int, stop: int) -> np.ndarray:
    """Rows ``start`` to ``stop`` - 1 of :func:`pair_bleu`."""
    matches = _match_rows(grams, start, stop)
    lengths = grams.lengths.astype(np.float64)
    rows = lengths[start:stop]
    log_bleu = np.zeros((stop - start, grams.count), dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        for n in range(1, ORDER + 1):
            totals = np.maximum(rows - (n - 1), 0.0)[:, None]  # the hypothesis's (row's) n-grams
            if n == 1:
                log_bleu += np.log(matches[0]) - np.log(totals)
            else:
                log_bleu += np.log(matches[n - 1] + 1.0) - np.log(totals + 1.0)
        log_bleu /= ORDER
        brevity = 1.0 - lengths[None, :] / rows[:, None]  # 1 - ref length / hyp length
        log_bleu += np.where(brevity < 0.0, brevity, 0.0)
        bleu = np.exp(log_bleu)
    return np.where(matches[0] == 0, 0.0, bleu)  # no unigram in common (or an empty hypothesis): 0


def _row_blocks(count: int, block: int) -> list[tuple[int, int]]:
    """The rows of the pair matrices in blocks of ``block`` // ``count`` (at least one)."""
    rows = max(1, block // max(count, 1))
    return [(start, min(start + rows, count)) for start in range(0, count, rows)]


def pair_bleu(tokens: Sequence[Sequence[str]], block: int = BLOCK) -> np.ndarray:
    """[hyps, hyps]: entry (i, j) is Moses' MBR BLEU of hypothesis i against hypothesis j as the
    reference (``calculate_score(sents, j, i, ...)``), computed in blocks of rows (``block``)."""
    grams = _shared_ngrams(tokens, block)
    parts = [_bleu_rows(grams, start, stop) for start, stop in _row_blocks(len(tokens), block)]
    return np.concatenate(parts) if parts else np.zeros((0, 0), dtype=np.float64)


def mbr_choice(hypotheses: Sequence[str], totals: np.ndarray, rule: Mbr, block: int = BLOCK) -> int:
    """The index, into ``hypotheses``, of the hypothesis of least expected loss among the
    ``rule.size`` of highest ``totals`` (their weighted sums, finite numbers; the first of equal
    totals first). The pairs' BLEU is computed ``block`` entries at a time (:data:`BLOCK`)."""
    if len(hypotheses) == 0:
        raise ValueError("no hypotheses to choose from")
    order = np.argsort(-np.asarray(totals, dtype=np.float64), kind="stable")[: rule.size]
    kept = np.asarray(totals, dtype=np.float64)[order]
    probs = _probabilities(kept, rule.scale)
    grams = _shared_ngrams([split_words(hypotheses[i]) for i in order], block)
    risk = np.empty(len(order), dtype=np.float64)
    for start, stop in _row_blocks(len(order), block):
        loss = 1.0 - _bleu_rows(grams, start, stop)
        loss[np.arange(stop - start), np.arange(start, stop)] = 0.0  # a hypothesis is not compared with itself
        risk[start:stop] = loss @ probs
    return int(order[int(np.argmin(risk))])  # argmin: the first of equal risks


def _probabilities(totals: np.ndarray, scale: float) -> np.ndarray:
    """exp(scale * total - the highest), normalised: Moses' ``UntransformScore(mbr_scale *
    total - maxScore)``, here as scale * (total - the highest), never inf - inf. A product beyond
    the floating-point range is -inf (its weight 0, as its exp would underflow to), the highest
    total's weight 1; a scale of 0 weighs all alike."""
    if scale == 0.0:
        return np.full(len(totals), 1.0 / len(totals))
    with np.errstate(over="ignore"):  # -inf: a difference or product below the range, weight 0
        logits = scale * (totals - totals.max())
    probs = np.exp(logits)
    return probs / probs.sum()
