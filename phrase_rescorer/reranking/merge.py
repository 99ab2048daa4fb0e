"""The candidates of several systems in one n-best list: Moses' n-best list joined by the
candidates of other systems (a network's own beam: ``translate --n-best-list``), every candidate
once, with the same features on every line, for one reranker tuned on them all.

Sentence by sentence (the lists are read together as streams, each sentence's lines at a time),
the output holds:

* Moses' hypotheses, in Moses' order, each line byte for byte as the decoder wrote it (a
  hypothesis Moses listed twice, in a list written without ``distinct``: its first line, the
  best derivation, as ``distinct`` keeps it); with ``moses_nbest`` N, only the first N distinct
  hypotheses of each sentence of the list (a candidate among the rest is then new, as beside
  the list cut by hand; a list Moses decodes with N can hold fewer, as its distinct n-best stops
  after N times its n-best-factor derivations);
* then each added list's candidates that neither Moses nor an earlier added list proposed, in
  that list's order, as new lines with Moses' features (:func:`new_features`).

A hypothesis is the same as another when its words are (``words.split_words``: the spaces and
tabs between them do not count). Every line then gets the indicators ``FromMoses= 1`` (Moses'
lines) or ``FromMoses= 0`` (the others) and ``FromNetI= 1`` or ``0`` for the I-th added list
(0, 1, ...): whether that list proposed the hypothesis, so that a line proposed by both systems
has both indicators, and the reranker learns how far to trust each source.

A new line cannot have the decoder's own feature values: no derivation of Moses' produced it
(its phrase pairs, reordering and phrase count are unknown, and may not exist). Those values are
written as 0, never as a made-up score, and ``FromMoses= 0`` says so: a linear reranker gives the
indicator a weight of its own, which learns the offset between the two kinds of line. Two of
Moses' features depend on the words alone, and are computed exactly for new lines:

* ``WordPenalty0``: minus the number of words (moses/FF/WordPenaltyProducer.cpp, ``float score =
  - (float) targetPhrase.GetNumTerminals();``, summed over the phrases of the hypothesis);
* the LM feature (``LM0``), when the n-gram LM that decoded the list is given: ln 10 times KenLM's
  log10 p(<s> words </s>) (moses/Util.h, ``return irstScore * 2.30258509299405f;``;
  ``lm.kenlm.KenLMSentences``). Without the LM it is 0 like the others.

**Constrained decoding** (``reach``: ``moses.constrained.ConstrainedDecoder`` with the moses.ini
that decoded the list): every new hypothesis is decoded by Moses constrained to its words, and
where the model can produce it, the new line gets the decoder's own features and total of its best
derivation, as if Moses had listed it. Every line then also gets ``MosesReached= 1`` (Moses' own
lines, and the new lines the decoder produced) or ``MosesReached= 0`` (a hypothesis the model
cannot produce: its features as above, ``WordPenalty0`` and the LM computed, the others 0).
With ``reached_only``, those it cannot produce are left out: every line is then one the decoder
can produce (``MosesReached= 1`` on every line, kept so that weights tuned on either list name the
same features), and the reranker chooses among the decoder's derivations only, as it does on
Moses' own list, with the networks proposing some of them.

Each added list's own features are not carried over (a feature must be on every line; ``nbest -m``
computes a network's for every line of the merged list). A new line's total (the field after
the features) is 0: it has no decoder score (one the decoder produced by constrained decoding: its
own), and the reranker computes totals from its weights.

Every sentence of Moses' list is kept, with lines in the same order of IDs; an added list must
list the same sentences (a sentence ID beyond Moses' is refused with its file and line, a list of
fewer sentences at its end; both before any line is written when the lists can be read twice).
New lines end as Moses' lines do (``\\r\\n`` after a list of them, else ``\\n``); where Moses'
last line has no terminator and new lines follow it, that line ending goes between them (``\\n``
after a line cut between its ``\\r`` and ``\\n``). The output is written
through ``output.AtomicOutput`` (complete or absent).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import BinaryIO, Protocol

from ..compression import rereadable
from ..lm.kenlm import LN_10
from ..moses.nbest import (
    Layout,
    NbestError,
    NbestLine,
    count_sentences,
    dense_features,
    nbest_line,
    read_nbest,
    show_layout,
    with_features,
)
from ..output import AtomicOutput, check_distinct_paths

#: The indicator of Moses' own hypotheses.
MOSES_INDICATOR = "FromMoses"
#: Moses' word penalty (the one WordPenalty feature of a moses.ini).
WORD_PENALTY = "WordPenalty0"
#: Whether the decoder can produce a line's hypothesis (with constrained decoding).
REACHED_INDICATOR = "MosesReached"
#: Lines merged before they are written (the new ones' LM scores asked for together).
WINDOW_LINES = 4096
#: ... with constrained decoding, which loads the moses.ini's tables once per window.
REACH_WINDOW_LINES = 400_000


def added_indicator(index: int) -> str:
    """The indicator of the ``index``-th added list: ``FromNet0``, ``FromNet1``, ..."""
    return f"FromNet{index}"


class SentenceLM(Protocol):
    """An n-gram LM's log10 p(<s> words </s>) of sentences (``lm.kenlm.KenLMSentences``)."""

    def check(self, words: list[str]) -> None:
        """ValueError for words the LM would read as other words."""

    def totals(self, sentences: list[list[str]]) -> list[float]: ...


