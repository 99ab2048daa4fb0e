"""The CSLM's task of the training loop (``train-lm``): its text prepared (the held-out split,
the shortlist, n-grams), Adam on shuffled n-grams, held-out perplexity at each validation.

An epoch is one pass over every n-gram of the training text in a fresh random order (seeded by
the seed and the epoch); the loop (``training.loop``) validates every ``valid_every`` steps, keeps
the best network by held-out perplexity, stops after ``patience`` validations without a better one
(the paper trained "until the validation perplexity had not improved for 10 epochs") or at a
limit, and resumes with the same batches. It trains on the CPU or on a CUDA device; the model file
is the same either way. Under torchrun every process holds all the n-grams and the same order, a
step's global batch of ``batch_size`` x processes n-grams is shared out, and rank 0 measures the
held-out perplexity and tells the others.

The optimizer is Adam (the paper's CSLM toolkit used plain SGD with a decaying rate; Adam reaches
the same kind of model in far fewer epochs, which is what a CPU budget needs).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from ..data.corpus import read_sentences
from ..data.vocab import Vocabulary
from ..errors import InputError
from ..model.kinds import ModelFile
from ..parallel.distributed import Group
from ..training.task_interface import LoopConfig, RunState, Validation
from .lm_file import load_lm, save_lm
from .network import CSLM, LMConfig, preset
from .perplexity import perplexity
from .text import build_vocabulary, split_held_out, text_ngrams


@dataclass(frozen=True)
class LMTrainConfig:
    batch_size: int = 256  # n-grams per step (under torchrun, per process)
    # the loop's: lr is Adam's; keep_checkpoints (train-nmt's --keep-checkpoints) is not for the CSLM
    loop: LoopConfig = LoopConfig(seed=1, lr=1e-3, valid_every=1000, patience=5, log_every=100)


@dataclass
class LMData:
    """A CSLM's prepared text: sizes, shortlist, (contexts, targets) of each side."""

    config: LMConfig
    vocab: Vocabulary
    train: tuple[np.ndarray, np.ndarray]
    valid: tuple[np.ndarray, np.ndarray]
    train_sentences: int
    valid_sentences: list[list[str]]


def prepare_lm_data(text: str, valid_path: str | None, vocab_size: int, preset_name: str, **sizes: Any) -> LMData:
    """TEXT's sentences (without 1 % held out, chosen by hash, unless ``valid_path`` names the
    held-out text), the shortlist of the ``vocab_size`` most frequent words, the preset's sizes
    with the non-None ``sizes``, and the n-grams of both sides."""
    sentences = list(read_sentences(text))
    if valid_path is not None:
        train_sentences, valid_sentences = sentences, list(read_sentences(valid_path))
    else:
        train_sentences, valid_sentences = split_held_out(sentences)
    if not train_sentences or not valid_sentences:
        raise InputError(f"{text}: too few sentences to train and hold some out")
    vocab = build_vocabulary(train_sentences, vocab_size)
    config = preset(preset_name, vocab_size=len(vocab), **sizes)
    train = text_ngrams(config.order, vocab, train_sentences)
    valid = text_ngrams(config.order, vocab, valid_sentences)
    return LMData(config, vocab, train, valid, len(train_sentences), valid_sentences)


class LMTask:
    """Training the CSLM on ``data``; ``info`` goes into the model files."""

    unit = "ngrams"
    clip_norm = None

    def __init__(
        self, data: LMData, cfg: LMTrainConfig, device: torch.device, info: dict[str, Any], group: Group | None = None
    ) -> None:
        self.data, self.cfg, self.device, self.info = data, cfg, device, info
        self.group = group or Group()
        self.global_batch = cfg.batch_size * self.group.world_size
        fingerprint = hashlib.sha256()  # of the n-grams, both sides
        for a in (*data.train, *data.valid):
            fingerprint.update(np.ascontiguousarray(a).tobytes())
        self.run: dict[str, Any] = {"table_hash": fingerprint.hexdigest()[:16], "model": data.config.to_dict()}
        self.run.update(batch_size=self.global_batch, lr=cfg.loop.lr, seed=cfg.loop.seed)
        torch.manual_seed(cfg.loop.seed)
        self.network = CSLM(data.config).to(device)
        self.net = self.group.wrap(self.network)  # DistributedDataParallel under torchrun
        self.optimizer = torch.optim.Adam(self.network.parameters(), lr=cfg.loop.lr)
        # the n-grams live on the training device (a few bytes per token), batches are gathered there
        self.contexts = torch.from_numpy(data.train[0]).to(device)
        self.targets = torch.from_numpy(data.train[1]).to(device)

    def record(self) -> dict[str, Any]:
        return self.run

    def start_event(self) -> dict[str, Any]:
        return {
            "train_tokens": len(self.data.train[1]),
            "valid_tokens": len(self.data.valid[1]),
            "argv": self.info["argv"],
        }

    def plan(self, epoch: int) -> Sequence[torch.Tensor]:
        n, size = len(self.data.train[1]), self.global_batch
        order = torch.from_numpy(np.random.default_rng([self.cfg.loop.seed, epoch]).permutation(n)).to(self.device)
        return [order[start : start + size] for start in range(0, max(n, 1), size)]

    def loss(self, batch: torch.Tensor) -> torch.Tensor:
        """Cross-entropy summed over this process's n-grams of the batch, over the batch's size."""
        mine = self.group.share(batch)
        logits = self.net(self.contexts[mine])
        return torch.nn.functional.cross_entropy(logits, self.targets[mine], reduction="sum") / len(batch)

    def validate(self) -> Validation:
        """Rank 0 measures and tells the others, so that all take the same decisions."""
        figures = perplexity(self.network, *self.data.valid) if self.group.is_main else None
        figures = self.group.broadcast(figures)
        assert figures is not None
        known = figures.tokens - figures.oovs
        logp = -known * math.log(figures.ppl) if known else None
        event = {"valid_token_ppl": figures.ppl, "valid_ppl_with_unk": figures.ppl_with_unk}
        return Validation(logp, figures.to_dict(), event)

    def save(self, path: str, progress: RunState, training_state: dict[str, Any] | None) -> None:
        p = progress
        valid = {k: v for k, v in (p.best or {}).items() if k != "step"}
        info = {**self.info, "run_id": p.run_id, "steps": p.step, "epochs": p.epoch, "valid": valid}
        save_lm(path, self.network, self.data.vocab, info, training_state)

    def read_last(
        self, last: str | ModelFile, check: Callable[[dict[str, Any] | None], None]
    ) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
        lm = load_lm(last, "--resume")
        check(lm.training_state)
        assert lm.training_state is not None
        return lm.training_state, lm.state_dict
