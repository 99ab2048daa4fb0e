"""The trainer's log: one JSON object per line.

Two kinds of records are read, everything else (other events, unknown keys) is ignored::

    {"event": "train", "step": ..., "epoch": ..., "loss": ..., "pairs_per_s": ..., "elapsed": ...}
    {"event": "valid", "step": ..., "epoch": ..., "valid_token_ppl": ..., "valid_mean_logp": ...,
     "unigram_token_ppl": ..., "elapsed": ..., "best": ...}

A line that is not JSON (such as the half-written last line of a run still in progress) is
skipped and counted; a log with no usable record at all is an error.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import TypeGuard


class TrainingLogError(ValueError):
    """A log that cannot be plotted; the message names the file."""


@dataclass
class Series:
    steps: list[float] = field(default_factory=list)
    values: list[float] = field(default_factory=list)

    def add(self, record: dict, key: str) -> None:
        step, value = record.get("step"), record.get(key)
        if _number(step) and _number(value):
            self.steps.append(float(step))
            self.values.append(float(value))

    def __len__(self) -> int:
        return len(self.steps)


@dataclass
class TrainingLog:
    path: str
    loss: Series = field(default_factory=Series)
    valid_ppl: Series = field(default_factory=Series)
    unigram_ppl: Series = field(default_factory=Series)
    skipped_lines: int = 0


def _number(x: object) -> TypeGuard[float]:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def read_training_log(path: str) -> TrainingLog:
    log = TrainingLog(path)
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                record = None
            if not isinstance(record, dict):
                log.skipped_lines += 1
            elif record.get("event") == "train":
                log.loss.add(record, "loss")
            elif record.get("event") == "valid":
                log.valid_ppl.add(record, "valid_token_ppl")
                log.unigram_ppl.add(record, "unigram_token_ppl")
    if not log.loss and not log.valid_ppl:
        raise TrainingLogError(
            f"{path}: no training or validation records "
            '(JSON lines with "event": "train" or "valid")'
        )
    return log
