"""The learning rate of a step: constant at ``--lr`` by default; lowered along a half cosine
from ``--lr`` at step 0 to 0 at step N, where the run ends (``--lr-decay-steps N``: the cosine
schedule of Loshchilov & Hutter 2017, without restarts), or held at ``--lr`` up to step S and
lowered along the half cosine from there (``--lr-decay-start S``: a cool-down at the end of a
run, as in the warm-up/stable/decay schedules of Hu et al. 2024); or raised linearly to ``--lr``
over the first W steps and lowered from there with the inverse square root of the step
(``--warmup-steps W``: the schedule of Vaswani et al. 2017, scaled so that its peak is ``--lr``).
A cool-down may also be given in time (``--lr-decay-time T`` with ``--max-time``): the loop turns it
into S and N when the last T seconds of the run begin, at the rate of the T seconds before
(``RecentPace``, ``cool_down_steps``). With a warm-up, the cosine multiplies the warm-up's rate
(a warmed-up run cooled down at its end: ``--warmup-steps W`` with ``--lr-decay-time T``)::

    base(t) = lr                                             without a warm-up
    base(t) = lr * min(s / W, sqrt(W / s))                   s = t + 1: the update's number
    rate(t) = base(t)                                        t < S
    rate(t) = base(t)/2 * (1 + cos(pi * (t - S) / (N - S)))  S <= t <= N   (t finished steps)

A function of the step alone, so a resumed run follows the schedule of an uninterrupted one
exactly; ``same_rates`` says whether two schedules gave the steps a run has taken the same
rates (a run at a constant rate, or warmed up, may be resumed with a cool-down that starts where
it stands)."""

from __future__ import annotations

import math
from collections import deque
from typing import Any

from ..errors import UsageError


def learning_rate(
    lr: float, step: int, decay_steps: int | None, warmup_steps: int | None = None, decay_start: int = 0
) -> float:
    """The rate of the update that follows ``step`` finished steps (0: the first update)."""
    rate = lr
    if warmup_steps is not None:
        s = step + 1
        rate = lr * min(s / warmup_steps, math.sqrt(warmup_steps / s))
    if decay_steps is None or step < decay_start:
        return rate
    done = min(step, decay_steps) - decay_start
    return 0.5 * rate * (1.0 + math.cos(math.pi * done / (decay_steps - decay_start)))


#: The settings of a run's schedule, as its record names them (``loop.Loop.record``, ``same_run``).
SCHEDULE_KEYS = ("lr_decay_steps", "warmup_steps", "lr_decay_start")


def same_rates(a: dict[str, Any], b: dict[str, Any], steps: int) -> bool:
    """Whether the schedules ``a`` and ``b`` (``lr_decay_steps``, ``warmup_steps``,
    ``lr_decay_start`` as a run records them) give each of the first ``steps`` updates the same
    rate: exactly, as the factor of the same ``--lr``."""

    def rate(schedule: dict[str, Any], t: int) -> float:
        decay, warmup = schedule.get("lr_decay_steps"), schedule.get("warmup_steps")
        return learning_rate(1.0, t, decay, warmup, schedule.get("lr_decay_start") or 0)

    if [a.get(k) or None for k in SCHEDULE_KEYS] == [b.get(k) or None for k in SCHEDULE_KEYS]:
        return True  # one schedule: no step to compare
    return all(rate(a, t) == rate(b, t) for t in range(steps))


def scheduled(decay_steps: int | None, warmup_steps: int | None) -> bool:
    """Whether the rate changes from step to step (else the optimizer keeps the rate it was made with)."""
    return decay_steps is not None or warmup_steps is not None


class RecentPace:
    """The steps an invocation took in its last ``window`` seconds (all of it while it is younger),
    validations included: the rate a cool-down in time plans its steps with. The last seconds
    before the cool-down predict its own better than the whole run: a machine whose load changed
    (another job ended, or began) runs the cool-down at its new rate."""

    def __init__(self, window: float) -> None:
        self.window = window
        self.spacing = window / 1000  # about 1,000 marks, whatever the steps per second
        self.marks: deque[tuple[float, int]] = deque([(0.0, 0)])  # (seconds, steps) into the invocation

    def mark(self, elapsed: float, steps_done: int) -> None:
        """Record that ``steps_done`` steps were done ``elapsed`` seconds into the invocation. Marks
        are kept ``window``/1,000 seconds apart or more (a newer one closer to the one before
        replaces the last), and of those older than the window's start only the last."""
        if len(self.marks) > 1 and elapsed - self.marks[-2][0] < self.spacing:
            self.marks[-1] = (elapsed, steps_done)
        else:
            self.marks.append((elapsed, steps_done))
        while len(self.marks) > 2 and self.marks[1][0] <= elapsed - self.window:
            self.marks.popleft()

    def span(self) -> tuple[int, float]:
        """The steps and seconds from the window's start (the last mark at or before it, up to
        ``window``/1,000 seconds earlier; the invocation's start while it is younger) to the last mark."""
        (first_seconds, first_steps), (seconds, steps) = self.marks[0], self.marks[-1]
        return steps - first_steps, seconds - first_seconds


def cool_down_steps(step: int, seconds: float, steps_done: int, elapsed: float, max_steps: int | None) -> int:
    """The step where a cool-down that starts at ``step`` and lasts ``seconds`` ends (its
    ``--lr-decay-steps``), at the rate of ``steps_done`` steps in ``elapsed`` seconds (the loop
    passes ``RecentPace.span``): at least one step, at most ``max_steps``."""
    end = step + max(1, round(seconds * steps_done / max(elapsed, 1e-9)))
    return end if max_steps is None else min(end, max_steps)


def check_schedule(
    max_steps: int | None,
    decay_steps: int | None,
    warmup_steps: int | None = None,
    decay_start: int = 0,
    decay_time: float | None = None,
    max_time: float | None = None,
) -> None:
    """Refuse a run that would go on past the end of its schedule, where the rate is 0, a cool-down
    that starts at or after its end or without one, a cool-down in time without a time limit or
    as long as it."""
    if decay_time is not None:
        if max_time is None:
            raise UsageError("--lr-decay-time T cools down the last T seconds of --max-time; give --max-time")
        if not 0 < decay_time < max_time:
            raise UsageError(f"--lr-decay-time {decay_time:g} must be above 0 and below --max-time {max_time:g}")
        if decay_steps is not None or decay_start:
            raise UsageError(
                "--lr-decay-time sets the cool-down's steps itself; not with --lr-decay-steps or --lr-decay-start"
            )
    if decay_steps is not None and decay_steps < 1:
        raise UsageError(f"--lr-decay-steps must be at least 1, not {decay_steps}")
    if decay_start < 0:
        raise UsageError(f"--lr-decay-start must be at least 0, not {decay_start}")
    if decay_start and decay_steps is None:
        raise UsageError("--lr-decay-start S needs --lr-decay-steps N, the step where the rate reaches 0")
    if decay_start and decay_steps is not None and decay_start >= decay_steps:
        raise UsageError(
            f"--lr-decay-start {decay_start} is not before --lr-decay-steps {decay_steps}, where the rate reaches 0"
        )
    if warmup_steps is not None and warmup_steps < 1:
        raise UsageError(f"--warmup-steps must be at least 1, not {warmup_steps}")
    if decay_steps is not None and max_steps is not None and max_steps > decay_steps:
        raise UsageError(
            f"--max-steps {max_steps} goes past --lr-decay-steps {decay_steps}, where the learning rate "
            "reaches 0 and the run ends; leave --max-steps out, or make it at most --lr-decay-steps"
        )
