"""Held-out figures: the network's perplexity and a unigram baseline's, on the same pairs.

Both count every target token and the end-of-sequence symbol of each pair (the events that
``log p(target|source)`` sums over), so their per-token perplexities compare directly:

    token perplexity  = exp(- sum of log p over the pairs / number of target tokens incl. </s>)
    mean log p        = sum of log p(target|source) over the pairs / number of pairs

The unigram baseline ignores the source and the history: p(y) = (count(y) + 1) / (N + K), counted
over the training pairs' target shortlist ids (</s> once per pair), add-one smoothed over the K
symbols a target can be (the shortlist without ``<pad>``). A network that beats it has learned
something from the source phrase or the target prefix.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass

import numpy as np
import torch

from ..data.batching import collate, fixed_batches
from ..data.pairs import EncodedPairs
from ..data.vocab import EOS_ID, PAD_ID, shortlist_coverage
from ..model.cho2014 import sequence_log_probs
from ..model.network import Network


@dataclass(frozen=True)
class HeldOut:
    """log-likelihood figures of a model on a fixed set of pairs."""

    pairs: int
    tokens: int  # target tokens including one </s> per pair
    total_logp: float

    @property
    def token_ppl(self) -> float:
        return math.exp(-self.total_logp / self.tokens) if self.tokens else float("nan")

    @property
    def mean_logp(self) -> float:
        return self.total_logp / self.pairs if self.pairs else float("nan")


def autocast(device: torch.device, bf16: bool) -> contextlib.AbstractContextManager:
    """bf16 autocast (CUDA or CPU) when asked for: matrix products in bfloat16, the weights, the
    gradients' accumulation and the optimizer in float32; otherwise nothing (full float32)."""
    if bf16:
        return torch.autocast(device_type=device.type, dtype=torch.bfloat16)
    return contextlib.nullcontext()


@torch.no_grad()
def evaluate(
    model: Network,
    pairs: EncodedPairs,
    indices: np.ndarray,
    device: torch.device,
    batch_size: int = 256,
    bf16: bool = False,
) -> HeldOut:
    """Sum of ``sequence_log_probs`` over ``indices`` (in eval mode; the mode is restored)."""
    was_training = model.training
    model.eval()
    total, tokens = 0.0, 0
    try:
        for idx in fixed_batches(pairs, indices, batch_size):
            batch = collate(pairs, idx).to(device)
            with autocast(device, bf16):
                logp = sequence_log_probs(model, batch.src, batch.src_len, batch.tgt, batch.tgt_len)
            total += float(logp.double().sum())
            tokens += int(batch.tgt_len.sum())
    finally:
        model.train(was_training)
    return HeldOut(pairs=len(indices), tokens=tokens, total_logp=total)


class UnigramBaseline:
    """Add-one smoothed target unigram model over the shortlist (see the module docstring)."""

    def __init__(self, pairs: EncodedPairs, train_indices: np.ndarray, vocab_size: int):
        tokens = _target_ids(pairs, train_indices)
        counts = np.bincount(tokens, minlength=vocab_size).astype(np.float64) + 1.0
        counts[PAD_ID] = 0.0  # a target is never padding
        with np.errstate(divide="ignore"):
            self.log_probs = np.log(counts / counts.sum())

    def evaluate(self, pairs: EncodedPairs, indices: np.ndarray) -> HeldOut:
        tokens = _target_ids(pairs, indices)
        total = float(self.log_probs[tokens].sum())
        return HeldOut(pairs=len(indices), tokens=len(tokens), total_logp=total)


def _target_ids(pairs: EncodedPairs, indices: np.ndarray) -> np.ndarray:
    """All target shortlist ids of ``indices``, plus one </s> per pair."""
    starts, ends = pairs.tgt_offsets[indices], pairs.tgt_offsets[indices + 1]
    lengths = ends - starts
    first = np.repeat(np.cumsum(lengths) - lengths, lengths)
    within = np.arange(int(lengths.sum()), dtype=np.int64) - first
    words = pairs.tgt_tokens[np.repeat(starts, lengths) + within].astype(np.int64)
    return np.concatenate([words, np.full(len(indices), EOS_ID, dtype=np.int64)])


def heldout_coverage(pairs: EncodedPairs, indices: np.ndarray) -> float | None:
    """Fraction of the source and target tokens of the pairs ``indices`` in the shortlists."""
    chosen = np.zeros(len(pairs), dtype=bool)
    chosen[indices] = True
    return shortlist_coverage(
        pairs.src_tokens[np.repeat(chosen, pairs.src_lengths)], pairs.tgt_tokens[np.repeat(chosen, pairs.tgt_lengths)]
    )
