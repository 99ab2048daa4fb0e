"""Training the CSLM: Adam on shuffled n-grams, held-out perplexity each epoch, patience.

The paper trained its CSLM "until the validation perplexity had not improved for 10 epochs".
Here an epoch is one pass over every n-gram of the training text in a fresh random order
(seeded); after each one (and every ``valid_every`` steps, when set) the held-out perplexity is
measured, the best network is written to the model file, and the run stops after ``patience``
epochs without improvement, or at ``max_epochs`` / ``max_steps`` / ``max_time``. The latest state
(weights, optimizer, RNG, position in the epoch) goes to ``MODEL.last.pt`` at every validation
and on an interruption, so ``resume`` continues where the run stopped, with the same batches.

It trains on the CPU or on a CUDA device (``device``); the model file is the same either way.
Under torchrun (``group``) every process holds all the n-grams and the same order; a step's
global batch of ``batch_size`` x processes n-grams is shared out (``Group.share``), gradients are
averaged by DistributedDataParallel so that the update is the one of the whole batch, every
process measures the same held-out perplexity, and rank 0 alone writes files and the log.

The optimizer is Adam (the paper's CSLM toolkit used plain SGD with a decaying rate; Adam reaches
the same kind of model in far fewer epochs, which is what a CPU budget needs).
"""

from __future__ import annotations

import hashlib
import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import torch

from ..data.vocab import Vocabulary
from ..errors import UsageError
from ..parallel.distributed import Group
from ..training.log import EventLog
from ..training.run_record import Interrupted
from .lm_file import LMFile, load_lm, save_lm
from .network import CSLM, LMConfig
from .perplexity import perplexity


class LMTrainingError(UsageError):
    """A training run that cannot start or continue (e.g. --resume with other data)."""


@dataclass(frozen=True)
class LMTrainConfig:
    batch_size: int = 256
    lr: float = 1e-3
    max_epochs: int | None = None
    max_steps: int | None = None
    max_time: float | None = None
    patience: int = 3
    valid_every: int | None = None  # steps; None: once per epoch
    seed: int = 1
    log_every: int = 100


def last_path(model_path: str) -> str:
    return model_path[:-3] + ".last.pt" if model_path.endswith(".pt") else model_path + ".last"


def data_fingerprint(*arrays: np.ndarray) -> str:
    h = hashlib.sha256()
    for a in arrays:
        h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()[:16]


@dataclass
class _State:
    epoch: int = 0  # epochs completed
    batch: int = 0  # batches done in the current epoch
    step: int = 0
    best: float = math.inf
    bad_epochs: int = 0
    elapsed: float = 0.0


