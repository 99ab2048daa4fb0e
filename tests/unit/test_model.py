"""The network against a plain re-derivation of the paper's equations, and its invariants.

The references below are written from PAPER.md (one pair, one step at a time, explicit matrices),
independently of model.py's batching, masking and fused projections. They run in float64 so
that agreement is checked to 1e-10, not to float32 noise.
"""

from __future__ import annotations

import pytest
import torch

from phrase_rescorer.data.batching import sequences_batch
from phrase_rescorer.data.vocab import EOS_ID
from phrase_rescorer.model.cho2014 import GRU, ModelConfig, RNNEncoderDecoder, sequence_log_probs, token_log_probs

TINY = dict(src_vocab_size=23, tgt_vocab_size=19, embed_dim=6, hidden_dim=10, maxout_dim=4, output_rank=5)
PAIRS = [
    ([5, 6, 7], [8, 9]),
    ([3], [4, 5, 6, 7, 8]),
    ([9, 10, 11, 12, 13, 14], [3]),
    ([1, 4], [1, 2, 3, 1]),
]  # id 1 is <unk>: allowed anywhere


def tiny_model(seed: int = 0, dtype: torch.dtype = torch.float64, **overrides: object) -> RNNEncoderDecoder:
    torch.manual_seed(seed)
    model = RNNEncoderDecoder(ModelConfig(**{**TINY, **overrides}))  # type: ignore[arg-type]
    # The paper's N(0, 0.01^2) start makes every path through c nearly invisible (~1e-10 on the
    # log-probs); large random weights and non-zero biases make every term of every equation count.
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, 0.5)
    return model.to(dtype).eval()


