"""The batched window scorer of every network, on the ``network.Network`` interface alone:
``--scorer batched`` for the architectures built from options (rnnsearch, gnmt, ...). The default
for them, ``stacked_prefix.StackedPrefixScorer``, builds on it (the same source encoding and
worker threads) and also shares decoder prefixes.

For a window of phrase pairs (``scorers.WindowScorer``):

* each distinct source is encoded once: its memory, its attention keys (``U_a h_j``, the
  query-independent half of the scores) and its summary, in length-sorted batches, padded to the
  longest source scored with it (padding is masked out of the attention softmax: weight 0). A
  window whose sources would pad to more than ``MAX_ENCODED_POSITIONS`` positions is scored in
  groups of sources of about one length (``source_groups``), so that one very long source pads
  only its own group, and the memory of a window stays bounded whatever its phrases;
* targets are sorted by length and decoded with teacher forcing in batches of ``batch_size``
  pairs, each pair reading its source's encoding by index (no source is encoded twice);
* the output layer runs only at the real (non-padding) positions, in slices of
  ``scorer_base.READOUT_ELEMENTS`` logits; each pair's token log-probabilities, </s> included, are
  summed in float64; the order of the lines is restored.

On CPU a window is cut into ``workers`` parts of consecutive sources and scored by as many
threads with one thread per op (``window_threads``), as the prefix scorer does: small recurrent
ops split over two OpenMP threads wait for each other at every op (measured on a loaded 2-core
machine, rnnsearch small sizes: 381 pairs/s with one thread per op, 110 with two).

The arithmetic is the model's own (``encode``, ``decode_outputs``, ``readout``); only
batch shapes change, so the scores equal ``sequence_log_probs`` of the same pairs to float32
rounding (tests: 1e-5 relative).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ..data.batching import flat_store, pad_sequences
from ..model.cho2014 import token_log_probs
from ..model.network import EncodedSource, Network
from .scorer_base import READOUT_ELEMENTS, _ModelScorer, length_batches
from .window_threads import WindowThreads

#: Source positions (sources x padded length) encoded at once: 32,768 x 2H floats of memory and
#: as many of attention keys, 0.5 GB at H = 1000. Ordinary windows of short phrases fit in a few
#: groups; a source longer than this is a group of its own.
MAX_ENCODED_POSITIONS = 1 << 15


def source_groups(lengths: np.ndarray, budget: int = MAX_ENCODED_POSITIONS) -> list[np.ndarray]:
    """Source indices by length (shortest first), cut into groups that, padded to their longest
    source and its </s>, hold at most ``budget`` positions (or are a single source)."""
    order = np.argsort(lengths, kind="stable")
    groups, start = [], 0
    while start < len(order):
        stop = start + 1  # sorted ascending: a group's longest source is its last
        while stop < len(order) and (stop + 1 - start) * (int(lengths[order[stop]]) + 1) <= budget:
            stop += 1
        groups.append(order[start:stop])
        start = stop
    return groups


class StackedScorer(_ModelScorer):
    """Sources encoded once per window, targets decoded in length-sorted batches."""

    default_batch_size = 256

    def __init__(
        self,
        model: Network,
        device: torch.device | str = "cpu",
        batch_size: int | None = None,
        workers: int | None = None,
    ):
        super().__init__(model, device, batch_size)
        self._threads = WindowThreads(self.device, workers)
        self.workers = self._threads.workers

    def score(self, sources: list[list[int]], targets: list[list[int]], source_index: np.ndarray) -> np.ndarray:
        return self._threads.run(self._score_in_groups, sources, targets, source_index)

    def _score_in_groups(
        self, sources: list[list[int]], targets: list[list[int]], source_index: np.ndarray
    ) -> np.ndarray:
        """``_score`` on groups of sources whose padded encoding stays within the budget."""
        lengths = np.fromiter((len(s) for s in sources), dtype=np.int64, count=len(sources))
        if not len(sources) or len(sources) * (int(lengths.max()) + 1) <= MAX_ENCODED_POSITIONS:
            return self._score(sources, targets, source_index)
        source_index = np.asarray(source_index, dtype=np.int64)
        out = np.empty(len(targets), dtype=np.float64)
        local = np.empty(len(sources), dtype=np.int64)
        for group in source_groups(lengths):
            local[group] = np.arange(len(group))
            rows = np.flatnonzero(np.isin(source_index, group))
            if len(rows):
                out[rows] = self._score(
                    [sources[i] for i in group], [targets[r] for r in rows], local[source_index[rows]]
                )
        return out

    @torch.inference_mode()
    def _score(self, sources: list[list[int]], targets: list[list[int]], source_index: np.ndarray) -> np.ndarray:
        out = np.empty(len(targets), dtype=np.float64)
        if not len(targets):
            return out
        enc = self.encode_sources(sources)
        tgt_tokens, tgt_offsets = flat_store(targets)
        for idx in length_batches(np.diff(tgt_offsets), self.batch_size):
            tgt, tgt_len = pad_sequences(tgt_tokens, tgt_offsets, idx)
            which = torch.from_numpy(source_index[idx]).to(self.device)
            out[idx] = self._decode(enc.select(which), tgt.to(self.device), tgt_len.to(self.device))
        return out

    def encode_sources(self, sources: list[list[int]]) -> Any:
        """The ``EncodedSource`` of every distinct source, in ``sources`` order, padded to one length."""
        tokens, offsets = flat_store(sources)
        width = int(np.diff(offsets).max()) + 1
        parts: list[tuple[np.ndarray, EncodedSource]] = []
        for idx in length_batches(np.diff(offsets), self.batch_size):
            src, src_len = pad_sequences(tokens, offsets, idx)
            parts.append((idx, self.model.encode(src.to(self.device), src_len.to(self.device)).padded(width)))
        inverse = torch.from_numpy(np.argsort(np.concatenate([idx for idx, _ in parts]))).to(self.device)
        return parts[0][1].cat([enc for _, enc in parts[1:]]).select(inverse)

    def _decode(self, enc: EncodedSource, tgt: torch.Tensor, tgt_len: torch.Tensor) -> np.ndarray:
        """Teacher-forced log p(target|source) of one batch (B,), the output layer at real positions only."""
        model = self.model
        tops, y_prev, ctxs, _ = model.decode_outputs(enc, tgt)
        mask = torch.arange(tgt.shape[1], device=tgt.device).unsqueeze(0) < tgt_len.unsqueeze(1)
        rows, cols = mask.nonzero(as_tuple=True)
        totals = torch.zeros(tgt.shape[0], dtype=torch.float64, device=tgt.device)
        step = max(32, READOUT_ELEMENTS.get(self.device.type, 1 << 21) // model.config.tgt_vocab_size)
        for s in range(0, rows.shape[0], step):
            b, pos = rows[s : s + step], cols[s : s + step]
            logits = model.readout(tops[b, pos], y_prev[b, pos], ctxs[b, pos])
            totals.index_add_(0, b, token_log_probs(logits, tgt[b, pos]).double())
        return totals.cpu().numpy()
