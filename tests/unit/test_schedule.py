"""The learning-rate schedules (``--lr-decay-steps``, ``--warmup-steps``): the half cosine is torch's
``CosineAnnealingLR`` (to 0, without restarts), the refusals of a run that would go past its end,
and the rate the optimizer holds at every step of a real run."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from phrase_rescorer.data.pairs import load_pairs
from phrase_rescorer.errors import UsageError
from phrase_rescorer.model.cho2014 import ModelConfig
from phrase_rescorer.parallel.distributed import Group
from phrase_rescorer.training.loop import fit
from phrase_rescorer.training.phrase_task import PhraseTask
from phrase_rescorer.training.run_settings import TrainConfig, prepare_data
from phrase_rescorer.training.schedule import RecentPace, check_schedule, cool_down_steps, learning_rate, same_rates
from phrase_rescorer.training.task_interface import LoopConfig
from tests.helpers.synthetic import mapping_table

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.mark.parametrize("steps", [1, 7, 5000])
def test_the_cosine_is_torchs_cosine_annealing(steps: int) -> None:
    """torch's scheduler sets the rate of the update after ``t`` scheduler steps; ours is asked
    with ``t`` finished steps. Equal within 1e-12 of --lr (torch's form is recursive)."""
    lr = 1e-3
    opt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=lr)
    torch_schedule = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=steps, eta_min=0.0)
    for t in range(steps + 1):
        assert abs(opt.param_groups[0]["lr"] - learning_rate(lr, t, steps)) <= 1e-12 * lr, t
        opt.step()
        torch_schedule.step()


def test_the_ends_and_the_middle_of_the_schedule() -> None:
    assert learning_rate(0.5, 0, 100) == 0.5
    assert learning_rate(0.5, 50, 100) == pytest.approx(0.25, abs=1e-15)
    assert learning_rate(0.5, 100, 100) == 0.0
    assert learning_rate(0.5, 150, 100) == 0.0  # never asked by the loop, which stops at 100
    assert [learning_rate(0.5, t, None) for t in (0, 1, 10**6)] == [0.5, 0.5, 0.5]


def test_a_run_past_the_end_of_its_schedule_is_refused() -> None:
    check_schedule(None, None)
    check_schedule(100, None)
    check_schedule(None, 100)
    check_schedule(100, 100)
    with pytest.raises(UsageError, match="--max-steps 101 goes past --lr-decay-steps 100"):
        check_schedule(101, 100)
    with pytest.raises(UsageError, match="--max-steps 101 goes past"):
        LoopConfig(max_steps=101, lr_decay_steps=100)


def rates_of_a_run(tmp_path: Path, **schedule: int) -> tuple[str, int, list[float]]:
    """A real phrase run with ``schedule``: (why it ended, its steps, the rate the optimizer held
    before each update, read at the loop's report after the step)."""
    table = mapping_table(tmp_path / "pt.gz", 300)
    cfg = TrainConfig(
        batch_size=16, valid_fraction=0.1, optimizer="adam", loop=LoopConfig(lr=1e-2, valid_every=5, **schedule)
    )
    data = prepare_data(load_pairs(str(table)), 40, cfg)
    device = torch.device("cpu")
    task = PhraseTask(data, ModelConfig(len(data.src_vocab), len(data.tgt_vocab), 8, 8, 4, 4), cfg, device)
    rates: list[float] = []

    def report(kind: str, event: dict) -> None:
        if kind == "step":
            rates.append(task.optimizer.param_groups[0]["lr"])

    reason, state = fit(task, cfg.loop, str(tmp_path / "m.pt"), device=device, group=Group(), report=report)
    return reason, state.step, rates


def test_the_optimizer_steps_with_the_scheduled_rate(tmp_path: Path) -> None:
    """A real phrase run of 12 steps: before each update the optimizer holds the schedule's rate,
    and the run ends at the schedule's end."""
    reason, steps, rates = rates_of_a_run(tmp_path, lr_decay_steps=12)
    assert (reason, steps) == ("lr_decay_steps", 12)
    assert rates == [learning_rate(1e-2, t, 12) for t in range(12)]
    assert rates[0] == 1e-2 and 0 < rates[-1] < 1e-3


