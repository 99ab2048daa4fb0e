"""The best hypothesis of each sentence under a weight vector: the highest total, the first of
equal ones (Moses' nbest-rescore topbest.py does the same from recomputed totals), or, with an
``Mbr`` rule, the one of least Bayes risk among the highest (``mbr.py``, Moses' ``-mbr``).

Every line's total, its weighted sum, must be a finite number: finite weights and values can
still give products or sums beyond the floating-point range (``1e308`` twice), where totals of
inf, or NaN, would rank nothing and choose the first hypothesis of every sentence. Such a pair
is refused (:func:`weighted_sums`) before anything is chosen."""

from __future__ import annotations

import sys

import numpy as np

from ..moses.nbest import NbestError
from .mbr import Mbr, mbr_choice
from .nbest_features import NbestMatrix
from .weights import WeightsError

#: Who gives the weights, in a refusal's message, where the caller does not name them.
WEIGHTS = "the weights"


def weighted_sums(matrix: NbestMatrix, weights: np.ndarray, source: str = WEIGHTS) -> np.ndarray:
    """Each line's total: the weighted sum of its features (float64). A total that is not a
    finite number is refused, naming the feature where the line's sum leaves the floating-point
    range and, of its weight and its value, the larger as the cause: the weight
    (:class:`WeightsError`, naming ``source``, the weights' file) or the value (``NbestError``,
    naming the list's file and line)."""
    with np.errstate(all="ignore"):  # checked below: no warning
        totals = matrix.features @ weights
    bad = np.flatnonzero(~np.isfinite(totals))
    if len(bad):
        raise _not_finite(matrix, weights, int(bad[0]), source)
    return totals


def _not_finite(matrix: NbestMatrix, weights: np.ndarray, index: int, source: str) -> WeightsError | NbestError:
    """The refusal of line ``index``'s total (:func:`weighted_sums`)."""
    values = matrix.features[index]
    with np.errstate(all="ignore"):
        terms = values * weights
        running = np.cumsum(terms)
    beyond = np.flatnonzero(~np.isfinite(running))
    column = int(beyond[0]) if len(beyond) else int(np.argmax(np.abs(terms)))
    feature = matrix.column_name(column)
    weight, value, line = float(weights[column]), float(values[column]), index + 1
    beyond_range = f"puts the line's weighted sum beyond the floating-point range (+-{sys.float_info.max:.4g})"
    if abs(weight) >= abs(value):
        return WeightsError(
            f"{source}: the weight {weight:g} of {feature} times its value {value:g} on {matrix.path}:{line} "
            f"{beyond_range}: give weights of a smaller magnitude"
        )
    return NbestError(
        matrix.path,
        line,
        f"the value {value:g} of {feature} times its weight {weight:g} ({source}) {beyond_range}: "
        "no hypothesis can be ranked by it",
    )


def best_per_sentence(
    matrix: NbestMatrix, weights: np.ndarray, mbr: Mbr | None = None, source: str = WEIGHTS
) -> tuple[list[int], list[int]]:
    """(sentence IDs in list order, index of the chosen line of each); ``mbr``: chosen by that
    rule instead of the highest total. Totals that are not finite numbers are refused first
    (:func:`weighted_sums`; ``source`` names the weights)."""
    totals = weighted_sums(matrix, weights, source)
    ids: list[int] = []
    chosen: list[int] = []
    starts = np.flatnonzero(np.r_[True, matrix.sentences[1:] != matrix.sentences[:-1]])
    ends = np.r_[starts[1:], len(totals)]
    for start, end in zip(starts, ends, strict=True):
        ids.append(int(matrix.sentences[start]))
        if mbr is None:
            chosen.append(int(start + np.argmax(totals[start:end])))  # argmax: the first of equal maxima
        else:
            chosen.append(int(start + mbr_choice(matrix.hypotheses[start:end], totals[start:end], mbr)))
    return ids, chosen


def output_lines(matrix: NbestMatrix, weights: np.ndarray, mbr: Mbr | None = None, source: str = WEIGHTS) -> list[str]:
    """One translation per input sentence, in order: the chosen hypothesis of each (the list
    numbers its sentences 0 to count - 1, ``moses.nbest.read_nbest`` checks it)."""
    ids, chosen = best_per_sentence(matrix, weights, mbr, source)
    if ids != list(range(len(ids))):  # read_nbest's promise, relied on here
        raise ValueError(f"{matrix.path}: sentence IDs are not 0 to {len(ids) - 1}")
    return [matrix.hypotheses[index] for index in chosen]
