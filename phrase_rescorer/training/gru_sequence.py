"""A whole GRU recurrence over length-sorted rows, with its backward pass written out.

The model's ``GRU.step`` (reset before the recurrent matrix) applied step after step, as the
packed training computation runs it: step t on the first ``counts[t]`` rows (rows sorted longest
first, so the rows still inside their phrase come first). Inputs and states are *packed*,
step-major: the rows of step 0, then those of step 1, and so on (N = sum of the counts rows).

What writing the backward pass out buys over autograd running the steps one by one:

* the recurrent matrices' gradients come from **one matrix product over all steps** (N rows
  deep) instead of one 64-deep outer product per step, each allocated and summed into the
  gradient;
* a zero initial state (the encoder's) costs no recurrent product at the first step, forward or
  backward: U_rz 0 and U (r 0) are zero, r has no effect there, and the matrices get nothing from
  that step;
* no per-step graph nodes and no zero-filled gradients of slices.

Independent recurrences of one row count each (the encoder's two directions) run stacked, as
one: each step's products are then one batched product of theirs (a step's [n, H] x [H, 2H]
products of two directions on two threads, 1.3-1.5 times as fast as one after the other).

The arithmetic of each step is the model's; only its order and what is skipped because it is
exactly zero differ. Each step's products with the recurrent matrices go through ``products``
(oneDNN where torch carries it, else torch's BLAS: the same products to float32 rounding).
``tests/unit/test_gru_sequence.py`` checks states and every gradient against autograd over
``GRU.step``, and stacked recurrences against each alone: within float32 rounding, and to 1e-12
in float64. Its graph can be backpropagated once (no double backward), as training does.
"""

from __future__ import annotations

import ctypes
import itertools
from collections.abc import Callable
from typing import Any

import torch
from torch.autograd.function import once_differentiable

from . import gru_gates, products
from .packed_rows import step_offsets


def gru_sequence(
    x: torch.Tensor, h0: torch.Tensor | None, w_rz: torch.Tensor, w_u: torch.Tensor, counts: list[int]
) -> torch.Tensor:
    """The states (N, H) of every step, packed step-major, from the packed input projections
    x (N, 3H) (``[W_r; W_z; W] x_t + b``, plus any context terms), the initial state h0 (B, H)
    (None: zeros) and the recurrent weights ``U_rz.weight`` (2H, H) and ``U.weight`` (H, H).
    ``counts``: rows at each step, non-increasing, none zero.

    Independent recurrences over the same row counts (the encoder's two directions) run as one,
    stacked: x (D, N, 3H), h0 (D, B, H) or None, w_rz (D, 2H, H), w_u (D, H, H) give states
    (D, N, H); each step's products are then one batched product of the D recurrences."""
    if not counts or counts[-1] < 1 or any(a < b for a, b in itertools.pairwise(counts)) or sum(counts) != x.shape[-2]:
        raise ValueError(
            f"gru_sequence: row counts {counts} are not non-increasing and positive, or not x's {x.shape[-2]} rows"
        )
    return _GRUSequence.apply(x, h0, w_rz, w_u, tuple(counts))


def _mm(a: torch.Tensor, b: torch.Tensor, add: torch.Tensor | None = None) -> torch.Tensor:
    """a b (+ ``add``): one recurrence's matrices (n, k) (k, m) through ``products`` (oneDNN
    where it can), stacked ones (D, n, k) (D, k, m) as one batched product."""
    if a.dim() == 2:
        return products.mm(a, b, add)
    return torch.bmm(a, b) if add is None else torch.baddbmm(add, a, b)


def _each(t: torch.Tensor) -> list[torch.Tensor]:
    """Each recurrence's matrix of ``t``: itself for one, its D slices for stacked ones."""
    return [t] if t.dim() == 2 else list(t.unbind(0))


#: h_{t-1} of step t's rows (None: a zero initial state), in the backward pass.
Previous = Callable[[int], "torch.Tensor | None"]


