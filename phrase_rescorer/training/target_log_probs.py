"""log p(y_t | ...) of the targets from the output layer: its product, log-softmax and pick.

The end of a training step's forward pass is the output layer over the shortlist, logits = u Wᵀ
+ b for N positions (N × V, V = 15,000 words at paper size), then one log-softmax per row and the
target's entry. Written with torch's operators that is about ten passes over the (N, V) buffer
(the bias copied in before the product, the product reading it back, the log-softmax's three,
the backward pass's exp, scaling and scatter, the bias gradient's sum), memory-bound at 20 MB.
Two paths compute it:

* ``picked_log_probs`` (any dtype and device): the output layer as ``nn.Linear``, then a
  log-softmax whose (N, V) buffer becomes the logits' gradient in place, g (onehot - softmax);
  ``cross_entropy`` would zero-fill one more (N, V) buffer and write the gradient into a third.
* two C loops (float32 on the CPU, where ``c_library`` can build them; ``target_log_probs``
  chooses): the product without its bias, then ``out_forward`` adds the bias as it reads each
  row, keeps per row only its maximum m and log Σ exp(z - m) (the sum taken while the row is in
  cache) and picks the target; the backward pass's ``out_backward`` turns the kept logits into
  the gradient exp((z - m) - log Σ)(-g) (+ g at the target) in place in one pass, summing the
  bias's gradient as it goes (in double, per thread, then in thread order: the same sum on
  every run). The exponential is a polynomial of Cephes' expf (relative error under 2e-7, 0
  below e^-87), the sums kept in 16 lanes: values and gradients are as close to float64 as
  torch's float32 path (at most twice its largest error, ``tests/unit/
  test_target_log_probs.py``), not bit for bit equal to it. The rows are split
  over torch's thread count (under ``MIN_ROWS_PER_THREAD`` rows a thread, fewer), on torch's own
  OpenMP threads where ``c_library`` can build for them, else on pthreads. For label smoothing
  (``compiled_smoothed``, ``smoothed_output``'s function) the forward loop also sums each row's
  logits and the backward loop adds the smoothing's terms as it writes the gradient; without it
  the loops run as before.

``operands=torch.bfloat16`` (``train-nmt --bf16-output``): the layer's three products, the
logits u Wᵀ forward, the input's gradient d W and the weight's dᵀ u backward, with bfloat16
operands (u and W rounded once in the forward pass and kept for the backward's products, the
logits' gradient d once for both), each result rounded to
bfloat16 by torch's CPU product and taken back in float32; the log-softmax, the pick, the
smoothing and the bias's gradient stay float32. An approximation of the float32 layer, opt-in:
faster only where the CPU multiplies bfloat16 in hardware (AVX512-BF16, AMX).

Each graph can be backpropagated once (no double backward), as training does.
"""

from __future__ import annotations

import ctypes
from typing import Any, Protocol

import torch
from torch.autograd.function import once_differentiable

from .c_library import CLibrary, c_source

#: The C source (``target_log_probs.c``, package data), its ``#include "run_parts.h"`` inlined.
SOURCE = c_source("target_log_probs.c")

#: Fewer rows than this per thread are not worth a thread (a paper-size batch has about 300).
MIN_ROWS_PER_THREAD = 32


def _declare(lib: ctypes.CDLL) -> None:
    size, address = ctypes.c_long, ctypes.c_void_p
    lib.out_forward.restype = ctypes.c_int
    lib.out_forward.argtypes = [size, size, *[address] * 7, ctypes.c_int]
    lib.out_backward.restype = ctypes.c_int
    lib.out_backward.argtypes = [size, size, *[address] * 8, ctypes.c_float, ctypes.c_float, size, ctypes.c_int]


LIBRARY = CLibrary("target-log-probs", SOURCE, _declare, openmp=True)


class OutputLayer(Protocol):
    """An output layer: ``nn.Linear``, or a product with another module's weights (the
    transformer's, whose output matrix is its target embedding)."""

    @property
    def weight(self) -> torch.Tensor: ...

    @property
    def bias(self) -> torch.Tensor | None: ...

    def __call__(self, u: torch.Tensor) -> torch.Tensor: ...


def target_log_probs(
    u: torch.Tensor, layer: OutputLayer, targets: torch.Tensor, operands: torch.dtype | None = None
) -> torch.Tensor:
    """log softmax(layer(u))[i, targets[i]] (N,) for u (N, R): the C loops where they apply
    (float32 CPU tensors outside autocast, a layer with a bias, the library built), else
    ``picked_log_probs(layer(u), targets)``. ``operands``: the layer's products' (module text);
    None: the tensors' own."""
    lib = compiled(u, layer)
    if lib is None:
        return picked_log_probs(layer_logits(u, layer, operands).float(), targets)
    return _CompiledTargetLogProbs.apply(u, layer.weight, layer.bias, targets, lib, 0.0, 0, operands)


def layer_logits(u: torch.Tensor, layer: OutputLayer, operands: torch.dtype | None) -> torch.Tensor:
    """``layer(u)``; where ``operands`` is given, its product's operands in that dtype, the
    product back in u's and the bias added there (autograd through the casts, as the C loops'
    path computes it)."""
    if operands is None:
        return layer(u)
    y = torch.nn.functional.linear(u.to(operands), layer.weight.to(operands)).to(u.dtype)
    return y if layer.bias is None else y + layer.bias


