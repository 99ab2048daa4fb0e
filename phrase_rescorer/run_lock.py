"""A lock file that a run holds for its whole life, so that one run at a time uses what it guards
(an experiment's ``--out``, a training's ``MODEL_OUT`` and its companion files).

``held_lock(path, record)`` opens ``path`` (creating it), takes an exclusive ``flock`` on it
without waiting, writes ``record`` (who holds it: a PID, a host, a command) into it, and keeps
it until the block ends, however it ends. When another process holds it, :class:`LockHeld`
says what that process wrote. The kernel drops an ``flock`` with its process, whatever ends it
(SIGKILL, a crash, power loss), so a lock file that a dead run left behind blocks nothing: the
next run takes it and writes its own record over the dead one's.

With ``remove=True`` the file is deleted as the lock is given back (still held, so no run can
take it in between). A run that opened the file just before that and takes its lock just after
finds that the file at ``path`` is no longer the one it locked (another device and inode, or
none), and opens ``path`` again: two runs never hold the locks of two files of one name. A
``path`` that is a symbolic link is refused (``ELOOP``), and ``ours`` may refuse a file found
with content that no run of its kind writes (:class:`NotALock`), which is then left untouched.

``holder(path)`` tells, without waiting and without keeping it, whether a living process holds
the lock of ``path``, and what it wrote there: for a command that writes a file such a run owns.

A training's lock sits beside its ``MODEL_OUT``: ``lock_path`` (``nmt.pt`` -> ``nmt.lock``), with
its other files' names (``companion_path``: ``nmt.last.pt``, ``nmt.log``), so that
:func:`running_owner` tells, for any path, the living run (not this process) that writes it.

Both refusals are ``HostError``s (exit 6), which callers word for their kind of run. Errors of
the system (a missing directory, no permission, a file system without ``flock``:
``ENOLCK``, ``ENOSYS``, ``EOPNOTSUPP``, see :data:`NO_LOCKS`) are the ``OSError`` itself.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import re
import socket
from collections.abc import Callable, Iterator

from .errors import HostError
from .signals import stop_signals_held

#: The errors of ``flock`` on a file system that has no locks (NFS without a lock daemon,
#: Lustre mounted without ``flock``).
NO_LOCKS = frozenset({errno.ENOLCK, errno.ENOSYS, errno.EOPNOTSUPP})

#: The most of a holder's record that is read back.
_RECORD_BYTES = 4096


class LockHeld(HostError):
    """Another living process holds the lock of ``path``; ``holder`` is what it wrote there
    (empty when it has not written yet)."""

    def __init__(self, path: str, holder: str) -> None:
        super().__init__(f"{path}: locked by another process")
        self.path, self.holder = path, holder


class NotALock(HostError):
    """``path`` holds something other than a lock record of the kind asked for (left untouched)."""

    def __init__(self, path: str) -> None:
        super().__init__(f"{path}: not a lock file")
        self.path = path


@contextlib.contextmanager
def held_lock(
    path: str, record: str, *, remove: bool = False, ours: Callable[[str], bool] | None = None
) -> Iterator[None]:
    """Hold the lock of ``path`` while the block runs (module docstring); ``ours(text)`` tells
    whether a non-empty file found there is a record of this kind of lock."""
    fd = -1
    try:
        with stop_signals_held():  # the file and its descriptor known to the finally below
            fd = _take(path, record, remove, ours)
        yield
    finally:
        if fd >= 0:
            if remove and _same_file(fd, path):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)
            os.close(fd)  # gives the lock back


def holder(path: str) -> str | None:
    """What the living process that holds the lock of ``path`` wrote there (empty when it has not
    written yet); None where no process holds it, or there is no such file. The lock is tried
    shared and given back at once: a run taking it at that very moment may find it held."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    except OSError:  # no such file, a link, unreadable: no lock a run holds there
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError as e:
            if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                return _read(fd)
            return None  # a file system without locks: none to find
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def _take(path: str, record: str, remove: bool, ours: Callable[[str], bool] | None) -> int:
    """A descriptor of ``path`` holding its lock, ``record`` written in it; on a file system
    without locks the file is not left behind where ``remove`` asks for that and this call made it."""
    flags = os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW
    while True:
        try:
            fd, made = os.open(path, flags | os.O_CREAT | os.O_EXCL, 0o644), True
        except FileExistsError:
            try:
                fd, made = os.open(path, flags), False
            except FileNotFoundError:  # given back and removed meanwhile
                continue
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as e:
                if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                    raise LockHeld(path, _read(fd)) from None
                if e.errno in NO_LOCKS and made and remove and _same_file(fd, path):
                    os.unlink(path)
                raise
            if not _same_file(fd, path):  # given back and removed meanwhile: take the new one
                os.close(fd)
                continue
            previous = _read(fd)
            if previous and ours is not None and not ours(previous):
                raise NotALock(path)
            os.ftruncate(fd, 0)
            os.pwrite(fd, record.encode("utf-8", "surrogateescape"), 0)
            return fd
        except BaseException:
            os.close(fd)
            raise


