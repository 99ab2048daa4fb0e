"""What the training loop (``training.loop``) and a kind of training agree on: the ``Task`` a
training command gives the loop (its network, optimizer, batches, loss, validation and files),
the ``LoopConfig`` the loop reads, where a run stands (``RunState``, saved for ``--resume``)
and a validation's outcome (``Validation``). ``training.phrase_task`` (``train``) and ``lm.task``
(``train-lm``, ``train-nmt``) implement a ``Task``; the loop drives either."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch

from ..model.kinds import ModelFile
from .schedule import check_schedule


@dataclass(frozen=True)
class LoopConfig:
    """The settings the loop reads, part of every training command's config (``TrainConfig.loop``,
    ``LMTrainConfig.loop``) with the command's defaults, and one option each (``cli.loop_options``)."""

    max_steps: int | None = None  # total steps (counted across resumes)
    max_time: float | None = None  # wall seconds of this invocation (a resumed run counts its own)
    epochs: int | None = None  # total passes over the training data
    valid_every: int = 500  # steps between validations
    patience: int = 10  # scheduled validations without improvement before stopping; 0 = off
    seed: int = 1234  # initialisation and data order
    lr: float = 1.0  # the optimizer's learning rate
    lr_decay_steps: int | None = None  # the cosine schedule's length (schedule.py); None: constant lr
    warmup_steps: int | None = None  # the inverse-square-root schedule's warm-up (schedule.py)
    lr_decay_start: int = 0  # the step where the cosine starts (schedule.py); the rate is lr before it
    lr_decay_time: float | None = None  # a cool-down over the last seconds of max_time (loop.py sets its steps)
    log_every: int = 50  # steps between train log events
    keep_checkpoints: int = 0  # the networks of the last N validations kept (kept_checkpoints.py)

    def __post_init__(self) -> None:
        check_schedule(
            self.max_steps,
            self.lr_decay_steps,
            self.warmup_steps,
            self.lr_decay_start,
            self.lr_decay_time,
            self.max_time,
        )


@dataclass
class RunState:
    """Where a run stands (saved in the resumable checkpoint as ``progress``)."""

    step: int = 0
    epoch: int = 0
    position: int = 0  # next batch of the epoch plan
    best_logp: float | None = None  # best held-out sum of log p, any validation
    best: dict | None = None  # its figures (what MODEL_OUT holds)
    scheduled_best_logp: float | None = None  # best over scheduled validations (patience)
    bad_validations: int = 0
    last_valid_step: int = -1
    kept: list[int] = field(default_factory=list)  # steps of the networks kept (kept_checkpoints)
    run_id: str | None = None  # the run's identity (``same_run.run_id``), in every model file it writes


@dataclass
class Validation:
    """A validation's outcome: ``logp`` the held-out sum of log p (None: nothing held out),
    ``figures`` what the model file records of it, ``event`` the log event's own fields."""

    logp: float | None
    figures: dict[str, Any] | None
    event: dict[str, Any]


class Trainable(Protocol):
    """What the loop asks of a network."""

    def train(self, mode: bool = True) -> Any: ...
    def eval(self) -> Any: ...
    def load_state_dict(self, *args: Any, **kwargs: Any) -> Any: ...


class Task(Protocol):
    """What one kind of training gives the loop: its ``network`` (``train()`` for steps, ``eval()``
    for validations and saving), ``optimizer``, ``clip_norm`` (None: no clipping) and ``unit``
    (what a batch holds, for the log: "pairs", "ngrams")."""

    @property
    def network(self) -> Trainable: ...
    @property
    def optimizer(self) -> torch.optim.Optimizer: ...
    @property
    def clip_norm(self) -> float | None: ...
    @property
    def unit(self) -> str: ...

    def record(self) -> dict[str, Any]:
        """What ``--resume`` must find unchanged: ``table_hash`` (the data), ``model`` (sizes),
        and the settings (``seed``, ``lr``, ``batch_size`` of a global batch, ...)."""

    def start_event(self) -> dict[str, Any]: ...

    def plan(self, epoch: int) -> Sequence[Any]:
        """The global batches of an epoch, in order (the same for every process)."""

    def loss(self, batch: Any) -> torch.Tensor:
        """This process's share of the batch's loss over the global batch's size."""

    def validate(self) -> Validation: ...

    def save(self, path: str, progress: RunState, training_state: dict[str, Any] | None) -> None:
        """Write a model file (rank 0 only calls it)."""

    def read_last(
        self, last: str | ModelFile, check: Callable[[dict[str, Any] | None], None]
    ) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
        """(the ``training_state``, the weights) of a ``.last.pt`` (its path, or the file read
        already): ``check(training_state)`` first (the loop's check of the run), then the task's
        own checks."""