def compiled(u: torch.Tensor, layer: OutputLayer) -> ctypes.CDLL | None:
    """The C loops' library where they apply to ``layer(u)`` (float32 CPU tensors outside
    autocast, a layer with a bias, the library built), else None."""
    w, b = layer.weight, layer.bias
    if (
        b is not None
        and all(t.dtype == torch.float32 and t.device.type == "cpu" for t in (u, w, b))
        and not torch.is_autocast_enabled("cpu")
    ):
        return LIBRARY.load()
    return None


def compiled_smoothed(
    u: torch.Tensor,
    layer: OutputLayer,
    targets: torch.Tensor,
    lib: ctypes.CDLL,
    eps: float,
    pad: int,
    operands: torch.dtype | None = None,
) -> torch.Tensor:
    """With the library of ``compiled``: the label-smoothed term of each position (N,),
    (1 - eps) log p(target) + eps mean of log p over the outputs but ``pad``
    (``smoothed_output``'s function), the loops also summing each row's logits forward and
    adding the smoothing's terms to the gradient as they write it. ``operands``: as for
    :func:`target_log_probs`."""
    return _CompiledTargetLogProbs.apply(u, layer.weight, layer.bias, targets, lib, eps, pad, operands)


def _product(a: torch.Tensor, b: torch.Tensor, operands: torch.dtype | None) -> torch.Tensor:
    """a b in float32, its operands in ``operands`` where given (module text)."""
    if operands is None:
        return a.mm(b)
    return a.to(operands).mm(b.to(operands)).to(torch.float32)


def _threads(rows: int) -> int:
    return max(1, min(torch.get_num_threads(), rows // MIN_ROWS_PER_THREAD, 64))


class _CompiledTargetLogProbs(torch.autograd.Function):
    @staticmethod
    def forward(
        ctx: Any,
        u: torch.Tensor,
        w: torch.Tensor,
        b: torch.Tensor,
        targets: torch.Tensor,
        lib: ctypes.CDLL,
        eps: float,
        pad: int,
        operands: torch.dtype | None,
    ) -> torch.Tensor:
        n, V = u.shape[0], w.shape[0]
        if operands is not None:  # rounded once: the forward product's operands, kept for the backward's
            u, w = u.to(operands), w.to(operands)
        logits = _product(u, w.t(), operands)  # (N, V), the bias added by the loop
        b = b.contiguous()
        targets = targets.contiguous().to(torch.long)
        if n and (targets.min() < 0 or targets.max() >= V):
            raise IndexError(f"target_log_probs: a target outside the {V} outputs")
        mx, ls, picked = logits.new_empty(n), logits.new_empty(n), logits.new_empty(n)
        zsum = logits.new_empty(n) if eps else None
        pointers = (logits, b, targets, mx, ls, picked)
        lib.out_forward(n, V, *(t.data_ptr() for t in pointers), None if zsum is None else zsum.data_ptr(), _threads(n))
        ctx.lib, ctx.eps, ctx.pad, ctx.operands = lib, eps, pad, operands
        ctx.save_for_backward(u, w, b, targets, logits, mx, ls)
        if zsum is None:
            return picked
        uniform = (zsum - (logits[:, pad] + b[pad])) / (V - 1) - (mx + ls)  # mean log p off <pad>
        return (1.0 - eps) * picked + eps * uniform

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        u, w, b, targets, logits, mx, ls = ctx.saved_tensors
        n, V = logits.shape
        g = grad.contiguous().to(torch.float32)
        threads = _threads(n)
        sums = logits.new_empty(threads, V, dtype=torch.float64)
        db = logits.new_empty(V)
        # The kept logits are nobody else's (the forward pass made them): they become the gradient.
        pointers = (logits, b, targets, mx, ls, g, sums, db)
        spread, keep = ctx.eps / (V - 1), 1.0 - ctx.eps
        ctx.lib.out_backward(n, V, *(t.data_ptr() for t in pointers), spread, keep, ctx.pad, threads)
        if ctx.operands is not None and (ctx.needs_input_grad[0] or ctx.needs_input_grad[1]):
            logits = logits.to(ctx.operands)  # the gradient, rounded once for both products
        du = _product(logits, w, ctx.operands) if ctx.needs_input_grad[0] else None
        dw = _product(logits.t(), u, ctx.operands) if ctx.needs_input_grad[1] else None
        return du, dw, db if ctx.needs_input_grad[2] else None, None, None, None, None, None


def picked_log_probs(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """log softmax(logits)[i, targets[i]] (N,) for logits (N, V): ``-cross_entropy(..., reduction=
    "none")`` with one (N, V) buffer instead of three (module text)."""
    return _PickedLogProbs.apply(logits, targets)


class _PickedLogProbs(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        logp = torch.log_softmax(logits, dim=1)
        ctx.save_for_backward(logp, targets)
        return logp.gather(1, targets.unsqueeze(1)).squeeze(1)

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        logp, targets = ctx.saved_tensors
        # The saved log-softmax is nobody else's (the forward pass made it): it becomes the gradient.
        d = logp.exp_().mul_(-grad.unsqueeze(1))
        return d.scatter_add_(1, targets.unsqueeze(1), grad.unsqueeze(1)), None
