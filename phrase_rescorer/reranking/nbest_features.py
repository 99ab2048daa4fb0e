"""An n-best list as numbers: each line's dense feature values, in one layout for the whole list.

The layout is the first line's dense features, each ``Name=`` followed by its values (Moses
writes every line of a list with the same features in the same order; mert-moses.pl reads the
order from the first line, ``get_order_of_scores_from_nbestlist``). ``moses.nbest.read_nbest``
checks every line (finite numbers, the first line's features, the sentences numbered 0, 1,
2, ...) and refuses a bad one, naming it. Sparse features (``name_x= value``) are not part of
the dense layout and are left to Moses' tools.
"""

from __future__ import annotations

import contextlib
from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from ..moses.nbest import Layout, NbestError, read_nbest, without_features
from ..output import AtomicOutput


@dataclass
class NbestMatrix:
    path: str
    layout: Layout  # (feature name, number of values), in order
    features: np.ndarray  # [lines, dims] float64
    sentences: np.ndarray  # [lines] the ID of each line: 0, 1, 2, ... each sentence's lines together
    hypotheses: list[str]  # each line's hypothesis, as written (trailing space removed)

    @property
    def names(self) -> list[str]:
        return [name for name, _ in self.layout]

    def column_name(self, column: int) -> str:
        """The feature of value ``column`` (from 0) of each line, as a message names it: ``LM0``,
        or ``TranslationModel0 (its value 2 of 4)``."""
        start = 0
        for name, count in self.layout:
            if column < start + count:
                return name if count == 1 else f"{name} (its value {column - start + 1} of {count})"
            start += count
        raise IndexError(f"column {column} of a list of {start} values a line")

    def column(self, name: str) -> int | None:
        """The value index (from 0) of the one-valued feature ``name``, None where the list has no
        such feature."""
        start = 0
        for feature, count in self.layout:
            if feature == name and count == 1:
                return start
            start += count
        return None

    @property
    def sentence_count(self) -> int:
        """The sentences of the list: its IDs number them 0 to count - 1."""
        return int(self.sentences[-1]) + 1 if len(self.sentences) else 0


def write_without_features(path: str, names: Sequence[str], out_path: str) -> None:
    """The list at ``path`` written to ``out_path`` (compressed as its name says) without the dense
    features ``names``, every other byte of each line kept (``moses.nbest.without_features``)."""
    with AtomicOutput(out_path) as out:
        for line in read_nbest(path):
            out.write(without_features(line, list(names)))


def read_matrix(
    path: str,
    copy_to: str | None = None,
    leave_out: Sequence[str] = (),
    check_layout: Callable[[Layout], None] | None = None,
) -> NbestMatrix:
    """The list at ``path`` as numbers; ``copy_to``: also write its lines there, plain (for
    Moses' programs, which read plain text, or gzip by its name, only), complete or not at all
    (``output.AtomicOutput``), without the dense features ``leave_out`` (the numbers keep them).
    ``check_layout`` is given the first line's features before anything else is read or written:
    a refusal raised there comes before the rest of a long list, and leaves no copy."""
    layout: Layout | None = None
    values_read = array("d")  # 8 bytes a value: a 1000-best list of thousands of sentences fits
    sentences = array("q")
    hypotheses: list[str] = []
    with contextlib.ExitStack() as stack:
        copy = stack.enter_context(AtomicOutput(copy_to, compress=False)) if copy_to is not None else None
        for line in read_nbest(path):
            if layout is None and check_layout is not None:
                check_layout(line.layout)
            if copy is not None:
                raw = line.raw
                if leave_out:
                    raw = without_features(line, list(leave_out))
                    raw = raw[: len(raw) - len(line.terminator)]
                copy.write(raw + b"\n")
            layout = line.layout
            values_read.extend(line.values)
            sentences.append(line.sentence)
            hypotheses.append(line.raw[line.hyp_start : line.hyp_end].decode("utf-8").strip(" "))
        if layout is None:
            raise NbestError(path, None, "empty n-best list")
    width = sum(count for _, count in layout)
    features = np.frombuffer(values_read, dtype=np.float64).reshape(-1, width).copy()
    return NbestMatrix(path, layout, features, np.frombuffer(sentences, dtype=np.int64).copy(), hypotheses)
