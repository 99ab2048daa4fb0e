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


def output_lines(matrix: NbestMatrix, weights: np.ndarray, sentence_count: int | None = None) -> list[str]:
    """One translation per input sentence: the chosen hypothesis, or an empty line for a sentence
    the list does not have (the decoder writes none for an empty input line)."""
    ids, chosen = best_per_sentence(matrix, weights)
    count = sentence_count if sentence_count is not None else (max(ids) + 1 if ids else 0)
    out = [""] * count
    for sentence, index in zip(ids, chosen, strict=True):
        if sentence >= count:
            raise ValueError(f"{matrix.path}: sentence {sentence} beyond the {count} input sentences")
        out[sentence] = matrix.hypotheses[index]
    return out
