"""Linear layers through oneDNN with weights packed once: the same function, faster on CPU.

PyTorch runs ``nn.Linear`` on CPU through the BLAS it was built with (MKL for the official
wheels). oneDNN, also inside every x86 build of PyTorch, is faster for the shapes of this model
once a weight has been reordered into its blocked layout: measured on an AMD EPYC (Zen 4) core,
float32, 256 rows, 1000 x 3000 GEMMs ran at 109 GFLOP/s against 90 through MKL, and the
100 x 15,000 output matrix at 98 against 77 (the bias is added inside the GEMM instead of being
broadcast into the output first). The arithmetic is a float32 matrix product either way; only
the blocking, hence the rounding, differs (about 1e-7 relative).

``pack_linears(model)`` returns a copy of a model (sharing its parameters) whose ``nn.Linear``
layers are replaced by ``PackedLinear``; the model's own code (``GRU.step``, ``readout`` ...)
then runs unchanged. It is used for inference on CPU only; where oneDNN is missing or fails its
self-check, the model is returned as it is.
"""

from __future__ import annotations

import copy

import torch
import torch.nn.functional as F
from torch import nn

from .. import onednn


class PackedLinear(nn.Module):
    """``y = x W^T + b`` with W held in oneDNN's blocked layout (inference only).

    Only inputs of exactly ``rows_hint`` rows go through oneDNN; any other row count goes to
    ``F.linear``. oneDNN builds and caches one kernel per input shape, and with several threads
    calling it the cache kept growing with every new row count (measured: the peak RSS of a
    paper-size rescoring rose from 0.9 GB to 1.6 GB over 60,000 lines, and on); callers batch
    their rows in blocks of ``rows_hint``, so only the last, partial block of a batch misses."""

    def __init__(self, linear: nn.Linear, rows_hint: int = 256):
        super().__init__()
        self.in_features = linear.in_features
        self.out_features = linear.out_features
        self.weight = linear.weight.detach()
        self.bias = None if linear.bias is None else linear.bias.detach()
        self.rows = rows_hint
        self.packed = onednn.pack(linear.weight.detach(), rows_hint)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() != 2:  # oneDNN's linear takes (rows, features)
            y = self.forward(x.reshape(-1, x.shape[-1]))
            return y.reshape(*x.shape[:-1], self.out_features)
        if x.shape[0] != self.rows:  # see the class docstring
            return F.linear(x, self.weight, self.bias)
        return onednn.times_transposed(x, self.packed, bias=self.bias)


def _self_check(linear: nn.Linear, packed: PackedLinear) -> bool:
    x = torch.randn(packed.rows, linear.in_features, generator=torch.Generator().manual_seed(0))
    with torch.inference_mode():
        want = F.linear(x, linear.weight, linear.bias)
        got = packed(x)
    scale = float(want.abs().max()) + 1e-30
    return got.shape == want.shape and float((got - want).abs().max()) <= 1e-5 * scale


def pack_linears(model: nn.Module, rows_hint: int = 256) -> nn.Module:
    """A copy of a float32 CPU ``model`` with every ``nn.Linear`` packed for oneDNN, or
    ``model`` itself when that is not possible here."""
    first = next(model.parameters(), None)
    if first is None or first.device.type != "cpu" or first.dtype != torch.float32:
        return model
    if not onednn.available():
        return model
    shared = {id(p): p for p in model.parameters()}  # the copy shares the weights, not copies them
    packed = copy.deepcopy(model, memo=shared)
    for _, module in list(packed.named_modules()):
        for name, child in list(module.named_children()):
            if type(child) is nn.Linear:
                try:
                    replacement = PackedLinear(child, rows_hint)
                    ok = _self_check(child, replacement)
                except RuntimeError:
                    ok = False
                if not ok:
                    return model
                setattr(module, name, replacement)
    return packed.eval()
