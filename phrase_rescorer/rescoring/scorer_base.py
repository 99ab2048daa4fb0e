"""What every window scorer shares: the interface the engine calls (``WindowScorer``), the
base of the scorers over a network (``_ModelScorer``), length-sorted batches
(``length_batches``) and the bound on logits computed at once (``READOUT_ELEMENTS``).

The scorers themselves are in ``scorers`` and ``prefix`` (cho2014's summary network),
``stacked_scorer`` and ``stacked_prefix`` (any network); ``scorers.make_scorer`` picks one by name.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import numpy as np
import torch

from ..model.network import Network

#: Logit elements (rows x V) evaluated at once. On CPU the (rows, V) logits must stay in cache:
#: with 8 MB slices the output layer runs 1.6x faster than with 128 MB ones (measured, small
#: preset, 1 thread). On a GPU the bound only caps memory (256 MB).
READOUT_ELEMENTS = {"cpu": 1 << 21, "cuda": 1 << 26}


@runtime_checkable
class WindowScorer(Protocol):
    """What the engine needs of a scorer."""

    def score(self, sources: list[list[int]], targets: list[list[int]], source_index: np.ndarray) -> np.ndarray:
        """log p(target|source) (float64, one per line, line order).

        ``sources``: the window's distinct source phrases as id lists without </s>;
        ``targets[i]``: line i's target ids without </s>; ``source_index[i]``: the position in
        ``sources`` of line i's source.
        """
        ...


def length_batches(lengths: np.ndarray, batch_size: int) -> list[np.ndarray]:
    """Indices sorted by length, cut into batches of at most ``batch_size`` sequences and at most
    ``32 * batch_size`` padded tokens, so that a batch of unusually long phrases stays within
    the memory of an ordinary one (phrase tables rarely exceed 7 to 10 tokens per phrase)."""
    order = np.argsort(lengths, kind="stable")  # short first: little padding
    budget = 32 * batch_size
    batches, start = [], 0
    while start < len(order):
        stop = min(start + batch_size, len(order))
        # sorted ascending: the last member is the longest; shrink until the padded size fits
        while stop - start > 1 and (stop - start) * (int(lengths[order[stop - 1]]) + 1) > budget:
            stop = start + max(1, budget // (int(lengths[order[stop - 1]]) + 1))
        batches.append(order[start:stop])
        start = stop
    return batches


class _ModelScorer:
    """A scorer over a model on a device, with a number of pairs per batch."""

    default_batch_size = 64

    model: Any  # a ``network.Network`` (BatchedScorer: one with cho2014's summary)

    def __init__(self, model: Network, device: torch.device | str = "cpu", batch_size: int | None = None):
        batch_size = self.default_batch_size if batch_size is None else batch_size
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        self.model = model.eval()
        self.device = torch.device(device)
        self.batch_size = batch_size
