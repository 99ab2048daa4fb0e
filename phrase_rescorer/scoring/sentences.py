"""ln p of every line of a text (a CSLM) or of a pair of line-aligned texts (a translation
network), one value out per line in, in order (``phrase-rescorer score``).

What is scored is what the n-best features score (``scoring.features``), through the same objects,
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

**Long lines.** The checking pass also measures each line against ``--max-tokens``
(``data.line_limit``): the first longer line is refused before any is scored, or, with
``--skip-long`` (corpus filtering, where such lines are noise), every line pair with a side that
long is not given to the network and its output line is :data:`SKIPPED` (``-inf``: ln 0, last in
any ranking or threshold); the output keeps one line per input line and the summary counts the
scored lines only.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from ..model.checkpoint import unusable_weights
from ..moses.nbest import format_value
from ..output import AtomicOutput
from .features import Hypothesis
from .texts import Text

#: Lines scored together (sources encoded once per window, shared prefixes decoded once).
WINDOW_LINES = 4096

#: The summaries ``--summary`` can print instead of the line scores (marian-scorer's names).
SUMMARIES = ("cross-entropy", "ce-mean-words", "ce-sum", "perplexity")

#: The output value of a line not scored for its length (``--skip-long``): ln 0.
SKIPPED = b"-inf"


class SentenceFeature(Protocol):
    """A feature of ``scoring.features``: a line's value, its count of log-probabilities, its terms."""

    path: str

    def score(self, lines: Sequence[Hypothesis]) -> tuple[np.ndarray, int]: ...

    def predictions(self, lines: Sequence[Hypothesis]) -> np.ndarray: ...

    def token_scores(self, lines: Sequence[Hypothesis]) -> list[np.ndarray]: ...


@dataclass(frozen=True)
class TextLine:
    """One line to score: the tokens the feature reads, and which source sentence goes with it."""

    sentence: int
    tokens: list[str]


@dataclass
class ScoreSummary:
    """What a run scored: lines, their word counts (tokens + </s>) and summed ln p."""

    lines: int = 0
    words: int = 0
    logp: float = 0.0
    unknown: int = 0  # words outside the shortlist (scored as p(<unk>))
    seconds: float = 0.0
    skipped: int = 0  # lines not scored for their length, written as SKIPPED (not in the figures above)

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


