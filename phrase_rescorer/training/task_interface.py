"""What the training loop (``training.loop``) and a kind of training agree on: the ``Task`` a
training command gives the loop (its network, optimizer, batches, loss, validation and files),
the ``LoopSettings`` the loop reads, where a run stands (``RunState``, saved for ``--resume``)
and a validation's outcome (``Validation``). ``training.phrase_task`` (``train``) and ``lm.task``
(``train-lm``, ``train-nmt``) implement a ``Task``; the loop drives either."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch


class LoopSettings(Protocol):
    """The settings the loop reads (``TrainConfig``, ``LMTrainConfig``)."""

    @property
    def seed(self) -> int: ...
    @property
    def lr(self) -> float: ...
    @property
    def max_steps(self) -> int | None: ...
    @property
    def max_time(self) -> float | None: ...
    @property
    def epochs(self) -> int | None: ...
    @property
    def valid_every(self) -> int: ...
    @property
    def patience(self) -> int: ...
    @property
    def log_every(self) -> int: ...
    @property
    def keep_checkpoints(self) -> int: ...
    @property
    def lr_decay_steps(self) -> int | None: ...
    @property
    def warmup_steps(self) -> int | None: ...


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
        self, path: str, check: Callable[[dict[str, Any] | None], None]
    ) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
        """(the ``training_state``, the weights) of a ``.last.pt``: ``check(training_state)``
        first (the loop's check of the run), then the task's own checks."""
