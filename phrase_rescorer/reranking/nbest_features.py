"""An n-best list as numbers: each line's dense feature values, in one layout for the whole list.

The layout is the first line's features field, each ``Name=`` followed by its values (Moses
writes every line of a list with the same features in the same order; mert-moses.pl reads the
order from the first line, ``get_order_of_scores_from_nbestlist``). A line with another layout
is refused, naming it. Sparse features (``name_x=``, as mert-moses.pl tells them apart:
``if ($tok =~ /.+_.+=/)``) are not part of the dense layout and are left to Moses' tools.
"""

from __future__ import annotations

import contextlib
import re
from array import array
from dataclasses import dataclass

import numpy as np

from ..moses.nbest import NbestError, dense_features, read_nbest

_SPARSE = re.compile(r".+_.+=")  # mert-moses.pl, get_order_of_scores_from_nbestlist


@dataclass
class NbestMatrix:
    path: str
    layout: list[tuple[str, int]]  # (feature name, number of values), in order
    features: np.ndarray  # [lines, dims] float64
    sentences: np.ndarray  # [lines] the ID of each line
    hypotheses: list[str]  # each line's hypothesis, as written (trailing space removed)

    @property
    def names(self) -> list[str]:
        return [name for name, _ in self.layout]


def _dense(field: str, path: str, line_no: int) -> tuple[list[tuple[str, int]], list[float]]:
    """The dense layout and values of a features field (``moses.nbest.dense_features`` reads it;
    sparse features are left out)."""
    layout: list[tuple[str, int]] = []
    values: list[float] = []
    for name, numbers in dense_features(field, path, line_no):
        if not _SPARSE.match(name + "="):
            layout.append((name, len(numbers)))
            values.extend(numbers)
    return layout, values


def read_matrix(path: str, copy_to: str | None = None) -> NbestMatrix:
    """The list at ``path`` as numbers; ``copy_to``: also write its lines there, plain (for
    Moses' programs, which read plain text, or gzip by its name, only)."""
    layout: list[tuple[str, int]] | None = None
    values_read = array("d")  # 8 bytes a value: a 1000-best list of thousands of sentences fits
    sentences = array("q")
    hypotheses: list[str] = []
    with contextlib.ExitStack() as stack:
        copy = stack.enter_context(open(copy_to, "wb")) if copy_to is not None else None
        for line in read_nbest(path):
            if copy is not None:
                copy.write(line.raw + b"\n")
            this, values = _dense(line.features, path, line.line_no)
            if layout is None:
                layout = this
                if not values:
                    raise NbestError(path, line.line_no, "no dense feature values in the features field")
            elif this != layout:
                raise NbestError(
                    path, line.line_no, f"features {_show(this)} differ from the first line's {_show(layout)}"
                )
            values_read.extend(values)
            sentences.append(line.sentence)
            hypotheses.append(line.raw[line.hyp_start : line.hyp_end].decode("utf-8").strip(" "))
    if layout is None:
        raise NbestError(path, None, "empty n-best list")
    width = sum(count for _, count in layout)
    features = np.frombuffer(values_read, dtype=np.float64).reshape(-1, width).copy()
    return NbestMatrix(path, layout, features, np.frombuffer(sentences, dtype=np.int64).copy(), hypotheses)


def _show(layout: list[tuple[str, int]]) -> str:
    return " ".join(f"{name}({count})" for name, count in layout)
