"""What every output path is checked for before any long work, and the error of an output that
cannot be written: :class:`OutputError` (an ``OSError`` naming the path), for ``output`` and
the callers that check their outputs up front (``check_output_path``, ``check_distinct_paths``,
``check_not_an_input`` for a command with several inputs, ``check_distinct_outputs`` for one with
several outputs)."""

from __future__ import annotations

import errno
import os
import stat
import sys
from collections.abc import Iterable

from .compression import CompressionError, format_of_name
from .errors import EXIT_SIGPIPE
from .output_targets import fd_of_link, is_open, is_special
from .run_lock import described_holder, running_owner


class OutputError(OSError):
    """An output that cannot be written: ``str(e)`` is ``"path: message"``; ``filename`` the path."""

    def __init__(self, path: str, message: str, code: int | None = None) -> None:
        super().__init__(code, message)
        self.filename = path

    def __str__(self) -> str:
        return f"{self.filename or repr(self.filename)}: {self.strerror}"

    def __reduce__(self):  # type: ignore[no-untyped-def]
        return (type(self), (self.filename, self.strerror, self.errno))


class ReaderGone(OutputError):
    """The reader of a pipe or FIFO went away (``| head``). Its ``errno`` is left unset: click
    ends a command that meets an ``EPIPE`` with exit 1, the program's rule is 141."""

    exit_code = EXIT_SIGPIPE


def check_output_path(path: str, by_name: bool = True, *, own: str | None = None) -> None:
    """Raise :class:`OutputError` if nothing could be written at ``path``; cheap, for callers to
    check their outputs before any long work. ``by_name``: the output is compressed by its name,
    and a compressed name of a format that is not written is refused (``compression``). A file a
    living training run writes is refused (:func:`check_not_running`; ``own``: the lock of the
    run that checks, whose refusal is its own), and so is the regular file this process's
    standard output or error is redirected to (its writes and the output's would overwrite each
    other)."""
    if path == "":
        raise OutputError(path, "empty output path")
    if by_name and path != "-":
        try:
            format_of_name(path)
        except CompressionError as exc:
            raise OutputError(path, str(exc), errno.EINVAL) from None
    if path == "-":
        if sys.stdout is None or not is_open(1):
            raise OutputError("-", "standard output is closed")
        return
    fd = fd_of_link(path)
    if fd is not None:
        if not is_open(fd):
            raise OutputError(path, f"file descriptor {fd} is not open")
        return
    if is_special(path):
        return
    stream = _standard_stream(path)
    if stream is not None:  # `train-nmt ... m.pt > m.log`: two writers of one file, each over the other
        raise OutputError(
            path, f"this command's {stream} is redirected to this file; redirect it elsewhere", errno.EINVAL
        )
    if os.path.isdir(path):
        raise OutputError(path, "output path is a directory", errno.EISDIR)
    if path.endswith(os.sep):
        raise OutputError(path, "output path ends with '/': it names a directory, not a file", errno.EISDIR)
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise OutputError(path, "output directory does not exist", errno.ENOENT)
    if not os.access(directory, os.W_OK | os.X_OK):
        raise OutputError(path, f"permission denied: cannot create files in {directory}", errno.EACCES)
    name = len(os.fsencode(os.path.basename(path)))
    try:
        longest = os.pathconf(directory, "PC_NAME_MAX")
    except (OSError, ValueError):  # not told: the final rename says
        longest = None
    if longest is not None and name > longest:
        raise OutputError(
            path, f"file name too long ({name} bytes; this file system takes {longest})", errno.ENAMETOOLONG
        )
    check_not_running(path, own=own)


def _standard_stream(path: str) -> str | None:
    """``"standard output"`` or ``"standard error"`` where that descriptor of this process is the
    regular file ``path`` names (``> out``, ``2>> out``: an output written there as well would be
    overwritten by the stream's writes and overwrite them), else None."""
    try:
        target = _regular_file_id(os.stat(path))
    except OSError:  # not there (yet): no stream writes to it
        return None
    if target is None:
        return None
    for fd, name in ((1, "standard output"), (2, "standard error")):
        try:
            info = os.fstat(fd)
        except OSError:  # closed
            continue
        if _regular_file_id(info) == target:
            return name
    return None