def test_the_warm_up_rises_to_the_rate_then_falls_with_the_inverse_square_root() -> None:
    """``--warmup-steps W``: lr s / W for the s-th update up to W, then lr sqrt(W / s); the
    form of Vaswani et al. (d^-0.5 min(s^-0.5, s W^-1.5)) scaled so that its peak is lr."""
    lr, w = 2e-3, 400
    assert learning_rate(lr, 0, None, w) == pytest.approx(lr / w)
    assert learning_rate(lr, w - 1, None, w) == pytest.approx(lr)
    assert learning_rate(lr, 4 * w - 1, None, w) == pytest.approx(lr / 2)
    peak = max(learning_rate(lr, t, None, w) for t in range(3 * w))
    assert peak == pytest.approx(lr)
    for t in (0, 17, w - 1, w, 5 * w, 10**6):  # Vaswani et al.'s own form, divided by its peak
        s = t + 1
        vaswani = min(s**-0.5, s * w**-1.5)
        assert learning_rate(lr, t, None, w) == pytest.approx(lr * vaswani / w**-0.5, rel=1e-12)


def test_a_warm_up_takes_a_cool_down_and_the_cosine_multiplies_its_rate() -> None:
    """--warmup-steps W with --lr-decay-start S --lr-decay-steps N: the warm-up's rate up to S,
    then that rate times the half cosine's factor, 0 at N; the plain forms are unchanged (a
    warm-up without a cool-down, a cool-down without a warm-up: the same floats as before)."""
    lr, w, start, end = 2e-3, 40, 300, 400
    check_schedule(None, end, w, start)
    check_schedule(None, None, w, 0, 60.0, 600.0)  # --warmup-steps with --lr-decay-time
    for t in range(start):
        assert learning_rate(lr, t, end, w, start) == learning_rate(lr, t, None, w), t
    for t in range(start, end + 1):
        factor = learning_rate(1.0, t - start, end - start)
        assert learning_rate(lr, t, end, w, start) == pytest.approx(learning_rate(lr, t, None, w) * factor, rel=1e-12)
    assert learning_rate(lr, end, end, w, start) == 0.0
    middle = (start + end) // 2
    assert learning_rate(lr, middle, end, w, start) == pytest.approx(lr * (w / (middle + 1)) ** 0.5 / 2, rel=1e-12)
    for t in (0, 7, 99, 100, 150):  # without a warm-up: exactly the old expression
        assert learning_rate(lr, t, 100, None, 50) == (
            lr if t < 50 else 0.5 * lr * (1.0 + math.cos(math.pi * (min(t, 100) - 50) / 50))
        )
    with pytest.raises(UsageError, match="--warmup-steps must be at least 1"):
        LoopConfig(warmup_steps=0)


def test_the_optimizer_steps_with_the_warm_up(tmp_path: Path) -> None:
    reason, steps, rates = rates_of_a_run(tmp_path, warmup_steps=4, max_steps=9)
    assert (reason, steps) == ("max_steps", 9)
    assert rates == [learning_rate(1e-2, t, None, 4) for t in range(9)]
    assert rates[3] == 1e-2 and rates[0] == 1e-2 / 4 and rates[-1] < 1e-2


def test_a_run_recorded_before_the_warm_up_existed_resumes_without_one() -> None:
    """A ``.last.pt`` saved before ``warmup_steps`` was part of a run's record reads as a run
    without a warm-up: it resumes as it is, and not with one."""
    from phrase_rescorer.training.same_run import differences

    now = {"table_hash": "h", "model": {"embed_dim": 8}, "lr_decay_steps": None, "warmup_steps": None}
    saved = {"table_hash": "h", "model": {"embed_dim": 8}, "lr_decay_steps": None}
    assert differences(saved, now, 5) is None
    said = differences(saved, {**now, "warmup_steps": 8}, 5)
    assert said is not None and "warmup_steps was None, now 8" in said


