"""Dropout for training on the CPU with its masks drawn by a counter-based generator in C.

``nn.Dropout`` in training draws its mask with torch's ``bernoulli_``: on the CPU one Mersenne
Twister draw per element on one thread, about 14 ns an element (3.5 ms for a (2,000, 128)
activation, 80 times the product with the mask). The transformer's step has 22 such dropouts and
the rnnsearch network's a few wider ones. Here the mask of element i is a word of Philox4x32-10
(Salmon et al. 2011, the generator of torch's CUDA dropout) at a counter given by i, under a key
drawn once per call from torch's own generator: one C loop (``dropout_masks.c``: AVX2 where the
CPU has it, plain C elsewhere, the same words) draws the words and writes x * noise, and the
backward pass draws the same words again from the saved key for g * noise, so no mask is kept.

The arithmetic is torch's: noise = scale where the element is kept, else 0, with scale = 1 / (1 -
p) rounded to float32 as torch's ``_dropout_impl`` computes it (``noise.div_(1 - p)``), and y = x *
noise, gradient g * noise. An element is kept where its 32-bit word is at least round(p 2^32):
probability 1 - p within 2^-33. The masks are other draws than ``nn.Dropout``'s (same
distribution, not the same numbers): ``--dropout-kernel torch`` keeps torch's. The key comes from
torch's default generator, so ``torch.manual_seed`` (the run's ``--seed``) fixes the masks, a
resumed run continues the generator as it did, and the thread count does not change them.

Float32 tensors on the CPU only; other dtypes (bf16 autocast) and devices go to torch's dropout,
and so does everything where the loop cannot be built (``c_library``: ``problem()`` says why).
"""

from __future__ import annotations

import ctypes

import torch
from torch import nn
from torch.autograd.function import once_differentiable
from torch.nn import functional as F

from .c_library import CLibrary, c_source

#: The C source (``dropout_masks.c``, package data), its ``#include "run_parts.h"`` inlined.
SOURCE = c_source("dropout_masks.c")

#: Fewer elements than this per thread are not worth a thread.
MIN_PER_THREAD = 1 << 16

#: The dropout implementations a run may use (``--dropout-kernel``).
KERNELS = ("compiled", "torch")


def _declare(lib: ctypes.CDLL) -> None:
    word = ctypes.c_uint32
    lib.dropout_apply.restype = ctypes.c_int
    lib.dropout_apply.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_long, word, word, word, ctypes.c_float]
    lib.dropout_apply.argtypes += [ctypes.c_int]
    lib.philox_words.restype = None
    lib.philox_words.argtypes = [ctypes.c_void_p, ctypes.c_long, word, word]


LIBRARY = CLibrary("dropout-masks", SOURCE, _declare, openmp=True)


def problem() -> str | None:
    """Why the loop cannot be used here (after trying to build it), None where it can."""
    return LIBRARY.problem()


def drop_below(p: float) -> int:
    """The 32-bit words below which an element is dropped: round(p 2^32), within 0 .. 2^32 - 1."""
    return min(round(p * 2**32), 2**32 - 1)


def scale(p: float) -> float:
    """1 / (1 - p) as torch's dropout computes it: float32 1 divided by the double 1 - p in float32."""
    return float(torch.ones((), dtype=torch.float32).div_(1 - p))


def apply(lib: ctypes.CDLL, x: torch.Tensor, key: tuple[int, int], p: float) -> torch.Tensor:
    """x * noise for the contiguous float32 CPU tensor ``x``, the noise drawn under ``key``."""
    y = torch.empty_like(x)
    n = x.numel()
    threads = max(1, min(torch.get_num_threads(), n // MIN_PER_THREAD))
    lib.dropout_apply(x.data_ptr(), y.data_ptr(), n, key[0], key[1], drop_below(p), scale(p), threads)
    return y


def draw_key() -> tuple[int, int]:
    """A key from torch's default CPU generator (one draw below 2^62), as two 32-bit words."""
    v = int(torch.randint(0, 2**62, (), dtype=torch.int64))
    return v & 0xFFFFFFFF, v >> 32


class _Dropout(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor, p: float, lib: ctypes.CDLL) -> torch.Tensor:  # type: ignore[override]
        key = draw_key()
        ctx.key, ctx.p, ctx.lib = key, p, lib
        return apply(lib, x.contiguous(), key, p)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor, None, None]:  # type: ignore[override]
        return apply(ctx.lib, grad.contiguous(), ctx.key, ctx.p), None, None


class CounterDropout(nn.Module):
    """``nn.Dropout(p)`` whose masks the C loop draws (module text); torch's dropout where it cannot
    (another dtype or device, no loop)."""

    def __init__(self, p: float):
        super().__init__()
        if not 0.0 <= p < 1.0:
            raise ValueError(f"dropout must be at least 0 and below 1, not {p}")
        self.p = p

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p == 0.0:
            return x
        lib = LIBRARY.load() if x.dtype == torch.float32 and x.device.type == "cpu" else None
        if lib is None:
            return F.dropout(x, self.p, True)
        return _Dropout.apply(x, self.p, lib)

    def extra_repr(self) -> str:
        return f"p={self.p}"


def counter_dropout(network: object) -> int:
    """Every ``nn.Dropout`` of ``network`` (a torch module) replaced by a ``CounterDropout`` of its
    rate, in place (a network's dropouts hold no parameters: its state and its files are
    unchanged); how many."""
    if not isinstance(network, nn.Module):
        raise TypeError(f"a torch module has dropouts to replace, not {type(network).__name__}")
    swapped = 0
    for module in list(network.modules()):
        for name, child in list(module.named_children()):
            if type(child) is nn.Dropout:
                setattr(module, name, CounterDropout(child.p))
                swapped += 1
    return swapped
