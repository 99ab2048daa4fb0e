"""Streaming reader and atomic writer for Moses text phrase tables.

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

Input is plain or gzip, told apart by the gzip magic bytes (also on stdin, ``-``), not by the
name. Output goes through ``output.AtomicOutput``: a temporary file beside the destination that is
renamed into place only when everything was written.
"""

from __future__ import annotations

import errno
import gzip
import io
import math
import os
import re
import stat
import sys
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import BinaryIO, cast

_SEP = b" ||| "
_SEP_AT_END = b" |||"
_BARS = b"|||"
_GZIP_MAGIC = b"\x1f\x8b"
_BUFFER_SIZE = 1 << 20
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
#: What separates the tokens of a phrase (``vocab.tokenize_phrase``): a phrase of nothing else is empty.
PHRASE_BLANKS = b" \t"
#: The longest line read (bytes, newline excluded): far above any real line, it bounds the memory
#: and time spent on an input without newlines (a binary file, /dev/zero). The environment
#: variable PHRASE_RESCORER_MAX_LINE_BYTES changes it.
MAX_LINE_BYTES = 64 << 20
#: Magic bytes of compression formats that are not read: named in the error instead of a
#: confusing "expected 3 to 7 fields".
_OTHER_COMPRESSION = {
    "bzip2": re.compile(rb"BZh[1-9]1AY&SY"),  # the signature, the block size, the first block's magic
    "xz": re.compile(rb"\xfd7zXZ\x00"),
    "zstd": re.compile(rb"\x28\xb5\x2f\xfd"),
}


