"""Window scorers: log p(target|source) for every line of a window of phrase pairs.

The streaming engine (``engine``) cuts a phrase table into windows and hands each window to a
scorer as token ids: the distinct source phrases of the window, every line's target, and which
source each line uses. A scorer returns one float64 log-probability per line, in line order.
Any object with that one method plugs into the engine (:class:`WindowScorer`), so a faster
implementation is a new class here or in its own module, never a change to the engine. What the
scorers share (the interface, their base class, length batches) is in ``scorer_base``.

Three implementations, selectable by name (``SCORERS``, ``rescore-phrase-table --scorer``):

``PrefixScorer``     (``prefix``, the default; ``prefix.py``) the fastest exact path: each
                     distinct source prefix and each distinct target prefix of a source is
                     computed once, over the window's prefix tries (``trie.py``).
``BatchedScorer``    (``batched``) each distinct source is encoded once and its context terms
                     (h'_0, C c, O_c c) computed once; targets are sorted by length, decoded with
                     teacher forcing in batches of ``batch_size`` pairs, and the softmax runs only
                     over real (non-padding) positions. Order is restored.
``ReferenceScorer``  (``reference``) the plain path: lines in file order, batches of 64 pairs
                     built with ``batching.sequences_batch``, scored with
                     ``sequence_log_probs``, no sorting and no sharing. The yardstick of the
                     tests and the benchmark.

``PrefixScorer`` and ``BatchedScorer`` need a network with cho2014's single GRU summary
(``network.SummaryNetwork``, a capability). Those three names work for every network
(``make_scorer``): on the others (rnnsearch, gnmt, ...) ``prefix`` is ``StackedPrefixScorer``
(``stacked_prefix.py``, decoder prefixes shared under each source) and ``batched`` is
``StackedScorer`` (``stacked_scorer.py``, each source encoded once, each target decoded on its
own); both run on the ``network.Network`` interface alone.

All compute in float32 (the checkpoint's precision; the prefix scorer also in bfloat16 on
request); the prefix and batched scorers sum the token log-probs of a pair in float64,
ReferenceScorer returns the float32 sum of ``sequence_log_probs``. They agree to about 1e-6
relative (tests hold them to 1e-5).
"""

from __future__ import annotations

import numpy as np
import torch

from ..data.batching import flat_store, pad_sequences, sequences_batch
from ..model.cho2014 import Summary, sequence_log_probs, sequence_token_log_probs, token_log_probs
from ..model.network import Network, is_summary_network
from .prefix import PrefixScorer
from .scorer_base import READOUT_ELEMENTS, WindowScorer, _ModelScorer, length_batches
from .stacked_prefix import StackedPrefixScorer
from .stacked_scorer import StackedScorer

__all__ = [
    "READOUT_ELEMENTS",
    "SCORERS",
    "BatchedScorer",
    "ReferenceScorer",
    "WindowScorer",
    "length_batches",
    "make_scorer",
]


