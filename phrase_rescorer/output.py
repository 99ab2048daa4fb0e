"""Output files that appear complete or not at all: the package's one writer of files.

``AtomicOutput`` writes rescored tables, model files, moses.ini files and every other output:

* to an exclusive temporary beside the destination (``.NAME.tmp-PID-`` and 8 random characters, created with
  ``O_EXCL`` by ``tempfile.mkstemp``: never a planted link, never another run's file), then
  fsyncs it, gives it the permission bits of the file it replaces (or those a new file gets
  under the umask) and renames it onto the destination; any failure or interruption deletes
  the temporary and leaves the destination as it was;
* straight into the destination, with no temporary and no rename, when it is ``-`` (standard
  output), a character device, a FIFO or socket, or a link to an open file descriptor
  (``/dev/stdout``, ``/dev/fd/N``, ``/proc/self/fd/N``, bash's ``>(cmd)``): nothing can be undone
  there, and renaming onto ``/dev/null`` would replace the device;
* through one loop that writes every byte or raises: a write that takes only part of its bytes
  (a pipe under a stop/continue signal, an unbuffered stdout) is continued, one that takes none
  is an error, and a non-blocking descriptor is waited on.

A temporary holds an exclusive ``flock`` while its run lives. A run that was killed (SIGKILL,
power loss) leaves it behind; the next run writing the same destination removes such stale
temporaries, naming them in a warning. Within one process, threads look for stale temporaries
and create their own one at a time (``_CREATING``), so that one thread never takes another's
temporary, created but not yet locked, for stale. Errors are :class:`OutputError` (an ``OSError`` naming
the output path); the checks of a path (:func:`check_output_path`, :func:`check_distinct_paths`)
are ``output_targets``', re-exported here.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import io
import os
import select
import sys
import tempfile
import threading
from collections.abc import Callable
from types import TracebackType
from typing import BinaryIO

from .compression import format_of_name, open_writer
from .output_paths import (
    OutputError,
    ReaderGone,
    check_distinct_outputs,
    check_distinct_paths,
    check_not_an_input,
    check_output_path,
)
from .output_targets import fd_of_link, fsync_directory, is_special, mode_for, stale_temporaries, temporary_stem
from .signals import stop_signals_held

__all__ = [
    "AtomicOutput",
    "OutputError",
    "ReaderGone",
    "check_distinct_outputs",
    "check_distinct_paths",
    "check_not_an_input",
    "check_output_path",
]

_BUFFER_SIZE = 1 << 20
_CREATING = threading.Lock()  # the stale scan, and a temporary's creation up to its lock
#: The system call every output byte goes through (tests replace it to simulate short writes).
_write = os.write


class AtomicOutput:
    """Context manager yielding a binary file whose content appears at ``path`` only on success.

    Compressed as its name says (``compression.format_of_name``: ``.gz``, ``.bz2``, ``.xz``,
    ``.zst``; a name of another compressed format is refused), or gzip when ``compress`` is True;
    the compressor writes into the temporary, through the same checked writes. On a clean exit
    the data is flushed, fsynced and renamed onto ``path``; on any exception (KeyboardInterrupt
    and SystemExit included) or after :meth:`abort`, the temporary is deleted and ``path`` left
    untouched. The constructor checks the path (:func:`check_output_path`). An ``OSError`` that
    names no file (a full disk, an I/O error) is labelled with ``path``; :attr:`write_error`
    keeps the first one a write met (for callers whose serializer replaces it by an error of its
    own). ``on_warning`` is told about stale temporaries removed. Special targets (module
    docstring) are written straight through.
    """

    def __init__(
        self, path: str, compress: bool | None = None, on_warning: Callable[[str], None] | None = None
    ) -> None:
        check_output_path(path, by_name=compress is None)
        self.path = path
        #: The compression format of the bytes written (``compression``), by default the one
        #: ``path`` names; ``compress=False`` stores them as given (e.g. streams that are
        #: already compressed), ``True`` gzips them.
        self.compression: str | None = (
            (format_of_name(path) if path != "-" else None) if compress is None else ("gzip" if compress else None)
        )
        self.on_warning = on_warning
        self.temporary: str | None = None
        self.direct = path == "-" or fd_of_link(path) is not None or is_special(path)
        self._sink: _Sink | None = None
        self._streams: list[BinaryIO] = []  # outermost first
        self._file: BinaryIO | None = None
        self._aborted = False

    @property
    def write_error(self) -> OSError | None:
        return None if self._sink is None else self._sink.error

    def __enter__(self) -> BinaryIO:
        try:  # a failure or a stop signal in here gets no __exit__: clean up now
            sink = self._sink = self._open_direct() if self.direct else self._create_temporary()
            buffered = io.BufferedWriter(sink, _BUFFER_SIZE)
            self._streams = [buffered]  # type: ignore[list-item]
            if self.compression is not None:
                compressor = open_writer(self.compression, buffered)  # type: ignore[arg-type]
                # a compressor's write costs a Python call per line: batch the writes.
                batched = io.BufferedWriter(compressor, _BUFFER_SIZE)  # type: ignore[arg-type]
                self._streams = [batched, compressor, buffered]  # type: ignore[list-item]
        except BaseException as exc:
            self.abort()
            self._label(exc)
            raise
        self._file = self._streams[0]
        return self._file

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        if exc_type is not None or self._aborted:
            self.abort()
            self._label(exc)
        else:
            self._commit()

    def _open_direct(self) -> _Sink:
        if self.path == "-":
            if hasattr(sys.stdout, "flush"):
                sys.stdout.flush()  # what was printed before comes first
            try:
                return _Sink(self.path, fd=sys.stdout.fileno(), owned=False)
            except (AttributeError, ValueError, io.UnsupportedOperation):  # a stdout replaced in-process
                return _Sink(self.path, fd=-1, owned=False, buffer=sys.stdout.buffer)
        link = fd_of_link(self.path)
        if link is not None:  # the descriptor itself, with its offset and append mode
            return _Sink(self.path, fd=link, owned=False)
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_NOCTTY | os.O_CLOEXEC)
        except OSError as exc:
            raise OutputError(self.path, f"cannot write: {exc.strerror}", exc.errno) from exc
        return _Sink(self.path, fd=fd, owned=True)

    def _create_temporary(self) -> _Sink:
        directory, name = os.path.split(os.path.abspath(self.path))
        stem = temporary_stem(name)
        with _CREATING:
            for stale in stale_temporaries(directory, stem):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(os.path.join(directory, stale))
                    if self.on_warning is not None:
                        self.on_warning(
                            f"removed {os.path.join(directory, stale)}: the temporary of an "
                            "earlier run that was killed before it could clean up"
                        )
            try:
                with stop_signals_held():  # the file, its name and its descriptor, all known to abort()
                    fd, self.temporary = tempfile.mkstemp(prefix=f".{stem}.tmp-{os.getpid()}-", dir=directory)
                    self._sink = _Sink(self.path, fd=fd, owned=True)
            except OSError as exc:
                raise OutputError(self.path, f"cannot write: {exc.strerror}", exc.errno) from exc
            # "alive" for stale_temporaries; advisory only: a file system without flock (ENOLCK)
            # still gets its output, its temporaries then told alive by their PID alone
            with contextlib.suppress(OSError):
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return self._sink

    def _commit(self) -> None:
        assert self._sink is not None
        try:
            for stream in self._streams:
                stream.close()  # the batched writes, the end of the compressed stream, the last buffer
            if self.direct:
                self._sink.close_fd()
                return
            assert self.temporary is not None
            os.fsync(self._sink.fd)
            os.fchmod(self._sink.fd, mode_for(self.path))
            directory = os.path.dirname(self.temporary)
            with stop_signals_held():  # once renamed, the output is there: nothing to abort
                os.replace(self.temporary, self.path)
                self.temporary = None
            self._sink.close_fd()
            fsync_directory(directory)
        except BaseException as exc:
            self.abort()
            self._label(exc)
            raise

    def _label(self, exc: BaseException | None) -> None:
        if isinstance(exc, OSError) and exc.filename in (None, self.temporary):
            exc.filename = self.path

    def abort(self) -> None:
        """Discard everything written: delete the temporary, leave ``path`` as it was (written
        bytes cannot be taken back from a special target)."""
        self._aborted = True
        if self._sink is not None:
            self._sink.discard = True  # the buffers' last bytes go nowhere
        for stream in self._streams:
            with contextlib.suppress(Exception):
                stream.close()
        if self._sink is not None:
            self._sink.close_fd()
        if self.temporary is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.temporary)


class _Sink(io.RawIOBase):
    """A file descriptor (or a replaced stdout's ``buffer``) whose ``write`` writes all its
    bytes or raises."""

    def __init__(self, path: str, fd: int, owned: bool, buffer: BinaryIO | None = None) -> None:
        self.fd, self.path, self.owned, self.buffer = fd, path, owned, buffer
        self.error: OSError | None = None
        self.discard = False

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        if self.fd < 0:
            raise io.UnsupportedOperation("fileno")
        return self.fd

    def write(self, data) -> int:  # type: ignore[no-untyped-def, override]
        if self.discard:
            return len(data)
        view = memoryview(data).cast("B")
        done = 0
        try:
            while done < len(view):
                try:
                    if self.buffer is not None:
                        written = self.buffer.write(view[done:])
                    else:
                        written = _write(self.fd, view[done:])
                except BlockingIOError:  # a non-blocking descriptor: wait until it takes more
                    select.select([], [self.fd], [])
                    continue
                if not written:
                    raise OutputError(self.path, f"short write: 0 of {len(view) - done} bytes accepted", errno.EIO)
                done += written
        except BrokenPipeError as exc:
            self.error = self.error or exc
            raise ReaderGone(self.path, "the reader went away (broken pipe)") from exc
        except OSError as exc:
            self.error = self.error or exc
            raise
        return done

    def close_fd(self) -> None:
        if self.owned and self.fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self.fd)
        self.fd = -1