class _GRUSequence(torch.autograd.Function):
    """One recurrence, or D stacked ones (``gru_sequence``); ``...`` indexes either."""

    @staticmethod
    def forward(
        ctx: Any,
        x: torch.Tensor,
        h0: torch.Tensor | None,
        w_rz: torch.Tensor,
        w_u: torch.Tensor,
        counts: tuple[int, ...],
    ) -> torch.Tensor:
        H = w_u.shape[-1]
        states = x.new_empty(*x.shape[:-1], H)
        rz = x.new_empty(*x.shape[:-1], 2 * H)  # the gates r, z of every step
        hh = x.new_empty(*x.shape[:-1], H)  # the candidate state h~ of every step
        rh = x.new_empty(*x.shape[:-1], H)  # r * h_{t-1}, the recurrent matrix U's input
        # the weights as the products read them: views for one, laid out once for stacked ones
        w_rz_t, w_u_t = (w.mT if w.dim() == 2 else w.mT.contiguous() for w in (w_rz, w_u))
        off, h = 0, h0
        for n in counts:
            s = slice(off, off + n)
            if h is None:  # zero state: no recurrent term, and r has no effect
                torch.sigmoid(x[..., s, : 2 * H], out=rz[..., s, :])
                torch.tanh(x[..., s, 2 * H :], out=hh[..., s, :])
                rh[..., s, :].zero_()
                torch.mul(hh[..., s, :], 1.0 - rz[..., s, H:], out=states[..., s, :])
            else:
                hp = h[..., :n, :]
                torch.sigmoid(_mm(hp, w_rz_t, x[..., s, : 2 * H]), out=rz[..., s, :])
                torch.mul(rz[..., s, :H], hp, out=rh[..., s, :])
                torch.tanh(_mm(rh[..., s, :], w_u_t, x[..., s, 2 * H :]), out=hh[..., s, :])
                # z h + (1 - z) h~
                torch.addcmul(hh[..., s, :], rz[..., s, H:], hp - hh[..., s, :], out=states[..., s, :])
            h = states[..., s, :]
            off += n
        ctx.counts = counts
        ctx.save_for_backward(states, rz, hh, rh, w_rz, w_u, *(() if h0 is None else (h0,)))
        return states

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, d_states: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        states, rz, hh, rh, w_rz, w_u, *given = ctx.saved_tensors
        counts: tuple[int, ...] = ctx.counts
        H = w_u.shape[-1]
        offsets = step_offsets(counts)

        def previous(t: int) -> torch.Tensor | None:
            """h_{t-1} of step t's rows; None for a zero initial state."""
            if t > 0:
                return states[..., offsets[t - 1] : offsets[t - 1] + counts[t], :]
            return given[0][..., : counts[0], :] if given else None

        dx = states.new_empty(*states.shape[:-1], 3 * H)  # d loss / d x, the inputs' gradient
        lib = gru_gates.usable(d_states, states, w_rz, w_u, *given)
        if lib is not None:
            carry = _backward_compiled(lib, d_states.contiguous(), states, rz, hh, w_rz, w_u, counts, previous, dx)
        else:
            carry = _backward_torch(d_states, rz, hh, w_rz, w_u, counts, previous, dx)
        # The recurrent matrices' gradients: one product over every step that had a state.
        first = 0 if given else counts[0]
        # (torch's BLAS: their depth N changes with every batch, see ``products``)
        d_w_u = torch.matmul(dx[..., first:, 2 * H :].mT, rh[..., first:, :])
        inputs = [p for p in map(previous, range(len(counts))) if p is not None]
        d_w_rz = (
            torch.matmul(dx[..., first:, : 2 * H].mT, torch.cat(inputs, dim=-2)) if inputs else torch.zeros_like(w_rz)
        )
        dh0 = None
        if given and carry is not None:  # carry: step 0's d loss / d h_0, for its rows
            h0 = given[0]
            missing = h0.shape[-2] - carry.shape[-2]
            dh0 = carry if not missing else torch.cat([carry, carry.new_zeros(*carry.shape[:-2], missing, H)], dim=-2)
        return dx, dh0, d_w_rz, d_w_u, None


