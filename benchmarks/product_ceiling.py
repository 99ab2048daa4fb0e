"""The ceiling that a step's matrix products put on its rate (``training_profile``).

Every product shape the steps ran (their time in the step taken in plain steps:
``plain_products``) is timed alone, in each library the machine has for it (the BLAS and oneDNN,
``parts.product_libraries``), its operands used again and again (in cache), with the layout that
library likes (A B for the BLAS, x W^T for oneDNN), best of 5. The faster library's time of each
shape, times its calls per step, summed, is how long a step would take if each product ran as
fast as it does alone and every other operator (element-wise work, copies, autograd, the
optimizer, Python) were free. The step's useful FLOPs over that time, against the 2048^3 product
timed in the same seconds, is the highest share of the bound that a step of these shapes can
reach on this machine: a ceiling, not a forecast. ``dtype`` bfloat16 times the shapes and the
2048^3 product in bfloat16 instead (the BLAS only): the ceiling the CPU's bf16 units would set.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

import torch

from benchmarks import parts
from benchmarks.plain_products import Calls
from benchmarks.profile_analysis import Shape

#: Each shape's timing: the calls of one timing last at least this long (seconds).
MIN_TIMED_S = 2e-3


def families(shapes: list[Shape]) -> dict[Shape, str]:
    """Each shape's family, e.g. "N x 100 x 15000": the shapes that differ in one dimension only
    (a batch's positions, new with every batch), that dimension written N. Each shape joins the
    largest of its three possible families."""

    def keys(s: Shape) -> list[str]:
        return [f"N x {s.k} x {s.n}", f"{s.m} x N x {s.n}", f"{s.m} x {s.k} x N"]

    size = Counter(key for s in shapes for key in keys(s))
    return {s: max(keys(s), key=lambda key: size[key]) for s in shapes}


def alone_seconds(shape: Shape, library: str, dtype: torch.dtype = torch.float32) -> float:
    """Best time of one product of ``shape`` in ``library`` ("blas" or "onednn") and ``dtype`` on
    the CPU, its operands in cache: best of 5 timings of enough calls to last ``MIN_TIMED_S``."""
    product = parts.ReferenceProduct(torch.device("cpu"), dtype, library=library, shape=(shape.m, shape.k, shape.n))
    product.seconds()  # oneDNN compiles its kernel for the shape here
    calls = max(1, int(MIN_TIMED_S / max(product.seconds(), 1e-7)))
    return min(sum(product.seconds() for _ in range(calls)) / calls for _ in range(5))


def ceiling(
    found: dict[Shape, Calls], unknown_ms: float, useful_flops_per_step: float, dtype: torch.dtype = torch.float32
) -> dict[str, Any]:
    """The products' ceiling (module text) for steps whose useful work is
    ``useful_flops_per_step``, from their products (``plain_products.time_products``: each shape's
    calls and milliseconds per step, and the milliseconds of products of no known shape): the
    products' time per step at their alone rates in each library and at the faster per shape, the
    step's rate and share of the 2048^3 bound there, and the families of products with their time
    in the step and alone; every product timed in ``dtype`` (bfloat16: what the machine's bf16
    units would give the same shapes)."""
    libraries = parts.product_libraries(torch.device("cpu"), dtype)
    per_library = {lib: 0.0 for lib in libraries}
    fastest = 0.0
    family = families(list(found))
    losses: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])  # in the step, alone
    for shape, c in found.items():
        times = {lib: alone_seconds(shape, lib, dtype) for lib in libraries}
        for lib, s in times.items():
            per_library[lib] += c.calls * s
        best = c.calls * min(times.values())
        fastest += best
        loss = losses[family[shape]]
        loss[0] += c.ms
        loss[1] += best * 1e3
    bound = {lib: parts.matmul_gflops(torch.device("cpu"), dtype, library=lib) for lib in libraries}
    seconds = fastest + unknown_ms * 1e-3
    rate = useful_flops_per_step / seconds / 1e9 if seconds else 0.0
    return {
        "shapes": len(found),
        "step_ms": sum(c.ms for c in found.values()) + unknown_ms,
        "product_flops_per_step": sum(c.calls * s.flops for s, c in found.items()),
        "alone_ms_by_library": {lib: s * 1e3 for lib, s in per_library.items()},
        "alone_ms": fastest * 1e3,
        "unknown_ms": unknown_ms,
        "useful_gflops": rate,
        "bound_by_library": bound,
        "share": rate / max(bound.values()) if bound else 0.0,
        # by family (``families``): the ms in the step and alone, largest loss first
        "by_family": sorted(
            ({"family": f, "step_ms": a, "alone_ms": b} for f, (a, b) in losses.items()),
            key=lambda d: d["alone_ms"] - d["step_ms"],
        ),
    }
