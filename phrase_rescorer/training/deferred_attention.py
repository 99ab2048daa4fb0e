"""Additive attention step after step, the encoder memory's and keys' gradients taken once.

At decoder step t the additive attention (``model.attention``) reads the whole encoder memory
h (B, S, D) and its keys U_a h (B, S, A)::

    p_t = tanh(W_a q_t + keys)      (B, S, A)
    e_t = p_t v_a                   a_t = softmax(e_t) over the real positions
    ctx_t = a_tᵀ h                  (B, D)

Under autograd every step's backward pass writes a full (B, S, D) gradient of the memory (the
outer product a_t ⊗ dctx_t, as a batched product of depth 1) and a full (B, S, A) gradient of
the keys, and adds each into the running sum: two memory-sized tensors written and two added a
step. The memory's gradient is Σ_t a_t ⊗ dctx_t = Aᵀ dC over the steps' stacked weights (B, T, S)
and context gradients (B, T, D): ``DeferredAttention`` records each step's a_t and dctx_t and
the memory receives Aᵀ dC in one batched product when the backward pass has gone through every
step; each step's keys gradient is added in place into one buffer, given to the keys then. As
in ``deferred_weights``, memory and keys enter the steps through one autograd node each
(``_Gather``), whose backward pass autograd runs after those of all their uses; W_a's weight
gradient is deferred by ``deferred_weights`` itself. The step's own backward pass (softmax, tanh,
v_a and the query) is written out, the same formulas as autograd's.

Values and gradients equal the model's to float rounding (W_a q a product and then its bias; the
order of the sums over the steps): ``tests/unit/test_deferred_attention.py``. The
other attention kinds, autocast, and calls without gradients run the model's own attention.
Each graph can be backpropagated once (no double backward), as training does.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.autograd.function import once_differentiable

from ..model.attention import Attention
from ..model.decoders import Encoded, Project


class _Record:
    """One forward pass's attention over the steps: each step's weights and context gradient
    (for the memory) and the keys' summed gradient, filled by the steps' backward passes."""

    def __init__(self) -> None:
        self.weights: list[torch.Tensor] = []
        self.ctx_grads: list[torch.Tensor] = []
        self.keys_grad: torch.Tensor | None = None


class DeferredAttention:
    """For one forward pass: ``attend(attention, q, enc)`` is ``attention(q, enc.keys,
    enc.memory, enc.real)`` (``Decoder.step``'s ``attend``), memory and keys gradients taken
    once over every step (module text). ``project`` computes ``W_a q`` (``DeferredWeights.linear``)."""

    def __init__(self, project: Project) -> None:
        self._project = project
        self._entry: tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, _Record] | None = None

    def attend(self, attention: Attention, q: torch.Tensor, enc: Encoded) -> tuple[torch.Tensor, torch.Tensor]:
        memory, keys = enc.memory, enc.keys
        if (
            attention.kind != "additive"
            or not torch.is_grad_enabled()
            or torch.is_autocast_enabled(q.device.type)
            or not (memory.requires_grad or keys.requires_grad or q.requires_grad)
        ):
            return attention(q, keys, memory, enc.real)
        if self._entry is None or self._entry[0] is not memory or self._entry[1] is not keys:
            record = _Record()
            gathered = _Gather.apply(memory, record, False), _Gather.apply(keys, record, True)
            self._entry = (memory, keys, *gathered, record)
        _, _, memory_in, keys_in, record = self._entry
        qw = self._project(attention.W_a, q)
        return _AdditiveStep.apply(qw, keys_in, attention.v_a.weight, memory_in, enc.real, record)


class _Gather(torch.autograd.Function):
    """Memory or keys as the steps use them: the backward pass, after every step's, gives the
    memory Aᵀ dC or the keys their summed gradient."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, record: _Record, is_keys: bool) -> torch.Tensor:
        ctx.record, ctx.is_keys = record, is_keys
        return x.detach()  # the same storage; the gradient comes through this node

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, unused: torch.Tensor) -> tuple[torch.Tensor | None, None, None]:
        record: _Record = ctx.record
        if ctx.is_keys:
            grad, record.keys_grad = record.keys_grad, None
            return grad, None, None
        if not record.weights:
            return None, None, None
        weights = torch.stack(record.weights, 1)  # (B, T, S)
        grads = torch.stack(record.ctx_grads, 1)  # (B, T, D)
        record.weights.clear()
        record.ctx_grads.clear()
        return torch.bmm(weights.transpose(1, 2), grads), None, None


class _AdditiveStep(torch.autograd.Function):
    """(ctx (B, D), a (B, S)) of one step from W_a q (B, A), keys (B, S, A), v_a's weight (1, A),
    memory (B, S, D) and the real positions (B, S); the backward pass records what ``_Gather``
    needs and returns the query's and v_a's gradients."""

    @staticmethod
    def forward(
        ctx: Any,
        qw: torch.Tensor,
        keys: torch.Tensor,
        v: torch.Tensor,
        memory: torch.Tensor,
        real: torch.Tensor,
        record: _Record,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        p = torch.tanh(qw.unsqueeze(1) + keys)
        e = torch.matmul(p, v.t()).squeeze(2)
        a = torch.softmax(e.masked_fill(~real, float("-inf")), dim=1)
        out = torch.bmm(a.unsqueeze(1), memory).squeeze(1)
        ctx.save_for_backward(p, v, memory, a)
        ctx.record = record
        return out, a

    @staticmethod
    @once_differentiable
    def backward(
        ctx: Any, d_out: torch.Tensor, d_a: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor, torch.Tensor | None, None, None]:
        p, v, memory, a = ctx.saved_tensors
        record: _Record = ctx.record
        record.weights.append(a)
        record.ctx_grads.append(d_out)
        d_a = torch.bmm(memory, d_out.unsqueeze(2)).squeeze(2) + d_a
        d_e = a * (d_a - (a * d_a).sum(1, keepdim=True))  # softmax's; 0 where a is (padding)
        d_v = d_e.reshape(1, -1).mm(p.reshape(-1, p.shape[2]))  # (1, A)
        d_pre = (1 - p * p).mul_(v).mul_(d_e.unsqueeze(2))  # (B, S, A)
        if record.keys_grad is None:
            record.keys_grad = d_pre  # this step's own tensor: the later steps add into it
        else:
            record.keys_grad.add_(d_pre)
        return d_pre.sum(1), None, d_v, None, None, None
