"""Cutting a phrase table into contiguous parts that rescore exactly as the whole does, and
joining the rescored parts back, in order, into one output.

The engine (``scoring.TableRescorer``) cuts its input into windows: a window holds ``window``
lines and is extended to the end of the current source phrase (at most ``window_cap`` lines).
The lines of a window are sorted and batched together, and float32 matrix products round
differently in differently shaped batches (by a unit in the last place; the 9 significant digits
of the output column show it). So a part may start only where the one-process run starts a
window, and where the source phrase changes (no source group is ever split between parts):
then every window of every part is a window of the one-process run, its lines are scored in
the same batches, and the concatenated parts are byte for byte the one-process output.

Where the windows start depends on every line before, so one pass over the input finds them
(:func:`find_cuts`): newlines are counted with numpy and only the few lines where a window may
close have their source phrase compared, so the pass runs at the speed of reading the file
(plain) or of decompressing it (gzip, bzip2, xz, zstd: ``compression``). The parts
(:func:`plan_parts`) then start at the first such cut at or after k/N of the (decompressed)
bytes.

A process reads its part with :class:`TablePart`: a plain file is opened and sought to the
part's first byte; a compressed stream cannot be entered in the middle, so it is decompressed from
the start and the bytes before the part are dropped (C speed, no parsing; no disk space, unlike
decompressing the table into a plain file first). Line numbers in entries and errors count from
the start of the whole table.

Cost, measured on the 839,351-line real table (104 MB of text, 20 MB gzipped) on a 2-core
machine: the index pass takes 0.14 s on plain text (from the page cache) and 0.67 s on gzip
(of which 0.53 s is decompression); entering the last of 4 parts of the gzipped table takes
0.40 s. Per 10^8 lines, about 17 s (plain) or 80 s + up to 60 s (gzip) before scoring starts.

Rescored parts are joined with :func:`concatenate`: bytes copied in order into a temporary file
beside the output, fsynced and renamed onto it. Parts of a ``.gz`` output are each a complete
gzip member; a gzip file is a series of members (RFC 1952, 2.2), read whole by gzip -d, zcat,
Python and Moses (``util/read_compressed.cc`` goes on to the next member), so the joined file
decompresses to the one-process output (its compressed bytes differ: compression restarts at
every part). Likewise a ``.bz2``, ``.xz`` or ``.zst`` output is a series of complete streams
(frames), which bzip2 -d, xz -d, zstd -d and ``compression`` read as one. Compressing in the
processes keeps the join a plain copy.
"""

from __future__ import annotations

import bisect
import os
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

from ..compression import HEAD_BYTES, CompressionError, Reader, format_of_head, is_stream_error, open_reader
from ..moses.phrase_table import Entry, PhraseTableError, PhraseTableOSError, PhraseTableStreamError
from ..moses.table_reader import InputTable
from ..output import AtomicOutput

_CHUNK = 1 << 22  # bytes read at a time by the index pass
_SEP = b" ||| "

#: ``on_progress(position, size)``: input bytes read (compressed when compressed) and the file size.
IndexProgress = Callable[[int, int], None]


@dataclass(frozen=True)
class Cut:
    """A line where a part may start: a window starts there and the source phrase changes."""

    offset: int  # byte offset of the line in the (decompressed) input
    line_no: int  # its 1-based line number
    previous_source: bytes  # the source phrase of the line before


@dataclass(frozen=True)
class Part:
    """Bytes [start, end) of the (decompressed) input: whole lines, whole windows."""

    index: int
    start: int
    end: int
    first_line: int  # 1-based number of its first line
    previous_source: bytes | None  # source phrase of the line before its first (None: none)

    @property
    def size(self) -> int:
        return self.end - self.start


def _source(line: bytes) -> bytes:
    """The source phrase of a raw line as the parser reads it (everything before " ||| ")."""
    cut = line.find(_SEP)
    return line if cut < 0 else line[:cut]


