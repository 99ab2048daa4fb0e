"""The Moses text phrase-table line: its fields, its one parser, its errors.

One phrase pair per line, fields separated by ``" ||| "``::

    source ||| target ||| s1 s2 ... sn [||| alignment [||| counts [||| sparse [||| properties]]]]

train-model.perl ends every line with ``" |||"``. As in Moses, fields are what lies between
``|||`` separators, so such a trailing separator adds one (empty) field. Tokens never contain
``|||`` (Moses escapes ``|`` as ``&#124;``) and are never un-escaped or re-tokenized here.

Rules checked by :func:`parse_line`, the single parser (violations raise :class:`PhraseTableError`):

* 3 to 7 fields; an empty line has one field and is malformed;
* source and target phrases are neither empty nor only spaces and tabs, and are valid UTF-8; they are
  returned exactly as written between the separators;
* the first two separators are exactly ``" ||| "`` (the second may end the line as ``" |||"``,
  which leaves the scores field empty);
* the scores field (field 3) ends at the next ``" |||"`` followed by a space or by the end of the
  line, or at the end of the line; with ``check_scores`` it holds one or more finite numbers
  separated by spaces or tabs (no ``nan``, ``inf``, overflowing exponent or text).

Tables hold up to hundreds of millions of lines, so the usual line (no ``|`` inside the phrases,
scores separated by single spaces) is handled by one precompiled regex; any other line goes
through the slower general parser, which also words the errors.

Lines end with ``\\n`` or ``\\r\\n``; the last one may have no terminator. The terminator is kept
apart from the line (:attr:`Entry.terminator`), so new columns go before it and output keeps the
input's line endings. Only the two phrases are decoded; the rest stays bytes, so an output line is
its input line byte for byte with new columns inserted at the end of the scores field
(:func:`with_appended`). Line order is never changed (binarizers need the sorted order).

Reading a table (plain or gzip, a file or ``-``) is ``table_reader``'s; writing one goes through
``output.AtomicOutput``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from ..errors import EXIT_OS, InputError
from .words import WORD_SEPARATORS

_SEP = b" ||| "
_SEP_AT_END = b" |||"
_BARS = b"|||"
_NUMBER = re.compile(rb"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")
# Fast path of parse_line: one regex for the common line (no "|" inside the phrases, scores
# separated by single spaces), ending at the end of the scores field. Its numbers have bounded
# digit counts, so every match is finite (below 1e200 * 1e99). Anything else goes to
# _parse_general, the reference implementation (about three times slower).
_FAST_NUMBER = rb"[+-]?(?:\d{1,200}(?:\.\d*|)|\.\d+)(?:[eE](?:-\d+|\+?\d{1,2})|)"
_FAST_HEAD = rb"([ \t]*[^| \t][^|]*) \|\|\| ([ \t]*[^| \t][^|]*) \|\|\| "
_FAST_TAIL = rb"(?= \|\|\|(?: |\Z)|\Z)"
_FAST_CHECKED = re.compile(_FAST_HEAD + rb"%s(?: %s)*" % (_FAST_NUMBER, _FAST_NUMBER) + _FAST_TAIL)
_FAST_UNCHECKED = re.compile(_FAST_HEAD + rb"[^|]*" + _FAST_TAIL)
_BLANKS = re.compile(rb"[ \t]+")
#: What separates the tokens of a phrase (``words.split_words``): a phrase of nothing else is empty.
PHRASE_BLANKS = WORD_SEPARATORS.encode("ascii")


class PhraseTableError(InputError):
    """Bad input; ``str(e)`` is ``"path:line_no: message"`` or ``"path: message"``.

    ``line_no`` is 1-based, or None when the problem is not on a given line.
    """

    def __init__(self, path: str, line_no: int | None, message: str) -> None:
        self.path = path
        self.line_no = line_no
        self.message = message
        where = path if line_no is None else f"{path}:{line_no}"
        super().__init__(f"{where}: {message}")

    def __reduce__(self) -> tuple[type[PhraseTableError], tuple[str, int | None, str]]:
        return (type(self), (self.path, self.line_no, self.message))


class PhraseTableOSError(PhraseTableError):
    """The file system, not the table's content: an input that cannot be opened or read (exit
    code 6 in the CLI, not 3). Output paths are ``output.OutputError``'s."""

    exit_code = EXIT_OS


