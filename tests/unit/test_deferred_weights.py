"""``training.deferred_weights`` against autograd: a recurrence that applies linear layers step
after step (one layer twice a step, one without a bias, one frozen) gives the same outputs and
the same gradients of its inputs, weights and biases, its weights' gradients taken once over all
steps; within float32 rounding, and to 1e-12 in float64."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from torch import nn

from phrase_rescorer.training.deferred_weights import DeferredWeights

pytestmark = pytest.mark.usefixtures("one_thread")

Linear = Callable[[nn.Linear, torch.Tensor], torch.Tensor]


def _recurrence(layers: list[nn.Linear], x: torch.Tensor, h0: torch.Tensor, linear: Linear) -> torch.Tensor:
    h, out = h0, []
    for t in range(x.shape[1]):
        rows = 4 - t % 2  # ragged: fewer rows at odd steps
        inp = torch.cat([x[:rows, t], h[:rows]], 1)
        a = torch.tanh(linear(layers[0], inp))
        b = linear(layers[1], torch.cat([a, h[:rows]], 1)) + linear(layers[2], inp)
        h = torch.cat([torch.tanh(b + linear(layers[0], inp)), h[rows:]])
        out.append(h)
    return torch.stack(out, 1)


def _outputs_and_gradients(
    layers: list[nn.Linear], x: torch.Tensor, h0: torch.Tensor, weigh: torch.Tensor, linear: Linear
) -> list[torch.Tensor]:
    """The recurrence's outputs, then the gradients of x, h0 and every trained weight and bias."""
    inputs = [x.clone().requires_grad_(), h0.clone().requires_grad_()]
    for layer in layers:
        layer.zero_grad()
    out = _recurrence(layers, inputs[0], inputs[1], linear)
    (out * weigh).sum().backward()
    params = [p for layer in layers for p in layer.parameters() if p.requires_grad]
    grads = [t.grad for t in [*inputs, *params]]
    assert all(g is not None for g in grads)
    return [out.detach(), *(g for g in grads if g is not None)]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_equals_autograd(dtype: torch.dtype) -> None:
    torch.manual_seed(0)
    layers = [nn.Linear(8, 5), nn.Linear(10, 5, bias=False), nn.Linear(8, 5)]
    for layer in layers:
        layer.to(dtype)
    layers[2].weight.requires_grad_(False)  # a frozen weight: the layer as it is
    x = torch.randn(4, 6, 3, dtype=dtype)
    h0 = torch.randn(4, 5, dtype=dtype)
    weigh = torch.randn(4, 6, 5, dtype=dtype)

    want = _outputs_and_gradients(layers, x, h0, weigh, lambda layer, inp: layer(inp))
    got = _outputs_and_gradients(layers, x, h0, weigh, DeferredWeights().linear)
    tol = 1e-12 if dtype == torch.float64 else 1e-5
    assert len(got) == len(want) == 7
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w, rtol=tol, atol=tol)


def test_bfloat16_operands() -> None:
    """``DeferredWeights(torch.bfloat16)``: each step's product and its input's gradient are the
    product of the operands rounded to bfloat16, bit for bit; the weights' gradients the float32
    sum over the steps of gᵀ x (within float32 rounding); a frozen layer runs as it is."""
    torch.manual_seed(0)
    layers = [nn.Linear(8, 5), nn.Linear(10, 5, bias=False), nn.Linear(8, 5)]
    layers[2].weight.requires_grad_(False)
    x, h0, weigh = torch.randn(4, 6, 3), torch.randn(4, 5), torch.randn(4, 6, 5)

    def rounded(layer: nn.Linear, inp: torch.Tensor) -> torch.Tensor:
        """The bfloat16 product's value and input gradient, and a float32 weight gradient (the
        product with w - w, zero, contributes it and nothing else)."""
        w = layer.weight
        if not w.requires_grad:
            return layer(inp)
        y = inp.to(torch.bfloat16).mm(w.detach().to(torch.bfloat16).t()).float() + inp.mm((w - w.detach()).t())
        return y if layer.bias is None else y + layer.bias

    want = _outputs_and_gradients(layers, x, h0, weigh, rounded)
    got = _outputs_and_gradients(layers, x, h0, weigh, DeferredWeights(torch.bfloat16).linear)
    plain = _outputs_and_gradients(layers, x, h0, weigh, DeferredWeights().linear)
    for g, w in zip(got[:3], want[:3], strict=True):  # the outputs and the inputs' gradients
        assert torch.equal(g, w)
    for g, w in zip(got[3:], want[3:], strict=True):  # weights and biases
        torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-5)
    assert not torch.equal(got[0], plain[0])  # not the float32 path under another name
    torch.testing.assert_close(got[0], plain[0], rtol=0.05, atol=0.05)