def test_a_cool_down_holds_the_rate_then_is_the_cosine_over_its_own_steps() -> None:
    """--lr-decay-start S: --lr up to step S, then the half cosine of N - S steps, shifted (the
    same numbers as --lr-decay-steps N - S from a first start); S = 0 is the plain cosine."""
    lr = 1e-3
    assert [learning_rate(lr, t, 100, None, 40) for t in (0, 39, 40)] == [lr, lr, lr]
    for t in range(40, 101):
        assert learning_rate(lr, t, 100, None, 40) == learning_rate(lr, t - 40, 60), t
    assert learning_rate(lr, 70, 100, None, 40) == pytest.approx(lr / 2, abs=1e-18)
    assert learning_rate(lr, 100, 100, None, 40) == 0.0
    assert all(learning_rate(lr, t, 100, None, 0) == learning_rate(lr, t, 100) for t in range(101))


def test_a_cool_down_is_refused_without_an_end_or_at_its_end() -> None:
    check_schedule(None, 100, None, 99)
    with pytest.raises(UsageError, match="--lr-decay-start S needs --lr-decay-steps N"):
        LoopConfig(lr_decay_start=10)
    with pytest.raises(UsageError, match="--lr-decay-start 100 is not before --lr-decay-steps 100"):
        LoopConfig(lr_decay_steps=100, lr_decay_start=100)
    with pytest.raises(UsageError, match="--lr-decay-start must be at least 0"):
        check_schedule(None, 100, None, -1)


def test_schedules_agree_on_the_steps_taken_only_where_every_rate_is_the_same() -> None:
    """A constant rate and a cool-down starting at step S gave the first S + 1 steps the same
    rates (the cosine starts at --lr), not S + 2; two cosines of other lengths differ from the
    second step on; a warm-up from the first."""
    constant = {"lr_decay_steps": None, "warmup_steps": None}
    cool = {"lr_decay_steps": 300, "warmup_steps": None, "lr_decay_start": 200}
    assert same_rates(constant, cool, 201) and same_rates(cool, constant, 201)
    assert not same_rates(constant, cool, 202)
    assert same_rates({"lr_decay_steps": 30}, {"lr_decay_steps": 40}, 1)
    assert not same_rates({"lr_decay_steps": 30}, {"lr_decay_steps": 40}, 2)
    assert not same_rates(constant, {"warmup_steps": 8}, 1)
    assert same_rates(constant, {"warmup_steps": 8}, 0)


def test_a_resume_compares_the_rates_of_exactly_the_steps_taken() -> None:
    """12 steps taken at the constant rate (updates 0-11): a cool-down from step 11 or 12 gave each
    the same rate (the cosine starts at --lr) and resumes; one from step 10 lowered update 11."""
    from phrase_rescorer.training.same_run import differences

    saved = {"table_hash": "h", "model": {"embed_dim": 8}, "lr_decay_steps": None, "warmup_steps": None}
    for start, agrees in ((12, True), (11, True), (10, False)):
        said = differences(saved, {**saved, "lr_decay_steps": 30, "lr_decay_start": start}, 12)
        assert (said is None) == agrees, (start, said)
    assert "other learning rates for the 12 steps taken" in (
        differences(saved, {**saved, "lr_decay_steps": 30, "lr_decay_start": 10}, 12) or ""
    )
    warmed = {**saved, "warmup_steps": 8}  # a warmed-up run takes a cool-down from where it stands
    assert differences(warmed, {**warmed, "lr_decay_steps": 30, "lr_decay_start": 12}, 12) is None
    assert differences(warmed, {**warmed, "lr_decay_steps": 30, "lr_decay_start": 10}, 12) is not None


def test_a_cool_down_in_time_needs_a_time_limit_longer_than_it_and_no_cool_down_in_steps() -> None:
    LoopConfig(max_time=60, lr_decay_time=20)
    with pytest.raises(UsageError, match="cools down the last T seconds of --max-time; give --max-time"):
        LoopConfig(lr_decay_time=20)
    for time_limit in (20, 10):
        with pytest.raises(UsageError, match="must be above 0 and below --max-time"):
            LoopConfig(max_time=time_limit, lr_decay_time=20)
    LoopConfig(max_time=60, lr_decay_time=20, warmup_steps=10)  # a warmed-up run cooled down at its end
    for other in ({"lr_decay_steps": 100}, {"lr_decay_steps": 100, "lr_decay_start": 50}):
        with pytest.raises(UsageError, match="sets the cool-down's steps itself"):
            LoopConfig(max_time=60, lr_decay_time=20, **other)