def _backward_torch(
    d_states: torch.Tensor,
    rz: torch.Tensor,
    hh: torch.Tensor,
    w_rz: torch.Tensor,
    w_u: torch.Tensor,
    counts: tuple[int, ...],
    previous: Previous,
    dx: torch.Tensor,
) -> torch.Tensor | None:
    """The steps of the backward pass, last to first, with torch's operators: fills ``dx`` and
    returns d loss / d h_0 for step 0's rows (None for a zero initial state)."""
    H = w_u.shape[-1]
    offsets = step_offsets(counts)
    carry = None  # d loss / d h_{t} from step t + 1, for its rows
    for t in range(len(counts) - 1, -1, -1):
        s = slice(offsets[t], offsets[t + 1])
        dh = d_states[..., s, :]
        if carry is not None:
            dh = dh.clone()
            dh[..., : carry.shape[-2], :] += carry
        r, z, c, hp = rz[..., s, :H], rz[..., s, H:], hh[..., s, :], previous(t)
        torch.mul(dh * (1.0 - z), 1.0 - c * c, out=dx[..., s, 2 * H :])  # through h~ = tanh(..)
        torch.mul(dh * (-c if hp is None else hp - c), z * (1.0 - z), out=dx[..., s, H : 2 * H])  # z
        if hp is None:  # r multiplied a zero state
            dx[..., s, :H].zero_()
            carry = None
            continue
        d_rh = _mm(dx[..., s, 2 * H :], w_u)
        torch.mul(d_rh * hp, r * (1.0 - r), out=dx[..., s, :H])
        carry = _mm(dx[..., s, : 2 * H], w_rz, dh * z).addcmul_(d_rh, r)
    return carry


def _backward_compiled(
    lib: ctypes.CDLL,
    d_states: torch.Tensor,
    states: torch.Tensor,
    rz: torch.Tensor,
    hh: torch.Tensor,
    w_rz: torch.Tensor,
    w_u: torch.Tensor,
    counts: tuple[int, ...],
    previous: Previous,
    dx: torch.Tensor,
) -> torch.Tensor | None:
    """``_backward_torch`` with each step's element-wise work in ``gru_gates``' two loops (a call
    for each recurrence): per step, the gates loops, the product with U, the reset loops, the
    product with U_rz."""
    H = w_u.shape[-1]
    offsets = step_offsets(counts)
    dhz = states.new_empty(*states.shape[:-2], counts[0], H)  # each step's carry before its product with U_rz
    carry = None
    for t in range(len(counts) - 1, -1, -1):
        a, n = offsets[t], counts[t]
        hp = previous(t)
        hps = None if hp is None else [p.contiguous() for p in _each(hp)]  # views where contiguous
        rows = slice(a, a + n)
        each_rz, each_dx, each_dhz = _each(rz[..., rows, :]), _each(dx[..., rows, :]), _each(dhz[..., :n, :])
        each_carry = [None] * len(each_dhz) if carry is None else _each(carry)
        for d, (d_s, c_h) in enumerate(zip(_each(d_states[..., rows, :]), _each(hh[..., rows, :]), strict=True)):
            p = None if hps is None else hps[d]
            gru_gates.gates(lib, d_s, each_carry[d], each_rz[d], c_h, p, each_dx[d], each_dhz[d])
        if hps is None:  # r multiplied a zero state
            dx[..., rows, :H].zero_()
            carry = None
            continue
        d_rh = _mm(dx[..., rows, 2 * H :], w_u)
        for d, g in enumerate(_each(d_rh)):
            gru_gates.reset(lib, g, each_rz[d], hps[d], each_dx[d], each_dhz[d])
        carry = _mm(dx[..., rows, : 2 * H], w_rz, dhz[..., :n, :])
    return carry
