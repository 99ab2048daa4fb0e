"""The networks a run kept for averaging, read back (``train --keep-checkpoints N``): the network of each of
its last N validations, as ``MODEL_OUT`` with ``.step<S>.pt`` (``nmt.step1800.pt``), besides the
best (``MODEL_OUT``) and the latest state (``.last.pt``).

The run (``run_files.keep``) records the steps it keeps in its resumable state (``RunState.kept``),
oldest first, and removes the file of a step that falls out of the last N. ``average --average-last N
MODEL_OUT`` reads that record from ``MODEL_OUT``'s ``.last.pt`` (``last_kept``): only this
run's files, never a ``.step*.pt`` left by an earlier run to the same name.
"""

from __future__ import annotations

from ..model.kinds import NETWORKS, check_kind
from .loop import TrainingError
from .run_files import companion_path, kept_path


def last_kept(out_path: str, n: int) -> list[str]:
    """The files of the last ``n`` networks the run writing ``out_path`` kept, oldest first."""
    last = companion_path(out_path, ".last.pt")
    state = check_kind(last, "phrase-rescorer average --average-last", NETWORKS).payload.get("training_state")
    kept = list(((state if isinstance(state, dict) else {}).get("progress") or {}).get("kept") or [])
    if len(kept) < n:
        raise TrainingError(
            f"{last}: the run kept {len(kept)} network(s), fewer than the {n} to average "
            "(train with --keep-checkpoints N, N at least as many)"
        )
    return [kept_path(out_path, step) for step in kept[-n:]]