def test_a_cool_down_in_time_lasts_the_steps_this_runs_rate_gives_it() -> None:
    assert cool_down_steps(120, 30, steps_done=100, elapsed=50, max_steps=None) == 180  # 2 steps/s
    assert cool_down_steps(120, 30, steps_done=100, elapsed=50, max_steps=150) == 150
    assert cool_down_steps(120, 1, steps_done=1, elapsed=100, max_steps=None) == 121  # at least a step
    assert cool_down_steps(7, 30, steps_done=0, elapsed=0, max_steps=None) == 8


def test_the_pace_is_that_of_the_last_window_seconds() -> None:
    pace = RecentPace(10.0)
    assert pace.span() == (0, 0.0)
    for steps in range(1, 5):  # 4 steps in 12 s, then one a second
        pace.mark(3.0 * steps, steps)
    assert pace.span() == (4, 12.0)  # younger than its window: the whole invocation
    for steps in range(5, 21):
        pace.mark(12.0 + steps - 4, steps)
    assert pace.span() == (10, 10.0)  # 28 s in: from 18 s (step 10) on
    assert len(pace.marks) == 11
    pace.mark(28.5, 21)  # a mark between whole seconds: the window starts at the last mark at or before it
    assert pace.span() == (11, 10.5)
    still = RecentPace(0.0)
    for steps in range(1, 50):
        still.mark(float(steps), steps)
    assert len(still.marks) == 2 and still.span() == (1, 1.0)


def test_the_pace_keeps_about_a_thousand_marks_at_any_rate() -> None:
    """A fast step (1,000 a second) under a 60-second window: the marks stay about 1,000, and the
    span starts within the marks' spacing (0.06 s) of the window's start."""
    pace = RecentPace(60.0)
    for steps in range(1, 200_001):
        pace.mark(steps / 1000, steps)
        assert len(pace.marks) <= 1050
    steps_done, seconds = pace.span()
    assert 60.0 <= seconds < 60.0 + 0.06 + 1e-9
    assert steps_done == round(seconds * 1000)


class StepClock:
    """A clock for the loop that moves one second at every update and at nothing else."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now


def timed_run(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    loop: LoopConfig,
    stop_at: int | None = None,
    resume: bool = False,
    slow_steps: int = 0,
) -> tuple[str, int, list[float]]:
    """``rates_of_a_run`` under ``StepClock`` (so that a run's seconds are its steps; its first
    ``slow_steps`` updates take 3 seconds each), optionally stopped as by a signal after step
    ``stop_at`` or resumed from its ``.last.pt``."""
    from phrase_rescorer.training import loop as loop_module

    clock = StepClock()
    monkeypatch.setattr(loop_module, "time", clock)
    plain_step = loop_module.Loop.step

    updates = [0]

    def step(self: loop_module.Loop, batch: torch.Tensor) -> torch.Tensor:
        updates[0] += 1
        clock.now += 3.0 if updates[0] <= slow_steps else 1.0
        return plain_step(self, batch)

    monkeypatch.setattr(loop_module.Loop, "step", step)
    table = mapping_table(tmp_path / "pt.gz", 300)
    cfg = TrainConfig(batch_size=16, valid_fraction=0.1, optimizer="adam", loop=loop)
    data = prepare_data(load_pairs(str(table)), 40, cfg)
    device = torch.device("cpu")
    task = PhraseTask(data, ModelConfig(len(data.src_vocab), len(data.tgt_vocab), 8, 8, 4, 4), cfg, device)
    rates: list[float] = []
    taken: list[int] = []

    def report(kind: str, event: dict) -> None:
        if kind == "step":
            rates.append(task.optimizer.param_groups[0]["lr"])
            taken.append(event["step"])

    def stop() -> int | None:
        return 15 if stop_at is not None and taken and taken[-1] == stop_at else None

    reason, state = fit(
        task, loop, str(tmp_path / "m.pt"), device=device, group=Group(), resume=resume, report=report, stop=stop
    )
    return reason, state.step, rates


def test_a_cool_down_in_time_begins_when_its_seconds_are_left_and_ends_at_0(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--max-time 20 --lr-decay-time 8 at one step a second: the rate held for 12 steps, then the
    half cosine of the 8 steps that 8 seconds give at that rate; the run ends at its end, the
    schedule logged and kept in the run's record."""
    from phrase_rescorer.model.checkpoint import load_checkpoint
    from phrase_rescorer.training.log import read_log

    loop = LoopConfig(lr=1e-2, valid_every=5, max_time=20, lr_decay_time=8)
    reason, steps, rates = timed_run(tmp_path, monkeypatch, loop)
    assert (reason, steps) == ("lr_decay_steps", 20)
    assert rates == [learning_rate(1e-2, t, 20, None, 12) for t in range(20)]
    assert rates[:13] == [1e-2] * 13 and 0 < rates[-1] < 1e-3
    events = [e for e in read_log(str(tmp_path / "m.log")) if e["event"] == "cool_down"]
    assert [(e["step"], e["lr_decay_steps"], e["steps_per_s"]) for e in events] == [(12, 20, 1.0)]
    state = load_checkpoint(str(tmp_path / "m.last.pt")).training_state
    assert state is not None
    run = state["run"]
    assert (run["lr_decay_start"], run["lr_decay_steps"]) == (12, 20)


