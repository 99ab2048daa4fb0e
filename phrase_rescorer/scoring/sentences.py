"""ln p of every line of a text (a CSLM) or of a pair of line-aligned texts (a translation
network), one value out per line in, in order (``phrase-rescorer score``).

What is scored is what the n-best features score (``nbest.features``), through the same objects,
so that a sentence gets the same number in an n-best list and here:

* a CSLM: ``ln p(w_1 .. w_m </s>)`` of each line of SRC, ``<s>`` before the first word;
* a translation network (``train-nmt``, or a phrase network of ``train``): ``ln p(TGT </s> | SRC)``
  of each line pair; a network trained with ``--direction inverse`` reads TGT and gives
  ``ln p(SRC </s> | TGT)``.

**Words.** The value of a line is a sum of ``n + 1`` log-probabilities: one per token of the
predicted side (the CSLM's line, the network's target: TGT, or SRC for an inverse network) and
one for ``</s>``. Tokens are those the network reads: the line's space-separated words, or its
subword units for a subword network. ``n + 1`` is the line's word count everywhere: ``--normalize``
divides the line's value by it, ``--word-scores`` lists exactly those ``n + 1`` values (summing
to the line's total within float32 rounding), and the summary's perplexity is
``exp(-sum of ln p / sum of the counts)``. Words outside a shortlist score p(<unk>).

**Input** is read as every text of the program: any compression by content, ``-`` for stdin,
errors naming the file and line. Every line is read and checked (UTF-8; SRC and TGT of the same
length) before the first is scored: regular files are read twice (a checking pass, then the
scoring pass, which must find the same lines), what cannot be read twice (stdin, a pipe) is
held in memory. Output goes through ``output.AtomicOutput`` (complete or absent), compressed
by its name.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import BinaryIO, Protocol

import numpy as np

from ..compression import rereadable
from ..data.corpus import read_sentences
from ..model.checkpoint import unusable_weights
from ..moses.nbest import format_value
from ..moses.phrase_table import PhraseTableError
from ..nbest.features import Hypothesis
from ..output import AtomicOutput

#: Lines scored together (sources encoded once per window, shared prefixes decoded once).
WINDOW_LINES = 4096

#: The summaries ``--summary`` can print instead of the line scores (marian-scorer's names).
SUMMARIES = ("cross-entropy", "ce-mean-words", "ce-sum", "perplexity")


class SentenceFeature(Protocol):
    """A feature of ``nbest.features``: a line's value, its count of log-probabilities, its terms."""

    path: str

    def score(self, lines: Sequence[Hypothesis]) -> tuple[np.ndarray, int]: ...

    def predictions(self, lines: Sequence[Hypothesis]) -> np.ndarray: ...

    def token_scores(self, lines: Sequence[Hypothesis]) -> list[np.ndarray]: ...


@dataclass(frozen=True)
class TextLine:
    """One line to score: the tokens the feature reads, and which source sentence goes with it."""

    sentence: int
    tokens: list[str]


class Text:
    """A text file checked whole before it is scored: :attr:`lines` counted and every line
    decoded (a bad line raises ``PhraseTableError`` naming it). What cannot be read twice
    (standard input, a pipe such as ``<(zcat f.gz)``) is kept in memory; a regular file is read
    again, and must give the lines counted (a file changed meanwhile stops the run)."""

    def __init__(self, path: str):
        self.path = path
        self._held: list[list[str]] | None = None
        if rereadable(path):
            self.lines = sum(1 for _ in read_sentences(path))
        else:
            self._held = list(read_sentences(path))
            self.lines = len(self._held)

    def __iter__(self) -> Iterator[list[str]]:
        if self._held is not None:
            yield from self._held
            return
        read = 0
        for tokens in read_sentences(self.path):
            read += 1
            if read > self.lines:
                break
            yield tokens
        if read != self.lines:
            raise PhraseTableError(
                self.path, None, f"changed while being scored ({self.lines:,} lines checked, then {read:,} read)"
            )


def check_aligned(source: Text, target: Text) -> None:
    """Refuse two texts of different lengths, naming the line where the shorter one ends."""
    if source.lines == target.lines:
        return
    short, long = (source, target) if source.lines < target.lines else (target, source)
    raise PhraseTableError(
        short.path,
        short.lines + 1,
        f"ends here, but {long.path} goes on ({long.lines:,} lines, {short.lines:,} here): "
        "the two texts must have one sentence a line, line for line",
    )