class PhraseTableError(ValueError):
    """Bad input or output path; ``str(e)`` is ``"path:line_no: message"`` or ``"path: message"``.

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
    """The file system, not the table's content: a file that cannot be opened or read, a missing
    output directory, an output path that is a directory (exit code 6 in the CLI, not 3)."""


class PhraseTableStreamError(PhraseTableError):
    """A truncated or corrupt gzip stream: unlike a bad line, it ends the reading, so whatever
    was counted or scored so far is short."""


class _LineTooLong(Exception):
    """A line beyond ``max_line_bytes()``: ends the reading (no resynchronising on a newline)."""


def max_line_bytes() -> int:
    """``MAX_LINE_BYTES``, or the value of PHRASE_RESCORER_MAX_LINE_BYTES when it is set."""
    value = os.environ.get("PHRASE_RESCORER_MAX_LINE_BYTES")
    return MAX_LINE_BYTES if not value else max(1, int(value))


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


def parse_line(
    raw: bytes, path: str, line_no: int, check_scores: bool = True
) -> tuple[str, str, int]:
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
        raise PhraseTableError(
            path, line_no, f"expected 3 to 7 fields separated by ' ||| ', found {fields}"
        )
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


class _Source:
    """Reads the underlying file or stdin, serving ``head`` (already read) first; counts bytes."""

    def __init__(self, read: Callable[[int], bytes], head: bytes) -> None:
        self._read = read
        self._head = head
        self.count = len(head)

    def read(self, size: int = _BUFFER_SIZE) -> bytes:
        if self._head:
            data, self._head = self._head[:size], self._head[size:]
            return data
        data = self._read(size)
        self.count += len(data)
        return data

    def seek(self, offset: int) -> int:
        raise io.UnsupportedOperation("seek")


class InputTable:
    """An opened phrase table: a context manager and an iterable of :class:`Entry`.

    ``path`` may be ``-`` for binary stdin. Gzip is recognised by its magic bytes whatever the
    name; ``is_gzip`` says what was found and ``name_mismatch`` whether it contradicts the name
    (a ``.gz`` name on plain text, which is then read as text, or gzip under another name).
    Errors, including a file that cannot be opened, are :class:`PhraseTableError`. The entries
    can be iterated once; line numbers count from the start of the input.
    """

    def __init__(self, path: str, *, check_scores: bool = True) -> None:
        self.path = path
        self.check_scores = check_scores
        self._file: BinaryIO | None = None
        self._gzip: gzip.GzipFile | None = None
        try:
            if path == "-":
                if sys.stdin is None:  # the program was started with stdin closed (<&-)
                    raise OSError(errno.EBADF, "standard input is closed")
                stdin = sys.stdin.buffer
                read = cast(Callable[[int], bytes], getattr(stdin, "read1", stdin.read))
            else:
                self._file = open(path, "rb", buffering=0)  # noqa: SIM115 (see close())
                read = self._file.read
            head = b""
            while len(head) < 10 and (chunk := read(10 - len(head))):
                head += chunk
        except OSError as exc:
            self.close()
            raise PhraseTableOSError(path, None, f"cannot read: {exc.strerror or exc}") from exc
        self._source = _Source(read, head)
        self.is_gzip = head[:2] == _GZIP_MAGIC
        for name, magic in _OTHER_COMPRESSION.items():
            if magic.match(head):
                self.close()
                raise PhraseTableError(path, None, f"{name}-compressed input: only plain text and gzip "
                                       f"are read; decompress it into a pipe, e.g. "
                                       f"{'xz' if name == 'xz' else name} -dc {path} | rescore-phrase-table - OUT ...")
        self.name_mismatch = path != "-" and path.endswith(".gz") != self.is_gzip
        self._read_chunk = self._source.read
        if self.is_gzip:
            self._gzip = gzip.GzipFile(filename="", mode="rb", fileobj=self._source)
            self._read_chunk = self._gzip.read1

    def __enter__(self) -> InputTable:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __iter__(self) -> Iterator[Entry]:
        return cast(Iterator[Entry], self._entries(lenient=False))

    def position(self) -> int:
        """Bytes consumed so far of the underlying file (compressed bytes for gzip)."""
        return self._source.count

    def size(self) -> int | None:
        """Size in bytes of the underlying file; None for stdin and anything not a regular file."""
        if self._file is None:
            return None
        info = os.fstat(self._file.fileno())
        return info.st_size if stat.S_ISREG(info.st_mode) else None

    def close(self) -> None:
        for stream in (self._gzip, self._file):
            if stream is not None:
                stream.close()

    def _entries(self, lenient: bool) -> Iterator[Entry | PhraseTableError]:
        """Entries in order; with ``lenient``, errors are yielded instead of raised."""
        path, check, read, line_no = self.path, self.check_scores, self._read_chunk, 0
        limit = max_line_bytes()
        pending: list[bytes] = []  # start of a line whose end is in a later chunk
        pending_size = 0
        try:
            while True:
                chunk = read(_BUFFER_SIZE)
                if chunk and b"\n" not in chunk:  # joined once its end comes: linear time
                    pending.append(chunk)
                    pending_size += len(chunk)
                    if pending_size > limit:
                        raise _LineTooLong()
                    continue
                if chunk:
                    data = b"".join((*pending, chunk))
                    lines = data.split(b"\n")
                    rest = lines.pop()
                    crlf = b"\r" in data
                elif pending:  # last line, without terminator
                    lines, rest, crlf = [b"".join(pending)], b"", False
                else:
                    break
                if len(lines[0]) > limit or (limit < _BUFFER_SIZE and max(map(len, lines)) > limit):
                    line_no += next(i for i, raw in enumerate(lines) if len(raw) > limit)
                    raise _LineTooLong()
                pending, pending_size = ([rest], len(rest)) if rest else ([], 0)
                terminator = b"\n" if chunk else b""
                for raw in lines:
                    line_no += 1
                    try:
                        if crlf and raw.endswith(b"\r"):
                            raw = raw[:-1]
                            source, target, end = parse_line(raw, path, line_no, check)
                            yield Entry(line_no, raw, b"\r\n", source, target, end)
                        else:
                            source, target, end = parse_line(raw, path, line_no, check)
                            yield Entry(line_no, raw, terminator, source, target, end)
                    except PhraseTableError as err:
                        if not lenient:
                            raise
                        yield err
        except (EOFError, zlib.error, OSError, _LineTooLong) as exc:
            error: PhraseTableError
            if isinstance(exc, _LineTooLong):
                error = PhraseTableStreamError(
                    path, line_no + 1, f"line longer than {limit:,} bytes (a binary file, or no "
                    "newlines?); PHRASE_RESCORER_MAX_LINE_BYTES sets the limit")
            elif self.is_gzip and isinstance(exc, (EOFError, zlib.error, gzip.BadGzipFile)):
                error = PhraseTableStreamError(path, line_no + 1, f"truncated or corrupt gzip stream: {exc}")
            else:
                error = PhraseTableOSError(path, line_no + 1, f"read error: {exc}")
            if not lenient:
                raise error from exc
            yield error


def read_phrase_table(path: str, *, check_scores: bool = True) -> Iterator[Entry]:
    """Yield the entries of the table at ``path`` (``-`` for stdin), closing it at the end."""
    with InputTable(path, check_scores=check_scores) as table:
        yield from table


def iter_lines_lenient(
    path: str, *, check_scores: bool = True
) -> Iterator[Entry | PhraseTableError]:
    """Yield an Entry per good line and a PhraseTableError per bad one, going on after it.

    An unreadable file or stream (unopenable, truncated or corrupt gzip) ends the iteration
    with a final error: a ``PhraseTableOSError`` or ``PhraseTableStreamError``.
    """
    try:
        table = InputTable(path, check_scores=check_scores)
    except PhraseTableError as err:
        yield err
        return
    with table:
        yield from table._entries(lenient=True)
