"""A window of lines scored by several threads: cut into parts of consecutive sources with about
equal work, one worker thread per part, each op single-threaded. Small recurrent ops split over
OpenMP threads wait for each other (and for a busy neighbour process) at every op; whole parts
on their own threads never do. Used by the prefix scorers and the stacked scorer alike.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import torch

#: ``score(sources, targets, source_index)`` of one part: log p per target line.
PartScorer = Callable[[list[list[int]], list[list[int]], np.ndarray], np.ndarray]


class WindowThreads:
    """``workers`` threads (default: torch's thread count; always 1 off the CPU)."""

    def __init__(self, device: torch.device, workers: int | None = None):
        if workers is not None and workers < 1:
            raise ValueError("workers must be at least 1")
        self.workers = 1 if device.type != "cpu" else workers or torch.get_num_threads()
        self._pool = ThreadPoolExecutor(self.workers) if self.workers > 1 else None

    def run(
        self, score: PartScorer, sources: list[list[int]], targets: list[list[int]], source_index: np.ndarray
    ) -> np.ndarray:
        """``score`` over the whole window, split between the threads when it is large enough."""
        source_index = np.asarray(source_index, dtype=np.int64)
        if self._pool is None:
            return score(sources, targets, source_index)
        parts = split_window(sources, targets, source_index, self.workers)
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            if len(parts) == 1:  # a window too small to split: one thread, one thread per op
                return score(sources, targets, source_index)
            results = list(self._pool.map(lambda part: score(*part[1:]), parts))
        finally:
            torch.set_num_threads(threads)
        out = np.empty(len(targets), dtype=np.float64)
        for part, scores in zip(parts, results, strict=True):
            out[part[0]] = scores
        return out


#: A window is split between worker threads only when each part gets at least this many lines.
MIN_PART_LINES = 256

Part = tuple[np.ndarray, list[list[int]], list[list[int]], np.ndarray]


def split_window(
    sources: list[list[int]], targets: list[list[int]], source_index: np.ndarray, parts: int
) -> list[Part]:
    """The window cut into at most ``parts`` sub-windows of consecutive sources with about equal
    work (decoder steps, plus encoder steps at half weight), each as (its lines, its sources,
    its targets, its source index). Consecutive sources share the most prefixes, so the cut
    loses almost no sharing."""
    n = len(targets)
    parts = max(1, min(parts, n // MIN_PART_LINES))
    if parts == 1:
        return [(np.arange(n), sources, targets, source_index)]
    target_steps = np.fromiter((len(t) + 1 for t in targets), dtype=np.float64, count=n)
    source_steps = np.fromiter((len(s) + 1 for s in sources), dtype=np.float64, count=len(sources))
    work = np.bincount(source_index, weights=target_steps, minlength=len(sources)) + 0.5 * source_steps
    cuts = np.searchsorted(np.cumsum(work), work.sum() * np.arange(1, parts) / parts)
    bounds = [0, *sorted(set(int(c) + 1 for c in cuts)), len(sources)]
    out: list[Part] = []
    for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
        lines = np.flatnonzero((source_index >= lo) & (source_index < hi))
        if len(lines):
            out.append((lines, sources[lo:hi], [targets[i] for i in lines], source_index[lines] - lo))
    return out
