"""The one training loop of every training command (``train``, ``train-nmt``, ``train-lm``):
``fit(task, ...)`` holds the run's state, its limits, the validation schedule, patience, the best
and the last files, ``--resume`` with its check of the settings, the agreement of the processes
under torchrun, the stop on a signal and the JSON-lines events; a ``Task`` (``task_interface``)
says what one step trains and how a network is validated and saved.

Limits: ``max_steps`` and ``epochs`` count the whole run (across resumes); ``max_time`` counts
the wall seconds of this invocation (a resumed run gets its own ``max_time``); ``lr_decay_steps``
both lowers the learning rate of every step from ``lr_decay_start`` on (``schedule``) and ends the
run. A run may be resumed with another schedule where that schedule gave its steps so far the same
rates (``same_run``): a run at the constant rate takes a cool-down that starts where it stands.
``lr_decay_time`` T: when T seconds of ``max_time`` are left, the loop sets ``lr_decay_start`` to the
step it stands at and ``lr_decay_steps`` to the step that the rate of the T seconds before reaches
in T more (``schedule.RecentPace``, ``cool_down_steps``; agreed by all processes), logs a
``cool_down`` event and saves that schedule in the run's record like one given in steps:
``--resume`` with T continues the cool-down where it began (a resumed run that had not begun it
gets its own). Validations run every ``valid_every`` steps; ``patience`` counts those without a
better held-out likelihood than the best of them (0: never stops for it). One more validation ends
every run that did not just validate: it may still give a new best network, it does not count for
patience.

Files, for ``MODEL_OUT = m.pt``: ``m.pt`` the best network by held-out likelihood; ``m.last.pt``
the latest state (written at every validation and on a stop) with ``training_state`` for
``--resume``: the optimizer, the RNG states, ``progress`` (``RunState``, with the run's identity,
``same_run.run_id``, which every model file of the run records) and ``run`` (the task's
``record()`` and the loop's schedule, which the resumed run must match: ``same_run``); ``m.log``
the events (``log``). Checkpoints hold no wall-clock value: the same seed, data and settings on a
CPU give byte-identical files (where the clock decides a step, the end of ``max_time`` or the start
of ``lr_decay_time``'s cool-down, the files up to that step), and a run resumed from ``m.last.pt``
computes exactly the losses of an uninterrupted one.

Under torchrun every process holds the whole model and data and the same epoch plan of global
batches; a task's ``loss`` is this process's share of the batch's loss (``Group.share``) divided by
the global batch's size, scaled here by the number of processes since DDP averages the gradients,
so an update is the one-process update on the global batch. Rank 0 alone writes files and the log;
every decision (a signal, the time limit) is agreed by all processes after each step.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from typing import Any

import torch
from torch.profiler import record_function

from ..errors import UsageError, signal_exit
from ..model.kinds import ModelFile
from ..parallel.distributed import Group
from .log import EventLog
from .optim import clipped_step
from .run_files import companion_path, keep
from .same_run import differences, run_id
from .schedule import SCHEDULE_KEYS, RecentPace, cool_down_steps, learning_rate, scheduled
from .task_interface import LoopConfig, RunState, Task


class TrainingError(UsageError):
    """A refused request (e.g. ``--resume`` with other settings); the message says what to do."""


class Interrupted(Exception):
    """``stop()`` asked to stop: the state after the last finished step is in ``last_path``."""

    def __init__(self, why: int, step: int, last_path: str):
        super().__init__(f"interrupted at step {step}; resumable state saved in {last_path}")
        self.why, self.step, self.last_path = why, step, last_path

    @property
    def exit_code(self) -> int:
        """The exit code of the signal that stopped the run (``why``: its number)."""
        return signal_exit(self.why)


#: ``report(kind, event)``: "step" after every step, and every event written to the log.
Report = Callable[[str, dict[str, Any]], None]


def check_same_run(saved: dict[str, Any], now: dict[str, Any], path: str, steps: int) -> None:
    """Refuse to resume the run ``saved``, ``steps`` steps in, with the settings ``now`` where they differ."""
    why = differences(saved, now, steps)
    if why:
        raise TrainingError(f"--resume: {path} {why}")


class Loop:
    """One run of a task; ``fit`` is its use."""

    def __init__(self, task: Task, cfg: LoopConfig, out_path: str, device: torch.device, group: Group):
        self.task, self.cfg, self.device, self.group = task, cfg, device, group
        self.out_path, self.last_path = out_path, companion_path(out_path, ".last.pt")
        self.p = RunState()

    def resume(self, last: str | ModelFile) -> None:
        """Continue from ``.last.pt`` (``last``: its path, or the file read already): weights,
        optimizer, RNG states and data position (refused where the run's record differs,
        ``check_same_run``)."""
        state, weights = self.task.read_last(last, self._check)
        self.task.network.load_state_dict(weights)
        self.task.optimizer.load_state_dict(state["optimizer"])
        torch.set_rng_state(state["torch_rng"])
        if len(state["cuda_rng"]) and self.device.type == "cuda":  # a list of tensors: never asked its truth
            torch.cuda.set_rng_state_all(state["cuda_rng"])
        self.p = RunState(**state["progress"])

    def _check(self, state: dict[str, Any] | None) -> None:
        if state is None or "run" not in state or "progress" not in state:
            raise TrainingError(
                f"--resume: {self.last_path} holds no training state this version can resume "
                "(written by an older phrase_rescorer, or not a .last.pt); start afresh without --resume"
            )
        saved = state["run"]
        if self.cfg.lr_decay_time is not None and saved.get("lr_decay_steps") is not None:
            self.cool_down(saved.get("lr_decay_start") or 0, saved["lr_decay_steps"])  # begun: continue it
        check_same_run(saved, self.record(), self.last_path, state["progress"]["step"])

    def cool_down_due(self, elapsed: float, pace: RecentPace) -> tuple[bool, int]:
        """Whether a cool-down in time (``lr_decay_time``) is to begin now, ``elapsed`` seconds into
        this invocation, and the step where it ends at the rate ``pace`` measured (0 where it is not due)."""
        cfg = self.cfg
        if cfg.lr_decay_time is None or cfg.max_time is None or elapsed < cfg.max_time - cfg.lr_decay_time:
            return False, 0
        return True, cool_down_steps(self.p.step, cfg.lr_decay_time, *pace.span(), cfg.max_steps)

    def cool_down(self, start: int, end: int) -> None:
        """From here on the rate is held to step ``start``, then the half cosine to 0 at ``end``."""
        self.cfg = dataclasses.replace(self.cfg, lr_decay_time=None, lr_decay_start=start, lr_decay_steps=end)

    def record(self) -> dict[str, Any]:
        """The task's record of the run, with the loop's own setting: the learning rate's schedule."""
        cfg = self.cfg
        return {**self.task.record(), **{k: getattr(cfg, k) for k in SCHEDULE_KEYS}}

    def save(self, path: str, with_state: bool) -> None:
        if not self.group.is_main:
            return
        self.task.network.eval()
        self.task.save(path, self.p, self.training_state() if with_state else None)

    def training_state(self) -> dict[str, Any]:
        return {
            "optimizer": self.task.optimizer.state_dict(),
            "torch_rng": torch.get_rng_state(),
            "cuda_rng": torch.cuda.get_rng_state_all() if self.device.type == "cuda" else [],
            "progress": asdict(self.p),
            "run": self.record(),
        }

    def validate(self, scheduled: bool) -> dict[str, Any]:
        """Validate, keep the best network, count patience, save the latest state; the event."""
        p = self.p
        self.task.network.eval()
        v = self.task.validate()
        best = v.logp is None or p.best_logp is None or v.logp > p.best_logp
        if best:
            p.best_logp = v.logp if v.logp is not None else 0.0
            p.best = None if v.figures is None else {"step": p.step, **v.figures}
            self.save(self.out_path, with_state=False)
        if self.cfg.keep_checkpoints and self.group.is_main:  # for `average --average-last`
            p.kept = keep(self.out_path, p.kept, p.step, self.cfg.keep_checkpoints, lambda f: self.save(f, False))
        if scheduled and v.logp is not None:
            improved = p.scheduled_best_logp is None or v.logp > p.scheduled_best_logp
            p.scheduled_best_logp = v.logp if improved else p.scheduled_best_logp
            p.bad_validations = 0 if improved else p.bad_validations + 1
        p.last_valid_step = p.step
        self.save(self.last_path, with_state=True)
        self.task.network.train()
        return {"event": "valid", "step": p.step, "epoch": p.epoch, **v.event, "best": best}

    def step(self, batch: Any) -> torch.Tensor:
        """One update on the (global) batch; this process's part of the loss."""
        task = self.task
        cfg = self.cfg
        if scheduled(cfg.lr_decay_steps, cfg.warmup_steps):  # else the optimizer keeps the rate it was made with
            rate = learning_rate(cfg.lr, self.p.step, cfg.lr_decay_steps, cfg.warmup_steps, cfg.lr_decay_start)
            for group in task.optimizer.param_groups:
                group["lr"] = rate
        task.network.train()  # dropout on (validation and every scorer run in eval mode)
        loss = task.loss(batch)  # ranges train.batch, train.forward
        task.optimizer.zero_grad(set_to_none=True)
        with record_function("train.backward"):
            if self.group.distributed:
                (loss * self.group.world_size).backward()  # DDP divides the summed gradients by it
            else:
                loss.backward()
        if task.clip_norm is None:
            task.optimizer.step()
        else:
            clipped_step(task.optimizer, task.clip_norm)  # ranges train.clip, train.optimizer
        return loss.detach()

    def limit(self, out_of_time: bool) -> str | None:
        cfg, p = self.cfg, self.p
        if cfg.max_steps is not None and p.step >= cfg.max_steps:
            return "max_steps"
        if cfg.epochs is not None and p.epoch >= cfg.epochs:
            return "epochs"
        if cfg.lr_decay_steps is not None and p.step >= cfg.lr_decay_steps:
            return "lr_decay_steps"
        if cfg.patience and p.bad_validations >= cfg.patience:
            return "patience"
        return "max_time" if out_of_time else None

    def run(self, log_path: str, append_log: bool, report: Report | None, stop: Callable[[], int | None] | None) -> str:
        cfg, p, task, group = self.cfg, self.p, self.task, self.group
        t_start = time.monotonic()

        def out_of_time() -> bool:
            return cfg.max_time is not None and time.monotonic() - t_start >= cfg.max_time

        if group.distributed:
            # each process draws its own dropout masks from here (every process drew the same
            # initial weights); a resumed run under torchrun draws other masks than an
            # uninterrupted one: only rank 0's RNG state is saved
            torch.manual_seed(cfg.seed + 1_000_003 * (group.rank + 1) + p.step)
        # Only rank 0 writes the log; the other processes write their events nowhere.
        with EventLog(log_path if group.is_main else os.devnull, append=append_log) as log:

            def emit(event: dict[str, Any]) -> None:
                if event["event"] != "start":
                    event["elapsed"] = round(log.previous_elapsed + time.monotonic() - t_start, 3)
                log.write(event)
                if report:
                    report(event["event"], event)

            def train_event(loss_sum: torch.Tensor, items: int, steps: int, seconds: float) -> dict[str, Any]:
                """The mean loss of the ``steps`` since the last train event, the rate (and the
                learning rate of the last step, where a schedule lowers it)."""
                event = {
                    "event": "train",
                    "step": p.step,
                    "epoch": p.epoch,
                    "loss": group.sum([float(loss_sum)])[0] / steps,
                    f"{task.unit}_per_s": round(items / max(seconds, 1e-9), 1),
                }
                if scheduled(cfg.lr_decay_steps, cfg.warmup_steps):
                    event["lr"] = learning_rate(
                        cfg.lr, p.step - 1, cfg.lr_decay_steps, cfg.warmup_steps, cfg.lr_decay_start
                    )
                return event

            start = {"event": "start", "step": p.step, "epoch": p.epoch, "resumed": append_log, "run_id": p.run_id}
            emit({**start, **task.start_event()})
            task.network.train()
            loss_sum, items, steps, t_last = torch.zeros((), device=self.device), 0, 0, t_start
            plan: Sequence[Any] | None = None
            reason = self.limit(bool(group.max([out_of_time()])[0]))
            first_step = p.step
            pace = RecentPace(cfg.lr_decay_time or 0.0)  # window 0: two marks kept
            while reason is None:
                plan = plan or task.plan(p.epoch)
                batch = plan[p.position]
                loss_sum += self.step(batch)
                items, steps = items + len(batch), steps + 1
                p.step, p.position = p.step + 1, p.position + 1
                if p.position == len(plan):
                    p.epoch, p.position, plan = p.epoch + 1, 0, None
                if report:
                    report("step", {"step": p.step})
                if p.step % cfg.log_every == 0:
                    now = time.monotonic()
                    emit(train_event(loss_sum, items, steps, now - t_last))
                    loss_sum, items, steps, t_last = loss_sum * 0, 0, 0, now
                if p.step % cfg.valid_every == 0:
                    emit(self.validate(scheduled=True))
                elapsed = time.monotonic() - t_start
                pace.mark(elapsed, p.step - first_step)
                due, cool_end = self.cool_down_due(elapsed, pace)
                why, late, cool, cool_end = group.max(
                    [(stop() if stop else None) or 0, int(out_of_time()), int(due), cool_end]
                )  # agreed
                if cool:
                    self.cool_down(p.step, cool_end)
                    cfg = self.cfg
                    steps_done, seconds = pace.span()
                    rate = round(steps_done / max(seconds, 1e-9), 3)
                    cooling = {"step": p.step, "epoch": p.epoch, "lr_decay_steps": cool_end, "steps_per_s": rate}
                    emit({"event": "cool_down", **cooling})
                if why:
                    self.save(self.last_path, with_state=True)
                    emit({"event": "end", "step": p.step, "epoch": p.epoch, "reason": "interrupted"})
                    raise Interrupted(why, p.step, self.last_path)
                reason = self.limit(bool(late))
            if steps:  # the steps since the last train event: a run shorter than log_every logs its loss too
                emit(train_event(loss_sum, items, steps, time.monotonic() - t_last))
            if p.last_valid_step != p.step:
                emit(self.validate(scheduled=False))
            emit({"event": "end", "step": p.step, "epoch": p.epoch, "reason": reason})
        return reason


def fit(
    task: Task,
    cfg: LoopConfig,
    out_path: str,
    *,
    device: torch.device,
    group: Group | None = None,
    resume: bool | ModelFile = False,
    log_path: str | None = None,
    report: Report | None = None,
    stop: Callable[[], int | None] | None = None,
) -> tuple[str, RunState]:
    """Train ``task`` until a limit: (the reason, "max_steps", ..., the final state). ``stop()`` is
    asked after every step; a true answer (a signal number) saves ``.last.pt`` and raises
    ``Interrupted``. ``resume``: continue from ``.last.pt``, or from the one given read."""
    loop = Loop(task, cfg, out_path, device, group or Group())
    if resume:
        loop.resume(resume if isinstance(resume, ModelFile) else loop.last_path)
    if loop.p.run_id is None:  # a first start, or a state saved before runs had an identity
        loop.p.run_id = run_id(loop.record())
    reason = loop.run(log_path or companion_path(out_path, ".log"), bool(resume), report, stop)
    return reason, loop.p