def check_not_running(path: str, *, own: str | None = None) -> None:
    """Refuse ``path`` (``OutputError``, exit 6) where a living training run, other than the one
    of the lock ``own`` (and other than this process), writes it (``run_lock.owner_locks``), naming
    that run: its model file, saved state, log, lock or a network it keeps would be replaced under
    it, whatever command writes there. A lock file a dead run left blocks nothing."""
    if path == "-":
        return
    found = running_owner(path, own=own)
    if found is not None:
        lock, record = found
        raise OutputError(
            path,
            f"a file of a running training ({described_holder(record)}; lock {lock}): wait for it to end, "
            "or write elsewhere",
            errno.EBUSY,
        )


def check_distinct_paths(input_path: str, output_path: str, *, model: str | None = None) -> None:
    """Raise OutputError if ``output_path`` names the same file as ``input_path`` or as the
    ``model`` file the run reads (writing there would destroy what is being read).

    Compares resolved paths (symlinks, relative spellings) and, when both exist, the files
    themselves (hard links). ``-`` is the file behind standard input (an input) or output (the
    output) when that is a regular file (``< t.gz``, ``> out``). Nothing is opened: a FIFO keeps
    its writer waiting for the real reader.
    """
    check_not_an_input(output_path, (("input", input_path), ("model file", model)))


def check_not_an_input(output_path: str, inputs: Iterable[tuple[str, str | None]]) -> None:
    """Raise OutputError if ``output_path`` names the same file as one of ``inputs``, given as
    (what it is, path) pairs (``("n-best list", "dev.nbest")``; a None path is skipped): the
    error says ``output is the same file as the n-best list 'dev.nbest'``. As
    :func:`check_distinct_paths`: symlinks, relative spellings and hard links, nothing opened."""
    for what, path in inputs:
        if path is not None and _same_file(path, output_path):
            raise OutputError(output_path, f"output is the same file as the {what} {path!r}", errno.EINVAL)


def check_distinct_outputs(output_path: str, others: Iterable[tuple[str, str | None]]) -> None:
    """Raise OutputError if ``output_path`` and one of ``others``, the command's other outputs given
    as (what it is, path) pairs (a None path skipped), write to one place, each over the other or
    interleaved: one file (symlinks, relative spellings, hard links), one descriptor (``-`` is
    standard output, as are ``/dev/stdout`` and ``/dev/fd/1``), or one pipe or FIFO. A terminal
    or device opened twice (``/dev/null``, standard output and error on one terminal) is not
    refused. Nothing is opened."""
    for what, path in others:
        if path is not None and _same_output(path, output_path):
            raise OutputError(
                output_path, f"output goes to the same place as the {what} {path!r}: give each its own", errno.EINVAL
            )


def _same_output(a: str, b: str) -> bool:
    if "" in (a, b):
        return False
    fds = [1 if path == "-" else fd_of_link(path) for path in (a, b)]
    if fds[0] is not None and fds[0] == fds[1]:
        return True
    try:
        infos = [os.fstat(fd) if fd is not None else os.stat(path) for fd, path in zip(fds, (a, b), strict=True)]
    except OSError:  # closed, or not there yet: one only if both name it
        return fds == [None, None] and os.path.realpath(a) == os.path.realpath(b)
    mode = infos[0].st_mode
    one = (infos[0].st_dev, infos[0].st_ino) == (infos[1].st_dev, infos[1].st_ino)
    return one and (stat.S_ISREG(mode) or stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode))


def _same_file(path: str, output_path: str) -> bool:
    if "" in (path, output_path):
        return False
    if path == "-" or output_path == "-":  # the file behind standard input or output (`< t.gz`, `> t.gz`)
        return _same_regular_file(path, output_path)
    if os.path.realpath(path) == os.path.realpath(output_path):
        return True
    try:
        return os.path.samefile(path, output_path)
    except OSError:  # either does not exist (yet)
        return False


def _same_regular_file(path: str, output_path: str) -> bool:
    """Whether ``path`` (``-``: the file on standard input) and ``output_path`` (``-``: the
    file on standard output) are one regular file: a shell's ``< t.gz`` or ``>> t.gz`` on a
    file the run also reads or writes. Terminals and pipes are never the same file (an
    interactive shell's standard input and output are one terminal)."""
    try:
        a = os.fstat(0) if path == "-" else os.stat(path)
        b = os.fstat(1) if output_path == "-" else os.stat(output_path)
    except OSError:  # closed, or not there (yet)
        return False
    file_id = _regular_file_id(a)
    return file_id is not None and file_id == _regular_file_id(b)


def _regular_file_id(info: os.stat_result) -> tuple[int, int] | None:
    """``(device, inode)`` of a regular file; None for a terminal, pipe, directory or device,
    which two descriptors may share without being one file a run reads and writes."""
    return (info.st_dev, info.st_ino) if stat.S_ISREG(info.st_mode) else None
