"""``training.smoothed_output`` against ``label_smoothing.smoothed_log_probs`` over the output
layer's logits: the same smoothed term of every position and the same gradients of the layer's
input, weight and bias, for eps 0 (log p itself), 0.1 and 0.5, targets anywhere in the shortlist;
within float32 rounding (through the C loops of ``target_log_probs`` and through torch's operators),
and to 1e-12 in float64."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from phrase_rescorer.data.vocab import PAD_ID
from phrase_rescorer.training import smoothed_output, target_log_probs
from phrase_rescorer.training.label_smoothing import smoothed_log_probs
from phrase_rescorer.training.smoothed_output import smoothed_target_log_probs

pytestmark = pytest.mark.usefixtures("one_thread")


def _run(fn: str, layer: nn.Linear, u: torch.Tensor, targets: torch.Tensor, eps: float) -> list[torch.Tensor]:
    """The terms (N,) and the gradients of u, the weight and the bias under a weighted sum."""
    layer.zero_grad()
    u = u.detach().requires_grad_()
    if fn == "plain":  # one position per row: the plain objective's sum is the position's term
        ones = torch.ones_like(targets)
        terms = smoothed_log_probs(layer(u).unsqueeze(1), targets.unsqueeze(1), ones, eps)
    else:
        terms = smoothed_target_log_probs(u, layer, targets, eps)
    (terms * torch.linspace(-1.0, 2.0, len(terms), dtype=terms.dtype)).sum().backward()
    assert u.grad is not None and layer.weight.grad is not None and layer.bias is not None
    assert layer.bias.grad is not None
    return [terms.detach(), u.grad, layer.weight.grad, layer.bias.grad]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("eps", [0.0, 0.1, 0.5])
@pytest.mark.parametrize("loops", [True, False])
def test_equals_the_smoothed_log_likelihood(
    dtype: torch.dtype, eps: float, loops: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if loops and dtype == torch.float32 and target_log_probs.LIBRARY.load() is None:
        pytest.skip(f"the C loops cannot be built here: {target_log_probs.LIBRARY.problem()}")
    if not loops:  # the torch operators' path, as without a compiler
        monkeypatch.setattr(smoothed_output, "compiled", lambda u, layer: None)
    torch.manual_seed(0)
    layer = nn.Linear(6, 40).to(dtype)
    with torch.no_grad():
        layer.weight.normal_(0.0, 1.0)
        layer.bias.normal_(0.0, 1.0)
    u = torch.randn(9, 6, dtype=dtype)
    targets = torch.tensor([3, 39, 1, 2, 17, 3, 25, 2, 1 + PAD_ID])
    want = _run("plain", layer, u, targets, eps)
    got = _run("fused", layer, u, targets, eps)
    tol = 1e-12 if dtype == torch.float64 else 2e-5  # float64: the order of the sums; float32: its rounding
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w, rtol=tol, atol=tol)


def test_refuses_a_smoothing_outside_0_to_1() -> None:
    with pytest.raises(ValueError, match="below 1"):
        smoothed_target_log_probs(torch.zeros(1, 2), nn.Linear(2, 3), torch.zeros(1, dtype=torch.long), 1.0)
