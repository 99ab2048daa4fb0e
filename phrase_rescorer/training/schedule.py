"""The learning rate of a step: constant at ``--lr`` by default; lowered along a half cosine
from ``--lr`` at step 0 to 0 at step N, where the run ends (``--lr-decay-steps N``: the cosine
schedule of Loshchilov & Hutter 2017, without restarts); or raised linearly to ``--lr`` over
the first W steps and lowered from there with the inverse square root of the step
(``--warmup-steps W``: the schedule of Vaswani et al. 2017, scaled so that its peak is ``--lr``)::

    rate(s) = lr * min(s / W, sqrt(W / s))          s = 1, 2, ...: the update's number

A function of the step alone, so a resumed run follows the schedule of an uninterrupted one
exactly. The two schedules are one or the other."""

from __future__ import annotations

import math

from ..errors import UsageError


def learning_rate(lr: float, step: int, decay_steps: int | None, warmup_steps: int | None = None) -> float:
    """The rate of the update that follows ``step`` finished steps (0: the first update)."""
    if warmup_steps is not None:
        s = step + 1
        return lr * min(s / warmup_steps, math.sqrt(warmup_steps / s))
    if decay_steps is None:
        return lr
    return 0.5 * lr * (1.0 + math.cos(math.pi * min(step, decay_steps) / decay_steps))


def scheduled(decay_steps: int | None, warmup_steps: int | None) -> bool:
    """Whether the rate changes from step to step (else the optimizer keeps the rate it was made with)."""
    return decay_steps is not None or warmup_steps is not None


def check_schedule(max_steps: int | None, decay_steps: int | None, warmup_steps: int | None = None) -> None:
    """Refuse a run that would go on past the end of its schedule, where the rate is 0, and two
    schedules at once."""
    if decay_steps is not None and decay_steps < 1:
        raise UsageError(f"--lr-decay-steps must be at least 1, not {decay_steps}")
    if warmup_steps is not None and warmup_steps < 1:
        raise UsageError(f"--warmup-steps must be at least 1, not {warmup_steps}")
    if decay_steps is not None and warmup_steps is not None:
        raise UsageError("--lr-decay-steps and --warmup-steps are two schedules of the learning rate; choose one")
    if decay_steps is not None and max_steps is not None and max_steps > decay_steps:
        raise UsageError(
            f"--max-steps {max_steps} goes past --lr-decay-steps {decay_steps}, where the learning rate "
            "reaches 0 and the run ends; leave --max-steps out, or make it at most --lr-decay-steps"
        )
