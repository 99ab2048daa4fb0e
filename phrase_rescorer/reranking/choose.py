"""The best hypothesis of each sentence under a weight vector (Moses' nbest-rescore topbest.py
does the same from recomputed totals: the highest total, the first of equal ones)."""

from __future__ import annotations

import numpy as np

from .nbest_features import NbestMatrix


def best_per_sentence(matrix: NbestMatrix, weights: np.ndarray) -> tuple[list[int], list[int]]:
    """(sentence IDs in list order, index of the chosen line of each)."""
    totals = matrix.features @ weights
    ids: list[int] = []
    chosen: list[int] = []
    starts = np.flatnonzero(np.r_[True, matrix.sentences[1:] != matrix.sentences[:-1]])
    ends = np.r_[starts[1:], len(totals)]
    for start, end in zip(starts, ends, strict=True):
        ids.append(int(matrix.sentences[start]))
        chosen.append(int(start + np.argmax(totals[start:end])))  # argmax: the first of equal maxima
    return ids, chosen


def output_lines(matrix: NbestMatrix, weights: np.ndarray) -> list[str]:
    """One translation per input sentence, in order: the chosen hypothesis of each (the list
    numbers its sentences 0 to count - 1, ``moses.nbest.read_nbest`` checks it)."""
    ids, chosen = best_per_sentence(matrix, weights)
    if ids != list(range(len(ids))):  # read_nbest's promise, relied on here
        raise ValueError(f"{matrix.path}: sentence IDs are not 0 to {len(ids) - 1}")
    return [matrix.hypotheses[index] for index in chosen]
