"""Reranking weights: a ``[weight]`` section of ``Name= w1 w2 ...`` lines, as in moses.ini, so that
a tuned moses.ini serves as starting weights and Moses' own ``scripts/nbest-rescore/rescore.py``
reads the file (it looks for the ``[weight]`` line and keys the weights by ``Name=``)."""

from __future__ import annotations

import math

import numpy as np

from ..errors import UsageError
from ..moses.ini import MosesIniError
from ..moses.ini_weights import read_weights
from ..moses.score_format import format_number
from ..output import AtomicOutput


class WeightsError(UsageError):
    pass


def vector(
    weights: dict[str, list[float]],
    layout: list[tuple[str, int]],
    *,
    missing: float | None = None,
    source: str = "weights",
) -> np.ndarray:
    """The weights in ``layout``'s order; a feature without weights gets ``missing`` (refused when
    None); a feature whose count differs is refused."""
    out: list[float] = []
    for name, count in layout:
        values = weights.get(name)
        if values is None:
            if missing is None:
                raise WeightsError(f"{source}: no weights for feature {name} of the n-best list")
            values = [missing] * count
        if len(values) != count:
            raise WeightsError(f"{source}: {name} has {len(values)} weights, the n-best list {count} values")
        out.extend(values)
    result = np.array(out, dtype=np.float64)
    if not np.all(np.isfinite(result)):
        raise WeightsError(f"{source}: weights must be finite numbers")
    return result


def read_weights_file(path: str) -> dict[str, list[float]]:
    """A weights file or a moses.ini (its ``[weight]`` section)."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except UnicodeDecodeError as e:
        raise WeightsError(f"{path}: not a text file ({e})") from e
    if "[weight]" not in text:
        text = "[weight]\n" + text
    try:
        weights = read_weights(text, path)
    except MosesIniError as e:
        raise WeightsError(str(e)) from e
    if not weights:
        raise WeightsError(f"{path}: no 'Name= w1 w2 ...' weight lines")
    return weights


def write_weights_file(path: str, layout: list[tuple[str, int]], values: np.ndarray, comment: str = "") -> None:
    lines = [f"# {line}\n" for line in comment.splitlines()] + ["[weight]\n"]
    start = 0
    for name, count in layout:
        chunk = values[start : start + count]
        if not all(math.isfinite(v) for v in chunk):
            raise WeightsError(f"{path}: {name}: weights must be finite numbers")
        lines.append(f"{name}= {' '.join(format_number(float(v)) for v in chunk)}\n")
        start += count
    with AtomicOutput(path, compress=False) as f:
        f.write("".join(lines).encode("utf-8"))
