"""Compressed files, read and written the same way everywhere: the one opener of compressed
input and the one choice of compressed output.

* **Output** is compressed by its name: ``.gz`` (gzip), ``.bz2``, ``.xz``, ``.zst`` (zstd), in
  any letter case (``.GZ`` too); a name of a format that is not written (``.lzma``, ``.Z``,
  ``.tgz``, ``.zip``, ...) is refused rather than given plain text. Writers compress into the
  file object they are given (``output.AtomicOutput``'s temporary), so that every byte still
  goes through its checked writes.
* **Input** is recognised by its first bytes, whatever its name (also on stdin): gzip, bzip2,
  xz, zstd, else plain text. Formats that are not read (compress's ``.Z``, legacy ``.lzma``,
  zip, lz4) are named in the error.

Everything is in Python's standard library (gzip, bz2, lzma) but zstd, which is read and written
with the ``zstandard`` package. A truncated or corrupt stream raises one of
:data:`STREAM_ERRORS` (see :func:`is_stream_error`). Deterministic: gzip is written with mtime 0,
so identical input gives identical bytes in every format.

Concatenated streams (gzip members, bzip2 and xz streams, zstd frames) are read as one, as
``gzip -d``, ``bzip2 -d``, ``xz -d`` and ``zstd -d`` read them: sharded rescoring writes one
stream per part (``parallel.sharded_rescoring``).

Not ``xopen``: it opens files by name (or pipes through an external pigz/igzip process), where
the writers here must compress into ``AtomicOutput``'s exclusive temporary through its checked
writes, and the readers report the compressed bytes consumed for progress and read part of a
table (``parallel.sharding``); its parallel gzip helps only with several threads, and the
default is one (``threads``).
"""

from __future__ import annotations

import bz2
import gzip
import lzma
import os
import re
import stat
import zlib
from collections.abc import Callable
from typing import IO, BinaryIO, Protocol, cast

import zstandard

#: Output suffixes (lower case) and the format each writes.
SUFFIXES = {".gz": "gzip", ".bz2": "bzip2", ".xz": "xz", ".zst": "zstd"}
#: Compressed or archive names that are not written: refused, never plain text under them.
REFUSED_SUFFIXES = {
    ".lzma": "legacy lzma (write .xz)",
    ".z": "compress (.Z; write .gz)",
    ".tgz": "a tar archive (write .gz)",
    ".tbz2": "a tar archive (write .bz2)",
    ".txz": "a tar archive (write .xz)",
    ".zip": "a zip archive",
    ".7z": "a 7-Zip archive",
    ".lz4": "lz4 (write .zst)",
    ".lz": "lzip (write .xz)",
    ".br": "brotli",
}
#: Leading bytes of each format read.
_MAGIC = {
    "gzip": re.compile(rb"\x1f\x8b"),
    "bzip2": re.compile(rb"BZh[1-9]1AY&SY"),  # signature, block size, the first block's magic
    "xz": re.compile(rb"\xfd7zXZ\x00"),
    "zstd": re.compile(rb"\x28\xb5\x2f\xfd"),
}
#: Leading bytes of formats that are not read: named in the error.
_NOT_READ = {
    "compress (.Z)": re.compile(rb"\x1f\x9d"),
    "legacy lzma (.lzma)": re.compile(rb"\x5d\x00\x00"),
    "zip": re.compile(rb"PK\x03\x04"),
    "lz4": re.compile(rb"\x04\x22\x4d\x18"),
}
#: Bytes enough to tell every format apart.
HEAD_BYTES = 10
#: What a truncated or corrupt stream raises (bz2 also raises a plain ``OSError`` without an
#: errno, "Invalid data stream": :func:`is_stream_error` tells it from a real read error).
STREAM_ERRORS: tuple[type[Exception], ...] = (
    EOFError,
    zlib.error,
    gzip.BadGzipFile,
    lzma.LZMAError,
    zstandard.ZstdError,
)


class CompressionError(ValueError):
    """A name or a content in a format that is not read or written; the message says which."""


class Readable(Protocol):
    def read(self, size: int = -1, /) -> bytes: ...


class Reader(Protocol):
    """What :func:`open_reader` returns."""

    def read(self, size: int = -1, /) -> bytes: ...
    def read1(self, size: int = -1, /) -> bytes: ...
    def close(self) -> None: ...


def rereadable(path: str) -> bool:
    """Whether ``path`` is a regular file, which a second pass reads again (not ``-``, a pipe's
    ``/dev/fd/N``, a FIFO or a device: those are read once); a path that cannot be stat'ed is
    not, and reading it names the problem."""
    if path == "-":
        return False
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False


