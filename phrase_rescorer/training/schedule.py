"""The learning rate of a step (``--lr-decay-steps``): constant at ``--lr`` by default, or lowered
along a half cosine from ``--lr`` at step 0 to 0 at step N, where the run ends (the cosine
schedule of Loshchilov & Hutter 2017, without restarts). A function of the step alone, so a
resumed run follows the schedule of an uninterrupted one exactly."""

from __future__ import annotations

import math

from ..errors import UsageError


def learning_rate(lr: float, step: int, decay_steps: int | None) -> float:
    """The rate of the update that follows ``step`` finished steps (0: the first update)."""
    if decay_steps is None:
        return lr
    return 0.5 * lr * (1.0 + math.cos(math.pi * min(step, decay_steps) / decay_steps))


def check_schedule(max_steps: int | None, decay_steps: int | None) -> None:
    """Refuse a run that would go on past the end of its schedule, where the rate is 0."""
    if decay_steps is not None and decay_steps < 1:
        raise UsageError(f"--lr-decay-steps must be at least 1, not {decay_steps}")
    if decay_steps is not None and max_steps is not None and max_steps > decay_steps:
        raise UsageError(
            f"--max-steps {max_steps} goes past --lr-decay-steps {decay_steps}, where the learning rate "
            "reaches 0 and the run ends; leave --max-steps out, or make it at most --lr-decay-steps"
        )
