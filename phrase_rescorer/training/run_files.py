"""The files of a training run beside ``MODEL_OUT``: their names (``companion_path``: the
``.last.pt`` state and the ``.log``; ``kept_path``: the networks ``--keep-checkpoints`` keeps, as
``MODEL.stepS.pt``; ``lock_path``: the ``.lock`` the run holds while it lives), whether a path is
one of those kept names, and keeping them (``keep``). ``check_not_running``: a file that a living
run writes, refused as the output of another command or run (``average OUT``, another training's
``MODEL_OUT`` or ``--log``)."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
from collections.abc import Callable

from ..output_paths import OutputError
from ..run_lock import holder


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


def check_not_running(path: str, *, own: str | None = None) -> None:
    """Refuse ``path`` (``OutputError``, exit 6) where a living training run, other than the one
    of the lock ``own``, writes it (:func:`owner_locks`), naming that run: its model file, saved
    state, log, lock or a network it keeps would be replaced under it. A lock file a dead run
    left blocks nothing."""
    if path == "-":
        return
    for lock in owner_locks(path):
        if own is not None and os.path.abspath(lock) == os.path.abspath(own):
            continue
        record = holder(lock)
        if record is not None:
            raise OutputError(
                path,
                f"a file of a running training ({described_holder(record)}; lock {lock}): wait for it to end, "
                "or write elsewhere",
                errno.EBUSY,
            )


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


def kept_path(out_path: str, step: int) -> str:
    """``nmt.pt``, 1800 -> ``nmt.step1800.pt``."""
    return companion_path(out_path, f".step{step}.pt")


def is_kept_path(out_path: str, path: str) -> bool:
    """Whether ``path`` (``-`` never), or the file it links to, has a name ``kept_path(out_path, S)``
    gives: the folders compared resolved, the names as written."""
    if path == "-":
        return False

    def resolved(p: str) -> str:  # the folder resolved, the name kept (a link named as the stem moves nothing)
        return os.path.join(os.path.realpath(os.path.dirname(os.path.abspath(p))), os.path.basename(p))

    stem = resolved(companion_path(out_path, ""))
    kept = re.compile(re.escape(os.path.basename(stem)) + r"\.step[1-9][0-9]*\.pt", re.ASCII)
    return any(
        os.path.dirname(name) == os.path.dirname(stem) and kept.fullmatch(os.path.basename(name)) is not None
        for name in (resolved(path), os.path.realpath(path))
    )


def keep(out_path: str, kept: list[int], step: int, n: int, save: Callable[[str], None]) -> list[int]:
    """Save the network of ``step`` (``save(path)``) and remove the files of the steps beyond the
    last ``n``; the steps kept now, oldest first."""
    save(kept_path(out_path, step))
    now = [s for s in kept if s != step] + [step]
    for old in now[:-n]:
        with contextlib.suppress(FileNotFoundError):  # removed by the user: nothing to do
            os.remove(kept_path(out_path, old))
    return now[-n:]
