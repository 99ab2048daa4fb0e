"""What an output path is on disk, for ``output.AtomicOutput``: a target written straight
through (a device, a FIFO or socket, a link to an open descriptor), the stale temporaries a
killed run left beside it, the permission bits a replacing file keeps, and a durable rename
(the checks made of an output path before any work are ``output_paths``')."""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import select
import stat

#: Bytes of the destination's name kept in its temporary's name (file names hold 255 bytes).
_NAME_BYTES = 200
#: Symbolic links followed in search of a descriptor link (the kernel's own limit).
_MAX_LINKS = 40
_FD_LINK = re.compile(r"/dev/(?:(stdout)|(stderr)|fd/(\d+))|/proc/(?:self|thread-self|\d+)/fd/(\d+)")


def is_open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


def reader_gone(fd: int = 1) -> bool:
    """Whether ``fd`` is a pipe or FIFO whose reader went away (``| head`` done): its write end
    polls with POLLERR."""
    try:
        if not stat.S_ISFIFO(os.fstat(fd).st_mode):
            return False
        poll = select.poll()
        poll.register(fd, select.POLLOUT)
        return any(events & select.POLLERR for _, events in poll.poll(0))
    except (OSError, ValueError):
        return False


def drop_stdout() -> None:
    """Point standard output at /dev/null, so that Python's last flush of what a gone reader
    left unread finds nothing to complain of."""
    with contextlib.suppress(OSError, ValueError):
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)
        os.close(null)


def fd_of_link(path: str) -> int | None:
    """The descriptor that ``/dev/stdout``, ``/dev/fd/N`` or ``/proc/self/fd/N`` names, directly
    or through symbolic links of one's own (``out -> /proc/self/fd/1``), else None."""
    current = os.path.abspath(path)
    for _ in range(_MAX_LINKS):
        match = _FD_LINK.fullmatch(current)
        if match is not None:
            if match.group(0).startswith("/proc/") and not _is_own_proc(match.group(0)):
                return None
            if match.group(1) or match.group(2):
                return 1 if match.group(1) else 2
            return int(match.group(3) or match.group(4))
        try:
            target = os.readlink(current)
        except OSError:  # not a link (or none left): a file's path
            return None
        current = os.path.normpath(os.path.join(os.path.dirname(current), target))
    return None


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
    """Temporaries for ``stem`` whose run is over: no lock held, and no process of that PID here.
    Only names as ``output`` makes them (``.NAME.tmp-PID-`` and mkstemp's 8 characters): a user's
    ``.NAME.tmp-PID`` is not one."""
    pattern = re.compile(re.escape(f".{stem}.tmp-") + r"(\d+)-[A-Za-z0-9_]{8}")
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
