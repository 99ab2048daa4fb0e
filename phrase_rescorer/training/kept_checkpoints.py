"""The networks a run keeps for averaging (``train --keep-checkpoints N``): the network of each of
its last N validations, as ``MODEL_OUT`` with ``.step<S>.pt`` (``nmt.step1800.pt``), besides the
best (``MODEL_OUT``) and the latest state (``.last.pt``).

The run records the steps it keeps in its resumable state (``RunState.kept``), oldest first,
and removes the file of a step that falls out of the last N. ``average --average-last N
MODEL_OUT`` reads that record from ``MODEL_OUT``'s ``.last.pt`` (``last_kept``): only this
run's files, never a ``.step*.pt`` left by an earlier run to the same name.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable

from ..model.checkpoint import load_checkpoint
from .run_settings import TrainingError, companion_path


def kept_path(out_path: str, step: int) -> str:
    """``nmt.pt``, 1800 -> ``nmt.step1800.pt``."""
    return companion_path(out_path, f".step{step}.pt")


def keep(out_path: str, kept: list[int], step: int, n: int, save: Callable[[str], None]) -> list[int]:
    """Save the network of ``step`` (``save(path)``) and remove the files of the steps beyond the
    last ``n``; the steps kept now, oldest first."""
    save(kept_path(out_path, step))
    now = [s for s in kept if s != step] + [step]
    for old in now[:-n]:
        with contextlib.suppress(FileNotFoundError):  # removed by the user: nothing to do
            os.remove(kept_path(out_path, old))
    return now[-n:]


def last_kept(out_path: str, n: int) -> list[str]:
    """The files of the last ``n`` networks the run writing ``out_path`` kept, oldest first."""
    last = companion_path(out_path, ".last.pt")
    state = load_checkpoint(last).training_state
    kept = list(((state or {}).get("progress") or {}).get("kept") or [])
    if len(kept) < n:
        raise TrainingError(
            f"{last}: the run kept {len(kept)} network(s), fewer than the {n} to average "
            "(train with --keep-checkpoints N, N at least as many)"
        )
    return [kept_path(out_path, step) for step in kept[-n:]]
