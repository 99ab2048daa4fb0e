"""Linear maps applied step after step, their weights' gradients taken once over all steps.

A recurrence that applies ``layer(x_t)`` at every step t (the attention decoder's input
projection ``W [e(y_{t-1}); ctx_t]``) gets, under autograd, one weight-gradient product per step
(g_tᵀ x_t, as deep as the batch: 35-80 rows, a third of the BLAS's rate) and one addition of a
full weight-sized gradient per step. The weight's gradient is the sum Σ_t g_tᵀ x_t = Gᵀ X over
the steps' stacked rows, so ``DeferredWeights.linear`` records each step's input and output
gradient in the backward pass and the weight receives Gᵀ X in one product when the backward pass
has gone through every step: the weight enters the steps through one autograd node (``_Gather``)
whose backward pass autograd runs after those of all its uses. The inputs' gradients (g_t W) stay
per step: the recurrence needs them in order. The same gradient to float rounding (the order of
the sum over the steps): ``tests/unit/test_deferred_weights.py``. Each graph can be
backpropagated once (no double backward), as training does.

``DeferredWeights(torch.bfloat16)`` (``train-nmt --bf16-steps``) computes each step's products,
x wᵀ forward and g w backward, with bfloat16 operands: the weight rounded once per forward pass,
x and g at each step, the product's result (rounded to bfloat16 by torch's CPU product) back in
the input's float32. The weights' gradients Gᵀ X stay float32, from the steps' float32 inputs and
output gradients. Faster only where the CPU multiplies bfloat16 in hardware (AVX512-BF16, AMX).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.autograd.function import once_differentiable


class _Steps:
    """One weight's record over the steps of one forward pass: each step's input and output
    gradient, appended by the backward passes of its products."""

    def __init__(self, operand: torch.Tensor | None = None) -> None:
        self.inputs: list[torch.Tensor] = []
        self.grads: list[torch.Tensor] = []
        self.operand = operand  # the weight in the products' reduced precision; None: as it is


class DeferredWeights:
    """For one forward pass: ``linear(layer, x)`` is ``layer(x)``, its weight's gradient taken once
    over every call on that layer (module text)."""

    def __init__(self, dtype: torch.dtype | None = None) -> None:
        """``dtype``: the products' operands (module text); None: the inputs' own."""
        self._weights: dict[int, tuple[torch.Tensor, _Steps]] = {}
        self.dtype = dtype

    def linear(self, layer: nn.Linear, x: torch.Tensor) -> torch.Tensor:
        """``layer(x)`` for x (B, in); the bias's gradient as autograd takes it."""
        w = layer.weight
        if not w.requires_grad or not torch.is_grad_enabled() or torch.is_autocast_enabled(x.device.type):
            return layer(x)  # autocast: its casts belong to the operators it wraps
        entry = self._weights.get(id(w))
        if entry is None:
            steps = _Steps(None if self.dtype in (None, w.dtype) else w.detach().to(self.dtype))
            entry = self._weights[id(w)] = (_Gather.apply(w, steps), steps)
        y = _StepProduct.apply(x, entry[0], entry[1])
        return y if layer.bias is None else y + layer.bias


class _Gather(torch.autograd.Function):
    """The weight as the steps use it: its backward pass, after every step's, gives Gᵀ X."""

    @staticmethod
    def forward(ctx: Any, w: torch.Tensor, steps: _Steps) -> torch.Tensor:
        ctx.steps = steps
        return w.detach()  # the same storage; the gradient comes through this node

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, unused: torch.Tensor) -> tuple[torch.Tensor | None, None]:
        steps: _Steps = ctx.steps
        if not steps.grads:
            return None, None
        dw = torch.cat(steps.grads).t().mm(torch.cat(steps.inputs))
        steps.grads.clear()
        steps.inputs.clear()
        return dw, None


class _StepProduct(torch.autograd.Function):
    """x wᵀ at one step; its backward pass gives x's gradient and records (x, g) for ``_Gather``."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, w: torch.Tensor, steps: _Steps) -> torch.Tensor:
        ctx.save_for_backward(x, w)
        ctx.steps = steps
        if steps.operand is not None:
            return x.to(steps.operand.dtype).mm(steps.operand.t()).to(x.dtype)
        return x.mm(w.t())

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, g: torch.Tensor) -> tuple[torch.Tensor | None, None, None]:
        x, w = ctx.saved_tensors
        steps: _Steps = ctx.steps
        steps.grads.append(g)
        steps.inputs.append(x)
        if not ctx.needs_input_grad[0]:
            return None, None, None
        if steps.operand is not None:
            return g.to(steps.operand.dtype).mm(steps.operand).to(g.dtype), None, None
        return g.mm(w), None, None
