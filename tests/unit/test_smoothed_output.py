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


def _bf16(x: torch.Tensor) -> torch.Tensor:
    return x.to(torch.bfloat16).to(torch.float64)


@pytest.mark.parametrize("eps", [0.0, 0.1])
@pytest.mark.parametrize("loops", [True, False])
def test_bf16_operands_are_the_rounded_products(eps: float, loops: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """``operands=torch.bfloat16`` (``--bf16-output``): the terms and the three gradients are the
    float64 computation of the same function with each product's operands and result rounded to
    bfloat16 (u, W and the logits' gradient d; z = bf16(u Wᵀ) + b, du = bf16(d W), dW = bf16(dᵀ u),
    db = Σ d), within two bfloat16 units (2⁻⁷) of each tensor's norm (the products accumulate
    in float32 before their rounding); du and dW bfloat16 numbers, every one (the backward
    products' results, not float32's); not the float32 layer's figures."""
    if loops and target_log_probs.LIBRARY.load() is None:
        pytest.skip(f"the C loops cannot be built here: {target_log_probs.LIBRARY.problem()}")
    if not loops:
        monkeypatch.setattr(smoothed_output, "compiled", lambda u, layer: None)
        monkeypatch.setattr(target_log_probs, "compiled", lambda u, layer: None)
    torch.manual_seed(0)
    layer = nn.Linear(16, 40)
    with torch.no_grad():
        layer.weight.normal_(0.0, 1.0)
        layer.bias.normal_(0.0, 1.0)
    u = torch.randn(9, 16)
    targets = torch.tensor([3, 39, 1, 2, 17, 3, 25, 2, 1 + PAD_ID])
    weights = torch.linspace(-1.0, 2.0, len(targets), dtype=torch.float64)
    layer.zero_grad()
    uu = u.detach().requires_grad_()
    terms = smoothed_target_log_probs(uu, layer, targets, eps, torch.bfloat16)
    (terms * weights.float()).sum().backward()
    assert uu.grad is not None and layer.weight.grad is not None and layer.bias.grad is not None
    got = [terms.detach(), uu.grad, layer.weight.grad, layer.bias.grad]
    # The reference: float64, the rounding written out.
    w, b = layer.weight.detach(), layer.bias.detach().double()
    z = _bf16(_bf16(u).mm(_bf16(w).t())).requires_grad_()
    ones = torch.ones_like(targets)
    ref_terms = smoothed_log_probs((z + b).unsqueeze(1), targets.unsqueeze(1), ones, eps)
    (ref_terms * weights).sum().backward()
    assert z.grad is not None
    d = z.grad
    want = [ref_terms.detach(), _bf16(_bf16(d).mm(_bf16(w))), _bf16(_bf16(d).t().mm(_bf16(u))), d.sum(0)]
    for g, r in zip(got, want, strict=True):
        assert g.dtype == torch.float32
        assert float((g.double() - r).norm()) <= 2**-7 * float(r.norm())
    for g in got[1:3]:
        assert torch.equal(g, g.to(torch.bfloat16).float())
    plain = _run("fused", layer, u, targets, eps)
    assert not torch.equal(got[0], plain[0]) and not torch.equal(got[2], plain[2])