def test_a_cool_down_in_time_plans_at_the_rate_of_the_seconds_before_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--max-time 30 --lr-decay-time 8, the first 4 steps at 3 seconds each, then one a second: the
    cool-down begins at step 14 (22 seconds) and plans at the 1 step/s of the 8 seconds before it,
    to step 22, where the time runs out too; the whole run's 14 steps in 22 seconds would have planned
    it to step 19, ending 3 seconds early."""
    from phrase_rescorer.training.log import read_log

    loop = LoopConfig(lr=1e-2, valid_every=5, max_time=30, lr_decay_time=8)
    reason, steps, rates = timed_run(tmp_path, monkeypatch, loop, slow_steps=4)
    assert (reason, steps) == ("lr_decay_steps", 22)
    assert rates == [learning_rate(1e-2, t, 22, None, 14) for t in range(22)]
    events = [e for e in read_log(str(tmp_path / "m.log")) if e["event"] == "cool_down"]
    assert [(e["step"], e["lr_decay_steps"], e["steps_per_s"]) for e in events] == [(14, 22, 1.0)]


def test_a_cool_down_in_time_resumed_continues_where_it_began(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Stopped at step 15, inside the cool-down, and resumed with the same options (and its own
    --max-time): the steps left take the uninterrupted run's rates, and it ends at the same step."""
    from phrase_rescorer.training.loop import Interrupted

    loop = LoopConfig(lr=1e-2, valid_every=5, max_time=20, lr_decay_time=8)
    with pytest.raises(Interrupted):
        timed_run(tmp_path, monkeypatch, loop, stop_at=15)
    reason, steps, rates = timed_run(tmp_path, monkeypatch, loop, resume=True)
    assert (reason, steps) == ("lr_decay_steps", 20)
    assert rates == [learning_rate(1e-2, t, 20, None, 12) for t in range(15, 20)]


def test_a_warmed_up_run_cooled_down_in_time_and_resumed_inside_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--warmup-steps 4 --max-time 20 --lr-decay-time 8 at one step a second: the warm-up's rates
    for 12 steps, then those rates times the half cosine to step 20; stopped at step 15 and resumed
    with the same options, the steps left take the uninterrupted run's rates."""
    from phrase_rescorer.training.loop import Interrupted

    loop = LoopConfig(lr=1e-2, valid_every=5, max_time=20, lr_decay_time=8, warmup_steps=4)
    whole = tmp_path / "whole"
    whole.mkdir()
    reason, steps, rates = timed_run(whole, monkeypatch, loop)
    assert (reason, steps) == ("lr_decay_steps", 20)
    assert rates == [learning_rate(1e-2, t, 20, 4, 12) for t in range(20)]
    assert rates[:12] == [learning_rate(1e-2, t, None, 4) for t in range(12)] and rates[3] == 1e-2
    assert 0 < rates[-1] < rates[12] < rates[11]
    with pytest.raises(Interrupted):
        timed_run(tmp_path, monkeypatch, loop, stop_at=15)
    reason, steps, resumed = timed_run(tmp_path, monkeypatch, loop, resume=True)
    assert (reason, steps) == ("lr_decay_steps", 20)
    assert resumed == rates[15:]