class Reach(Protocol):
    """Moses' best derivation of each (sentence ID, words), or None where its model cannot
    produce the hypothesis (``moses.constrained.ConstrainedDecoder``)."""

    def lines(self, hypotheses: Sequence[tuple[int, list[str]]]) -> list[NbestLine | None]: ...


@dataclass
class MergeSummary:
    sentences: int = 0
    moses: int = 0  # Moses' distinct hypotheses (its lines written)
    moses_repeats: int = 0  # Moses' lines of a hypothesis it had listed already (left out)
    moses_cut: int = 0  # Moses' distinct hypotheses after the first ``moses_nbest`` (left out)
    added: list[int] = field(default_factory=list)  # each added list's candidates
    shared: list[int] = field(default_factory=list)  # ... that Moses had proposed
    new: list[int] = field(default_factory=list)  # ... new to the list (written unless left out)
    computed: list[str] = field(default_factory=list)  # Moses' features computed for new lines
    zeroed: list[str] = field(default_factory=list)  # Moses' features 0 on new lines
    reached: int | None = None  # new lines the decoder produced (with constrained decoding)
    unreached_left_out: int = 0  # new hypotheses it cannot produce, left out (``reached_only``)
    seconds: float = 0.0

    @property
    def lines(self) -> int:
        return self.moses + sum(self.new) - self.unreached_left_out


def new_features(
    layout: Layout, words: list[str], lm_feature: str | None, lm_total: float | None
) -> list[tuple[str, list[float]]]:
    """Moses' features of a hypothesis Moses did not produce: ``WordPenalty0`` minus its number
    of words, ``lm_feature`` ln 10 times ``lm_total`` (its log10 p, when the LM is given), every
    other value 0 (module docstring)."""
    out: list[tuple[str, list[float]]] = []
    for name, count in layout:
        if name == WORD_PENALTY and count == 1:
            out.append((name, [-float(len(words))]))
        elif name == lm_feature and lm_total is not None:
            out.append((name, [LN_10 * lm_total]))
        else:
            out.append((name, [0.0] * count))
    return out