def _open(path: str) -> tuple[Callable[[int], bytes], Callable[[], int], Callable[[], None], str | None]:
    """(read decompressed bytes, compressed position, close, compression format) of a plain or
    compressed file."""
    raw = open(path, "rb")  # noqa: SIM115 (closed by the returned close())
    try:
        fmt = format_of_head(raw.read(HEAD_BYTES))
    except CompressionError as exc:
        raw.close()
        raise PhraseTableError(path, None, str(exc)) from None
    raw.seek(0)
    reader: Reader | None = open_reader(fmt, raw) if fmt is not None else None

    def close() -> None:
        for stream in (reader, raw):
            if stream is not None:
                stream.close()

    return (reader.read if reader is not None else raw.read), raw.tell, close, fmt


@dataclass(frozen=True)
class Index:
    """What one pass over a table tells: where parts may start, its size and its lines."""

    cuts: list[Cut]
    size: int  # bytes of the (decompressed) input
    lines: int


def find_cuts(path: str, window: int, window_cap: int, on_progress: IndexProgress | None = None) -> Index:
    """Every line where the one-process engine starts a window at a change of source phrase.
    Replays ``TableRescorer._windows``: a window closes before line i when it holds ``window``
    lines or more and line i's source differs from line i-1's, or when it holds
    ``window_cap`` lines."""
    if path == "-":
        raise PhraseTableError(path, None, "a table read from stdin cannot be cut into parts")
    try:
        read, position, close, fmt = _open(path)
        file_size = os.path.getsize(path)
    except OSError as exc:
        raise PhraseTableOSError(path, None, f"cannot read: {exc.strerror or exc}") from exc
    cuts: list[Cut] = []
    offset = 0  # byte offset of data[0] in the input
    first = 0  # 0-based number of data's first line
    start = 0  # 0-based number of the line that starts the current window
    before = b""  # source phrase of the line before data's first line
    rest = b""  # a line whose end is not read yet
    try:
        while True:
            chunk = read(_CHUNK)
            data = rest + chunk
            if chunk:  # line j is data[begins[j]:ends[j]], its newline at ends[j]
                ends = np.flatnonzero(np.frombuffer(data, dtype=np.uint8) == 10)
                consumed = int(ends[-1]) + 1 if len(ends) else 0
            else:  # end of input: what is left is the last line, without newline
                ends = np.array([len(data)] if data else [], dtype=np.int64)
                consumed = len(data)
            begins = np.concatenate(([0], ends[:-1] + 1)) if len(ends) else ends

            def line(j: int) -> bytes:
                return data[int(begins[j]) : int(ends[j])]  # noqa: B023 (used in this pass)

            n = len(ends)
            i = max(start + window, first)
            while i < first + n:
                j = i - first
                src, prev = _source(line(j)), (_source(line(j - 1)) if j else before)
                if src != prev or i - start >= window_cap:
                    if src != prev:
                        cuts.append(Cut(offset + int(begins[j]), i + 1, prev))
                    start, i = i, i + window
                else:
                    i += 1
            if n:
                before = _source(line(n - 1))
            offset, first, rest = offset + consumed, first + n, data[consumed:]
            if on_progress is not None:
                on_progress(position(), file_size)
            if not chunk:
                return Index(cuts, offset, first)
    except Exception as exc:
        # read(_CHUNK) gives nothing of a chunk that fails: the line is not known, only that
        # the first `first` lines were whole
        if is_stream_error(exc):
            raise PhraseTableStreamError(
                path, None, f"truncated or corrupt {fmt} stream after its first {first:,} lines: {exc}"
            ) from exc
        if isinstance(exc, OSError):
            raise PhraseTableOSError(path, None, f"read error after its first {first:,} lines: {exc}") from exc
        raise
    finally:
        close()