def split3(m: torch.Tensor, H: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return m[:H], m[H : 2 * H], m[2 * H :]


def reference_gru_step(gru: GRU, x: torch.Tensor, h: torch.Tensor, extra: torch.Tensor | None = None) -> torch.Tensor:
    """h_t for one x (E,) and h_{t-1} (H,), from the equations; ``extra`` = [C_r; C_z; C] c."""
    H = gru.hidden_dim
    W_r, W_z, W = split3(gru.W.weight, H)
    b_r, b_z, b = split3(gru.W.bias, H)
    U_r, U_z = gru.U_rz.weight[:H], gru.U_rz.weight[H:]
    U = gru.U.weight
    Cr_c, Cz_c, C_c = split3(extra, H) if extra is not None else (0.0, 0.0, 0.0)
    r = torch.sigmoid(W_r @ x + b_r + U_r @ h + Cr_c)
    z = torch.sigmoid(W_z @ x + b_z + U_z @ h + Cz_c)
    if gru.cell == "reset_before":
        h_tilde = torch.tanh(W @ x + b + U @ (r * h) + C_c)
    else:
        h_tilde = torch.tanh(W @ x + b + r * (U @ h) + C_c)
    return z * h + (1 - z) * h_tilde


@torch.no_grad()
def reference_step_log_probs(model: RNNEncoderDecoder, src: list[int], tgt: list[int]) -> list[torch.Tensor]:
    """log p(y_t | y_<t, e) over the shortlist for t = 1 .. len(tgt) + 1 (the last: </s>)."""
    m = model
    H = m.config.hidden_dim
    h = torch.zeros(H, dtype=torch.float64)
    for tok in src + [EOS_ID]:  # the encoder reads the source and then </s>
        h = reference_gru_step(m.encoder, m.src_embed.weight[tok], h)
    c = torch.tanh(m.V.weight @ h + m.V.bias)  # c = tanh(V h_N)
    h = torch.tanh(m.bridge.weight @ c + m.bridge.bias)  # h'_0 = tanh(V' c)
    Cc = m.C.weight @ c  # [C_r; C_z; C] c, the same at every step
    e_prev = torch.zeros(m.config.embed_dim, dtype=torch.float64)  # no begin symbol: e(y_0) = 0
    out = []
    for y in tgt + [EOS_ID]:
        h = reference_gru_step(m.decoder, e_prev, h, Cc)
        s_prime = m.O_h.weight @ h + m.O_h.bias + m.O_y.weight @ e_prev + m.O_c.weight @ c
        s = torch.maximum(s_prime[0::2], s_prime[1::2])  # maxout over consecutive pairs
        logits = m.G_l.weight @ (m.G_r.weight @ s) + m.G_l.bias  # rank-R output matrix
        out.append(torch.log_softmax(logits, dim=0))
        e_prev = m.tgt_embed.weight[y]
    return out


def reference_score(model: RNNEncoderDecoder, src: list[int], tgt: list[int]) -> float:
    steps = reference_step_log_probs(model, src, tgt)
    return float(sum(float(lp[y]) for lp, y in zip(steps, tgt + [EOS_ID], strict=True)))


def batched_scores(model: RNNEncoderDecoder, pairs: list[tuple[list[int], list[int]]]) -> torch.Tensor:
    b = sequences_batch([s for s, _ in pairs], [t for _, t in pairs])
    with torch.no_grad():
        return sequence_log_probs(model, b.src, b.src_len, b.tgt, b.tgt_len)


@pytest.mark.parametrize("cell", ["reset_before", "reset_after"])
def test_gru_step_matches_the_equations(cell: str) -> None:
    torch.manual_seed(1)
    gru = GRU(7, 9, cell).double()
    with torch.no_grad():
        gru.W.bias.normal_()
    x, h = torch.randn(4, 7, dtype=torch.float64), torch.randn(4, 9, dtype=torch.float64)
    got = gru.step(gru.W(x), h)
    want = torch.stack([reference_gru_step(gru, x[i], h[i]) for i in range(4)])
    torch.testing.assert_close(got, want, rtol=0, atol=1e-12)


def test_reset_before_and_after_are_different_functions() -> None:
    torch.manual_seed(1)
    a = GRU(7, 9, "reset_before").double()
    b = GRU(7, 9, "reset_after").double()
    b.load_state_dict(a.state_dict())
    x, h = torch.randn(4, 7, dtype=torch.float64), torch.randn(4, 9, dtype=torch.float64)
    assert not torch.allclose(a.step(a.W(x), h), b.step(b.W(x), h), atol=1e-6)


@pytest.mark.parametrize("cell", ["reset_before", "reset_after"])
def test_batched_score_equals_step_by_step_reference(cell: str) -> None:
    model = tiny_model(cell=cell)
    got = batched_scores(model, PAIRS)
    want = torch.tensor([reference_score(model, s, t) for s, t in PAIRS], dtype=torch.float64)
    torch.testing.assert_close(got, want, rtol=0, atol=1e-10)


def test_score_is_unchanged_by_padding_and_batch_company() -> None:
    model = tiny_model(dtype=torch.float32)
    alone = torch.cat([batched_scores(model, [p]) for p in PAIRS])
    together = batched_scores(model, PAIRS)
    shuffled = batched_scores(model, PAIRS[::-1]).flip(0)
    # float32: the batched matrix products may sum in another order, nothing more.
    torch.testing.assert_close(together, alone, rtol=0, atol=1e-5)
    torch.testing.assert_close(shuffled, alone, rtol=0, atol=1e-5)


def test_padding_tokens_have_no_effect() -> None:
    """Whatever sits in the padded positions, the scores stay the same."""
    model = tiny_model()
    b = sequences_batch([s for s, _ in PAIRS], [t for _, t in PAIRS])
    base = sequence_log_probs(model, b.src, b.src_len, b.tgt, b.tgt_len)
    steps = torch.arange(b.src.shape[1]).unsqueeze(0)
    pad = steps >= b.src_len.unsqueeze(1)
    noisy_src = torch.where(pad, torch.randint_like(b.src, 3, 20), b.src)
    steps = torch.arange(b.tgt.shape[1]).unsqueeze(0)
    pad = steps >= b.tgt_len.unsqueeze(1)
    noisy_tgt = torch.where(pad, torch.randint_like(b.tgt, 3, 18), b.tgt)
    noisy = sequence_log_probs(model, noisy_src, b.src_len, noisy_tgt, b.tgt_len)
    torch.testing.assert_close(noisy, base, rtol=0, atol=1e-12)


def test_step_probabilities_sum_to_one_and_match_the_reference() -> None:
    model = tiny_model()
    b = sequences_batch([s for s, _ in PAIRS], [t for _, t in PAIRS])
    with torch.no_grad():
        logits = model(b.src, b.src_len, b.tgt)  # (B, T, V)
    V = logits.shape[-1]
    every = torch.arange(V).expand(*logits.shape[:2], V)  # every target symbol at every step
    logp = token_log_probs(logits.unsqueeze(2).expand(-1, -1, V, -1), every)  # (B, T, V)
    torch.testing.assert_close(logp.exp().sum(-1), torch.ones(logp.shape[:2], dtype=logp.dtype), rtol=0, atol=1e-12)
    for i, (s, t) in enumerate(PAIRS):
        for step, ref in enumerate(reference_step_log_probs(model, s, t)):
            torch.testing.assert_close(logp[i, step], ref, rtol=0, atol=1e-10)


def test_first_prediction_depends_on_the_source_not_on_any_begin_symbol() -> None:
    model = tiny_model()
    a = sequences_batch([[5, 6]], [[7, 8]])
    b = sequences_batch([[5, 6]], [[9, 8]])  # other first target word
    c = sequences_batch([[11, 6]], [[7, 8]])  # other source
    with torch.no_grad():
        la, lb, lc = (model(x.src, x.src_len, x.tgt) for x in (a, b, c))
    # step 1 sees only c and e(y_0) = 0, whatever the targets
    torch.testing.assert_close(la[:, 0], lb[:, 0], rtol=0, atol=0)
    assert not torch.allclose(la[:, 1], lb[:, 1], rtol=0, atol=1e-9)  # step 2 sees y_1
    assert not torch.allclose(la[:, 0], lc[:, 0], rtol=0, atol=1e-9)  # the source matters


def test_summary_last_uses_the_final_encoder_state() -> None:
    model = tiny_model(summary="last")
    src = torch.tensor([[5, 6, EOS_ID]])
    h_last = torch.zeros(1, TINY["hidden_dim"], dtype=torch.float64)
    for tok in src[0]:
        h_last = reference_gru_step(model.encoder, model.src_embed.weight[tok], h_last[0])[None]
    torch.testing.assert_close(model.encode(src, torch.tensor([3])).c, h_last, rtol=0, atol=1e-12)


def test_initialisation_follows_the_paper() -> None:
    torch.manual_seed(0)
    model = RNNEncoderDecoder(ModelConfig(**{**TINY, "hidden_dim": 64, "embed_dim": 32}))  # type: ignore[arg-type]
    for gru in (model.encoder, model.decoder):
        for U in gru.recurrent_matrices():
            torch.testing.assert_close(U @ U.T, torch.eye(64), rtol=0, atol=1e-5)  # orthogonal
    with torch.no_grad():
        big = torch.cat([model.C.weight.flatten(), model.O_h.weight.flatten(), model.src_embed.weight.flatten()])
        assert abs(float(big.std()) - 0.01) < 0.001 and abs(float(big.mean())) < 0.001
    with torch.no_grad():
        biases = [p for n, p in model.named_parameters() if n.endswith("bias")]
        assert biases and all(float(p.abs().max()) == 0 for p in biases)
