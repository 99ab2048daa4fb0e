"""A training step's matrix products timed in plain steps, without the profiler (``product_ceiling``).

Under ``torch.profiler`` a step's large buffers are page-faulted in again (the profiler's own
allocations take the heap's freed blocks), and the products that allocate a large output, the
output layer's (N, 100) x (100, 15,000) above all, run there at a fifth to a half of their rate
in a plain step (docs/training-speed.md). The time of each product in the step is therefore taken
here: a dispatch mode (``TorchDispatchMode``) sees every operator the steps run, the backward
pass's included, and adds the wall time of each product call, and of nothing around it, to its
shape. The mode costs Python for every operator (tens of microseconds, between the operators:
outside the timed calls), so the steps it watches are not timed as a whole.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from benchmarks.profile_analysis import Shape, kind_of, shape_of


@dataclass
class Calls:
    """One shape's products in a step: calls and milliseconds per step."""

    calls: float = 0.0
    ms: float = 0.0


class _ProductTimer(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.found: dict[Shape, Calls] = defaultdict(Calls)
        self.unknown_s = 0.0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None) -> Any:
        name = func._schema.name  # "aten::mm", "mkldnn::_linear_pointwise": the profiler's names
        if kind_of(name) != "matrix products":
            return func(*args, **(kwargs or {}))
        t = time.perf_counter()
        out = func(*args, **(kwargs or {}))
        seconds = time.perf_counter() - t
        tensors = [*args, *(kwargs or {}).values()]  # an out= tensor last, as the profiler lists it
        shape = shape_of(name, [list(a.shape) if isinstance(a, torch.Tensor) else [] for a in tensors])
        if shape is None:  # a batched product or one of vectors
            self.unknown_s += seconds
        else:
            self.found[shape].calls += 1
            self.found[shape].ms += seconds * 1e3
        return out


def time_products(run: Callable[[], object], steps: int) -> tuple[dict[Shape, Calls], float]:
    """Run ``run`` (``steps`` steps, CPU tensors) and return the product shapes it ran with their
    calls and milliseconds per step, and the milliseconds per step of the products of no known
    shape (``shape_of``)."""
    timer = _ProductTimer()
    with timer:
        run()
    found = {s: Calls(c.calls / steps, c.ms / steps) for s, c in timer.found.items()}
    return found, timer.unknown_s * 1e3 / steps
