"""The lock a run holds for its life (``run_lock``): one holder at a time, the holder's record told
to the refused one, a dead holder's file taken over, the file removed on the way out where asked
(also when the block fails), never through a link, and never two holders of one name when a
holder removes the file while another is taking it."""

from __future__ import annotations

import errno
import fcntl
import os
from pathlib import Path

import pytest

from phrase_rescorer import run_lock
from phrase_rescorer.run_lock import LockHeld, NotALock, held_lock


def test_one_holder_at_a_time_and_the_refused_one_is_told_who(tmp_path: Path) -> None:
    lock = tmp_path / "m.lock"
    with held_lock(str(lock), "first\n", remove=True):
        assert lock.read_text() == "first\n"
        with pytest.raises(LockHeld) as held, held_lock(str(lock), "second\n", remove=True):
            pass
        assert held.value.holder == "first" and held.value.path == str(lock)
        assert lock.read_text() == "first\n"
    assert not lock.exists()
    with held_lock(str(lock), "kept\n"):  # remove=False: the file stays (an experiment's)
        pass
    assert lock.read_text() == "kept\n"
    with held_lock(str(lock), "next\n"):  # a lock file nobody holds: taken, its record replaced
        assert lock.read_text() == "next\n"


def test_given_back_and_removed_when_the_block_fails(tmp_path: Path) -> None:
    lock = tmp_path / "m.lock"
    with pytest.raises(KeyboardInterrupt), held_lock(str(lock), "r", remove=True):
        raise KeyboardInterrupt
    assert not lock.exists()


def test_a_link_is_never_followed(tmp_path: Path) -> None:
    target = tmp_path / "precious"
    target.write_text("data\n")
    lock = tmp_path / "m.lock"
    lock.symlink_to(target)
    with pytest.raises(OSError) as e, held_lock(str(lock), "r", remove=True):
        pass
    assert e.value.errno == errno.ELOOP
    assert target.read_text() == "data\n" and lock.is_symlink()


def test_a_file_of_another_kind_is_refused_untouched(tmp_path: Path) -> None:
    lock = tmp_path / "m.lock"
    lock.write_text("notes\n")
    with pytest.raises(NotALock), held_lock(str(lock), "r", remove=True, ours=lambda text: text.startswith("{")):
        pass
    assert lock.read_text() == "notes\n"


def test_a_lock_removed_while_it_is_taken_is_taken_again_at_its_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The holder gives the lock back (and removes the file) between this run's open and its
    flock: this run must hold the file at the name, not the removed one."""
    lock = tmp_path / "m.lock"
    lock.write_text("the holder's\n")
    real_flock = fcntl.flock
    removed: list[int] = []

    def flock_after_the_holder_left(fd: int, operation: int) -> None:
        if not removed:
            removed.append(os.fstat(fd).st_ino)
            lock.unlink()  # the holder's way out
        real_flock(fd, operation)

    monkeypatch.setattr(run_lock.fcntl, "flock", flock_after_the_holder_left)
    with held_lock(str(lock), "mine\n", remove=True):
        assert lock.read_text() == "mine\n" and removed
        monkeypatch.setattr(run_lock.fcntl, "flock", real_flock)
        with pytest.raises(LockHeld), held_lock(str(lock), "third\n", remove=True):
            pass
    assert not lock.exists()
