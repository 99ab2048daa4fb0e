"""``training.gru_sequence`` against autograd over the model's ``GRU.step``: the same states and
the same gradients (inputs, initial state, both recurrent matrices) within float32 rounding, with
a zero or a given initial state, ragged row counts and one-step runs; and in float64, where
the two orders of the arithmetic must agree to 1e-12. On a CUDA device too, where torch sees one.
In float32 on the CPU the backward pass's element-wise work runs in ``gru_gates``' compiled loops
where they can be built: checked against autograd as above, and against the torch operators'
path, which it must equal but for the carry's order of addition (float32 rounding)."""

from __future__ import annotations

import pytest
import torch

from phrase_rescorer.model.cho2014 import GRU
from phrase_rescorer.training import gru_gates
from phrase_rescorer.training.gru_sequence import gru_sequence


def _plain(gru: GRU, x: torch.Tensor, h0: torch.Tensor | None, counts: list[int]) -> torch.Tensor:
    """``GRU.step`` step after step on the first counts[t] rows, states packed step-major."""
    H = gru.hidden_dim
    h = h0 if h0 is not None else x.new_zeros(counts[0], H)
    out, off = [], 0
    for n in counts:
        h = gru.step(x[off : off + n], h[:n])
        out.append(h)
        off += n
    return torch.cat(out)


CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device here")


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=CUDA)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("zero_start", [True, False])
@pytest.mark.parametrize("counts", [[5, 5, 3, 2, 2, 1], [4], [3, 1], [6, 6, 6]])
@pytest.mark.parametrize("strided", [False, True])
def test_states_and_gradients_equal_autograd(
    device: str, dtype: torch.dtype, zero_start: bool, counts: list[int], strided: bool
) -> None:
    torch.manual_seed(3)
    H, B = 7, counts[0] + 2  # h0 has rows that never run: their gradient is zero
    gru = GRU(4, H).to(device, dtype)
    with torch.no_grad():
        for p in gru.parameters():
            p.normal_(0.0, 0.6)  # far from linear, so that a wrong term shows
    x = torch.randn(sum(counts), 3 * H, dtype=dtype, device=device, requires_grad=True)
    h0 = None if zero_start else torch.randn(B, H, dtype=dtype, device=device, requires_grad=True)
    weight = torch.randn(sum(counts), H, dtype=dtype, device=device)  # a loss that weighs every state

    inputs = [x, gru.U_rz.weight, gru.U.weight, *([h0] if h0 is not None else [])]
    names = ["x", "U_rz", "U", "h0"][: len(inputs)]

    layouts = []

    def column_major(g: torch.Tensor) -> torch.Tensor:
        g = g.t().contiguous().t()  # the same values, laid out by columns
        layouts.append(g.is_contiguous())
        return g

    def loss(states: torch.Tensor) -> torch.Tensor:
        # strided: the states' incoming gradient reaches gru_sequence laid out by columns
        if strided and states.requires_grad:
            states.register_hook(column_major)
        return (states * weight).sum()

    want = _plain(gru, x, h0, counts)
    want_grads = torch.autograd.grad(loss(want), inputs)
    got = gru_sequence(x, h0, gru.U_rz.weight, gru.U.weight, counts)
    got_grads = torch.autograd.grad(loss(got), inputs)
    assert layouts == ([False, False] if strided else [])

    tol = dict(atol=1e-12, rtol=1e-12) if dtype == torch.float64 else dict(atol=2e-6, rtol=1e-5)
    torch.testing.assert_close(got, want, **tol)
    for name, g, w in zip(names, got_grads, want_grads, strict=True):
        torch.testing.assert_close(g, w, **tol, msg=name)


@pytest.mark.parametrize("zero_start", [True, False])
@pytest.mark.parametrize("counts", [[5, 5, 3, 2, 2, 1], [4], [3, 1], [6, 6, 6]])
def test_the_compiled_gates_equal_the_torch_operators(
    zero_start: bool, counts: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    if gru_gates.LIBRARY.load() is None:
        pytest.skip(f"the gate loops cannot be built here: {gru_gates.LIBRARY.problem()}")
    torch.manual_seed(4)
    H, B = 33, counts[0] + 1  # H not a multiple of a vector's width
    w_rz, w_u = (torch.randn(2 * H, H) * 0.4).requires_grad_(), (torch.randn(H, H) * 0.4).requires_grad_()
    x = torch.randn(sum(counts), 3 * H, requires_grad=True)
    h0 = None if zero_start else torch.randn(B, H, requires_grad=True)
    weight = torch.randn(sum(counts), H)
    inputs = [x, w_rz, w_u, *([h0] if h0 is not None else [])]

    calls = []
    real = gru_gates.gates
    monkeypatch.setattr(gru_gates, "gates", lambda *a: calls.append(1) or real(*a))
    got = torch.autograd.grad((gru_sequence(x, h0, w_rz, w_u, counts) * weight).sum(), inputs)
    assert len(calls) == len(counts)  # one gates loop per step
    monkeypatch.setattr(gru_gates, "usable", lambda *tensors: None)  # the torch operators
    want = torch.autograd.grad((gru_sequence(x, h0, w_rz, w_u, counts) * weight).sum(), inputs)
    assert len(calls) == len(counts)
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w, atol=1e-6, rtol=1e-6)
    # Where no carry is summed the two paths' arithmetic is the same, bit for bit: the last
    # step's rows of every input gradient (both loops, where that step has a state) ...
    last = sum(counts[:-1])
    assert torch.equal(got[0][last:], want[0][last:])
    if len(counts) == 1:  # ... and a one-step run's every gradient but h0's
        assert all(torch.equal(g, w) for g, w in zip(got[:3], want[:3], strict=True))