def _windows(
    source: Iterable[list[str]], target: Iterable[list[str]] | None, size: int
) -> Iterator[tuple[list[str], list[TextLine]]]:
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
    :data:`SUMMARIES`) the output is that one figure of the whole text instead. A line that
    either text holds too long (``texts.Text(..., skip_long=True)``) is not scored: its output line is
    :data:`SKIPPED` (`` ||| WordScores=`` after it with ``word_scores``), outside the summary.

    ``feature`` scores a translation network's lines given its ``sources`` attribute, set here
    window by window. The texts must have been checked (``texts.Text``, ``texts.check_aligned``).
    """
    if summary is not None and summary not in SUMMARIES:
        raise ValueError(f"unknown summary {summary!r}; expected one of {', '.join(SUMMARIES)}")
    started = time.monotonic()
    long = sorted(set(source.long) | set(target.long if target is not None else ()))
    result = ScoreSummary(skipped=len(long))
    terms = word_scores and summary is None
    skips = _Skips(long, SKIPPED + (b" ||| WordScores=" if terms else b"") + b"\n")
    texts: tuple[Iterable[list[str]], Iterable[list[str]] | None] = (source, target)
    if long:  # the network never sees them
        texts = (_kept(source, long), None if target is None else _kept(target, long))

    def where(n: int) -> str:
        return f"{source.path}:{skips.input_line(n)}"

    with AtomicOutput(out_path, on_warning=on_warning) as out:
        for scores in scored_windows(feature, *texts, where, terms, window):
            result.lines += len(scores.totals)
            result.words += int(scores.counts.sum())
            result.logp += float(scores.totals.sum())
            result.unknown += scores.unknown
            if summary is None:
                words = scores.terms if scores.terms is not None else [None] * len(scores.totals)
                values = zip(scores.values(normalize), words, strict=True)
                out.write(b"".join(skips.around([_line(float(v), w) for v, w in values])))
            else:
                skips.around([b""] * len(scores.totals))
            if on_progress is not None:
                on_progress(skips.done)
        rest = skips.rest()
        if on_progress is not None and rest:
            on_progress(skips.done)
        if summary is None:
            out.write(b"".join(rest))
        else:
            out.write(f"{result.figure(summary):.6f}\n".encode())
    result.seconds = time.monotonic() - started
    return result


def _kept(text: Iterable[list[str]], long: Sequence[int]) -> Iterator[list[str]]:
    """The lines of ``text`` whose numbers (from 1) are not in ``long`` (sorted)."""
    skipped = set(long)
    return (tokens for line_no, tokens in enumerate(text, 1) if line_no not in skipped)


class _Skips:
    """The output rows of the lines not scored (their numbers from 1, sorted), put back among
    those of the lines scored, in input order."""

    def __init__(self, lines: Sequence[int], row: bytes) -> None:
        self.lines, self.row = lines, row
        self.done = 0  # input lines passed, scored or not
        self._passed = 0  # of them not scored

    def around(self, rows: Sequence[bytes]) -> list[bytes]:
        """The next scored lines' ``rows``, with the rows of the lines not scored before and among them."""
        out: list[bytes] = []
        for row in rows:
            while self._passed < len(self.lines) and self.lines[self._passed] == self.done + 1:
                out.append(self.row)
                self._passed += 1
                self.done += 1
            out.append(row)
            self.done += 1
        return out

    def rest(self) -> list[bytes]:
        """The rows of the lines not scored after the last scored one."""
        out = [self.row] * (len(self.lines) - self._passed)
        self.done += len(out)
        self._passed = len(self.lines)
        return out

    def input_line(self, n: int) -> int:
        """The input line number of the ``n``-th line scored."""
        for line_no in self.lines:
            if line_no > n:
                break
            n += 1
        return n


@dataclass(frozen=True)
class WindowScores:
    """A window of lines scored (:func:`scored_windows`), in order: each line's ln p (float64),
    its word count (the predicted tokens + 1 for </s>), with ``word_scores`` its terms (the ln p
    of each token and of </s>, never normalised), and the lines' words outside the shortlist."""

    totals: np.ndarray
    counts: np.ndarray
    terms: list[np.ndarray] | None
    unknown: int

    def values(self, normalize: bool = False) -> np.ndarray:
        """Each line's ln p, or with ``normalize`` its ln p per word (``--normalize``)."""
        return self.totals / self.counts if normalize else self.totals


def scored_windows(
    feature: SentenceFeature,
    source: Iterable[list[str]],
    target: Iterable[list[str]] | None,
    where: Callable[[int], str],
    word_scores: bool = False,
    window: int = WINDOW_LINES,
) -> Iterator[WindowScores]:
    """Score the token lists of ``source`` (a CSLM's lines) or, given ``target``, each target
    line given the source line of the same number, ``window`` lines at a time: the one scoring
    of ``score`` (:func:`score_texts`) and of the Python API (``scoring.api``). ``where(n)``
    names line ``n`` (from 1) in the error of a network that gives a log p that is no finite
    value <= 0 (``unusable_weights``, exit 4, as nbest and rescoring).

    ``feature`` scores a translation network's lines given its ``sources`` attribute, set here
    window by window."""
    scored = 0
    for sources, lines in _windows(source, target, window):
        if target is not None:
            feature.sources = sources  # type: ignore[attr-defined]  # a translation feature
        totals, unknown = feature.score(lines)
        bad = np.flatnonzero(~(np.isfinite(totals) & (totals <= 1e-6)))
        if bad.size:
            i = int(bad[0])
            raise unusable_weights(feature.path, float(totals[i]), where(scored + i + 1))
        terms = feature.token_scores(lines) if word_scores else None
        scored += len(lines)
        yield WindowScores(totals, feature.predictions(lines), terms, unknown)
