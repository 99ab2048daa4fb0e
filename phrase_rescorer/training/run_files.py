"""The files of a training run beside ``MODEL_OUT``: ``kept_path``, the networks
``--keep-checkpoints`` keeps (``MODEL.stepS.pt``), whether a path is one of those kept names, and
keeping them (``keep``). The other names of a run's files (``companion_path``: the ``.last.pt``
state and the ``.log``; ``lock_path``: the ``.lock`` the run holds while it lives) are
``run_lock``'s, which ``output_paths.check_not_running`` reads for every command's output."""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Callable

from ..run_lock import companion_path


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
