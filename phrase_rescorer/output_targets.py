"""What an output path is on disk, for ``output.AtomicOutput``: a target written straight
through (a device, a FIFO or socket, a link to an open descriptor), the stale temporaries a
killed run left beside it, the permission bits a replacing file keeps, and a durable rename; the
checks made of an output path before any work (:func:`check_output_path`,
:func:`check_distinct_paths`) and their error, :class:`OutputError`."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import re
import stat
import sys

from .compression import CompressionError, format_of_name

#: Bytes of the destination's name kept in its temporary's name (file names hold 255 bytes).
_NAME_BYTES = 200
_FD_LINK = re.compile(r"/dev/(?:(stdout)|(stderr)|fd/(\d+))|/proc/(?:self|thread-self|\d+)/fd/(\d+)")


class OutputError(OSError):
    """An output that cannot be written: ``str(e)`` is ``"path: message"``; ``filename`` the path."""

    def __init__(self, path: str, message: str, code: int | None = None) -> None:
        super().__init__(code, message)
        self.filename = path

    def __str__(self) -> str:
        return f"{self.filename or repr(self.filename)}: {self.strerror}"

    def __reduce__(self):  # type: ignore[no-untyped-def]
        return (type(self), (self.filename, self.strerror, self.errno))


def check_output_path(path: str, by_name: bool = True) -> None:
    """Raise :class:`OutputError` if nothing could be written at ``path``; cheap, for callers to
    check their outputs before any long work. ``by_name``: the output is compressed by its name,
    and a compressed name of a format that is not written is refused (``compression``)."""
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
    if os.path.isdir(path):
        raise OutputError(path, "output path is a directory", errno.EISDIR)
    if path.endswith(os.sep):
        raise OutputError(path, "output path ends with '/': it names a directory, not a file", errno.EISDIR)
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise OutputError(path, "output directory does not exist", errno.ENOENT)
    if not os.access(directory, os.W_OK | os.X_OK):
        raise OutputError(path, f"permission denied: cannot create files in {directory}", errno.EACCES)


def check_distinct_paths(input_path: str, output_path: str) -> None:
    """Raise OutputError if ``output_path`` names the same file as ``input_path``.

    Compares resolved paths (symlinks, relative spellings) and, when both exist, the files
    themselves (hard links). ``-`` (stdin/stdout) never clashes.
    """
    if input_path == "-" or output_path == "-" or "" in (input_path, output_path):
        return
    same = os.path.realpath(input_path) == os.path.realpath(output_path)
    if not same and os.path.exists(input_path) and os.path.exists(output_path):
        same = os.path.samefile(input_path, output_path)
    if same:
        raise OutputError(output_path, f"output is the same file as the input {input_path!r}", errno.EINVAL)


def is_open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


def fd_of_link(path: str) -> int | None:
    """The descriptor that ``/dev/stdout``, ``/dev/fd/N`` or ``/proc/self/fd/N`` names, else None."""
    match = _FD_LINK.fullmatch(os.path.abspath(path))
    if match is None or (match.group(0).startswith("/proc/") and not _is_own_proc(match.group(0))):
        return None
    if match.group(1) or match.group(2):
        return 1 if match.group(1) else 2
    return int(match.group(3) or match.group(4))


def _is_own_proc(path: str) -> bool:
    part = path.split("/")[2]
    return part in ("self", "thread-self") or part == str(os.getpid())


def is_special(path: str) -> bool:
    """An existing target that is neither a regular file nor a directory (a device, a FIFO, a
    socket, or a link to one): written straight through, never replaced."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return not stat.S_ISREG(mode) and not stat.S_ISDIR(mode)


def temporary_stem(name: str) -> str:
    """``name`` cut to ``_NAME_BYTES`` bytes, so that its temporary's name is a legal name."""
    raw = os.fsencode(name)
    return name if len(raw) <= _NAME_BYTES else raw[:_NAME_BYTES].decode("utf-8", "ignore")


def stale_temporaries(directory: str, stem: str) -> list[str]:
    """Temporaries for ``stem`` whose run is over: no lock held, and no process of that PID here."""
    pattern = re.compile(re.escape(f".{stem}.tmp-") + r"(\d+)(?:-[A-Za-z0-9_]{8})?")
    stale = []
    try:
        names = os.listdir(directory)
    except OSError:
        return []
    for name in names:
        match = pattern.fullmatch(name)
        if match is None or _alive(int(match.group(1))):
            continue
        try:
            fd = os.open(os.path.join(directory, name), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            continue
        try:
            if stat.S_ISREG(os.fstat(fd).st_mode):
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # raises while its writer lives
                stale.append(name)
        except OSError:
            pass
        finally:
            os.close(fd)
    return stale


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return False  # an earlier run that had this process's PID (another PID namespace)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def mode_for(path: str) -> int:
    """The permission bits of the file at ``path``, or those a new file gets (0666 less umask)."""
    try:
        info = os.stat(path)
    except OSError:
        info = None
    if info is not None and stat.S_ISREG(info.st_mode):
        return stat.S_IMODE(info.st_mode)
    umask = os.umask(0o022)
    os.umask(umask)
    return 0o666 & ~umask


def fsync_directory(directory: str) -> None:
    """Make a rename in ``directory`` durable, where the platform allows it."""
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
