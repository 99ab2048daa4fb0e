"""What kind of Moses table a file is, told from its first lines.

The network reads phrases as plain words. Three other tables that a Moses user has look like a
phrase table line by line (``src ||| tgt ||| numbers``) and would be scored silently as if
their tokens were words, so they are recognised and refused, naming what they are:

* a **hierarchical / SCFG rule table** (train-model.perl ``-hierarchical``, EMS
  ``hierarchical-rule-set``, GHKM): non-terminals on both sides, a gap written ``[X][X]``
  (source label, target label) and the left-hand-side label as the last token,
  e.g. ``der [X][X] ||| the [X][X] ||| ...`` ending ``[X]`` on each side. Moses escapes a
  literal bracket in a word as ``&#91;`` / ``&#93;``, so a ``[LABEL]`` token is always a
  non-terminal;
* a **factored table** (``word|POS`` tokens, from ``--translation-factors``): Moses escapes a
  literal ``|`` inside a word as ``&#124;``, so a ``|`` inside every token of a phrase
  separates factors;
* a **lexicalized reordering table** (``reordering-table.wbe-msd-bidirectional-fe.gz``), given
  by mistake for the phrase table: three fields only, and scores that fall into groups of 2
  (monotonicity), 3 (msd) or 4 (mslr) probabilities, each group summing to 1, on every line
  looked at, every score strictly between 0 and 1 (lexical-reordering-score smooths
  its counts). A phrase table's p(f|e) lex(f|e) p(e|f) lex(e|f) does not do so line after line,
  except in two pairs (``0.5 0.5 0.5 0.5``), so a 4-score monotonicity-bidirectional table is
  the one reordering kind not recognised.

Scoring any of them would need the network to understand non-terminals or factors, which the
paper's network does not; refusing is the honest answer. A phrase-based table with the usual
tokens passes (``None``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from itertools import islice

from .phrase_table import Entry, PhraseTableError
from .words import split_words

#: How many lines of a table are looked at.
LINES_CHECKED = 32

_NON_TERMINAL = re.compile(r"^\[[^\[\]\s]+\](\[[^\[\]\s]+\])?$")
_SUM_TOLERANCE = 2e-3


def _is_rule(entry: Entry) -> bool:
    source, target = split_words(entry.source), split_words(entry.target)
    if not source or not target:
        return False
    lhs = _NON_TERMINAL.match(source[-1]) and _NON_TERMINAL.match(target[-1])
    gap = any(_NON_TERMINAL.match(t) and t.count("[") == 2 for t in source + target)
    return bool(lhs or gap)


def _factor_count(entry: Entry) -> int:
    counts = set()
    for phrase in (entry.source, entry.target):
        tokens = split_words(phrase)
        per_token = {len(t.split("|")) if all(t.split("|")) else 0 for t in tokens}
        if len(per_token) != 1:
            return 0
        counts |= per_token
    n = counts.pop() if len(counts) == 1 else 0
    return n if n > 1 else 0


def _scores(entry: Entry) -> list[float] | None:
    fields = entry.raw.split(b" |||")
    if len(fields) != 3:  # a reordering table has no alignment or count fields
        return None
    try:
        return [float(x) for x in fields[2].split()]
    except ValueError:
        return None


def _reordering_group(entries: Sequence[Entry]) -> int | None:
    """The probability-group size (2, 3 or 4) that every entry's scores fall into, if any."""
    candidates = None
    for entry in entries:
        scores = _scores(entry)
        if not scores or not all(0.0 < x < 1.0 for x in scores):  # smoothed: never 0 or 1
            return None
        fits = {
            g
            for g in (2, 3, 4)
            # four scores in two pairs (monotonicity-bidirectional) would also be a phrase
            # table's p(f|e) lex(f|e) p(e|f) lex(e|f) written 0.5 0.5 0.5 0.5: not told apart
            if len(scores) % g == 0
            and (g, len(scores)) != (2, 4)
            and all(abs(sum(scores[i : i + g]) - 1.0) <= _SUM_TOLERANCE for i in range(0, len(scores), g))
        }
        candidates = fits if candidates is None else candidates & fits
        if not candidates:
            return None
    return min(candidates) if candidates else None


def detect_table_kind(entries: Iterable[Entry]) -> tuple[str, str] | None:
    """``(kind, evidence)`` for a table that is not a phrase-based phrase table, judged on
    (up to) the first :data:`LINES_CHECKED` entries; None for an ordinary phrase table."""
    first = []
    for entry in entries:
        first.append(entry)
        if len(first) >= LINES_CHECKED:
            break
    for entry in first:
        if _is_rule(entry):
            return (
                "a hierarchical/SCFG rule table",
                f"line {entry.line_no} has non-terminals ([X][X] gaps or a [LABEL] left-hand side)",
            )
        factors = _factor_count(entry)
        if factors:
            return (
                f"a factored table ({factors} factors per word, word|factor...)",
                f"every word of line {entry.line_no} has {factors} '|'-separated factors",
            )
    group = _reordering_group(first)
    if group is not None and first:
        name = {2: "monotonicity", 3: "msd", 4: "mslr"}[group]
        return (
            "a lexicalized reordering table",
            f"its lines have three fields and scores in {name} groups of {group} probabilities "
            f"summing to 1 (lines {first[0].line_no}-{first[-1].line_no})",
        )
    return None


def refuse_other_kinds(entries: Sequence[Entry], path: str) -> None:
    """Raise :class:`PhraseTableError` if ``entries`` (the first lines of ``path``) come from a
    rule, factored or reordering table: the network would score its tokens as plain words."""
    found = detect_table_kind(entries)
    if found is None:
        return
    kind, evidence = found
    raise PhraseTableError(
        path,
        None,
        f"this is {kind}, not a phrase-based phrase table: {evidence}. The RNN Encoder-Decoder "
        "scores plain word sequences; it would read non-terminals, factors or reordering "
        "probabilities as words. Give the phrase table (model/phrase-table.gz) of a "
        "phrase-based, unfactored system",
    )


def checked_entries(entries: Iterable[Entry], path: str) -> Iterator[Entry]:
    """``entries`` unchanged, after :func:`refuse_other_kinds` has seen the first
    :data:`LINES_CHECKED` of them (or all, for a shorter table)."""
    iterator = iter(entries)
    head = list(islice(iterator, LINES_CHECKED))
    refuse_other_kinds(head, path)
    yield from head
    yield from iterator