class PhraseTableStreamError(PhraseTableError):
    """A truncated or corrupt gzip stream: unlike a bad line, it ends the reading, so whatever
    was counted or scored so far is short."""


@dataclass(slots=True)
class Entry:
    """One phrase-table line."""

    line_no: int  # 1-based
    raw: bytes  # the line as read, without its terminator
    terminator: bytes  # b"\n", b"\r\n", or b"" (last line without newline)
    source: str  # field 1, exactly as written
    target: str  # field 2, exactly as written
    scores_end: int  # offset in raw where the scores field ends (where new columns go)


def _score_problem(field: bytes) -> str | None:
    """Exact (slow) check of a scores field: the error message, or None if it is valid."""
    tokens = [token for token in _BLANKS.split(field) if token]
    if not tokens:
        return "missing scores field"
    for token in tokens:
        if not _NUMBER.fullmatch(token) or not math.isfinite(float(token)):
            return f"non-numeric score {token.decode('utf-8', 'replace')!r}"
    return None


def parse_line(raw: bytes, path: str, line_no: int, check_scores: bool = True) -> tuple[str, str, int]:
    """Parse one line (without terminator) into ``(source, target, scores_end)``.

    Raises :class:`PhraseTableError` (located at ``path:line_no``) if the line breaks a rule of
    the module docstring.
    """
    match = (_FAST_CHECKED if check_scores else _FAST_UNCHECKED).match(raw)
    if match is not None:
        end = match.end()
        if raw.count(_BARS, end) <= 4:
            source, target = match.group(1, 2)
            try:
                return source.decode(), target.decode(), end
            except UnicodeDecodeError:
                pass
    return _parse_general(raw, path, line_no, check_scores)


def _parse_general(raw: bytes, path: str, line_no: int, check_scores: bool) -> tuple[str, str, int]:
    """parse_line without the fast path: slower, handles every line and builds the errors."""
    fields = raw.count(_BARS) + 1
    if not 3 <= fields <= 7:
        raise PhraseTableError(path, line_no, f"expected 3 to 7 fields separated by ' ||| ', found {fields}")
    i1 = raw.find(_BARS)
    i2 = raw.find(_BARS, i1 + 3)
    if not raw[:i1].strip(PHRASE_BLANKS):
        raise PhraseTableError(path, line_no, "empty source phrase")
    if not raw[i1 + 3 : i2].strip(PHRASE_BLANKS):
        raise PhraseTableError(path, line_no, "empty target phrase")
    if raw[i1 - 1 : i1 + 4] != _SEP or raw[i2 - 1 : i2 + 4] not in (_SEP, _SEP_AT_END):
        raise PhraseTableError(path, line_no, "field separator is not ' ||| '")
    start = i2 + 4
    i3 = raw.find(_BARS, start)
    if i3 < 0:
        end = len(raw)
    elif raw[i3 - 1 : i3 + 4] in (_SEP, _SEP_AT_END):
        end = i3 - 1
    else:
        raise PhraseTableError(path, line_no, "field separator after the scores is not ' ||| '")
    if check_scores:
        problem = _score_problem(raw[start:end])
        if problem is not None:
            raise PhraseTableError(path, line_no, problem)
    try:
        phrases = raw[: i2 - 1].decode()
    except UnicodeDecodeError as exc:
        raise PhraseTableError(path, line_no, f"invalid UTF-8 (byte offset {exc.start})") from None
    # The first " ||| " is the first separator: no "|||" comes before it.
    cut = phrases.find(" ||| ")
    return phrases[:cut], phrases[cut + 5 :], end


def with_appended(entry: Entry, columns: bytes) -> bytes:
    """The entry's line with ``" " + columns`` inserted at the end of its scores field."""
    raw, end = entry.raw, entry.scores_end
    return b"".join((raw[:end], b" ", columns, raw[end:], entry.terminator))


def without_appended(entry: Entry, count: int) -> bytes:
    """The entry's line without the last ``count`` scores of its scores field: a line of
    ``with_appended`` as it was before those columns were appended (each after one space)."""
    raw, end = entry.raw, entry.scores_end
    cut = end
    for _ in range(count):
        cut = raw.rindex(b" ", 0, cut)
    return b"".join((raw[:cut], raw[end:], entry.terminator))
