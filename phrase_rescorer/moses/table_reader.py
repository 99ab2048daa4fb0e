"""Reading a Moses text phrase table as a stream of :class:`~.phrase_table.Entry`.

Input is plain text or compressed (gzip, bzip2, xz, zstd), told apart by its first bytes (also on
stdin, ``-``), not by its name: ``compression`` is the one opener. Other compression formats are
named in the error. Lines end with ``\\n`` or ``\\r\\n``; a line
longer than ``max_line_bytes()`` ends the reading with an error naming its number. Every line
goes through ``phrase_table.parse_line``.
"""

from __future__ import annotations

import errno
import io
import os
import stat
import sys
from collections.abc import Callable, Iterator
from typing import Any, BinaryIO, cast

from ..compression import (
    HEAD_BYTES,
    STREAM_ERRORS,
    CompressionError,
    Reader,
    format_of_head,
    format_of_name,
    is_stream_error,
    open_reader,
)
from .phrase_table import Entry, PhraseTableError, PhraseTableOSError, PhraseTableStreamError, parse_line

_BUFFER_SIZE = 1 << 20
#: The longest line read (bytes, newline excluded): far above any real line, it bounds the memory
#: and time spent on an input without newlines (a binary file, /dev/zero). The environment
#: variable PHRASE_RESCORER_MAX_LINE_BYTES changes it.
MAX_LINE_BYTES = 64 << 20


class _LineTooLong(Exception):
    """A line beyond ``max_line_bytes()``: ends the reading (no resynchronising on a newline)."""


def max_line_bytes() -> int:
    """``MAX_LINE_BYTES``, or the value of PHRASE_RESCORER_MAX_LINE_BYTES when it is set."""
    value = os.environ.get("PHRASE_RESCORER_MAX_LINE_BYTES")
    return MAX_LINE_BYTES if not value else max(1, int(value))


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

    ``parse``, when given, reads another line format through the same stream (an n-best list,
    plain text): it is called as ``parse(raw, terminator, line_no)`` for every line and what it
    returns is yielded; it reports a bad line by raising :class:`PhraseTableError`.

    ``path`` may be ``-`` for binary stdin. A compression format is recognised by its first
    bytes whatever the name; ``compression`` says what was found (None: plain text) and
    ``name_mismatch`` whether it contradicts the name (a ``.gz`` name on plain text, which is
    then read as text, or xz under a ``.gz`` name, read as xz).
    Errors, including a file that cannot be opened, are :class:`PhraseTableError`. The entries
    can be iterated once; line numbers count from the start of the input.
    """

    def __init__(
        self, path: str, *, check_scores: bool = True, parse: Callable[[bytes, bytes, int], Any] | None = None
    ) -> None:
        self.path = path
        self.check_scores = check_scores
        self._parse = parse
        self._file: BinaryIO | None = None
        self._decompressed: Reader | None = None
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
            while len(head) < HEAD_BYTES and (chunk := read(HEAD_BYTES - len(head))):
                head += chunk
        except OSError as exc:
            self.close()
            raise PhraseTableOSError(path, None, f"cannot read: {exc.strerror or exc}") from exc
        self._source = _Source(read, head)
        try:
            self.compression = format_of_head(head)
        except CompressionError as exc:
            self.close()
            raise PhraseTableError(path, None, str(exc)) from None
        self.name_mismatch = path != "-" and _named_format(path) != self.compression
        self._read_chunk: Callable[[int], bytes] = self._source.read
        if self.compression is not None:
            self._decompressed = open_reader(self.compression, self._source)
            self._read_chunk = self._decompressed.read1

    @property
    def is_gzip(self) -> bool:
        return self.compression == "gzip"

    def __enter__(self) -> InputTable:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __iter__(self) -> Iterator[Entry]:
        return cast(Iterator[Entry], self._entries(lenient=False))

    def position(self) -> int:
        """Bytes consumed so far of the underlying file (compressed bytes for compressed input)."""
        return self._source.count

    def size(self) -> int | None:
        """Size in bytes of the underlying file; None for stdin and anything not a regular file."""
        if self._file is None:
            return None
        info = os.fstat(self._file.fileno())
        return info.st_size if stat.S_ISREG(info.st_mode) else None

    def close(self) -> None:
        for stream in (self._decompressed, self._file):
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
                        if self._parse is not None:
                            if crlf and raw.endswith(b"\r"):
                                yield self._parse(raw[:-1], b"\r\n", line_no)
                            else:
                                yield self._parse(raw, terminator, line_no)
                        elif crlf and raw.endswith(b"\r"):
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
        except Exception as exc:
            if not isinstance(exc, (*STREAM_ERRORS, OSError, _LineTooLong)):
                raise
            error: PhraseTableError
            if isinstance(exc, _LineTooLong):
                error = PhraseTableStreamError(
                    path,
                    line_no + 1,
                    f"line longer than {limit:,} bytes (a binary file, or no "
                    "newlines?); PHRASE_RESCORER_MAX_LINE_BYTES sets the limit",
                )
            elif self.compression is not None and is_stream_error(exc):
                error = PhraseTableStreamError(
                    path, line_no + 1, f"truncated or corrupt {self.compression} stream: {exc}"
                )
            else:
                error = PhraseTableOSError(path, line_no + 1, f"read error: {exc}")
            if not lenient:
                raise error from exc
            yield error


def _named_format(path: str) -> str | None:
    """The compression format ``path``'s name says (None: plain, or a name not written)."""
    try:
        return format_of_name(path)
    except CompressionError:
        return None


def read_phrase_table(path: str, *, check_scores: bool = True) -> Iterator[Entry]:
    """Yield the entries of the table at ``path`` (``-`` for stdin), closing it at the end."""
    with InputTable(path, check_scores=check_scores) as table:
        yield from table


def iter_lines_lenient(path: str, *, check_scores: bool = True) -> Iterator[Entry | PhraseTableError]:
    """Yield an Entry per good line and a PhraseTableError per bad one, going on after it.

    An unreadable file or stream (unopenable, truncated or corrupt compressed data) ends the iteration
    with a final error: a ``PhraseTableOSError`` or ``PhraseTableStreamError``.
    """
    try:
        table = InputTable(path, check_scores=check_scores)
    except PhraseTableError as err:
        yield err
        return
    with table:
        yield from table._entries(lenient=True)
