"""What a training run is given: its settings (``TrainConfig``, the loop's among them, and the ones
``--resume`` must find unchanged), the model sizes of a preset, the names of its companion files, and the data
prepared for it (shortlists or subword units, token ids, the pairs that train and the held-out
pairs that validate)."""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from ..data.batching import trainable
from ..data.pairs import EncodedPairs, PairSet
from ..data.subwords import Subwords, learn_pair_subwords, segment_pairs
from ..data.vocab import Vocabulary
from ..model.cho2014 import PRESETS
from .dropout_masks import KERNELS as DROPOUT_KERNELS
from .loop import TrainingError
from .optim import KERNELS
from .task_interface import LoopConfig


@dataclass(frozen=True)
class TrainConfig:
    batch_size: int = 64  # unique pairs per minibatch
    batch_tokens: int | None = None  # instead: padded target tokens per minibatch (sentences)
    max_length: int = 30  # longest phrase (tokens, either side) used for training
    optimizer: str = "adadelta"  # the paper's; or "adam"
    optimizer_kernel: str = "compiled"  # Adadelta's update: one compiled loop, or "chunked" (torch's, bit for bit)
    dropout_kernel: str = "compiled"  # dropout's masks on the CPU: a C loop's counter-based draws, or "torch"
    rho: float = 0.95  # Adadelta decay
    eps: float = 1e-6  # Adadelta epsilon
    clip_norm: float = 1.0  # gradient-norm clipping threshold
    init_std: float = 0.01  # standard deviation of the initial weights (the paper: 0.01)
    valid_fraction: float = 0.01  # share of the unique pairs held out
    valid_max: int = 5000  # held-out pairs scored at each validation
    valid_batch_size: int = 256
    bf16: bool = False  # bf16 autocast (weights and optimizer stay float32)
    bf16_steps: bool = False  # the decoder steps' products with bfloat16 operands (deferred_weights)
    bf16_output: bool = False  # the output layer's products with bfloat16 operands (target_log_probs)
    label_smoothing: float = 0.0  # the training loss's smoothing (label_smoothing.py); 0: log p
    loop: LoopConfig = LoopConfig()  # the loop's (seed, lr, limits, validations, schedule)

    def __post_init__(self) -> None:
        if self.optimizer not in OPTIMIZERS:
            raise TrainingError(f"unknown optimizer {self.optimizer!r}; expected one of {', '.join(OPTIMIZERS)}")
        if self.bf16 and self.bf16_steps:
            raise TrainingError("--bf16 and --bf16-steps: give one (autocast, or the decoder steps' products only)")
        if self.bf16 and self.bf16_output:
            raise TrainingError("--bf16 and --bf16-output: give one (autocast, or the output layer's products only)")
        if not 0.0 <= self.label_smoothing < 1.0:
            raise TrainingError(f"label smoothing must be at least 0 and below 1, not {self.label_smoothing}")
        if self.optimizer_kernel not in KERNELS:
            raise TrainingError(
                f"unknown optimizer kernel {self.optimizer_kernel!r}; expected one of {', '.join(KERNELS)}"
            )
        if self.dropout_kernel not in DROPOUT_KERNELS:
            raise TrainingError(
                f"unknown dropout kernel {self.dropout_kernel!r}; expected one of {', '.join(DROPOUT_KERNELS)}"
            )

    @property
    def precision(self) -> str:
        """The products' precision as the summary line and the profiles name it: "float32", "bf16"
        (autocast), or the products given bfloat16 operands ("bf16 decoder steps and bf16 output layer")."""
        if self.bf16:
            return "bf16"
        reduced = ["bf16 decoder steps"] * self.bf16_steps + ["bf16 output layer"] * self.bf16_output
        return " and ".join(reduced) or "float32"

    def to_dict(self) -> dict[str, Any]:
        """Every setting, the loop's among them, in one level: a model file's ``train_config``."""
        flat = {**asdict(self), **asdict(self.loop)}
        del flat["loop"]
        order = _SAVED_ORDER.split()
        return dict(sorted(flat.items(), key=lambda item: order.index(item[0])))


#: The order of the settings in a model file's ``train_config``, the one its files have always had.
_SAVED_ORDER = (
    "batch_size batch_tokens max_length seed optimizer optimizer_kernel lr rho eps clip_norm init_std max_steps "
    "max_time epochs valid_fraction valid_max valid_every valid_batch_size patience log_every bf16 label_smoothing "
    "keep_checkpoints lr_decay_steps warmup_steps lr_decay_start lr_decay_time dropout_kernel bf16_steps "
    "bf16_output"
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