def merge_nbest(
    moses_path: str,
    out_path: str,
    added_paths: Sequence[str],
    *,
    lm: SentenceLM | None = None,
    lm_feature: str = "LM0",
    reach: Reach | None = None,
    reached_only: bool = False,
    moses_nbest: int | None = None,
    on_warning: Callable[[str], None] | None = None,
) -> MergeSummary:
    """Write to ``out_path`` Moses' n-best list ``moses_path`` merged with the lists
    ``added_paths`` (module docstring). ``lm``: the n-gram LM of Moses' feature ``lm_feature``,
    whose value new lines then get (else 0); ``reach``: Moses' own features of the new lines it
    can produce (constrained decoding), with the indicator ``MosesReached``; ``reached_only``
    (with ``reach``): the new hypotheses it cannot produce left out; ``moses_nbest``: Moses' first
    N distinct hypotheses of each sentence kept, the rest left out (None: all)."""
    if reached_only and reach is None:
        raise ValueError("reached_only needs reach: which hypotheses the decoder can produce")
    if moses_nbest is not None and moses_nbest < 1:
        raise ValueError(f"moses_nbest must be at least 1, not {moses_nbest}")
    for path in (moses_path, *added_paths):
        check_distinct_paths(path, out_path)
    started = time.monotonic()
    summary = MergeSummary(added=[0] * len(added_paths), shared=[0] * len(added_paths), new=[0] * len(added_paths))
    indicators = [MOSES_INDICATOR, *(added_indicator(i) for i in range(len(added_paths)))]
    checked = [*indicators, REACHED_INDICATOR] if reach is not None else indicators
    window = WINDOW_LINES if reach is None else REACH_WINDOW_LINES
    if reach is not None:
        summary.reached = 0
    if all(rereadable(path) for path in (moses_path, *added_paths)):  # sentence IDs checked before any work
        moses_sentences = count_sentences(moses_path)
        for path in added_paths:
            _check_sentences(path, _sentences(read_nbest(path)), moses_sentences, -1)
    moses = _sentences(read_nbest(moses_path))
    added = [_sentences(read_nbest(path)) for path in added_paths]
    ahead: list[list[NbestLine] | None] = [next(lines, None) for lines in added]
    last = [-1] * len(added)  # each added list's last sentence merged
    layout: Layout | None = None
    pending: list[tuple[list[tuple[NbestLine, list[int]]], list[tuple[int, list[str], list[int]]]]] = []
    waiting = 0  # lines in pending
    eol = b"\n"  # the line ending of Moses' list (its last terminated line's), which new lines take

    def flush(out: BinaryIO) -> None:
        nonlocal waiting, eol
        assert layout is not None
        news = [(sentence, words) for _, new in pending for sentence, words, _ in new]
        totals: list[float | None] = [None] * len(news)
        if lm is not None and news and not reached_only:  # reached_only: every line written is the decoder's
            totals = list(lm.totals([words for _, words in news]))
        derived: list[NbestLine | None] = [None] * len(news)
        if reach is not None and news:
            derived = reach.lines(news)
            for line in derived:
                if line is not None and line.layout != layout:
                    raise NbestError(
                        moses_path,
                        None,
                        f"the decoder's features {show_layout(line.layout)} in constrained decoding differ from "
                        f"the list's {show_layout(layout)}: give the moses.ini that decoded the list",
                    )
        reached = [] if reach is None else [1.0]
        at = 0
        for kept, new in pending:
            unterminated = False  # the list's last line without its newline: one before a new line
            for line, flags in kept:
                marks = [(name, float(f)) for name, f in zip(indicators, flags, strict=True)]
                out.write(with_features(line, marks + [(REACHED_INDICATOR, v) for v in reached]))
                unterminated = not line.terminator
                eol = line.terminator or eol
            for sentence, words, flags in new:
                moses_line = derived[at]
                if moses_line is not None:
                    features = dense_features(moses_line.features)
                    total = moses_line.total
                    assert summary.reached is not None
                    summary.reached += 1
                elif reached_only:
                    summary.unreached_left_out += 1
                    at += 1
                    continue
                else:
                    features = new_features(layout, words, lm_feature if lm is not None else None, totals[at])
                    total = 0.0
                features += [(name, [float(f)]) for name, f in zip(indicators, flags, strict=True)]
                if reach is not None:
                    features.append((REACHED_INDICATOR, [float(moses_line is not None)]))
                if unterminated:  # Moses' last line, written without its terminator
                    out.write(b"\n" if kept[-1][0].raw.endswith(b"\r") else eol)
                    unterminated = False
                text = nbest_line(sentence, words, features, total)
                out.write(text if eol == b"\n" else text[:-1] + eol)
                at += 1
        pending.clear()
        waiting = 0

    with AtomicOutput(out_path, on_warning=on_warning) as out:
        for group in moses:
            sentence = group[0].sentence
            if layout is None:
                layout = _check_layout(moses_path, group[0], checked, lm_feature if lm is not None else None)
                summary.computed, summary.zeroed = _columns(layout, lm_feature if lm is not None else None)
                zero_lm = lm is None and not reached_only and any(name == lm_feature for name, _ in layout)
                if zero_lm and on_warning is not None:
                    on_warning(
                        f"{lm_feature} of the hypotheses Moses did not produce is 0 (with {MOSES_INDICATOR}= 0): "
                        "give the LM that decoded the list (--lm) for its value"
                    )
            summary.sentences += 1
            kept: dict[str, list[int]] = {}
            cut: set[str] = set()
            moses_lines: list[tuple[NbestLine, list[int]]] = []
            for line in group:
                key = " ".join(line.tokens)
                if key in kept or key in cut:
                    summary.moses_repeats += 1
                    continue
                if moses_nbest is not None and len(moses_lines) == moses_nbest:
                    summary.moses_cut += 1
                    cut.add(key)  # a later line of these words: a repeat, not cut again
                    continue
                kept[key] = flags = [1] + [0] * len(added_paths)
                moses_lines.append((line, flags))
            new: dict[str, tuple[int, list[str], list[int]]] = {}
            for i, lines in enumerate(added):
                other = ahead[i]
                if other is None or other[0].sentence != sentence:
                    continue
                for line in other:
                    words = line.tokens
                    key = " ".join(words)
                    summary.added[i] += 1
                    if key in kept:
                        summary.shared[i] += kept[key][i + 1] == 0
                        kept[key][i + 1] = 1
                    elif key in new:
                        new[key][2][i + 1] = 1
                    else:
                        if lm is not None and not reached_only:
                            try:
                                lm.check(words)
                            except ValueError as e:
                                raise NbestError(added_paths[i], line.line_no, str(e)) from None
                        new[key] = (sentence, words, [0] * (len(added_paths) + 1))
                        new[key][2][i + 1] = 1
                        summary.new[i] += 1
                ahead[i], last[i] = next(lines, None), sentence
            summary.moses += len(moses_lines)
            pending.append((moses_lines, list(new.values())))
            waiting += len(moses_lines) + len(new)
            if waiting >= window:
                flush(out)
        if layout is None:
            raise NbestError(moses_path, None, "empty n-best list: no hypotheses to merge")
        flush(out)
        for path, other, lines, merged in zip(added_paths, ahead, added, last, strict=True):
            _check_sentences(path, _rest(other, lines), summary.sentences, merged)
    summary.seconds = time.monotonic() - started
    return summary


