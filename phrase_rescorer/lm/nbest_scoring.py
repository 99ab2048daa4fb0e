"""Appending the CSLM's log p(hypothesis + </s>) to every line of a Moses n-best list.

The list is read as a stream and scored a window of lines at a time (whole sentences: the
hypotheses of one sentence share their n-grams, so a window holds all of a sentence's lines
when it can); every line is written back byte for byte with ``NAME= value`` at the end of its
features field, in the input's order, through ``output.AtomicOutput`` (complete or absent).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import torch

from ..moses.nbest import NbestLine, read_nbest, with_feature
from ..output import AtomicOutput, check_distinct_paths
from .lm_file import LMFile
from .scoring import sentence_log_probs

#: Lines scored together (a sentence's 1,000-best fits; more only costs memory).
WINDOW_LINES = 4096


@dataclass
class NbestSummary:
    lines: int
    sentences: int
    words: int
    unknown: int
    seconds: float


def score_nbest(in_path: str, out_path: str, lm: LMFile, name: str, *, device: str = "cpu",
                window: int = WINDOW_LINES, on_progress: Callable[[int], None] | None = None,
                on_warning: Callable[[str], None] | None = None) -> NbestSummary:
    """Write ``in_path`` to ``out_path`` with the feature ``name`` appended to every line."""
    check_distinct_paths(in_path, out_path, model=lm.path)
    started = time.monotonic()
    model = lm.build(torch.device(device))
    lines = sentences = words = unknown = 0
    pending: list[NbestLine] = []

    def flush(out) -> None:  # type: ignore[no-untyped-def]
        nonlocal words, unknown
        tokens = [line.tokens for line in pending]
        totals, unknowns = sentence_log_probs(model, lm.vocab, tokens, device)
        out.write(b"".join(with_feature(line, name, float(v)) for line, v in zip(pending, totals, strict=True)))
        words += sum(len(t) for t in tokens)
        unknown += int(unknowns.sum())
        pending.clear()

    with AtomicOutput(out_path, on_warning=on_warning) as out:
        current = None
        for line in read_nbest(in_path):
            if line.sentence != current:
                sentences += 1
                current = line.sentence
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
    return NbestSummary(lines, sentences, words, unknown, time.monotonic() - started)