@pytest.mark.parametrize("shape", [(3, 10), (4, 5), (2, 5)])
def test_the_gate_loops_refuse_tensors_that_do_not_fit(shape: tuple[int, int]) -> None:
    lib = gru_gates.LIBRARY.load()
    if lib is None:
        pytest.skip(f"the gate loops cannot be built here: {gru_gates.LIBRARY.problem()}")
    n, H = 3, 5
    ok = torch.zeros(n, H)
    with pytest.raises(ValueError, match=r"shape \(" + ", ".join(map(str, shape)) + r"\) does not fit 3 x 1 x 5"):
        gru_gates.gates(lib, torch.zeros(shape), None, torch.zeros(n, 2 * H), ok, None, torch.zeros(n, 3 * H), ok)
    with pytest.raises(ValueError, match="not contiguous"):
        gru_gates.reset(lib, ok, torch.zeros(n, 2 * H), torch.zeros(H, n).t(), torch.zeros(n, 3 * H), ok)
    with pytest.raises(ValueError, match="does not fit"):
        gru_gates.reset(lib, ok.double(), torch.zeros(n, 2 * H), ok, torch.zeros(n, 3 * H), ok)


def test_a_zero_start_spends_nothing_on_the_first_steps_recurrence() -> None:
    """With h0 = None the first step's gradient of r is exactly zero (r multiplies a zero state),
    and the recurrent matrices get nothing from that step."""
    torch.manual_seed(0)
    gru = GRU(3, 5)
    x = torch.randn(4, 15, requires_grad=True)
    states = gru_sequence(x, None, gru.U_rz.weight, gru.U.weight, [4])
    states.sum().backward()
    assert torch.equal(x.grad[:, :5], torch.zeros(4, 5))
    assert torch.equal(gru.U_rz.weight.grad, torch.zeros(10, 5))
    assert torch.equal(gru.U.weight.grad, torch.zeros(5, 5))


@pytest.mark.parametrize("counts", [[], [2, 3], [2, 0], [2, 2]])
def test_row_counts_that_do_not_fit_are_refused(counts: list[int]) -> None:
    gru = GRU(3, 5)
    with pytest.raises(ValueError, match="row counts"):
        gru_sequence(torch.zeros(5, 15), None, gru.U_rz.weight, gru.U.weight, counts)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("zero_start", [True, False])
@pytest.mark.parametrize("counts", [[5, 5, 3, 2, 2, 1], [4], [6, 6, 6]])
@pytest.mark.parametrize("compiled", [True, False])
def test_stacked_recurrences_equal_each_alone(
    dtype: torch.dtype, zero_start: bool, counts: list[int], compiled: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Recurrences stacked (the encoder's two directions: each step one batched product) give each
    recurrence's states and gradients as it gives alone, within float32 rounding, to 1e-12 in
    float64; with the compiled gate loops and with the torch operators."""
    if not compiled:
        monkeypatch.setattr(gru_gates, "usable", lambda *tensors: None)
    torch.manual_seed(6)
    D, H, B, N = 2, 7, counts[0] + 1, sum(counts)
    x = torch.randn(D, N, 3 * H, dtype=dtype, requires_grad=True)
    w_rz = (torch.randn(D, 2 * H, H, dtype=dtype) * 0.6).requires_grad_()
    w_u = (torch.randn(D, H, H, dtype=dtype) * 0.6).requires_grad_()
    h0 = None if zero_start else torch.randn(D, B, H, dtype=dtype, requires_grad=True)
    weight = torch.randn(D, N, H, dtype=dtype)
    inputs = [x, w_rz, w_u, *([h0] if h0 is not None else [])]

    got = gru_sequence(x, h0, w_rz, w_u, counts)
    got_grads = torch.autograd.grad((got * weight).sum(), inputs)
    alone = [gru_sequence(x[d], None if h0 is None else h0[d], w_rz[d], w_u[d], counts) for d in range(D)]
    want = torch.stack(alone)
    want_grads = torch.autograd.grad((want * weight).sum(), inputs)

    tol = dict(atol=1e-12, rtol=1e-12) if dtype == torch.float64 else dict(atol=2e-6, rtol=1e-5)
    assert got.shape == (D, N, H)
    torch.testing.assert_close(got, want, **tol)
    for name, g, w in zip(["x", "U_rz", "U", "h0"], got_grads, want_grads, strict=False):
        torch.testing.assert_close(g, w, **tol, msg=name)
