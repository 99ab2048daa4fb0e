"""Reranking weights: a ``[weight]`` section of ``Name= w1 w2 ...`` lines, as in moses.ini, so that
a tuned moses.ini serves as starting weights and Moses' own ``scripts/nbest-rescore/rescore.py``
reads the file (it looks for the ``[weight]`` line and keys the weights by ``Name=``).

A weights file written by ``rerank-tune`` names exactly the features of the list it was tuned
on; applied to a list, it must name exactly that list's features (a feature the list lacks would
be dropped from a system tuned with it, a feature without a weight would weigh nothing). A
moses.ini (a file with a ``[feature]`` section) also weighs features the decoder does not write
into n-best lists (``UnknownWordPenalty0``): those are left out, but every feature of the list
needs its weights. Files are read by content (compressed or not) and written compressed as
their name says, as every other input and output.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..data.corpus import read_lines
from ..errors import UsageError
from ..moses.ini import MosesIniError
from ..moses.ini_weights import read_weights
from ..moses.score_format import format_number
from ..output import AtomicOutput


class WeightsError(UsageError):
    pass


@dataclass
class Weights:
    """The weights of a file, by feature name; ``is_ini``: read from a moses.ini."""

    path: str
    by_name: dict[str, list[float]]
    is_ini: bool


def vector(
    weights: Weights | dict[str, list[float]],
    layout: tuple[tuple[str, int], ...] | list[tuple[str, int]],
    *,
    missing: float | None = None,
    source: str | None = None,
) -> np.ndarray:
    """The weights in ``layout``'s order; a feature without weights gets ``missing`` (refused when
    None); a feature whose count differs is refused. Without ``missing``, a weights file (not a
    moses.ini) must not weigh a feature the list lacks either."""
    by_name = weights.by_name if isinstance(weights, Weights) else weights
    source = source or (weights.path if isinstance(weights, Weights) else "weights")
    out: list[float] = []
    names = [name for name, _ in layout]
    lacking = [name for name in names if name not in by_name]
    if lacking and missing is None:
        raise WeightsError(
            f"{source}: no weights for the feature{'s' if len(lacking) > 1 else ''} {', '.join(lacking)} of the "
            "n-best list: tune weights on a list with the same features (rerank-tune)"
        )
    if isinstance(weights, Weights) and not weights.is_ini and missing is None:
        extra = [name for name in by_name if name not in names]
        if extra:
            raise WeightsError(
                f"{source}: weights for the feature{'s' if len(extra) > 1 else ''} {', '.join(extra)}, which the "
                "n-best list lacks: they were tuned together with the list's features; score the list "
                "with the same features (phrase-rescorer nbest), or tune weights for it (rerank-tune)"
            )
    for name, count in layout:
        values = by_name.get(name)
        if values is None:
            values = [missing if missing is not None else 0.0] * count
        if len(values) != count:
            raise WeightsError(f"{source}: {name} has {len(values)} weights, the n-best list {count} values")
        if not all(math.isfinite(v) for v in values):
            raise WeightsError(f"{source}: {name}: weights must be finite numbers, not {' '.join(map(str, values))}")
        out.extend(values)
    return np.array(out, dtype=np.float64)


def read_weights_file(path: str) -> Weights:
    """A weights file or a moses.ini (its ``[weight]`` section), plain or compressed."""
    lines = read_lines(path)  # a bad file: PhraseTableError, naming its line
    is_ini = any(line.strip() == "[feature]" for line in lines)
    has_header = any(line.strip() == "[weight]" for line in lines)
    _refuse_twice_named(lines, path, None if has_header else "[weight]")
    if not has_header:
        lines = ["[weight]", *lines]
    text = "".join(line + "\n" for line in lines)
    try:
        weights = read_weights(text, path)
    except MosesIniError as e:
        raise WeightsError(str(e)) from e
    if not weights:
        raise WeightsError(f"{path}: no 'Name= w1 w2 ...' weight lines")
    return Weights(path, weights, is_ini)


def _refuse_twice_named(lines: list[str], path: str, section: str | None) -> None:
    """A feature with two weight lines would read back as one of them: refused, naming both
    (``section``: the one the first lines are in)."""
    seen: dict[str, int] = {}
    for i, line in enumerate(lines, 1):
        body = line.split("#", 1)[0].strip()
        if body.startswith("[") and body.endswith("]"):
            section = body
        elif section == "[weight]" and "=" in body:
            name = body.split("=", 1)[0].strip()
            if name in seen:
                raise WeightsError(f"{path}: {name} has weight lines twice (lines {seen[name]} and {i}): give it one")
            seen[name] = i


def write_weights_file(
    path: str, layout: tuple[tuple[str, int], ...] | list[tuple[str, int]], values: np.ndarray, comment: str = ""
) -> None:
    """The weights file at ``path`` (compressed as its name says)."""
    lines = [f"# {line}\n" for line in comment.splitlines()] + ["[weight]\n"]
    start = 0
    for name, count in layout:
        chunk = values[start : start + count]
        if not all(math.isfinite(v) for v in chunk):
            raise WeightsError(f"{path}: {name}: weights must be finite numbers")
        lines.append(f"{name}= {' '.join(format_number(float(v)) for v in chunk)}\n")
        start += count
    with AtomicOutput(path) as f:
        f.write("".join(lines).encode("utf-8"))
