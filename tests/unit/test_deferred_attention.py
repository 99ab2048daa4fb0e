"""``training.deferred_attention`` against autograd over ``model.attention``: a recurrence whose
query depends on the previous context, over sources with padding, gives the same contexts and
weights and the same gradients of the memory, the query and every attention parameter (W_a's
through ``deferred_weights``), within float32 rounding and to 1e-12 in float64; the weights' own
gradient (used below) reaches the scores too."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

from phrase_rescorer.model.attention import Attention
from phrase_rescorer.model.decoders import Encoded
from phrase_rescorer.training.deferred_attention import DeferredAttention
from phrase_rescorer.training.deferred_weights import DeferredWeights

pytestmark = pytest.mark.usefixtures("one_thread")

Attend = Callable[[Attention, torch.Tensor, Encoded], tuple[torch.Tensor, torch.Tensor]]


def _run(attention: Attention, memory: torch.Tensor, q0: torch.Tensor, real: torch.Tensor, attend: Attend):
    enc = Encoded(memory, attention.keys(memory), real, memory[:, 0])
    q, ctxs, weights = q0, [], []
    for _ in range(5):
        ctx, a = attend(attention, q, enc)
        ctxs.append(ctx)
        weights.append(a)
        q = torch.tanh(q + ctx[:, : q.shape[1]])
    return torch.stack(ctxs, 1), torch.stack(weights, 1)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_equals_autograd(dtype: torch.dtype) -> None:
    torch.manual_seed(0)
    attention = Attention("additive", 6, 8, 7).to(dtype)
    real = torch.tensor([[True] * 5, [True, True, True, False, False], [True, False, False, False, False]])
    memory0 = torch.randn(3, 5, 8, dtype=dtype)
    q00 = torch.randn(3, 6, dtype=dtype)
    weigh_ctx = torch.randn(3, 5, 8, dtype=dtype)
    weigh_a = torch.randn(3, 5, 5, dtype=dtype)

    def grads(attend: Attend) -> list[torch.Tensor]:
        memory, q0 = memory0.clone().requires_grad_(), q00.clone().requires_grad_()
        attention.zero_grad()
        ctxs, weights = _run(attention, memory, q0, real, attend)
        ((ctxs * weigh_ctx).sum() + (weights * weigh_a).sum()).backward()
        found = [memory.grad, q0.grad, *(p.grad for p in attention.parameters())]
        assert all(g is not None for g in found)
        return [ctxs.detach(), weights.detach(), *(g for g in found if g is not None)]

    want = grads(lambda att, q, enc: att(q, enc.keys, enc.memory, enc.real))
    got = grads(DeferredAttention(DeferredWeights().linear).attend)
    assert len(got) == len(want) == 8  # contexts, weights, memory, query, W_a (2), U_a, v_a
    tol = 1e-12 if dtype == torch.float64 else 1e-5
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w, rtol=tol, atol=tol)


def test_other_kinds_and_no_gradients_are_the_models_attention() -> None:
    torch.manual_seed(0)
    memory, q, real = torch.randn(2, 4, 6), torch.randn(2, 6), torch.ones(2, 4, dtype=torch.bool)
    for kind in ("dot", "general", "additive"):
        attention = Attention(kind, 6, 6, 5)
        enc = Encoded(memory, attention.keys(memory), real, memory[:, 0])
        with torch.no_grad():
            want = attention(q, enc.keys, memory, real)
            got = DeferredAttention(DeferredWeights().linear).attend(attention, q, enc)
        assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])
