"""oneDNN's float32 matrix product as torch carries it: whether it is here, and x W^T through it.

torch's CPU builds run ``torch.mm`` and ``nn.Linear`` through their BLAS (MKL in the official
wheels) and also carry oneDNN, whose ``mkldnn::_linear_pointwise`` operator computes x W^T (+ a
bias, or + an addend of the output's shape) from ordinary dense tensors, strided views included,
or from a weight reordered once into oneDNN's blocked layout (``mkldnn::_reorder_linear_weight``).
On an AMD EPYC (Zen 4) oneDNN ran float32 products 10-50 % faster than MKL (the 2048^3 product
15-20 %). The arithmetic is a float32 product either way; only the order of the sums differs.

Users of it: the rescoring's packed weights (``rescoring.packed_linear``) and the training
recurrences' per-step products (``training.products``).
"""

from __future__ import annotations

import functools

import torch


@functools.cache
def _operators_present() -> bool:
    if not torch.backends.mkldnn.is_available():
        return False
    try:
        torch.ops.mkldnn._linear_pointwise.default  # noqa: B018  (raises where the operator is missing)
        torch.ops.mkldnn._linear_pointwise.binary  # noqa: B018
        torch.ops.mkldnn._reorder_linear_weight.default  # noqa: B018
    except (AttributeError, RuntimeError):
        return False
    return True


def available() -> bool:
    """True where this torch carries oneDNN's product, has it enabled (``torch.backends.mkldnn.
    enabled``, or its ``flags(enabled=False)``) and runs it in full float32 precision (not lowered
    through ``torch.backends.mkldnn.matmul.fp32_precision``)."""
    precision = getattr(getattr(torch.backends.mkldnn, "matmul", None), "fp32_precision", None)
    return _operators_present() and bool(torch.backends.mkldnn.enabled) and precision in (None, "none", "ieee")


def times_transposed(
    x: torch.Tensor, w: torch.Tensor, *, bias: torch.Tensor | None = None, add: torch.Tensor | None = None
) -> torch.Tensor:
    """x W^T (+ ``bias`` (N,) or + ``add`` (M, N), not both) in oneDNN: x (M, K), W (N, K) dense
    (any strides) or from :func:`pack`. Float32 CPU matrices where :func:`available`; a new
    tensor."""
    if add is None:
        return torch.ops.mkldnn._linear_pointwise(x, w, bias, "none", [], "")
    if bias is not None:
        raise ValueError("oneDNN's product takes a bias or an addend, not both")
    return torch.ops.mkldnn._linear_pointwise.binary(x, add, w, None, "add")


def pack(w: torch.Tensor, rows: int) -> torch.Tensor:
    """W (N, K) reordered into oneDNN's blocked layout for products of ``rows`` rows."""
    return torch.ops.mkldnn._reorder_linear_weight(w, rows)
