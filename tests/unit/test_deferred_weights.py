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

    def run(linear: Linear) -> list[torch.Tensor]:
        inputs = [x.clone().requires_grad_(), h0.clone().requires_grad_()]
        for layer in layers:
            layer.zero_grad()
        out = _recurrence(layers, inputs[0], inputs[1], linear)
        (out * weigh).sum().backward()
        params = [p for layer in layers for p in layer.parameters() if p.requires_grad]
        grads = [t.grad for t in [*inputs, *params]]
        assert all(g is not None for g in grads)
        return [out.detach(), *(g for g in grads if g is not None)]

    want = run(lambda layer, inp: layer(inp))
    got = run(DeferredWeights().linear)
    tol = 1e-12 if dtype == torch.float64 else 1e-5
    assert len(got) == len(want) == 7
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w, rtol=tol, atol=tol)