@dataclass
class ScoreSummary:
    """What a run scored: lines, their word counts (tokens + </s>) and summed ln p."""

    lines: int = 0
    words: int = 0
    logp: float = 0.0
    unknown: int = 0  # words outside the shortlist (scored as p(<unk>))
    seconds: float = 0.0

    @property
    def ce_mean_words(self) -> float:
        """-ln p per word (nats)."""
        return -self.logp / self.words if self.words else math.nan

    @property
    def perplexity(self) -> float:
        return math.exp(self.ce_mean_words) if self.words else math.nan

    def figure(self, name: str) -> float:
        """One of :data:`SUMMARIES`: cross-entropy (-ln p per line), ce-mean-words (per word),
        ce-sum (-ln p of the whole text) or perplexity (per word)."""
        values = {
            "cross-entropy": -self.logp / self.lines if self.lines else math.nan,
            "ce-mean-words": self.ce_mean_words,
            "ce-sum": -self.logp,
            "perplexity": self.perplexity,
        }
        return values[name]


def _windows(source: Text, target: Text | None, size: int) -> Iterator[tuple[list[str], list[TextLine]]]:
    """(the window's distinct source sentences, its lines): for a CSLM (no target) the lines are
    the source's; for a pair, each target line with its source sentence (equal sources shared)."""
    pending: list[TextLine] = []
    sources: list[str] = []
    position: dict[str, int] = {}
    targets: Iterator[list[str] | None] = iter(target) if target is not None else iter(lambda: None, 0)
    for src_tokens, tgt_tokens in zip(source, targets, strict=False):
        if tgt_tokens is None:
            pending.append(TextLine(len(pending), src_tokens))
        else:
            text = " ".join(src_tokens)
            sentence = position.setdefault(text, len(sources))
            if sentence == len(sources):
                sources.append(text)
            pending.append(TextLine(sentence, tgt_tokens))
        if len(pending) >= size:
            yield sources, pending
            pending, sources, position = [], [], {}
    if target is not None:
        next(targets, None)  # the end of the target text: its check (a text that grew meanwhile)
    if pending:
        yield sources, pending


def _line(value: float, words: np.ndarray | None) -> bytes:
    text = format_value(value)
    if words is None:
        return text + b"\n"
    return text + b" ||| WordScores= " + b" ".join(format_value(float(w)) for w in words) + b"\n"


def score_texts(
    feature: SentenceFeature,
    source: Text,
    target: Text | None,
    out_path: str,
    *,
    normalize: bool = False,
    word_scores: bool = False,
    summary: str | None = None,
    window: int = WINDOW_LINES,
    on_progress: Callable[[int], None] | None = None,
    on_warning: Callable[[str], None] | None = None,
) -> ScoreSummary:
    """Write one line per line of ``source`` (and ``target``) to ``out_path``: its ln p, or ln p
    per word with ``normalize``; with ``word_scores`` followed by `` ||| WordScores= `` and the
    ln p of each token and of </s> (never normalised). With ``summary`` (one of
    :data:`SUMMARIES`) the output is that one figure of the whole text instead.

    ``feature`` scores a translation network's lines given its ``sources`` attribute, set here
    window by window. The texts must have been checked (:class:`Text`, :func:`check_aligned`).
    """
    if summary is not None and summary not in SUMMARIES:
        raise ValueError(f"unknown summary {summary!r}; expected one of {', '.join(SUMMARIES)}")
    started = time.monotonic()
    result = ScoreSummary()
    with AtomicOutput(out_path, on_warning=on_warning) as out:
        for sources, lines in _windows(source, target, window):
            if target is not None:
                feature.sources = sources  # type: ignore[attr-defined]  # a translation feature
            _score_window(
                feature, lines, out, result, normalize, word_scores and summary is None, summary is None, source.path
            )
            if on_progress is not None:
                on_progress(result.lines)
        if summary is not None:
            out.write(f"{result.figure(summary):.6f}\n".encode())
    result.seconds = time.monotonic() - started
    return result


def _score_window(
    feature: SentenceFeature,
    lines: Sequence[TextLine],
    out: BinaryIO,
    result: ScoreSummary,
    normalize: bool,
    word_scores: bool,
    write: bool,
    source_path: str,
) -> None:
    totals, unknown = feature.score(lines)
    bad = np.flatnonzero(~(np.isfinite(totals) & (totals <= 1e-6)))
    if bad.size:  # a log p: NaN or inf from weights that diverged (exit 4, as nbest and rescoring)
        i = int(bad[0])
        raise unusable_weights(feature.path, float(totals[i]), f"{source_path}:{result.lines + i + 1}")
    counts = feature.predictions(lines)
    terms: Sequence[np.ndarray | None] = feature.token_scores(lines) if word_scores else [None] * len(lines)
    result.lines += len(lines)
    result.words += int(counts.sum())
    result.logp += float(totals.sum())
    result.unknown += unknown
    if write:
        values = totals / counts if normalize else totals
        out.write(b"".join(_line(float(v), t) for v, t in zip(values, terms, strict=True)))