class LMTrainer:
    """One training run; ``run()`` returns why it stopped."""

    def __init__(
        self,
        model_path: str,
        config: LMConfig,
        vocab: Vocabulary,
        train: tuple[np.ndarray, np.ndarray],
        valid: tuple[np.ndarray, np.ndarray],
        settings: LMTrainConfig,
        *,
        info: dict[str, Any],
        log: EventLog | None = None,
        resume: bool = False,
        on_progress: Callable[[str], None] | None = None,
        stop: Callable[[], int | None] | None = None,
        on_step: Callable[[int, float, float], None] | None = None,
        device: torch.device | str = "cpu",
        group: Group | None = None,
    ) -> None:
        self.model_path, self.vocab, self.settings, self.info = model_path, vocab, settings, info
        self.device = torch.device(device)
        self.group = group or Group()
        self.global_batch = settings.batch_size * self.group.world_size
        self.train_contexts, self.train_targets = train
        self.valid_contexts, self.valid_targets = valid
        self.log, self.on_progress, self.stop, self.on_step = log, on_progress, stop, on_step
        self.data_key = data_fingerprint(*train, *valid)
        torch.manual_seed(settings.seed)
        self.model = CSLM(config).to(self.device)
        self.net = self.group.wrap(self.model)  # DistributedDataParallel under torchrun
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=settings.lr)
        self.state = _State()
        if resume:
            self._restore(load_lm(last_path(model_path)))
        if self.group.distributed:
            # every process drew the same initial weights (DDP keeps rank 0's); from here each
            # draws its own dropout masks (a resumed run under torchrun draws other masks than
            # an uninterrupted one: only rank 0's state is saved)
            torch.manual_seed(settings.seed + 1_000_003 * (self.group.rank + 1) + self.state.step)

    def _restore(self, last: LMFile) -> None:
        ts = last.training_state or {}
        if ts.get("data") != self.data_key:
            raise LMTrainingError(
                f"{last.path}: trained on other data or settings; --resume continues a run "
                "with the same text, held-out set and sizes"
            )
        if last.config != self.model.config:
            raise LMTrainingError(f"{last.path}: network sizes differ from this run's")
        saved_batch = ts.get("global_batch", self.settings.batch_size)
        if saved_batch != self.global_batch:  # a step's place in the epoch depends on it
            raise LMTrainingError(
                f"{last.path}: trained with a global batch of {saved_batch} n-grams, this run's is "
                f"{self.global_batch} (--batch-size x processes): resume with the same global batch"
            )
        self.model.load_state_dict(last.state_dict)
        self.optimizer.load_state_dict(ts["optimizer"])
        torch.set_rng_state(ts["rng"])
        cuda_rng = ts.get("cuda_rng")  # a tensor: tested against None, never for truth
        if cuda_rng is not None and self.device.type == "cuda":  # dropout's masks on the GPU
            torch.cuda.set_rng_state(cuda_rng, self.device)
        self.state = _State(**ts["state"])

    def _training_state(self) -> dict[str, Any]:
        return {
            "data": self.data_key,
            "global_batch": self.global_batch,
            "optimizer": self.optimizer.state_dict(),
            "rng": torch.get_rng_state(),
            "cuda_rng": torch.cuda.get_rng_state(self.device) if self.device.type == "cuda" else None,
            "state": asdict(self.state),
        }

    def _order(self, epoch: int) -> np.ndarray:
        return np.random.default_rng([self.settings.seed, epoch]).permutation(len(self.train_targets))

    def _event(self, event: dict[str, Any]) -> None:
        if self.log is not None and self.group.is_main:
            self.log.write({"step": self.state.step, "epoch": self.state.epoch, **event})

    def _validate(self, started: float) -> bool:
        """Measure, keep the best, save the latest; True when this one is the best so far. Under
        torchrun rank 0 measures and tells the others, so that all take the same decisions."""
        figures = perplexity(self.model, self.valid_contexts, self.valid_targets) if self.group.is_main else None
        figures = self.group.broadcast(figures)
        assert figures is not None
        best = figures.ppl < self.state.best
        if best:
            self.state.best = figures.ppl
            self.info.update(steps=self.state.step, epochs=self.state.epoch, valid=figures.to_dict())
            if self.group.is_main:
                save_lm(self.model_path, self.model, self.vocab, dict(self.info))
        self.state.elapsed = self._elapsed(started)
        self._save_last()
        self._event(
            {
                "event": "valid",
                "valid_token_ppl": figures.ppl,
                "valid_ppl_with_unk": figures.ppl_with_unk,
                "elapsed": self.state.elapsed,
                "best": best,
            }
        )
        if self.on_progress and self.group.is_main:
            self.on_progress(
                f"step {self.state.step:,}, epoch {self.state.epoch}: held-out perplexity "
                f"{figures.ppl:.2f}{' (best)' if best else ''}"
            )
        return best

    def _save_last(self) -> None:
        if self.group.is_main:
            save_lm(last_path(self.model_path), self.model, self.vocab, dict(self.info), self._training_state())

    def _elapsed(self, started: float) -> float:
        return self._base_elapsed + time.monotonic() - started

    def run(self) -> str:
        s, st, g = self.settings, self.state, self.group
        self._base_elapsed = st.elapsed
        started = time.monotonic()
        self.model.train()
        n = len(self.train_targets)
        global_batch = self.global_batch
        batches = max(1, math.ceil(n / global_batch))
        # the n-grams live on the training device (a few bytes per token), batches are gathered there
        contexts = torch.from_numpy(self.train_contexts).to(self.device)
        targets = torch.from_numpy(self.train_targets).to(self.device)
        # the loss is summed on the device and read at each log line: no wait for the GPU per step
        loss_sum, loss_n, tick = torch.zeros((), dtype=torch.float64, device=self.device), 0, time.monotonic()
        while True:
            if s.max_epochs is not None and st.epoch >= s.max_epochs:
                return "epochs"
            order = torch.from_numpy(self._order(st.epoch)).to(self.device)
            while st.batch < batches:
                batch = order[st.batch * global_batch : (st.batch + 1) * global_batch]
                idx = g.share(batch)
                logits = self.net(contexts[idx])
                self.optimizer.zero_grad(set_to_none=True)
                if g.distributed:
                    # this share's sum over the whole batch's size, times the processes: DDP's
                    # average of the gradients is then the gradient of the whole batch's mean
                    total = torch.nn.functional.cross_entropy(logits, targets[idx], reduction="sum")
                    (total * (g.world_size / len(batch))).backward()
                    loss_sum += total.detach().double()
                else:
                    loss = torch.nn.functional.cross_entropy(logits, targets[idx])
                    loss.backward()
                    loss_sum += loss.detach().double() * len(idx)
                self.optimizer.step()
                st.batch += 1
                st.step += 1
                loss_n += len(idx)
                if st.step % s.log_every == 0:
                    summed, counted = g.sum([float(loss_sum), loss_n])
                    mean_loss = summed / counted
                    loss_n = int(counted)
                    now = time.monotonic()
                    self._event(
                        {
                            "event": "train",
                            "loss": mean_loss,
                            "ngrams_per_s": loss_n / max(now - tick, 1e-9),
                            "elapsed": self._elapsed(started),
                        }
                    )
                    if self.on_step:
                        self.on_step(st.step, mean_loss, loss_n / max(now - tick, 1e-9))
                    loss_sum.zero_()
                    loss_n, tick = 0, now
                # a signal, the time limit: one agreement of every process per step
                why, out_of_time = g.max(
                    [
                        (self.stop() or 0) if self.stop else 0,
                        int(s.max_time is not None and self._elapsed(started) >= s.max_time),
                    ]
                )
                if why:
                    # Ctrl-C, SIGTERM, SIGHUP between two steps: the latest state, for --resume
                    st.elapsed = self._elapsed(started)
                    last = last_path(self.model_path)
                    self._save_last()
                    self._event({"event": "end", "reason": "interrupted", "elapsed": st.elapsed})
                    raise Interrupted(why, st.step, last)
                if s.valid_every and st.step % s.valid_every == 0 and st.batch < batches:
                    self._validate(started)
                just_measured = s.valid_every is not None and st.step % s.valid_every == 0
                if s.max_steps is not None and st.step >= s.max_steps:
                    if not just_measured:
                        self._validate(started)
                    return "max_steps"
                if out_of_time:
                    if not just_measured:
                        self._validate(started)
                    return "max_time"
            st.epoch += 1
            st.batch = 0
            if self._validate(started):
                st.bad_epochs = 0
            else:
                st.bad_epochs += 1
                if st.bad_epochs >= s.patience:
                    return "patience"
