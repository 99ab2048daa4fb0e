"""Training: maximise log p(target|source) over the unique phrase pairs (Cho et al. 2014, section 4).

Adadelta (rho 0.95, eps 1e-6), minibatches of 64 unique pairs drawn regardless of their
frequencies (``batching.epoch_plan``), gradient-norm clipping at 1, and the per-sequence cost of
the original code: loss = -(sum of log p(target|source) over the batch) / batch size, log p
computed as ``sequence_log_probs`` defines it, for the paper's network without the padding work
(``packed_log_probs``; Adadelta as one compiled loop over all parameters: ``optim``). ``bf16`` autocasts the products
to bfloat16. Pairs longer than ``max_length`` tokens on either side do not train; held-out pairs
(``PairSet.heldout_mask``) never train, and the first ``valid_max`` of them, in table order, are
scored every ``valid_every`` steps and at the end.

Files, for ``MODEL_OUT = rnn.pt``:

    rnn.pt        the best network by held-out likelihood (what rescoring uses)
    rnn.last.pt   the latest state, with ``training_state`` for ``--resume``: optimizer, RNG
                  states, step, epoch, batch position in the epoch plan, best figures, patience
    rnn.log       JSON lines, one object per event (``train_log`` documents them)

Checkpoints hold no wall-clock value, so the same seed, data and settings on a CPU give
byte-identical files, and a run resumed from ``rnn.last.pt`` computes exactly the losses of an
uninterrupted one. Only validations on the ``valid_every`` schedule count for ``patience``; the
extra one at the end of a run may still give a new best ``rnn.pt``.

Under torchrun the same run is shared by several processes (``Trainer``, ``distributed``): the
batch is then the global batch of ``batch_size`` x processes pairs, and ``batch_size`` in the
resume check counts global pairs.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

import numpy as np
import torch
from torch.profiler import record_function

from ..data.batching import collate, epoch_plan
from ..model.architectures import ArchConfig, build_model
from ..model.checkpoint import load_checkpoint, save_checkpoint
from ..model.cho2014 import ModelConfig
from ..parallel.distributed import Group
from .evaluate import HeldOut, autocast, evaluate
from .kept_checkpoints import keep
from .label_smoothing import training_objective
from .log import EventLog
from .optim import clipped_step, make_optimizer
from .run_record import Interrupted, RunState, model_info, run_record
from .run_settings import TrainConfig, TrainingData, TrainingError, check_same_run, companion_path

#: ``report(kind, event)``: "step" after every step, and every event written to the log.
Report = Callable[[str, dict[str, Any]], None]


class Trainer:
    """One training run. With a distributed ``group`` (torchrun), every process holds the whole
    model and data; the epoch plan is cut into global batches of ``batch_size`` x processes
    pairs, process r trains on rows r, r + world, ... of each (``Group.share``), and with its
    loss scaled by the number of processes (DDP averages the gradients over them) the update is
    the one-process update on the global batch, to float32 rounding. Rank 0 alone writes
    the checkpoints and the log; the data position counts global batches, so a run resumes with
    any number of processes whose per-process batch gives the same global batch.
    ``languages``: the (source, target) language codes to record in the model files (None:
    unknown; a resumed run keeps the recorded ones)."""

    def __init__(
        self,
        data: TrainingData,
        model_config: ModelConfig,
        cfg: TrainConfig,
        out_path: str,
        device: torch.device,
        argv: list[str] | None = None,
        group: Group | None = None,
        languages: tuple[str | None, str | None] = (None, None),
        arch: ArchConfig | None = None,
        record: dict[str, str] | None = None,
    ):
        self.data, self.cfg, self.device, self.out_path = data, cfg, device, out_path
        self.group = group or Group()
        self.global_batch = cfg.batch_size * self.group.world_size
        self.global_tokens = None if cfg.batch_tokens is None else cfg.batch_tokens * self.group.world_size
        self.last_path = companion_path(out_path, ".last.pt")
        self.run = run_record(data, model_config, cfg, self.global_batch, arch, (record or {}).get("direction"))
        torch.manual_seed(cfg.seed)
        self.model = build_model(model_config, arch)
        self.model.reset_parameters(std=cfg.init_std)
        self.model.to(device)
        # What training steps call: log p(target|source) per pair, for cho2014 without the padding work
        # (``packed_log_probs``), or its label-smoothed form (``label_smoothing``), under torchrun in its
        # DDP wrapper (same call).
        self.net = self.group.wrap(training_objective(self.model, cfg.label_smoothing))
        # The paper's Adadelta, one compiled loop over all parameters or torch's bit for bit in cache-sized
        # pieces; or Adam, the optimizer of sentence-level NMT toolkits (``train-nmt``'s default).
        self.opt = make_optimizer(
            self.model.parameters(), cfg.optimizer, cfg.lr, cfg.rho, cfg.eps, kernel=cfg.optimizer_kernel
        )
        self.p = RunState()
        self.info = model_info(data, cfg, argv, languages, record)
        if self.group.distributed:
            self.info.update(processes=self.group.world_size, global_batch=self.global_batch)

    def resume(self) -> None:
        """Continue from ``.last.pt``: weights, optimizer, RNG states and data position."""
        ckpt = load_checkpoint(self.last_path)
        state = ckpt.training_state
        if state is None:
            raise TrainingError(f"{self.last_path} holds no training state to resume from")
        check_same_run(state["run"], self.run, self.last_path)
        if [m.proto for m in ckpt.subwords or ()] != [m.proto for m in self.data.subwords or ()]:
            raise TrainingError(
                f"--resume: {self.last_path} holds other subword units than the ones "
                "learned again now; start afresh without --resume"
            )
        for key, recorded in (("source_lang", ckpt.source_lang), ("target_lang", ckpt.target_lang)):
            given = self.info[key]
            if given is not None and recorded is not None and given != recorded:
                option = "--" + key.replace("_", "-")
                raise TrainingError(f"{self.last_path} was trained with {option} {recorded}, not {given}")
            self.info[key] = given or recorded
        self.model.load_state_dict(ckpt.state_dict)
        self.opt.load_state_dict(state["optimizer"])
        torch.set_rng_state(state["torch_rng"])
        if state["cuda_rng"] and self.device.type == "cuda":
            torch.cuda.set_rng_state_all(state["cuda_rng"])
        self.p = RunState(**state["progress"])

    def save(self, path: str, with_state: bool) -> None:
        if not self.group.is_main:
            return
        p = self.p
        state = None
        if with_state:
            cuda_rng = torch.cuda.get_rng_state_all() if self.device.type == "cuda" else []
            state = {
                "optimizer": self.opt.state_dict(),
                "torch_rng": torch.get_rng_state(),
                "cuda_rng": cuda_rng,
                "progress": asdict(p),
                "run": self.run,
            }
        info = {**self.info, "steps": p.step, "epochs_done": p.epoch, "best_valid": p.best}
        save_checkpoint(
            path, self.model, self.data.src_vocab, self.data.tgt_vocab, info, state, subwords=self.data.subwords
        )

    def validate(self, scheduled: bool) -> dict[str, Any]:
        """Score the held-out pairs, keep the best network, count patience; the log event."""
        d, p = self.data, self.p
        v = None
        if len(d.valid_idx):
            v = evaluate(
                self.model,
                d.encoded,
                self.group.share(d.valid_idx),
                self.device,
                self.cfg.valid_batch_size,
                self.cfg.bf16,
            )
            if self.group.distributed:
                total, tokens, pairs = self.group.sum([v.total_logp, v.tokens, v.pairs])
                v = HeldOut(pairs=int(pairs), tokens=int(tokens), total_logp=total)
        logp = v.total_logp if v is not None else 0.0
        best = v is None or p.best_logp is None or logp > p.best_logp
        if best:
            p.best_logp = logp
            p.best = (
                None
                if v is None
                else {"step": p.step, "token_ppl": v.token_ppl, "mean_logp": v.mean_logp, "pairs": v.pairs}
            )
            self.save(self.out_path, with_state=False)
        if self.cfg.keep_checkpoints and self.group.is_main:  # for `average --average-last`
            p.kept = keep(self.out_path, p.kept, p.step, self.cfg.keep_checkpoints, lambda f: self.save(f, False))
        if scheduled and v is not None:
            improved = p.scheduled_best_logp is None or logp > p.scheduled_best_logp
            p.scheduled_best_logp = logp if improved else p.scheduled_best_logp
            p.bad_validations = 0 if improved else p.bad_validations + 1
        p.last_valid_step = p.step
        self.save(self.last_path, with_state=True)
        return {
            "event": "valid",
            "step": p.step,
            "epoch": p.epoch,
            "valid_token_ppl": v.token_ppl if v else None,
            "valid_mean_logp": v.mean_logp if v else None,
            "unigram_token_ppl": self.info["unigram_token_ppl"],
            "best": best,
        }

    def step(self, idx: np.ndarray) -> torch.Tensor:
        """One Adadelta update on the (global) batch ``idx``; this process's part of the loss
        (the batch's loss is the sum over the processes; not synchronised)."""
        mine = self.group.share(idx)
        self.model.train()  # dropout on (validation and every scorer run in eval mode)
        # The phases are named for torch.profiler (``benchmarks.training_profile``); outside a
        # profile a named range costs ~20 microseconds (measured), 0.1 ms of a step of >= 10 ms.
        with record_function("train.batch"):
            # A process left without a row (the epoch's last batch may be smaller than the number
            # of processes) still joins the gradient exchange, with a zero loss.
            batch = collate(self.data.encoded, mine if len(mine) else idx[:1]).to(self.device)
        with record_function("train.forward"):
            with autocast(self.device, self.cfg.bf16):
                logp = self.net(batch.src, batch.src_len, batch.tgt, batch.tgt_len)
            loss = -logp.sum() / len(idx)
            if not len(mine):
                loss = loss * 0.0
        self.opt.zero_grad(set_to_none=True)
        with record_function("train.backward"):
            if self.group.distributed:
                (loss * self.group.world_size).backward()  # DDP divides the summed gradients by it
            else:
                loss.backward()
        clipped_step(self.opt, self.cfg.clip_norm)  # ranges train.clip, train.optimizer
        return loss.detach()

    def limit_reached(self, t_start: float) -> str | None:
        cfg, p = self.cfg, self.p
        if cfg.max_steps is not None and p.step >= cfg.max_steps:
            return "max_steps"
        if cfg.epochs is not None and p.epoch >= cfg.epochs:
            return "epochs"
        if cfg.patience and p.bad_validations >= cfg.patience:
            return "patience"
        if (
            cfg.max_time is not None and self.group.max([time.monotonic() - t_start >= cfg.max_time])[0]
        ):  # every process stops
            return "max_time"
        return None

    def fit(
        self,
        log_path: str,
        append_log: bool = False,
        report: Report | None = None,
        stop: Callable[[], int | None] | None = None,
    ) -> str:
        """Train until a limit; the reason ("max_steps", ...). ``stop()`` is asked after every
        step; a true answer (a signal number, say) saves ``.last.pt``, raises ``Interrupted``."""
        cfg, d, p = self.cfg, self.data, self.p
        t_start = time.monotonic()
        # Only rank 0 writes the log; the other processes write their events nowhere.
        with EventLog(log_path if self.group.is_main else os.devnull, append=append_log) as log:

            def emit(event: dict[str, Any]) -> None:
                if event["event"] != "start":
                    event["elapsed"] = round(log.previous_elapsed + time.monotonic() - t_start, 3)
                log.write(event)
                if report:
                    report(event["event"], event)

            emit(
                {
                    "event": "start",
                    "step": p.step,
                    "epoch": p.epoch,
                    "resumed": append_log,
                    "train_pairs": len(d.train_idx),
                    "skipped_long": d.skipped_long,
                    "valid_pairs": len(d.valid_idx),
                    "argv": self.info["argv"],
                }
            )
            self.model.train()
            loss_sum, pairs, steps, t_last = torch.zeros((), device=self.device), 0, 0, t_start
            plan: list[np.ndarray] | None = None
            reason = self.limit_reached(t_start)
            while reason is None:
                plan = plan or epoch_plan(
                    d.encoded, d.train_idx, self.global_batch, cfg.seed, p.epoch, max_tokens=self.global_tokens
                )
                idx = plan[p.position]
                loss_sum += self.step(idx)
                pairs, steps = pairs + len(idx), steps + 1
                p.step, p.position = p.step + 1, p.position + 1
                if p.position == len(plan):
                    p.epoch, p.position, plan = p.epoch + 1, 0, None
                if report:
                    report("step", {"step": p.step})
                if p.step % cfg.log_every == 0:
                    now = time.monotonic()
                    emit(
                        {
                            "event": "train",
                            "step": p.step,
                            "epoch": p.epoch,
                            "loss": self.group.sum([float(loss_sum)])[0] / steps,
                            "pairs_per_s": round(pairs / max(now - t_last, 1e-9), 1),
                        }
                    )
                    loss_sum, pairs, steps, t_last = loss_sum * 0, 0, 0, now
                if p.step % cfg.valid_every == 0:
                    emit(self.validate(scheduled=True))
                why = self.group.max([(stop() if stop else None) or 0])[0]  # agreed
                if why:
                    self.save(self.last_path, with_state=True)
                    emit({"event": "end", "step": p.step, "epoch": p.epoch, "reason": "interrupted"})
                    raise Interrupted(why, p.step, self.last_path)
                reason = self.limit_reached(t_start)
            if steps:  # the steps since the last train event: a run shorter than log_every logs its loss too
                loss = self.group.sum([float(loss_sum)])[0] / steps
                rate = round(pairs / max(time.monotonic() - t_last, 1e-9), 1)
                emit({"event": "train", "step": p.step, "epoch": p.epoch, "loss": loss, "pairs_per_s": rate})
            if p.last_valid_step != p.step:
                emit(self.validate(scheduled=False))
            emit({"event": "end", "step": p.step, "epoch": p.epoch, "reason": reason})
        return reason