def _sentences(lines: Iterator[NbestLine]) -> Iterator[list[NbestLine]]:
    """The lines of each sentence of a list, together (``read_nbest`` keeps them together)."""
    group: list[NbestLine] = []
    for line in lines:
        if group and line.sentence != group[0].sentence:
            yield group
            group = []
        group.append(line)
    if group:
        yield group


def _rest(first: list[NbestLine] | None, groups: Iterator[list[NbestLine]]) -> Iterator[list[NbestLine]]:
    if first is not None:
        yield first
        yield from groups


def _check_sentences(path: str, groups: Iterator[list[NbestLine]], sentences: int, last: int) -> None:
    """Refuse an added list's sentence beyond Moses' ``sentences`` (its file and line), or a list
    that ends before them; ``groups``: the list's sentences after ``last``, the last one read."""
    for group in groups:
        if group[0].sentence >= sentences:
            raise NbestError(
                path,
                group[0].line_no,
                f"sentence ID {group[0].sentence}, but Moses' list has {sentences:,} sentences (IDs 0 to "
                f"{sentences - 1}): merge the lists of one input",
            )
        last = group[0].sentence
    if last < sentences - 1:
        listed = f"sentences 0 to {last}" if last >= 0 else "no sentence"
        raise NbestError(path, None, f"lists {listed}, but Moses' list has {sentences:,}: merge the lists of one input")


def _check_layout(path: str, first: NbestLine, indicators: list[str], lm_feature: str | None) -> Layout:
    """Moses' features (its first line's), refused with the list's first line when they hold an
    indicator's name already, or lack the LM feature the LM is given for."""
    names = dict(first.layout)
    there = [name for name in indicators if name in names]
    if there:
        raise NbestError(
            path,
            first.line_no,
            f"already has the feature {there[0]} (features {show_layout(first.layout)}): merge Moses' own list",
        )
    if lm_feature is not None and names.get(lm_feature) != 1:
        why = "no such feature" if lm_feature not in names else f"{names[lm_feature]} values, not 1"
        raise NbestError(
            path,
            first.line_no,
            f"the LM feature {lm_feature}: {why} (features {show_layout(first.layout)}); name the KENLM "
            "feature of the moses.ini that decoded the list",
        )
    return first.layout


def _columns(layout: Layout, lm_feature: str | None) -> tuple[list[str], list[str]]:
    """(Moses' features computed for new lines, those written as 0)."""
    computed = [name for name, count in layout if (name == WORD_PENALTY and count == 1) or name == lm_feature]
    return computed, [name for name, _ in layout if name not in computed]
