"""The recurrences' per-step float32 matrix products, through oneDNN where torch carries it.

A GRU step's products (``gru_sequence``: h U_rz^T and (r h) U^T forward, d(r h) = dx U and the
carry's dx U_rz backward) go to oneDNN's product (``onednn``), with the input projections added
inside it; elsewhere, and for every other product of a step, torch's BLAS. The two differ only
in the order of their float32 sums (within float32 rounding of each other: ``tests/unit/
test_products.py``); no reduced precision is used. Timings: docs/training-speed.md, "The
recurrences' products through oneDNN".

oneDNN compiles a kernel for each shape it meets and keeps it in its primitive cache (1,024 by
default), so it suits products whose shapes recur: a GRU step's products have the weights'
fixed shape and at most a batch's rows. Products whose depth changes with every batch (the weight
gradients over all of a batch's positions) stay with torch's BLAS: through oneDNN each call
compiled a new kernel and page-faulted about 2,000 pages in. So do products of more than
``MAX_ROWS`` rows (batches over 128: four kinds of step product with up to 256 row counts each
would fill the cache), where the BLAS is efficient anyway. The kernels of a paper-size network's
steps (all their row counts, after a hundred-odd steps) held about 330 MB.

``PHRASE_RESCORER_PRODUCTS=blas`` in the environment keeps every product in torch's BLAS (to
compare the two, or where a oneDNN build misbehaves); other dtypes, other devices and a torch
without oneDNN use the BLAS anyway.
"""

from __future__ import annotations

import os

import torch

from .. import onednn

#: The environment variable that chooses the products' library: "onednn" (default) or "blas".
ENV = "PHRASE_RESCORER_PRODUCTS"

#: Products of more rows than this go to torch's BLAS (module text).
MAX_ROWS = 128


def library() -> str:
    """The library the products run in now: "onednn" or "blas" (float32 CPU tensors)."""
    wanted = os.environ.get(ENV, "onednn").strip().lower() or "onednn"
    if wanted not in ("onednn", "blas"):
        raise ValueError(f"{ENV}={os.environ[ENV]!r}: give onednn or blas")
    return "onednn" if wanted == "onednn" and onednn.available() else "blas"


def onednn_usable(*tensors: torch.Tensor) -> bool:
    """True where the products of ``tensors`` go to oneDNN: all float32 matrices in CPU memory,
    none empty, and :func:`library` says oneDNN."""
    if any(t.dtype != torch.float32 or t.device.type != "cpu" or t.dim() != 2 or t.numel() == 0 for t in tensors):
        return False
    return library() == "onednn"


def times_transposed(x: torch.Tensor, w: torch.Tensor, add: torch.Tensor | None = None) -> torch.Tensor:
    """x w^T (+ ``add``), as ``torch.addmm(add, x, w.t())``: x (n, k), w (m, k), add (n, m); any
    of them may be a strided view (a slice of columns, a transposed matrix). A new tensor."""
    if x.shape[0] <= MAX_ROWS and onednn_usable(x, w, *(() if add is None else (add,))):
        return onednn.times_transposed(x, w, add=add)
    return torch.mm(x, w.t()) if add is None else torch.addmm(add, x, w.t())


def mm(a: torch.Tensor, b: torch.Tensor, add: torch.Tensor | None = None) -> torch.Tensor:
    """a b (+ ``add``), as ``torch.mm``/``torch.addmm``: a (n, k), b (k, m). A new tensor."""
    return times_transposed(a, b.t(), add)
