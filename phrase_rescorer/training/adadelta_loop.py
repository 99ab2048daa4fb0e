"""Adadelta's update as one loop in C: every parameter read and written once per step, split over
threads, torch's operations in torch's order, equal to torch's update within float32 rounding.

torch's update is eleven passes over each parameter-sized tensor (``optim._update``); this is one.
It fuses the multiply-adds that torch's own vectorized kernels fuse and nothing else; its square
roots are correctly rounded, where torch's vectorized ones (Sleef's, on AVX2 and AVX-512 CPUs)
may be one unit in the last place off, so the two agree to float32 rounding rather than bit for
bit (``tests/unit/test_optim.py`` states the tolerance). The loop also multiplies each gradient
by the gradient-norm clipping's factor as it reads it, as ``clip_grad_norm_`` would have done in a
pass of its own: the same float32 product, so the update is the same.

The source is compiled on first use and cached (``c_library``); where no compiler works, ``load()``
returns None and ``problem()`` says why: the caller keeps the pure-torch update.
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence

import torch

from .c_library import CLibrary, c_source

#: The C source (``adadelta_loop.c``, package data), its ``#include "run_parts.h"`` inlined.
SOURCE = c_source("adadelta_loop.c")

#: Fewer elements than this per thread are not worth a thread (one paper-size step has 18 M).
MIN_PER_THREAD = 1 << 18


def _declare(lib: ctypes.CDLL) -> None:
    lib.adadelta_step.restype = ctypes.c_int
    lib.adadelta_step.argtypes = [ctypes.POINTER(ctypes.c_void_p)] * 4 + [
        ctypes.POINTER(ctypes.c_long),
        ctypes.c_int,
        ctypes.c_int,
        *[ctypes.c_float] * 5,
    ]


LIBRARY = CLibrary("adadelta", SOURCE, _declare, openmp=True)


def load() -> ctypes.CDLL | None:
    """The loop's library, or None where it cannot be built or loaded here (``problem()``)."""
    return LIBRARY.load()


def problem() -> str | None:
    """Why the loop cannot be used here (after trying to build it), None where it can."""
    return LIBRARY.problem()


def step(
    lib: ctypes.CDLL,
    tensors: Sequence[tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]],
    lr: float,
    rho: float,
    eps: float,
    threads: int,
    grad_scale: float = 1.0,
) -> None:
    """One Adadelta update of every (param, grad, square_avg, acc_delta) in ``tensors``: contiguous
    float32 CPU tensors of equal sizes (the caller checks), in place, each gradient taken times
    ``grad_scale`` (a float32 value: the clipping's factor; the gradients themselves are left as
    they are). torch's scalars: rho, 1 - rho (computed in double), eps and -lr, each rounded to
    float32 as torch's float kernels do."""
    k = len(tensors)
    if k == 0:
        return
    columns = [(ctypes.c_void_p * k)(*(t[i].data_ptr() for t in tensors)) for i in range(4)]
    sizes = (ctypes.c_long * k)(*(t[0].numel() for t in tensors))
    total = sum(sizes)
    threads = max(1, min(threads, total // MIN_PER_THREAD))
    lib.adadelta_step(*columns, sizes, k, threads, rho, 1 - rho, eps, -lr, grad_scale)