class BatchedScorer(_ModelScorer):
    """Sources encoded once, targets decoded in length-sorted batches, order restored."""

    default_batch_size = 256

    @torch.inference_mode()
    def score(self, sources: list[list[int]], targets: list[list[int]], source_index: np.ndarray) -> np.ndarray:
        n = len(targets)
        out = np.empty(n, dtype=np.float64)
        if n == 0:
            return out
        enc = self._encode(sources)
        tgt_tokens, tgt_offsets = flat_store(targets)
        source_index = np.asarray(source_index, dtype=np.int64)
        for idx in length_batches(np.diff(tgt_offsets), self.batch_size):
            tgt, tgt_len = pad_sequences(tgt_tokens, tgt_offsets, idx)
            which = torch.from_numpy(source_index[idx]).to(self.device)
            out[idx] = self._decode(enc.select(which), tgt.to(self.device), tgt_len.to(self.device))
        return out

    def _encode(self, sources: list[list[int]]) -> Summary:
        """c and its context terms (h'_0, C c, O_c c) of every distinct source, in ``sources`` order."""
        src_tokens, src_offsets = flat_store(sources)
        parts: list[tuple[np.ndarray, Summary]] = []
        for idx in length_batches(np.diff(src_offsets), self.batch_size):
            src, src_len = pad_sequences(src_tokens, src_offsets, idx)
            parts.append((idx, self.model.encode(src.to(self.device), src_len.to(self.device))))
        inverse = torch.from_numpy(np.argsort(np.concatenate([idx for idx, _ in parts]))).to(self.device)
        joined: Summary = parts[0][1].cat([enc for _, enc in parts[1:]])
        return joined.select(inverse)

    def _decode(self, enc: Summary, tgt: torch.Tensor, tgt_len: torch.Tensor) -> np.ndarray:
        """Teacher-forced log p(target|source) of one batch (B,) given its sources' encodings.

        The same computation as ``RNNEncoderDecoder.forward`` + ``sequence_log_probs``, except
        that the output layer runs only at the real positions (t < tgt_len) instead of the whole
        padded (B, T) grid, in slices of READOUT_ELEMENTS logits.
        """
        model = self.model
        hs, y_prev, ocs, _ = model.decode_outputs(enc, tgt)  # (B, T, H), (B, T, E), (B, T, 2M)
        mask = torch.arange(tgt.shape[1], device=tgt.device).unsqueeze(0) < tgt_len.unsqueeze(1)
        rows, cols = mask.nonzero(as_tuple=True)  # every real position (b, t)
        totals = torch.zeros(tgt.shape[0], dtype=torch.float64, device=tgt.device)
        step = max(32, READOUT_ELEMENTS.get(self.device.type, 1 << 21) // model.config.tgt_vocab_size)
        for s in range(0, rows.shape[0], step):
            b, pos = rows[s : s + step], cols[s : s + step]
            logits = model.readout(hs[b, pos], y_prev[b, pos], ocs[b, pos])  # (rows, V)
            totals.index_add_(0, b, token_log_probs(logits, tgt[b, pos]).double())
        return totals.cpu().numpy()


class ReferenceScorer(_ModelScorer):
    """The plain path: file order, fixed batches of pairs, ``sequence_log_probs``."""

    default_batch_size = 64

    @torch.inference_mode()
    def score(self, sources: list[list[int]], targets: list[list[int]], source_index: np.ndarray) -> np.ndarray:
        out = np.empty(len(targets), dtype=np.float64)
        for start in range(0, len(targets), self.batch_size):
            stop = min(start + self.batch_size, len(targets))
            src = [sources[int(j)] for j in source_index[start:stop]]
            batch = sequences_batch(src, targets[start:stop]).to(self.device)
            logp = sequence_log_probs(self.model, batch.src, batch.src_len, batch.tgt, batch.tgt_len)
            out[start:stop] = logp.double().cpu().numpy()
        return out

    @torch.inference_mode()
    def token_scores(
        self, sources: list[list[int]], targets: list[list[int]], source_index: np.ndarray
    ) -> list[np.ndarray]:
        """Each line's log p of every target token and </s> (float64, ``len(target) + 1``
        values): the terms of :meth:`score`'s sums (``sequence_token_log_probs``)."""
        out: list[np.ndarray] = []
        for start in range(0, len(targets), self.batch_size):
            stop = min(start + self.batch_size, len(targets))
            src = [sources[int(j)] for j in source_index[start:stop]]
            batch = sequences_batch(src, targets[start:stop]).to(self.device)
            logp = sequence_token_log_probs(self.model, batch.src, batch.src_len, batch.tgt, batch.tgt_len)
            rows = logp.double().cpu().numpy()
            out.extend(rows[i, : len(targets[start + i]) + 1] for i in range(stop - start))
        return out


#: Scorers selectable by name (``rescore-phrase-table --scorer``); the first is the default.
SCORERS: dict[str, type] = {"prefix": PrefixScorer, "batched": BatchedScorer, "reference": ReferenceScorer}

#: The scorer that takes the place of one needing a ``SummaryNetwork`` on any other network.
ANY_NETWORK: dict[type, type] = {PrefixScorer: StackedPrefixScorer, BatchedScorer: StackedScorer}


def make_scorer(
    name: str,
    model: Network,
    device: torch.device | str,
    batch_size: int | None = None,
    dtype: torch.dtype = torch.float32,
) -> WindowScorer:
    """A scorer by name; ``batch_size`` None keeps the scorer's own default.

    ``prefix`` and ``batched`` name the classes above for a network with cho2014's GRU summary
    (``network.SummaryNetwork``); for every other network ``prefix`` gives ``StackedPrefixScorer``
    (``stacked_prefix.py``: each source encoded once per window, decoder prefixes shared) and
    ``batched`` gives ``StackedScorer`` (``stacked_scorer.py``: each source encoded once, every
    target decoded on its own); ``reference`` stays the plain per-pair path for every network.
    Only the prefix scorer on a summary network computes in another ``dtype`` than float32
    (bfloat16, approximate)."""
    try:
        cls = SCORERS[name]
    except KeyError:
        raise ValueError(f"unknown scorer {name!r}; expected one of {sorted(SCORERS)}") from None
    if dtype != torch.float32:
        if cls is not PrefixScorer or not is_summary_network(model):
            raise ValueError(f"dtype {dtype} works with the prefix scorer on a cho2014 network only, not {name!r}")
        return PrefixScorer(model, device, batch_size, dtype=dtype)
    if not is_summary_network(model):
        cls = ANY_NETWORK.get(cls, cls)
    return cls(model, device) if batch_size is None else cls(model, device, batch_size)