def plan_parts(index: Index, parts: int) -> list[Part]:
    """``parts`` contiguous parts covering the input: part k starts at the first cut at or after
    k/parts of its bytes (so parts are even to a window). Too few windows leave parts empty."""
    offsets = [c.offset for c in index.cuts]
    starts: list[tuple[int, int, bytes | None]] = [(0, 1, None)]
    for k in range(1, parts):
        i = bisect.bisect_left(offsets, -(-k * index.size // parts))
        if i < len(index.cuts):
            cut = index.cuts[i]
            starts.append((cut.offset, cut.line_no, cut.previous_source))
        else:
            starts.append((index.size, index.lines + 1, None))
    ends = [s[0] for s in starts[1:]] + [index.size]
    return [
        Part(k, start, end, line_no, prev)
        for k, ((start, line_no, prev), end) in enumerate(zip(starts, ends, strict=True))
    ]


class TablePart(InputTable):
    """The entries of one part of the table at ``path`` (an :class:`InputTable` over the bytes
    [part.start, part.end) of the decompressed input), numbered as lines of the whole table.

    ``position()`` and ``size()`` count the part's bytes (for progress bars)."""

    def __init__(self, path: str, part: Part, *, check_scores: bool = True) -> None:
        super().__init__(path, check_scores=check_scores)
        self.part = part
        self._done = 0
        try:
            self._head = self._enter(part.start)
        except BaseException:
            self.close()
            raise
        self._read_chunk = self._read_part

    def _enter(self, start: int) -> bytes:
        """Go to byte ``start``: seek a plain file; decompress a compressed stream up to it."""
        if self.part.size == 0:
            return b""
        if self._decompressed is None:
            assert self._file is not None  # stdin is refused by find_cuts
            self._file.seek(start)
            return b""
        skipped = 0
        try:
            while True:
                chunk = self._decompressed.read(_CHUNK)
                if not chunk:
                    raise PhraseTableError(
                        self.path, self.part.first_line, "the table is shorter than when it was indexed"
                    )
                if skipped + len(chunk) > start:
                    return chunk[start - skipped :]
                skipped += len(chunk)
        except Exception as exc:
            if not is_stream_error(exc):
                raise
            raise PhraseTableStreamError(
                self.path, None, f"truncated or corrupt {self.compression} stream: {exc}"
            ) from exc

    def _read_part(self, size: int = _CHUNK) -> bytes:
        left = self.part.size - self._done
        if left <= 0:
            return b""
        if self._head:
            n = min(size, left)
            data, self._head = self._head[:n], self._head[n:]
        else:
            data = self._raw_read(min(size, left))[:left]
        self._done += len(data)
        return data

    def _raw_read(self, size: int) -> bytes:
        if self._decompressed is not None:
            return self._decompressed.read1(size)
        assert self._file is not None
        return self._file.read(size)

    def position(self) -> int:
        return self._done

    def size(self) -> int:
        return self.part.size

    def _entries(self, lenient: bool) -> Iterator[Entry | PhraseTableError]:
        shift = self.part.first_line - 1
        try:
            for item in super()._entries(lenient):
                if isinstance(item, PhraseTableError):
                    yield _renumbered(item, shift)
                else:
                    item.line_no += shift
                    yield item
        except PhraseTableError as exc:
            raise _renumbered(exc, shift) from exc


def _renumbered(error: PhraseTableError, shift: int) -> PhraseTableError:
    line_no = None if error.line_no is None else error.line_no + shift
    return type(error)(error.path, line_no, error.message)  # the same kind (stream, OS, line)


def concatenate(paths: list[str], out_path: str) -> None:
    """The files ``paths``, in order, into ``out_path``, byte for byte, through ``AtomicOutput``
    (temporary name, fsync, rename; on any failure ``out_path`` is left as it was)."""
    with AtomicOutput(out_path, compress=False) as out:
        for path in paths:
            with open(path, "rb") as part:
                shutil.copyfileobj(part, out, _CHUNK)
