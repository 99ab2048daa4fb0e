"""The training log: JSON lines, one object per event, written by ``train`` and read by plots.

Events (every object has ``"event"``, ``"step"`` and ``"epoch"``; ``elapsed`` is wall seconds,
continued from the log's last value when a run is resumed into the same log)::

    {"event": "start", "step", "epoch", "resumed": bool, "train_pairs", "skipped_long",
     "valid_pairs", "argv"}
    {"event": "train", "step", "epoch", "loss", "pairs_per_s", "elapsed"}
        every ``log_every`` steps; ``loss`` is the mean per-pair loss (-log p(f|e)) over the
        steps since the previous train event of the same run
    {"event": "valid", "step", "epoch", "valid_token_ppl", "valid_mean_logp",
     "unigram_token_ppl", "elapsed", "best": bool}
        held-out figures (null when there are no held-out pairs); ``best``: written to MODEL_OUT
    {"event": "end", "step", "epoch", "reason", "elapsed"}
        reason: max_steps, max_time, epochs, patience or interrupted

A resumed run appends to the log, so one file holds the whole history; readers should ignore
event kinds they do not know.
"""

from __future__ import annotations

import contextlib
import json
from typing import Any

EVENTS = ("start", "train", "valid", "end")


class EventLog:
    """Writes events, one flushed line each; on ``append`` continues ``elapsed`` from the file."""

    def __init__(self, path: str, append: bool):
        self.path = path
        self.previous_elapsed = 0.0
        if append:
            with contextlib.suppress(OSError):
                for event in read_log(path):
                    self.previous_elapsed = float(event.get("elapsed", self.previous_elapsed))
        self.file = open(path, "a" if append else "w", encoding="utf-8", newline="\n")  # noqa: SIM115

    def write(self, event: dict[str, Any]) -> None:
        self.file.write(json.dumps(event) + "\n")
        self.file.flush()

    def close(self) -> None:
        self.file.close()

    def __enter__(self) -> EventLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_log(path: str) -> list[dict[str, Any]]:
    """The events of a log, in order; a torn last line (a run killed mid-write) is skipped."""
    events = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            with contextlib.suppress(ValueError):
                event = json.loads(line)
                if isinstance(event, dict) and "event" in event:
                    events.append(event)
    return events
