"""Reading a Moses text phrase table as a stream of :class:`~.phrase_table.Entry`.

Input is plain or gzip, told apart by the gzip magic bytes (also on stdin, ``-``), not by the
name; bzip2, xz and zstd are named in the error. Lines end with ``\\n`` or ``\\r\\n``; a line
longer than ``max_line_bytes()`` ends the reading with an error naming its number. Every line
goes through ``phrase_table.parse_line``.
"""

from __future__ import annotations

import errno
import gzip
import io
import os
import re
import stat
import sys
import zlib
from collections.abc import Callable, Iterator
from typing import Any, BinaryIO, cast

from .phrase_table import (
    Entry,
    PhraseTableError,
    PhraseTableOSError,
    PhraseTableStreamError,
    parse_line,
)

_GZIP_MAGIC = b"\x1f\x8b"
_BUFFER_SIZE = 1 << 20
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

    ``path`` may be ``-`` for binary stdin. Gzip is recognised by its magic bytes whatever the
    name; ``is_gzip`` says what was found and ``name_mismatch`` whether it contradicts the name
    (a ``.gz`` name on plain text, which is then read as text, or gzip under another name).
    Errors, including a file that cannot be opened, are :class:`PhraseTableError`. The entries
    can be iterated once; line numbers count from the start of the input.
    """

    def __init__(self, path: str, *, check_scores: bool = True,
                 parse: Callable[[bytes, bytes, int], Any] | None = None) -> None:
        self.path = path
        self.check_scores = check_scores
        self._parse = parse
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
