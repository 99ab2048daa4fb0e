"""Output files that appear complete or not at all.

``AtomicOutput`` writes to a temporary name beside the destination (gzip-compressed when the name
ends with ``.gz``), then fsyncs and renames it; any failure or interruption removes the
temporary and leaves the destination as it was. ``-`` writes to stdout, where nothing can be
undone. ``check_distinct_paths`` refuses an output that is the input itself.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import os
import sys
from types import TracebackType
from typing import BinaryIO

from .moses.phrase_table import PhraseTableError, PhraseTableOSError

_BUFFER_SIZE = 1 << 20


class AtomicOutput:
    """Context manager yielding a binary file whose content appears at ``path`` only on success.

    Data goes to ``.NAME.tmp-PID`` in the destination directory, gzip-compressed (level 6,
    mtime 0: identical input gives identical bytes) when ``path`` ends with ``.gz``. On a clean
    exit the temporary is flushed, fsynced, closed and renamed onto ``path``; on any exception
    (KeyboardInterrupt and SystemExit included) or after :meth:`abort`, it is deleted and ``path``
    is left untouched. A missing output directory is reported by the constructor. An ``OSError``
    that names no file (a full disk, an I/O error) and ends the block, or the final flush, is
    labelled with ``path`` so that the message says which output failed.

    ``path`` ``-`` writes plain bytes straight to stdout: nothing can be atomic or undone there.
    """

    def __init__(self, path: str, compress: bool | None = None) -> None:
        self.path = path
        #: gzip the bytes written; by default when ``path`` ends with ``.gz``. ``False`` stores
        #: them as given (e.g. gzip members that are already compressed).
        self.compress = path.endswith(".gz") if compress is None else compress
        self.temporary: str | None = None
        self._raw: BinaryIO | None = None
        self._file: BinaryIO | None = None
        self._aborted = False
        if path == "-":
            return
        directory, name = os.path.split(os.path.abspath(path))
        if not os.path.isdir(directory):
            raise PhraseTableOSError(path, None, "output directory does not exist")
        if os.path.isdir(path):
            raise PhraseTableOSError(path, None, "output path is a directory")
        self.temporary = os.path.join(directory, f".{name}.tmp-{os.getpid()}")

    def __enter__(self) -> BinaryIO:
        if self.temporary is None:
            self._file = sys.stdout.buffer
            return self._file
        try:
            self._raw = open(self.temporary, "wb", buffering=_BUFFER_SIZE)
        except OSError as exc:
            raise PhraseTableOSError(self.path, None, f"cannot write: {exc.strerror}") from exc
        self._file = self._raw
        if self.compress:
            compressor = gzip.GzipFile(
                filename="", mode="wb", fileobj=self._raw, compresslevel=6, mtime=0
            )
            # GzipFile.write costs a Python call per line: batch the writes.
            self._file = io.BufferedWriter(compressor, _BUFFER_SIZE)  # type: ignore[arg-type]
        return self._file

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if exc_type is not None or self._aborted:
            self.abort()
            self._label(exc)
        elif self.temporary is None:
            if self._file is not None:
                self._file.flush()
        else:
            self._commit()

    def _commit(self) -> None:
        assert self._raw is not None and self._file is not None and self.temporary is not None
        try:
            if self._file is not self._raw:
                self._file.close()  # flushes the batched writes and writes the gzip trailer
            self._raw.flush()
            os.fsync(self._raw.fileno())
            self._raw.close()
            os.replace(self.temporary, self.path)
            _fsync_directory(os.path.dirname(self.temporary))
        except BaseException as exc:
            self.abort()
            self._label(exc)
            raise

    def _label(self, exc: BaseException | None) -> None:
        if isinstance(exc, OSError) and exc.filename is None and self.temporary is not None:
            exc.filename = self.path

    def abort(self) -> None:
        """Discard everything written: delete the temporary, leave ``path`` as it was."""
        self._aborted = True
        if self.temporary is None:
            return
        for stream in (self._file, self._raw):
            if stream is not None:
                with contextlib.suppress(Exception):  # discarding anyway (e.g. disk full)
                    stream.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.temporary)


def _fsync_directory(directory: str) -> None:
    """Make a rename in ``directory`` durable, where the platform allows it."""
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def check_distinct_paths(input_path: str, output_path: str) -> None:
    """Raise PhraseTableError if ``output_path`` names the same file as ``input_path``.

    Compares resolved paths (symlinks, relative spellings) and, when both exist, the files
    themselves (hard links). ``-`` (stdin/stdout) never clashes.
    """
    if input_path == "-" or output_path == "-":
        return
    same = os.path.realpath(input_path) == os.path.realpath(output_path)
    if not same and os.path.exists(input_path) and os.path.exists(output_path):
        same = os.path.samefile(input_path, output_path)
    if same:
        raise PhraseTableError(
            output_path, None, f"output is the same file as the input {input_path!r}"
        )
