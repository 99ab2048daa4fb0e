"""The training log: JSON lines, one object per event, written by the training loop of every
training command (``loop.fit``) and read by plots.

Events (every object has ``"event"``, ``"step"`` and ``"epoch"``; ``elapsed`` is wall seconds,
continued from the log's last value when a run is resumed into the same log)::

    {"event": "start", "step", "epoch", "resumed": bool, "argv", ...}
        and what the task trains on: "train_pairs", "skipped_long", "valid_pairs" and
        "label_smoothing" (train, train-nmt) or "train_tokens", "valid_tokens" (train-lm)
    {"event": "train", "step", "epoch", "loss", "pairs_per_s" (train-lm: "ngrams_per_s"), "elapsed"}
        every ``log_every`` steps, and at the end of a run for the steps since the last one;
        ``loss`` is the mean loss per pair (-log p(target|source); label-smoothed with
        --label-smoothing) or per n-gram over the steps since the previous train event; with
        --lr-decay-steps also "lr", the learning rate of the event's last step
    {"event": "valid", "step", "epoch", "valid_token_ppl", "elapsed", "best": bool, ...}
        held-out figures (null when there are no held-out pairs), with "valid_mean_logp" and
        "unigram_token_ppl" (train, train-nmt) or "valid_ppl_with_unk" (train-lm); with
        train-nmt --valid-bleu N also "valid_bleu" (tokenized BLEU of the first N held-out pairs
        translated greedily) and "valid_bleu_pairs"; ``best``: written to MODEL_OUT
    {"event": "kenlm", "step", "epoch", "text", "kenlm_ppl", "kenlm_ppl_with_oovs", "lm"}
        train-lm --kenlm: the n-gram LM's perplexity of the held-out text (OOVs left out, as
        ``valid_token_ppl`` leaves out the words outside the shortlist)
    {"event": "cool_down", "step", "epoch", "lr_decay_steps", "steps_per_s", "elapsed"}
        --lr-decay-time: the cool-down begins at ``step`` and reaches 0 at ``lr_decay_steps``,
        set from the rate of the T seconds before (``steps_per_s``)
    {"event": "end", "step", "epoch", "reason", "elapsed"}
        reason: max_steps, max_time, epochs, lr_decay_steps, patience or interrupted

A resumed run appends to the log, so one file holds the whole history; readers should ignore
event kinds they do not know.
"""

from __future__ import annotations

import contextlib
import json
import math
from dataclasses import dataclass, field
from typing import Any, TypeGuard

from ..errors import InputError


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
    return read_log_counting(path)[0]


def read_log_counting(path: str) -> tuple[list[dict[str, Any]], int]:
    """The events of a log and how many non-empty lines were not JSON event objects."""
    events: list[dict[str, Any]] = []
    skipped = 0
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            if not line.strip():
                continue
            try:
                event = json.loads(line)
            except ValueError:
                event = None
            if isinstance(event, dict) and "event" in event:
                events.append(event)
            else:
                skipped += 1
    return events, skipped


class TrainingLogError(InputError):
    """A log that cannot be plotted; the message names the file."""


@dataclass
class Series:
    """One curve: (step, minutes, value) points of the events that carry a finite value
    (``minutes`` from ``elapsed``; NaN where an event has none)."""

    steps: list[float] = field(default_factory=list)
    values: list[float] = field(default_factory=list)
    minutes: list[float] = field(default_factory=list)

    def add(self, record: dict, key: str) -> None:
        step, value, elapsed = record.get("step"), record.get(key), record.get("elapsed")
        if _number(step) and _number(value):
            self.steps.append(float(step))
            self.values.append(float(value))
            self.minutes.append(float(elapsed) / 60 if _number(elapsed) else math.nan)

    def __len__(self) -> int:
        return len(self.steps)


@dataclass
class TrainingCurves:
    path: str
    loss: Series = field(default_factory=Series)
    valid_ppl: Series = field(default_factory=Series)
    unigram_ppl: Series = field(default_factory=Series)
    #: The greedy BLEU of held-out pairs (train-nmt --valid-bleu), when the run logged it
    valid_bleu: Series = field(default_factory=Series)
    skipped_lines: int = 0
    #: "sentence pairs" (train, train-nmt: the loss is -ln p per pair) or "text" (train-lm:
    #: -ln p per word), from the start event
    kind: str = "sentence pairs"
    #: KenLM's perplexity of the held-out text, when train-lm --kenlm recorded it
    kenlm_ppl: float | None = None
    #: The run's --label-smoothing (its logged loss is the smoothed one), from the start event
    label_smoothing: float = 0.0


def _number(x: object) -> TypeGuard[float]:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _label_smoothing(start: dict) -> float:
    """A start event's --label-smoothing: its ``label_smoothing``, else (logs written before it
    was recorded) the value on its command line; 0 when neither says."""
    if _number(start.get("label_smoothing")):
        return float(start["label_smoothing"])
    argv = start.get("argv")
    if isinstance(argv, list):
        for i, arg in enumerate(argv):
            value = arg.partition("=")[2] if str(arg).startswith("--label-smoothing=") else None
            if arg == "--label-smoothing" and i + 1 < len(argv):
                value = argv[i + 1]
            if value is not None:
                with contextlib.suppress(TypeError, ValueError):
                    return float(value)
    return 0.0


def read_training_curves(path: str) -> TrainingCurves:
    """The loss and perplexity curves of a log of any training command (for ``plot-log``), and
    the held-out BLEU where the run logged it; other events are ignored."""
    events, skipped = read_log_counting(path)
    curves = TrainingCurves(path, skipped_lines=skipped)
    for record in events:
        if record["event"] == "start" and "train_tokens" in record:
            curves.kind = "text"
        elif record["event"] == "start":
            curves.label_smoothing = _label_smoothing(record)
        elif record["event"] == "train":
            curves.loss.add(record, "loss")
        elif record["event"] == "valid":
            curves.valid_ppl.add(record, "valid_token_ppl")
            curves.unigram_ppl.add(record, "unigram_token_ppl")
            curves.valid_bleu.add(record, "valid_bleu")
        elif record["event"] == "kenlm" and _number(record.get("kenlm_ppl")):
            curves.kenlm_ppl = float(record["kenlm_ppl"])
    if not curves.loss and not curves.valid_ppl:
        raise TrainingLogError(
            f'{path}: no training or validation records (JSON lines with "event": "train" or "valid")'
        )
    return curves