def _read(fd: int) -> str:
    return os.pread(fd, _RECORD_BYTES, 0).decode("utf-8", "replace").strip()


def _same_file(fd: int, path: str) -> bool:
    """Whether ``path`` still names the file open at ``fd``."""
    try:
        now = os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        return False
    mine = os.fstat(fd)
    return (now.st_dev, now.st_ino) == (mine.st_dev, mine.st_ino)


def companion_path(out_path: str, suffix: str) -> str:
    """``rnn.pt`` -> ``rnn.last.pt`` / ``rnn.log``."""
    return (out_path[:-3] if out_path.endswith(".pt") else out_path) + suffix


def lock_path(out_path: str) -> str:
    """``rnn.pt`` -> ``rnn.lock``: held by the run writing ``rnn.pt``, ``rnn.last.pt``, ``rnn.log``."""
    return companion_path(out_path, ".lock")


#: The names a run gives its files beside its ``MODEL_OUT`` stem S: S.last.pt, S.log, S.lock, S.stepN.pt.
_COMPANION = re.compile(r"(.+)\.(?:last\.pt|log|lock|step[1-9][0-9]*\.pt)", re.ASCII | re.DOTALL)


def owner_locks(path: str) -> list[str]:
    """The locks of the runs that would write ``path``: the run whose ``MODEL_OUT`` it is, and, for
    a companion's name (``S.last.pt``, ``S.log``, ``S.lock``, ``S.stepN.pt``), the run of ``S``."""
    locks = [lock_path(path)]
    folder, name = os.path.split(path)
    companion = _COMPANION.fullmatch(name)
    if companion is not None:
        locks.append(lock_path(os.path.join(folder, companion.group(1))))
    return list(dict.fromkeys(locks))


def is_lock_record(text: str) -> bool:
    """Whether ``text`` is a training lock's record (JSON with the holder's ``pid``)."""
    try:
        fields = json.loads(text)
    except ValueError:
        return False
    return isinstance(fields, dict) and "pid" in fields


def described_holder(record: str) -> str:
    """What a lock's record (JSON: the holder's ``pid``, ``host``, ``command``) says of its run."""
    if not is_lock_record(record):
        return "PID unknown"
    fields = json.loads(record)
    command = str(fields.get("command", "?"))
    command = command if len(command) <= 200 else command[:197] + "..."
    return f"PID {fields['pid']} on {fields.get('host', '?')}: {command}"


def running_owner(path: str, *, own: str | None = None) -> tuple[str, str] | None:
    """The lock (its path and record) of a living training run, other than the one of the lock
    ``own`` and other than this process, that writes ``path`` (:func:`owner_locks`); None where
    there is none. A lock file a dead run left blocks nothing."""
    for lock in owner_locks(path):
        if own is not None and os.path.abspath(lock) == os.path.abspath(own):
            continue
        record = holder(lock)
        if record is not None and not _this_process(record):
            return lock, record
    return None


def _this_process(record: str) -> bool:
    """Whether a training lock's record is this process's own (a run saving its own files)."""
    if not is_lock_record(record):
        return False
    fields = json.loads(record)
    return fields["pid"] == os.getpid() and fields.get("host") == socket.gethostname()
