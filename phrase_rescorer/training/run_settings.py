"""What a training run is given: its settings (``TrainConfig``, and the ones ``--resume`` must
find unchanged), the model sizes of a preset, the names of its companion files, and the data
prepared for it (shortlists or subword units, token ids, the pairs that train and the held-out
pairs that validate)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..data.batching import trainable
from ..data.pairs import EncodedPairs, PairSet
from ..data.subwords import Subwords, learn_pair_subwords, segment_pairs
from ..data.vocab import Vocabulary
from ..model.cho2014 import PRESETS
from .loop import TrainingError
from .optim import KERNELS
from .schedule import check_schedule


@dataclass(frozen=True)
class TrainConfig:
    batch_size: int = 64  # unique pairs per minibatch
    batch_tokens: int | None = None  # instead: padded target tokens per minibatch (sentences)
    max_length: int = 30  # longest phrase (tokens, either side) used for training
    seed: int = 1234  # initialisation and data order
    optimizer: str = "adadelta"  # the paper's; or "adam"
    optimizer_kernel: str = "compiled"  # Adadelta's update: one compiled loop, or "chunked" (torch's, bit for bit)
    lr: float = 1.0  # the optimizer's learning rate
    rho: float = 0.95  # Adadelta decay
    eps: float = 1e-6  # Adadelta epsilon
    clip_norm: float = 1.0  # gradient-norm clipping threshold
    init_std: float = 0.01  # standard deviation of the initial weights (the paper: 0.01)
    max_steps: int | None = None  # total steps (counted across resumes)
    max_time: float | None = None  # wall seconds of this invocation (a resumed run counts its own)
    epochs: int | None = None  # total passes over the training pairs
    valid_fraction: float = 0.01  # share of the unique pairs held out
    valid_max: int = 5000  # held-out pairs scored at each validation
    valid_every: int = 500  # steps between validations
    valid_batch_size: int = 256
    patience: int = 10  # scheduled validations without improvement before stopping; 0 = off
    log_every: int = 50  # steps between train log events
    bf16: bool = False  # bf16 autocast (weights and optimizer stay float32)
    label_smoothing: float = 0.0  # the training loss's smoothing (label_smoothing.py); 0: log p
    keep_checkpoints: int = 0  # the networks of the last N validations kept (kept_checkpoints.py)
    lr_decay_steps: int | None = None  # the cosine schedule's length (schedule.py); None: constant lr
    warmup_steps: int | None = None  # the inverse-square-root schedule's warm-up (schedule.py)

    def __post_init__(self) -> None:
        check_schedule(self.max_steps, self.lr_decay_steps, self.warmup_steps)
        if self.optimizer not in OPTIMIZERS:
            raise TrainingError(f"unknown optimizer {self.optimizer!r}; expected one of {', '.join(OPTIMIZERS)}")
        if not 0.0 <= self.label_smoothing < 1.0:
            raise TrainingError(f"label smoothing must be at least 0 and below 1, not {self.label_smoothing}")
        if self.optimizer_kernel not in KERNELS:
            raise TrainingError(
                f"unknown optimizer kernel {self.optimizer_kernel!r}; expected one of {', '.join(KERNELS)}"
            )


#: The optimizers a run may use: the paper's Adadelta (rho, eps apply), or Adam.
OPTIMIZERS = ("adadelta", "adam")


#: Settings that must be the same for ``--resume`` (besides the model and the table).
RUN_KEYS = (
    "batch_size",
    "batch_tokens",
    "max_length",
    "seed",
    "optimizer",
    "lr",
    "rho",
    "eps",
    "clip_norm",
    "init_std",
    "valid_fraction",
    "valid_max",
    "label_smoothing",
)


def preset_sizes(preset: str, **overrides: Any) -> tuple[int, dict[str, Any]]:
    """(shortlist size per side, model sizes) of a preset, with the non-None ``overrides``."""
    sizes: dict[str, Any] = dict(PRESETS[preset])
    sizes.update({k: v for k, v in overrides.items() if v is not None})
    return int(sizes.pop("vocab_size")), sizes


@dataclass
class TrainingData:
    src_vocab: Vocabulary
    tgt_vocab: Vocabulary
    encoded: EncodedPairs
    train_idx: np.ndarray  # pairs that train (not held out, not too long)
    valid_idx: np.ndarray  # held-out pairs scored at validation
    unique_pairs: int
    heldout: int
    skipped_long: int
    table_hash: str  # sha256 of the unique pairs' hashes, in table order
    subwords: tuple[Subwords, Subwords] | None = None  # (source, target) units; None: words


def prepare_data(
    pairs: PairSet, vocab_size: int, cfg: TrainConfig, subwords: int | None = None, right_to_left: bool = False
) -> TrainingData:
    """The training data; with ``subwords`` N, each side's phrases split into at most N learned
    subword units (``data.subwords``), whose vocabulary replaces the shortlist; with
    ``right_to_left`` each target's tokens (or units) reversed, after the segmentation."""
    units = None
    if subwords:
        units = learn_pair_subwords(pairs, subwords)
        pairs = segment_pairs(pairs, *units)
        src_vocab, tgt_vocab = units[0].vocabulary(), units[1].vocabulary()
    else:
        src_vocab, tgt_vocab = pairs.build_vocabularies(vocab_size, vocab_size)
    if right_to_left:
        pairs = pairs.targets_reversed()
    encoded = pairs.encode(src_vocab, tgt_vocab)
    held = pairs.heldout_mask(cfg.valid_fraction)
    candidates = np.flatnonzero(~held)
    train_idx = trainable(encoded, candidates, cfg.max_length)
    if len(train_idx) == 0:
        raise TrainingError(
            f"no pair to train on: {len(pairs)} unique pairs, {int(held.sum())} "
            f"held out, {len(candidates)} longer than {cfg.max_length} tokens"
        )
    return TrainingData(
        src_vocab,
        tgt_vocab,
        encoded,
        train_idx,
        np.flatnonzero(held)[: cfg.valid_max],
        unique_pairs=len(pairs),
        heldout=int(held.sum()),
        skipped_long=len(candidates) - len(train_idx),
        table_hash=hashlib.sha256(pairs.hashes.astype("<u8").tobytes()).hexdigest(),
        subwords=units,
    )