def format_of_name(path: str) -> str | None:
    """The format written under ``path`` (``None``: plain text); a refused name raises
    :class:`CompressionError`."""
    suffix = os.path.splitext(path)[1].lower()
    if suffix in REFUSED_SUFFIXES:
        raise CompressionError(
            f"{suffix} names {REFUSED_SUFFIXES[suffix]}, which is not written: "
            f"name the output {', '.join(SUFFIXES)} or plain"
        )
    return SUFFIXES.get(suffix)


def format_of_head(head: bytes) -> str | None:
    """The format of a stream starting with ``head`` (``None``: not compressed); a format that
    is not read raises :class:`CompressionError`."""
    for name, magic in _MAGIC.items():
        if magic.match(head):
            return name
    for name, magic in _NOT_READ.items():
        if magic.match(head):
            raise CompressionError(
                f"{name}-compressed input: gzip, bzip2, xz, zstd and plain text "
                "are read; decompress it first, or through a pipe with - for the file"
            )
    return None


def is_stream_error(exc: BaseException) -> bool:
    """Whether ``exc``, raised while decompressing, says the stream is truncated or corrupt."""
    return isinstance(exc, STREAM_ERRORS) or (type(exc) is OSError and exc.errno is None)


def open_reader(fmt: str, source: Readable) -> Reader:
    """A binary reader of the decompressed bytes of ``source`` (with ``read`` and ``read1``);
    closing it does not close ``source``."""
    file = cast(IO[bytes], source)  # read() is all the readers call
    if fmt == "gzip":
        return cast(Reader, gzip.GzipFile(filename="", mode="rb", fileobj=file))
    if fmt == "bzip2":
        return _StreamReader(source, fmt, bz2.BZ2Decompressor)
    if fmt == "xz":
        return _StreamReader(source, fmt, lambda: lzma.LZMADecompressor(format=lzma.FORMAT_XZ))
    if fmt == "zstd":
        return _StreamReader(source, fmt, lambda: zstandard.ZstdDecompressor().decompressobj())
    raise ValueError(f"unknown compression format {fmt!r}")


def open_writer(fmt: str, sink: BinaryIO) -> BinaryIO:
    """A binary writer compressing into ``sink``; its ``close`` writes the end of the stream
    into ``sink`` and leaves ``sink`` open."""
    if fmt == "gzip":
        return cast(BinaryIO, gzip.GzipFile(filename="", mode="wb", fileobj=sink, compresslevel=6, mtime=0))
    if fmt == "bzip2":
        return cast(BinaryIO, bz2.BZ2File(sink, mode="wb", compresslevel=9))
    if fmt == "xz":
        return cast(BinaryIO, lzma.LZMAFile(sink, mode="wb", preset=6))
    if fmt == "zstd":
        return cast(
            BinaryIO, zstandard.ZstdCompressor(level=3).stream_writer(sink, closefd=False, write_return_read=True)
        )
    raise ValueError(f"unknown compression format {fmt!r}")


class _Decoder(Protocol):
    @property
    def eof(self) -> bool: ...
    @property
    def unused_data(self) -> bytes: ...
    def decompress(self, data: bytes, /) -> bytes: ...


class _StreamReader:
    """bzip2 or xz streams, or zstd frames, one after another, from ``source``, as ``bzip2 -d``,
    ``xz -d`` and ``zstd -d`` read them: a stream cut short raises EOFError, and bytes after the
    last stream that do not start another raise the decoder's error. (``zstandard``'s own stream
    reader takes a cut frame for a short one and ends quietly; the standard library's BZ2File
    and LZMAFile ignore what follows the last stream.)"""

    _CHUNK = 1 << 17

    def __init__(self, source: Readable, fmt: str, decoder: Callable[[], _Decoder]) -> None:
        self._source, self._fmt, self._new = source, fmt, decoder
        self._decoder = decoder()
        self._fed = False  # bytes given to the current stream
        self._pending = b""  # decompressed, not yet returned
        self.closed = False

    def readable(self) -> bool:
        return True

    def read1(self, size: int = -1) -> bytes:
        """Up to ``size`` decompressed bytes (all that one chunk of input gave when ``size`` < 0);
        b"" at the end."""
        if not self._pending:
            self._pending = self._decompress()
        if size < 0 or size >= len(self._pending):
            data, self._pending = self._pending, b""
        else:
            data, self._pending = self._pending[:size], self._pending[size:]
        return data

    read = read1  # callers loop until b""

    def _decompress(self) -> bytes:
        while True:
            data = self._source.read(self._CHUNK)
            if not data:
                if self._fed and not self._decoder.eof:
                    raise EOFError(f"compressed file ended before the end of its last {self._fmt} stream")
                return b""
            out = []
            while data:
                if self._decoder.eof:
                    self._decoder, self._fed = self._new(), False
                self._fed = True
                out.append(self._decoder.decompress(data))
                data = self._decoder.unused_data if self._decoder.eof else b""
            chunk = b"".join(out)
            if chunk:
                return chunk

    def close(self) -> None:
        self.closed = True
