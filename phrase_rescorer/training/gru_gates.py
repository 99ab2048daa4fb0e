"""The element-wise part of a GRU step's backward pass as two loops in C.

``gru_sequence``'s backward pass, one step at a time, between its two matrix products: written
with torch's operators it is about twenty passes over (rows, H) tensors per step (each a
dispatch, most with a temporary); here it is two loops, each element read and written once:

* ``gates``: dh = the states' incoming gradient + the next step's carry (for the rows it has);
  the candidate's and the update gate's input gradients, dh (1 - z)(1 - h~²) and
  dh (h_{t-1} - h~) z (1 - z); and dh z, the start of this step's carry;
* ``reset`` (after the product d(r h) = dx_h~ U): the reset gate's input gradient
  d(r h) h_{t-1} r (1 - r), and the carry's element-wise part dh z + d(r h) r (the caller adds
  the product with U_rz).

Each expression is computed as ``gru_sequence``'s torch operators compute it, in the same order,
without fused multiply-adds (``-ffp-contract=off``); only the carry's two terms are summed before
its product is added rather than after, a float32 rounding apart (``tests/unit/
test_gru_sequence.py`` checks both paths against autograd). Float32 CPU tensors only; the caller
keeps the torch operators for other dtypes and devices, and where the loops cannot be built
(``c_library``: ``load()`` None, ``problem()`` says why).
"""

from __future__ import annotations

import ctypes

import torch

from .c_library import CLibrary, c_source

#: The C source (``gru_gates.c``, package data).
SOURCE = c_source("gru_gates.c")


def _declare(lib: ctypes.CDLL) -> None:
    size, address = ctypes.c_long, ctypes.c_void_p
    lib.gru_back_gates.restype = None
    lib.gru_back_gates.argtypes = [size, size, size, *[address] * 7]
    lib.gru_back_reset.restype = None
    lib.gru_back_reset.argtypes = [size, size, *[address] * 5]


LIBRARY = CLibrary("gru-gates", SOURCE, _declare)


def usable(*tensors: torch.Tensor) -> ctypes.CDLL | None:
    """The loops' library where all ``tensors`` are float32 CPU tensors and it can be built,
    else None (the caller's torch operators)."""
    if any(t.dtype != torch.float32 or t.device.type != "cpu" for t in tensors):
        return None
    return LIBRARY.load()


def gates(
    lib: ctypes.CDLL,
    d_states: torch.Tensor,
    carry: torch.Tensor | None,
    rz: torch.Tensor,
    hh: torch.Tensor,
    hp: torch.Tensor | None,
    dx: torch.Tensor,
    dhz: torch.Tensor,
) -> None:
    """One step's ``gates`` loop (module text) on its n rows: ``d_states`` (n, H), ``carry`` (m, H)
    with m <= n or None, ``rz`` (n, 2H), ``hh`` (n, H), ``hp`` (n, H) or None (a zero state); writes
    dx[:, H:] of ``dx`` (n, 3H) and ``dhz`` (n, H). Every tensor contiguous (the caller's slices of
    row-major tensors)."""
    n, H = hh.shape
    _check(n, H, (d_states, 1), (rz, 2), (hh, 1), (dx, 3), (dhz, 1), *(() if hp is None else ((hp, 1),)))
    if carry is not None:
        _check(min(carry.shape[0], n), H, (carry, 1))
    lib.gru_back_gates(
        n,
        0 if carry is None else carry.shape[0],
        H,
        d_states.data_ptr(),
        None if carry is None else carry.data_ptr(),
        rz.data_ptr(),
        hh.data_ptr(),
        None if hp is None else hp.data_ptr(),
        dx.data_ptr(),
        dhz.data_ptr(),
    )


def reset(
    lib: ctypes.CDLL, d_rh: torch.Tensor, rz: torch.Tensor, hp: torch.Tensor, dx: torch.Tensor, dhz: torch.Tensor
) -> None:
    """One step's ``reset`` loop (module text): from ``d_rh`` (n, H) writes dx[:, :H] and adds
    d(r h) r to ``dhz``."""
    n, H = d_rh.shape
    _check(n, H, (d_rh, 1), (rz, 2), (hp, 1), (dx, 3), (dhz, 1))
    lib.gru_back_reset(n, H, d_rh.data_ptr(), rz.data_ptr(), hp.data_ptr(), dx.data_ptr(), dhz.data_ptr())


def _check(n: int, H: int, *tensors: tuple[torch.Tensor, int]) -> None:
    """The loops read and write by address: each tensor float32, in CPU memory and contiguous,
    of n rows and the given multiple of H columns."""
    for t, k in tensors:
        if t.dtype != torch.float32 or t.device.type != "cpu" or not t.is_contiguous() or tuple(t.shape) != (n, k * H):
            raise ValueError(
                f"gru_gates: a {t.dtype} {t.device.type} tensor of shape {tuple(t.shape)} does not fit {n} x {k} x {H}"
                f"{'' if t.is_contiguous() else ' (not contiguous)'}"
            )
