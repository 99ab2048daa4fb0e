"""The output layer's target log-probabilities (``training.target_log_probs``): the C loops
against the float64 computation and torch's float32 one, over thread counts, and the fallback."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from phrase_rescorer.training import target_log_probs as tlp


def _compiled() -> None:
    if tlp.LIBRARY.load() is None:
        pytest.skip(f"the output layer's loops cannot be built here: {tlp.LIBRARY.problem()}")


def _case(N: int, V: int, R: int, scale: float, seed: int) -> tuple[torch.Tensor, nn.Linear, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    u = (scale * torch.randn(N, R, generator=gen)).requires_grad_()
    layer = nn.Linear(R, V)
    with torch.no_grad():
        layer.weight.copy_(torch.randn(V, R, generator=gen))
        layer.bias.copy_(2 * torch.randn(V, generator=gen))
    targets = torch.randint(0, V, (N,), generator=gen)
    if N > 2:
        targets[1] = targets[2]  # two rows with the same target
    return u, layer, targets


def _run(
    u: torch.Tensor, layer: nn.Linear, targets: torch.Tensor, g: torch.Tensor, plain: bool = False
) -> tuple[torch.Tensor, ...]:
    u.grad = None
    layer.zero_grad(set_to_none=True)
    out = tlp.picked_log_probs(layer(u), targets) if plain else tlp.target_log_probs(u, layer, targets)
    out.backward(g)
    return out.detach(), u.grad, layer.weight.grad, layer.bias.grad


# V below, at and above the loops' 16 lanes, not a multiple of them; logits of spread 1 to 300
# (most exponentials under e^-87 at the widest); one row; the paper's shortlist size.
CASES = [(7, 37, 5, 0.3), (1, 16, 3, 1.0), (65, 1000, 20, 10.0), (40, 333, 8, 30.0), (300, 15000, 100, 0.1)]


@pytest.mark.parametrize(("N", "V", "R", "scale"), CASES)
def test_as_close_to_float64_as_torchs_float32_path(N: int, V: int, R: int, scale: float) -> None:
    """Values and the three gradients against float64: the largest error, relative to the
    largest entry, at most twice that of torch's float32 path (``picked_log_probs``) or 1e-6,
    whichever is more (measured: 1.0-1.3 times torch's on these cases)."""
    _compiled()
    u, layer, targets = _case(N, V, R, scale, seed=N + V)
    g = torch.randn(N, generator=torch.Generator().manual_seed(3))
    got = _run(u, layer, targets, g)
    plain = _run(u, layer, targets, g, plain=True)
    u64 = u.detach().double().requires_grad_()
    w64 = layer.weight.detach().double().requires_grad_()
    b64 = layer.bias.detach().double().requires_grad_()
    want = torch.log_softmax(u64 @ w64.t() + b64, dim=1).gather(1, targets.unsqueeze(1)).squeeze(1)
    want.backward(g.double())
    wants = (want.detach(), u64.grad, w64.grad, b64.grad)
    for name, a, b, w in zip(("values", "du", "dW", "db"), got, plain, wants, strict=True):
        size = float(w.abs().max())
        ours, torchs = (float((x.double() - w).abs().max()) / size for x in (a, b))
        assert ours <= max(2 * torchs, 1e-6), (name, ours, torchs)


def test_the_same_rows_on_any_number_of_threads() -> None:
    """Each row is one thread's: values and the logits' gradients equal bit for bit on 1 and 3
    threads; the bias gradient's per-thread sums, added in thread order, within rounding."""
    _compiled()
    u, layer, targets = _case(200, 700, 16, 3.0, seed=9)
    g = torch.randn(200, generator=torch.Generator().manual_seed(4))
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = _run(u, layer, targets, g)
        torch.set_num_threads(3)
        assert tlp._threads(200) == 3
        three = _run(u, layer, targets, g)
    finally:
        torch.set_num_threads(before)
    assert torch.equal(one[0], three[0])
    torch.testing.assert_close(one[3], three[3], rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(one[1], three[1], rtol=1e-6, atol=1e-6)  # products of equal gradients


def test_non_finite_logits_give_non_finite_values() -> None:
    """A diverged network (a NaN weight) gives NaN, as torch's log-softmax does, never a number."""
    _compiled()
    u, layer, targets = _case(5, 40, 4, 1.0, seed=2)
    with torch.no_grad():
        layer.weight[7, 0] = float("nan")
    out = tlp.target_log_probs(u, layer, targets)
    assert torch.isnan(out).all()


def test_a_target_outside_the_outputs_is_refused() -> None:
    _compiled()
    u, layer, targets = _case(4, 20, 3, 1.0, seed=1)
    targets[2] = 20
    with pytest.raises(IndexError, match="outside the 20 outputs"):
        tlp.target_log_probs(u, layer, targets)


def test_other_dtypes_autocast_and_no_compiler_take_torchs_path(monkeypatch: pytest.MonkeyPatch) -> None:
    u, layer, targets = _case(6, 30, 4, 1.0, seed=5)
    g = torch.ones(6)
    plain = _run(u, layer, targets, g, plain=True)
    monkeypatch.setattr(tlp.LIBRARY, "_loaded", [None])
    monkeypatch.setattr(tlp.LIBRARY, "_problem", ["no compiler"])
    for a, b in zip(_run(u, layer, targets, g), plain, strict=True):
        assert torch.equal(a, b)
    monkeypatch.undo()
    u64, layer64 = u.detach().double().requires_grad_(), layer.double()
    out = tlp.target_log_probs(u64, layer64, targets)
    assert "Picked" in type(out.grad_fn).__name__
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = tlp.target_log_probs(u, layer.float(), targets)
    assert "Picked" in type(out.grad_fn).__name__
