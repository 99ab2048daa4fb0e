"""The best hypothesis of each sentence under a weight vector: the highest total, the first of
equal ones (Moses' nbest-rescore topbest.py does the same from recomputed totals), or, with an
``Mbr`` rule, the one of least Bayes risk among the highest (``mbr.py``, Moses' ``-mbr``)."""

from __future__ import annotations

import numpy as np

from .mbr import Mbr, mbr_choice
from .nbest_features import NbestMatrix


def best_per_sentence(matrix: NbestMatrix, weights: np.ndarray, mbr: Mbr | None = None) -> tuple[list[int], list[int]]:
    """(sentence IDs in list order, index of the chosen line of each); ``mbr``: chosen by that
    rule instead of the highest total."""
    totals = matrix.features @ weights
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


def output_lines(matrix: NbestMatrix, weights: np.ndarray, mbr: Mbr | None = None) -> list[str]:
    """One translation per input sentence, in order: the chosen hypothesis of each (the list
    numbers its sentences 0 to count - 1, ``moses.nbest.read_nbest`` checks it)."""
    ids, chosen = best_per_sentence(matrix, weights, mbr)
    if ids != list(range(len(ids))):  # read_nbest's promise, relied on here
        raise ValueError(f"{matrix.path}: sentence IDs are not 0 to {len(ids) - 1}")
    return [matrix.hypotheses[index] for index in chosen]
