"""An experiment's ``--out`` directory: the path checked, one lock, and what a restart must find unchanged.

* **The path.** An empty ``--out``, a symbolic link to nothing and a non-directory are refused,
  naming the path, before anything is done.
* **One lock.** A run holds an exclusive ``flock`` on ``OUT/.experiment.lock`` (``run_lock``; the
  file records its PID) from before it reads or writes anything in the directory until it ends; the kernel drops
  the lock with the process, however it ends. A second run on the same ``--out`` is refused
  (exit 6) and touches nothing: it would delete the first one's live MERT working directory.
* **Fingerprints.** A restart continues the runs of the first start, so the files those runs
  used must not have changed: the SHA-256 of the dev and test files, of the model file and of
  the moses.ini itself, and the size and modification time (ns) of every file the ini names
  (phrase and reordering tables, language models: hashing gigabytes on every restart would
  cost minutes; a table rewritten in place changes its mtime). Those files are hashed once,
  at the first start (seconds for gigabytes), and again only where the modification time
  alone changed: a copy that did not keep the times (``cp`` without ``-p``, data restored
  from a backup) has the same content, and the restart goes on. Any other difference is
  refused, naming the file.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping

from .. import checksums
from ..errors import EXIT_OS, HostError
from ..moses.ini_paths import ini_files
from ..run_lock import LockHeld, held_lock
from .systems import ExperimentError

LOCK_NAME = ".experiment.lock"


def check_out_dir(path: str) -> None:
    """Refuse an ``--out`` that cannot be the experiment's directory (exit 6), naming it."""
    if path == "":
        raise ExperimentError("--out '': an empty path names no directory", EXIT_OS)
    if os.path.islink(path) and not os.path.exists(path):
        raise ExperimentError(
            f"{path}: --out is a symbolic link to {os.readlink(path)!r}, which does not exist", EXIT_OS
        )
    if os.path.exists(path) and not os.path.isdir(path):
        raise ExperimentError(f"{path}: --out exists and is not a directory", EXIT_OS)


@contextlib.contextmanager
def locked_out_dir(path: str) -> Iterator[None]:
    """Create ``path`` if needed and hold its lock while the block runs (``run_lock``); refuse
    (exit 6) when another process holds it."""
    check_out_dir(path)
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as e:
        raise ExperimentError(f"{path}: cannot use it as --out ({e.strerror})", EXIT_OS) from None
    with contextlib.ExitStack() as held:
        try:
            held.enter_context(held_lock(os.path.join(path, LOCK_NAME), f"{os.getpid()}\n"))
        except LockHeld as e:
            raise ExperimentError(
                f"{path}: another experiment (PID {e.holder[:32] or '?'}) is running in this directory; wait "
                "for it to end, or give another --out",
                EXIT_OS,
            ) from None
        except OSError as e:
            raise ExperimentError(f"{path}: cannot lock {LOCK_NAME} ({e.strerror})", EXIT_OS) from None
        yield


def sha256_of(path: str) -> str:
    """``checksums.sha256_of``, a file that cannot be read refused as the experiment's error (exit 6)."""
    try:
        return checksums.sha256_of(path)
    except HostError as e:
        raise ExperimentError(str(e), EXIT_OS) from None


def content_sha256(path: str) -> str:
    """``checksums.content_sha256`` (a file, or a directory's files), a file that cannot be read
    refused as the experiment's error (exit 6)."""
    try:
        return checksums.content_sha256(path)
    except HostError as e:
        raise ExperimentError(str(e), EXIT_OS) from None


def fingerprints(
    ini: str,
    dev: tuple[str, str],
    test: tuple[str, str],
    raw_reference: str | None,
    model: str | None,
    inverse_model: str | None = None,
) -> dict:
    """What a restart must find unchanged (module docstring); ``inverse_model`` the second
    column's network (recorded only when given, as experiments before it had none). The
    sentence-level models are not among them: each decoder run records the ones its lists were
    scored with (``reranked.score_lists``)."""
    return {
        "ini": sha256_of(ini),
        "ini_files": ini_files(ini),
        "dev": [sha256_of(p) for p in dev],
        "test": [sha256_of(p) for p in test],
        "test_raw_reference": sha256_of(raw_reference) if raw_reference else None,
        "model": sha256_of(model) if model else None,
        **({"inverse_model": sha256_of(inverse_model)} if inverse_model else {}),
    }


def with_contents(prints: dict) -> dict:
    """``fingerprints`` as the first start records them: each of the ini's files with its
    content's SHA-256 appended, ``[size, mtime_ns, sha256]``."""
    return {**prints, "ini_files": {p: [*v[:2], content_sha256(p)] for p, v in prints["ini_files"].items()}}


def retimed(old: Mapping[str, object], new: Mapping[str, list]) -> dict[str, list]:
    """The ini's files whose modification time changed since ``old`` was recorded and whose
    content did not (``checksums.same_content``), with their entries as ``old`` should now hold
    them. Entries recorded without a hash cannot be rechecked."""
    found = {}
    for p, now in new.items():
        before = old.get(p)
        if not (isinstance(before, list) and len(before) == 3 and before[:2] != now[:2]):
            continue
        with contextlib.suppress(HostError):  # unreadable now: left to changed_files
            if checksums.same_content(p, now[0], before[0], before[2]):
                found[p] = [now[0], now[1], before[2]]
    return found


def _stat(entries: Mapping[str, object], path: str) -> object:
    """The size and modification time of one of ``ini_files``' entries, without its hash."""
    entry = entries.get(path)
    return entry[:2] if isinstance(entry, list) else entry


def changed_files(old: dict, new: dict, names: Mapping[str, object]) -> list[str]:
    """The files whose fingerprints differ between ``old`` and ``new``; ``names`` holds the
    paths under the same keys (a path, or a list of paths for a list of fingerprints). The
    ini's files are compared by size and modification time (a hash recorded beside is
    ``retimed``'s)."""
    changed = []
    for key, value in new.items():
        before = old.get(key)
        if key == "ini_files":
            before = before if isinstance(before, dict) else {}
            changed += [p for p in sorted(set(before) | set(value)) if _stat(before, p) != _stat(value, p)]
        elif isinstance(value, list):
            before = before if isinstance(before, list) and len(before) == len(value) else [None] * len(value)
            paths = names[key]
            assert isinstance(paths, tuple | list)
            changed += [str(p) for p, a, b in zip(paths, before, value, strict=True) if a != b]
        elif before != value:
            changed.append(str(names[key]))
    return changed
