"""training.products: the step's float32 products through oneDNN are torch's products within
float32 rounding, on the shapes and strided views the GRU recurrence gives them; torch's own
product where oneDNN is not asked for or cannot run."""

from __future__ import annotations

import pytest
import torch

from phrase_rescorer import onednn
from phrase_rescorer.training import products

ONEDNN = onednn.available()


def _operands(n: int, k: int, m: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    # x and the addend as column slices of wider matrices, as the packed step gives them
    x = torch.randn(n, 3 * k, generator=g)[:, k : 2 * k]
    w = torch.randn(m, k, generator=g) * 0.05
    add = torch.randn(n, 2 * m, generator=g)[:, m:]
    return x, w, add


def _close(got: torch.Tensor, exact: torch.Tensor, k: int) -> None:
    """Within float32 rounding of a k-term sum: a few ulps of the sum of the terms' magnitudes."""
    assert got.dtype == torch.float32 and got.shape == exact.shape
    assert (got.double() - exact).abs().max().item() <= 4 * k * 2**-24 * exact.abs().max().item() + 1e-6


@pytest.mark.parametrize("library", ["onednn", "blas"])
@pytest.mark.parametrize(("n", "k", "m"), [(64, 1000, 2000), (7, 1000, 1000), (1, 33, 5), (400, 64, 1000)])
def test_products_match_the_float64_product(
    monkeypatch: pytest.MonkeyPatch, library: str, n: int, k: int, m: int
) -> None:
    monkeypatch.setenv(products.ENV, library)
    x, w, add = _operands(n, k, m)
    exact = x.double() @ w.double().t()
    _close(products.times_transposed(x, w), exact, k)
    _close(products.times_transposed(x, w, add), exact + add.double(), k)
    # mm with a transposed view on either side, as the weight gradients and d(r h) take them
    _close(products.mm(x, w.t()), exact, k)
    _close(products.mm(w, x.t()), exact.t(), k)
    _close(products.mm(x, w.t(), add), exact + add.double(), k)
    assert products.times_transposed(x, w, add).is_contiguous()


def test_blas_is_torch_bit_for_bit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(products.ENV, "blas")
    x, w, add = _operands(64, 100, 300)
    assert products.library() == "blas"
    assert torch.equal(products.times_transposed(x, w, add), torch.addmm(add, x, w.t()))
    assert torch.equal(products.mm(x, w.t()), torch.mm(x, w.t()))


@pytest.mark.skipif(not ONEDNN, reason="this torch build has no oneDNN linear operator")
def test_onednn_is_used_by_default_and_differs_from_blas_only_by_rounding(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(products.ENV, raising=False)
    assert products.library() == "onednn"
    x, w, add = _operands(64, 1000, 2000, seed=3)
    assert products.onednn_usable(x, w, add)
    got = products.times_transposed(x, w, add)
    blas = torch.addmm(add, x, w.t())
    assert (got - blas).abs().max().item() <= 1e-3 * blas.abs().max().item()
    _close(got, x.double() @ w.double().t() + add.double(), 1000)


def test_other_dtypes_empty_and_unknown_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(products.ENV, raising=False)
    x, w, add = (t.double() for t in _operands(5, 8, 3))
    assert not products.onednn_usable(x, w)
    assert torch.equal(products.times_transposed(x, w, add), torch.addmm(add, x, w.t()))
    empty = torch.zeros(4, 0)
    assert not products.onednn_usable(empty, torch.zeros(0, 3))
    assert torch.equal(products.mm(empty, torch.zeros(0, 3)), torch.zeros(4, 3))
    monkeypatch.setenv(products.ENV, "cublas")
    with pytest.raises(ValueError, match="PHRASE_RESCORER_PRODUCTS='cublas': give onednn or blas"):
        products.library()


def test_products_of_many_rows_stay_with_blas(monkeypatch: pytest.MonkeyPatch) -> None:
    """Above MAX_ROWS rows the BLAS computes the product, bit for bit torch's."""
    monkeypatch.delenv(products.ENV, raising=False)
    x, w, add = _operands(products.MAX_ROWS + 1, 50, 70)
    monkeypatch.setattr(products, "onednn_usable", lambda *tensors: pytest.fail("oneDNN considered"))
    assert torch.equal(products.times_transposed(x, w, add), torch.addmm(add, x, w.t()))
    assert torch.equal(products.mm(x, w.t()), torch.mm(x, w.t()))


@pytest.mark.skipif(not ONEDNN, reason="this torch build has no oneDNN linear operator")
def test_onednn_forms_of_the_product() -> None:
    """The bias form, the addend form and a packed weight all give x W^T within rounding; a bias
    and an addend together are refused."""
    x, w, add = _operands(16, 40, 24, seed=5)
    bias = torch.randn(24)
    exact = x.double() @ w.double().t()
    _close(onednn.times_transposed(x, w, bias=bias), exact + bias.double(), 40)
    _close(onednn.times_transposed(x, w, add=add), exact + add.double(), 40)
    _close(onednn.times_transposed(x.contiguous(), onednn.pack(w, 16)), exact, 40)
    with pytest.raises(ValueError, match="a bias or an addend, not both"):
        onednn.times_transposed(x, w, bias=bias, add=add)


@pytest.mark.skipif(not ONEDNN, reason="this torch build has no oneDNN linear operator")
@pytest.mark.filterwarnings("ignore:TF32 acceleration on top of oneDNN")  # torch's flags() sets it too
def test_onednn_disabled_or_at_lowered_precision_leaves_the_products_to_blas(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(products.ENV, raising=False)
    x, w, add = _operands(8, 16, 12)
    with torch.backends.mkldnn.flags(enabled=False):
        assert not onednn.available() and products.library() == "blas"
        assert torch.equal(products.times_transposed(x, w, add), torch.addmm(add, x, w.t()))
    assert onednn.available()
    matmul = getattr(torch.backends.mkldnn, "matmul", None)
    if matmul is None or not hasattr(matmul, "fp32_precision"):
        pytest.skip("this torch has no oneDNN float32 precision setting")
    before = matmul.fp32_precision
    try:
        matmul.fp32_precision = "bf16"
        assert not onednn.available() and products.library() == "blas"
    finally:
        matmul.fp32_precision = before
    assert onednn.available()
