"""Padded tensors from flat pair arrays, and the training epoch plan.

Every sequence handed to the model ends with the end-of-sequence symbol: the encoder reads
``x_1 .. x_N </s>`` and the decoder predicts ``y_1 .. y_M </s>``. Padding is on the right with
``<pad>``; lengths count the end-of-sequence symbol.

Training draws every unique pair once per epoch in a random order (the paper samples its
minibatches uniformly from the unique pairs), but to waste little work on padding the shuffled
pairs are cut into windows of ``window`` batches, sorted by length inside a window, cut into
batches and the batches shuffled again. The whole plan of an epoch follows from (seed, epoch), so
training can be resumed at any batch. Pairs longer than the training maximum (30 tokens by
default, as in the paper) are left out of training only; scoring never drops or truncates.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import torch

from .vocab import EOS_ID, PAD_ID

if TYPE_CHECKING:
    from .pairs import EncodedPairs


@dataclass
class Batch:
    src: torch.Tensor  # (B, S) int64, </s>-terminated, right-padded
    src_len: torch.Tensor  # (B,) int64, including </s>
    tgt: torch.Tensor  # (B, T) int64, </s>-terminated, right-padded
    tgt_len: torch.Tensor  # (B,) int64, including </s>

    def to(self, device: torch.device | str) -> Batch:
        return Batch(*(t.to(device, non_blocking=True) for t in (self.src, self.src_len, self.tgt, self.tgt_len)))

    def __len__(self) -> int:
        return int(self.src.shape[0])


def pad_sequences(tokens: np.ndarray, offsets: np.ndarray, idx: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
    """Sequences ``idx`` of a flat store as a (len(idx), max_len + 1) </s>-terminated matrix."""
    idx = np.asarray(idx, dtype=np.int64)
    starts = offsets[idx]
    lengths = offsets[idx + 1] - starts
    width = int(lengths.max()) + 1 if len(idx) else 1
    out = np.full((len(idx), width), PAD_ID, dtype=np.int64)
    rows = np.repeat(np.arange(len(idx)), lengths)
    cols = np.arange(int(lengths.sum())) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    out[rows, cols] = tokens[np.repeat(starts, lengths) + cols]
    out[np.arange(len(idx)), lengths] = EOS_ID
    return torch.from_numpy(out), torch.from_numpy(lengths + 1)


def collate(pairs: EncodedPairs, idx: np.ndarray) -> Batch:
    src, src_len = pad_sequences(pairs.src_tokens, pairs.src_offsets, idx)
    tgt, tgt_len = pad_sequences(pairs.tgt_tokens, pairs.tgt_offsets, idx)
    return Batch(src, src_len, tgt, tgt_len)


def flat_store(seqs: Sequence[Sequence[int]], end: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Id lists as a flat (tokens, offsets) store, each list followed by ``end`` when it is given:
    the form ``pad_sequences`` and the scorers' prefix tries read."""
    extra = 0 if end is None else 1
    lengths = np.fromiter((len(s) + extra for s in seqs), dtype=np.int64, count=len(seqs))
    offsets = np.zeros(len(seqs) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    flat = (t for s in seqs for t in s) if end is None else (t for s in seqs for t in (*s, end))
    data = np.fromiter(flat, dtype=np.int64, count=int(offsets[-1]))
    return data, offsets


def sequences_batch(src: list[list[int]], tgt: list[list[int]]) -> Batch:
    """A batch from Python lists of token ids (without </s>); for scoring and analysis."""
    s_data, s_off = flat_store(src)
    t_data, t_off = flat_store(tgt)
    idx = np.arange(len(src))
    s, s_len = pad_sequences(s_data, s_off, idx)
    t, t_len = pad_sequences(t_data, t_off, idx)
    return Batch(s, s_len, t, t_len)


def trainable(pairs: EncodedPairs, candidates: np.ndarray, max_len: int) -> np.ndarray:
    """Those of ``candidates`` whose source and target both have at most ``max_len`` tokens."""
    ok = (pairs.src_lengths[candidates] <= max_len) & (pairs.tgt_lengths[candidates] <= max_len)
    return candidates[ok]


def epoch_plan(
    pairs: EncodedPairs,
    indices: np.ndarray,
    batch_size: int,
    seed: int,
    epoch: int,
    window: int = 20,
    max_tokens: int | None = None,
) -> list[np.ndarray]:
    """The batches of one epoch, each an array of pair indices; a function of (seed, epoch) only.

    With ``max_tokens``, a batch is cut by size instead of count, as sentence-level toolkits cut
    theirs: as many pairs as keep the padded target (pairs x (longest target + 1)) within
    ``max_tokens``, at least one; the length-sorted windows then hold ``window`` x
    ``max_tokens`` target tokens."""
    rng = np.random.default_rng([seed, epoch])
    order = indices[rng.permutation(len(indices))]
    # Sort key: target length first (the decoder dominates the cost), then source length.
    key = pairs.tgt_lengths[order] * 1024 + pairs.src_lengths[order]
    if max_tokens is None:
        chunk = batch_size * window
    else:
        mean = float(pairs.tgt_lengths[order].mean()) + 1 if len(order) else 1.0
        chunk = max(1, int(window * max_tokens / mean))
    batches: list[np.ndarray] = []
    for start in range(0, len(order), chunk):
        part = order[start : start + chunk]
        part = part[np.argsort(key[start : start + chunk], kind="stable")]
        if max_tokens is None:
            batches.extend(part[i : i + batch_size] for i in range(0, len(part), batch_size))
        else:
            batches.extend(_token_batches(part, pairs.tgt_lengths[part] + 1, max_tokens))
    return [batches[i] for i in rng.permutation(len(batches))]


def _token_batches(part: np.ndarray, widths: np.ndarray, max_tokens: int) -> list[np.ndarray]:
    """``part`` (sorted by ascending ``widths``) cut into runs whose count x widest <= max_tokens."""
    out, start = [], 0
    while start < len(part):
        stop = start + 1
        while stop < len(part) and (stop + 1 - start) * int(widths[stop]) <= max_tokens:
            stop += 1
        out.append(part[start:stop])
        start = stop
    return out


def fixed_batches(pairs: EncodedPairs, indices: np.ndarray, batch_size: int) -> list[np.ndarray]:
    """Length-sorted batches over ``indices`` (for evaluation, where order does not matter)."""
    key = pairs.tgt_lengths[indices] * 1024 + pairs.src_lengths[indices]
    ordered = indices[np.argsort(key, kind="stable")]
    return [ordered[i : i + batch_size] for i in range(0, len(ordered), batch_size)]
