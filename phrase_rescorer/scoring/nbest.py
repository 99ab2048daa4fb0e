"""Appending features to every line of a Moses n-best list, as a stream.

The list is read a window of whole sentences at a time (the hypotheses of one sentence share
their n-grams and their source, so a window holds all of a sentence's lines when it can); each
feature scores the window's lines, and every line is written back byte for byte with ``NAME=
value`` for each feature, in the order given, at the end of its features field
(``moses.nbest.with_features``), in the input's order, through ``output.AtomicOutput`` (complete
or absent).

A feature that reads the source sentences (a translation network) is given them as a list, line
i of the source file for sentence ID i. The list and the source file must describe the same
input. The list is read once: a regular file is counted first (a source file of another length
is then refused before any scoring), and anything else (stdin, a FIFO, ``<(zcat ...)``) as it
streams: a sentence ID beyond the source file stops the run with its line named, a list that
ends early is refused at its end, and AtomicOutput leaves no output file either way.

A hypothesis of more tokens than ``max_tokens`` (``data.line_limit``: ``nbest --max-tokens``) is
refused the same way: found by the first reading of a regular file, before any scoring, or as
the list streams, before the window that holds it is scored.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import BinaryIO, Protocol

import numpy as np

from ..compression import rereadable
from ..data.line_limit import line_too_long
from ..model.checkpoint import unusable_weights
from ..moses.nbest import NbestError, NbestLine, count_sentences, read_nbest, with_features
from ..output import AtomicOutput, check_distinct_paths

#: Lines scored together (a sentence's 1,000-best fits; more only costs memory).
WINDOW_LINES = 4096


class Feature(Protocol):
    """One feature: its name in the list and how it scores a window of lines."""

    name: str
    path: str  # the model file (never an output)

    def score(self, lines: Sequence[NbestLine]) -> tuple[np.ndarray, int]:
        """(the feature's value for every line, float64; the lines' hypothesis words outside its
        vocabulary)."""
        ...


@dataclass
class NbestSummary:
    lines: int
    sentences: int
    words: int
    unknown: dict[str, int]  # each feature's name: the hypotheses' words outside its vocabulary
    seconds: float


def append_features(
    in_path: str,
    out_path: str,
    features: Sequence[Feature],
    *,
    sources: Sequence[object] | None = None,
    window: int = WINDOW_LINES,
    on_progress: Callable[[int], None] | None = None,
    on_warning: Callable[[str], None] | None = None,
    source_path: str = "",
    max_tokens: int | None = None,
) -> NbestSummary:
    """Write ``in_path`` to ``out_path`` with every feature appended to every line.

    ``sources``: the source sentences (``source_path`` names their file), when a feature reads
    them; the list must then number exactly as many sentences. ``max_tokens``: the most tokens
    a hypothesis may have (None: no limit)."""
    for feature in features:
        check_distinct_paths(in_path, out_path, model=feature.path)
    if source_path:
        check_distinct_paths(source_path, out_path)
    if (sources is not None or max_tokens is not None) and rereadable(in_path):  # read twice only where safe
        counted = count_sentences(in_path, lambda line: _check_length(in_path, line, max_tokens))
        if sources is not None and counted != len(sources):
            raise NbestError(
                source_path,
                None,
                f"{len(sources):,} source sentences, but {in_path} lists "
                f"{counted:,} sentences (IDs 0 to {counted - 1}): give the source text the "
                "n-best list was translated from",
            )
    started = time.monotonic()
    lines = sentences = words = 0
    unknown = {feature.name: 0 for feature in features}
    pending: list[NbestLine] = []

    def flush(out: BinaryIO) -> None:
        nonlocal words, unknown
        columns = []
        for feature in features:
            values, unknowns = feature.score(pending)
            bad = np.flatnonzero(~(np.isfinite(values) & (values <= 1e-6)))
            if bad.size:  # a log p: NaN or inf from weights that diverged
                i = int(bad[0])
                raise unusable_weights(feature.path, float(values[i]), f"{in_path}:{pending[i].line_no}")
            columns.append(values)
            unknown[feature.name] += unknowns
        out.write(
            b"".join(
                with_features(line, [(f.name, float(c[i])) for f, c in zip(features, columns, strict=True)])
                for i, line in enumerate(pending)
            )
        )
        words += sum(len(line.tokens) for line in pending)
        pending.clear()

    last_id = -1
    names = {f.name for f in features}
    with AtomicOutput(out_path, on_warning=on_warning) as out:
        current = None
        for line in read_nbest(in_path):
            _check_length(in_path, line, max_tokens)
            if lines == 0:  # a list that has the feature already (every line has line 1's features)
                there = names & {name for name, _ in line.layout}
                if there:
                    raise NbestError(
                        in_path,
                        line.line_no,
                        f"already has the feature {', '.join(sorted(there))}: each feature is appended once (give a "
                        "model's another --name; a decoder's list has its WordPenalty0)",
                    )
            if line.sentence != current:
                if sources is not None and line.sentence >= len(sources):
                    raise NbestError(
                        in_path,
                        line.line_no,
                        f"sentence ID {line.sentence}, but {source_path} has {len(sources):,} sentences",
                    )
                sentences += 1
                current = last_id = line.sentence
                if len(pending) >= window:
                    flush(out)
            pending.append(line)
            lines += 1
            if len(pending) >= 4 * window:  # one sentence with an enormous list
                flush(out)
            if on_progress is not None and lines % 1000 == 0:
                on_progress(lines)
        if pending:
            flush(out)
        if lines == 0:  # most likely an earlier step that failed, as rescore and rerank refuse it
            raise NbestError(in_path, None, "empty n-best list: no lines to score")
        if sources is not None and last_id + 1 != len(sources):
            raise NbestError(
                in_path,
                None,
                f"lists {last_id + 1:,} sentences, but {source_path} has "
                f"{len(sources):,}: give the source text the n-best list was translated from",
            )
    return NbestSummary(lines, sentences, words, unknown, time.monotonic() - started)


def _check_length(path: str, line: NbestLine, max_tokens: int | None) -> None:
    if max_tokens is not None and len(line.tokens) > max_tokens:
        raise line_too_long(path, line.line_no, len(line.tokens), max_tokens)
