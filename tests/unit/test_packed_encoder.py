"""``training.packed_encoder`` against ``Encoder.forward``: the same memory (padding included),
the same ``final`` and the same gradients (inputs and every weight), with dropout drawing the
same masks, for the bidirectional GRU (rnnsearch), stacked layers with residual connections, and
ragged lengths; within float32 rounding, and to 1e-12 in float64. Encoders it does not run (the
LSTM, the GRU with its reset after U) are ``Encoder.forward`` itself."""

from __future__ import annotations

import pytest
import torch

from phrase_rescorer.model.encoders import Encoder
from phrase_rescorer.training.packed_encoder import packable, packed_encoder

pytestmark = pytest.mark.usefixtures("one_thread")

LENGTHS = [3, 7, 1, 7, 4, 2]  # ragged, ties, a one-token source; the longest shorter than S
S = 8


def _outputs(
    encoder: Encoder, run: str, x: torch.Tensor, lengths: torch.Tensor, seed: int
) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """(memory, final) and the gradients of x and every weight under a loss weighing every output."""
    encoder.zero_grad()
    x = x.detach().requires_grad_()
    torch.manual_seed(seed)  # the dropout masks
    memory, final = encoder(x, lengths) if run == "plain" else packed_encoder(encoder, x, lengths)
    torch.manual_seed(99)
    loss = (memory * torch.randn_like(memory)).sum() + (final * torch.randn_like(final)).sum()
    loss.backward()
    assert x.grad is not None
    grads = [x.grad, *(p.grad if p.grad is not None else torch.zeros_like(p) for p in encoder.parameters())]
    return [memory.detach(), final.detach()], grads


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize(
    "layers, bidirectional, residual_from", [(1, True, 0), (1, False, 0), (3, True, 3), (3, False, 2)]
)
@pytest.mark.parametrize("dropout", [0.0, 0.3])
def test_equals_the_encoder(
    dtype: torch.dtype, layers: int, bidirectional: bool, residual_from: int, dropout: float
) -> None:
    torch.manual_seed(0)
    encoder = Encoder("gru", 5, 6, layers, bidirectional, residual_from, dropout_rate=dropout).to(dtype)
    with torch.no_grad():
        for p in encoder.parameters():
            p.normal_(0.0, 0.6)  # far from linear, so that a wrong term shows
    encoder.train()
    assert packable(encoder, torch.zeros(1, dtype=dtype))
    lengths = torch.tensor(LENGTHS)
    x = torch.randn(len(LENGTHS), S, 5, dtype=dtype)
    want, want_grads = _outputs(encoder, "plain", x, lengths, seed=7)
    got, got_grads = _outputs(encoder, "packed", x, lengths, seed=7)
    tol = 1e-12 if dtype == torch.float64 else 1e-5  # float64: the order of the sums; float32: its rounding
    for g, w in zip(got + got_grads, want + want_grads, strict=True):
        torch.testing.assert_close(g, w, rtol=tol, atol=tol)


def test_other_cells_run_the_encoder_itself() -> None:
    torch.manual_seed(0)
    lengths = torch.tensor(LENGTHS)
    x = torch.randn(len(LENGTHS), S, 5)
    for encoder in (Encoder("lstm", 5, 6, 2, True), Encoder("gru", 5, 6, 1, True, reset="reset_after")):
        assert not packable(encoder, x)
        for got, want in zip(packed_encoder(encoder, x, lengths), encoder(x, lengths), strict=True):
            assert torch.equal(got, want)
