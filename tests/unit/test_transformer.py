"""The transformer (``--arch transformer``, ``model/transformer.py``) behind the one network
interface: its steps compute what its teacher-forced pass computes, padding and later tokens
change nothing they should not, its options are checked, its files keep the recurrent
architectures' files as they were, and ``train-nmt`` trains and resumes it.

``attend_values`` (torch's fused attention, every attention whose weights are not read) equals
``attend`` (the plain products and softmax): values and the gradients of queries, keys and
values within 1e-5 in float32 and 1e-12 in float64, under each mask the network uses.

Tolerance of step against teacher forcing: 1e-5 absolute on log-probabilities of order 1-10
(float32; the two differ only in the order of additions inside the attention's products;
measured about 1e-6). A step that read the wrong positions of its state, or a causal mask off by
one, moves them by 1e-2 or more (the last test below)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from phrase_rescorer.analysis.search import beam_search
from phrase_rescorer.cli import cli
from phrase_rescorer.data.batching import sequences_batch
from phrase_rescorer.model.arch_options import ArchConfig
from phrase_rescorer.model.architectures import arch_config, build_model, unused_sizes
from phrase_rescorer.model.checkpoint import load_checkpoint, save_checkpoint
from phrase_rescorer.model.cho2014 import ModelConfig, sequence_log_probs
from phrase_rescorer.model.files import CheckpointError
from phrase_rescorer.model.transformer import TransformerEncoderDecoder, attend, attend_values
from tests.helpers.nmt import TINY_MOSES
from tests.helpers.rescore_data import tiny_arch_checkpoint

pytestmark = pytest.mark.usefixtures("one_thread")

CONFIG = ModelConfig(src_vocab_size=30, tgt_vocab_size=25, embed_dim=16, hidden_dim=24, maxout_dim=8, output_rank=8)


def network(seed: int = 0, **options: object) -> TransformerEncoderDecoder:
    torch.manual_seed(seed)
    model = build_model(CONFIG, arch_config("transformer", layers=2, **options)).eval()  # type: ignore[arg-type]
    model.reset_parameters(0.5)
    assert isinstance(model, TransformerEncoderDecoder)
    return model


def stepped_log_probs(
    model: TransformerEncoderDecoder, src: torch.Tensor, src_len: torch.Tensor, tgt: torch.Tensor
) -> torch.Tensor:
    """log p over the shortlist at every target position, one ``step`` at a time (B, T, V)."""
    enc = model.encode(src, src_len)
    y_prev = model.previous_word_embeddings(tgt)
    state, out = model.start(enc), []
    for i in range(tgt.shape[1]):
        state, top, ctx, weights = model.step(y_prev[:, i], state, enc)
        assert weights is not None and torch.allclose(weights.sum(1), torch.ones(len(src)), atol=1e-6)
        out.append(torch.log_softmax(model.readout(top, y_prev[:, i], ctx), -1))
        assert state.shape == (len(src), (i + 1) * 2 * 2 * CONFIG.embed_dim)  # positions x layers x (k, v) x d
    return torch.stack(out, 1)


def _masks(B: int, T: int, S: int) -> dict[str, torch.Tensor | None]:
    lengths = torch.tensor([S, 1, 4, S - 2, 3])[:B]
    real = torch.arange(S).unsqueeze(0) < lengths.unsqueeze(1)
    return {
        "none": None,
        "padding": real.unsqueeze(1),  # the encoder's and the cross-attention's (B, 1, S)
        "causal": torch.ones(T, S, dtype=torch.bool).tril(S - T).unsqueeze(0),  # after S - T past positions
    }


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("mask", ["none", "padding", "causal"])
def test_fused_attention_equals_the_plain_one(dtype: torch.dtype, mask: str) -> None:
    torch.manual_seed(4)
    B, T, S, d, heads = 5, 6, 7, 16, 4
    qkv = torch.randn(B, T, 3 * d, dtype=dtype, requires_grad=True)
    kv = torch.randn(B, S, 2 * d, dtype=dtype, requires_grad=True)
    allowed = _masks(B, T, S)[mask]
    out_grad = torch.randn(B, T, d, dtype=dtype)

    def run(fn: object) -> list[torch.Tensor]:
        qkv.grad = kv.grad = None
        q, k, v = qkv[..., :d], kv[..., :d], kv[..., d:]  # strided views, as the layers pass them
        out = attend(q, k, v, heads, allowed)[0] if fn is attend else attend_values(q, k, v, heads, allowed)
        out.backward(out_grad)
        assert qkv.grad is not None and kv.grad is not None
        return [out.detach(), qkv.grad.clone(), kv.grad.clone()]

    tol = 1e-12 if dtype == torch.float64 else 1e-5
    for got, want in zip(run(attend_values), run(attend), strict=True):
        torch.testing.assert_close(got, want, rtol=tol, atol=tol)


def test_teacher_forcing_without_the_weights_computes_the_same() -> None:
    model = network(seed=5)
    src, src_len = torch.tensor([[5, 6, 7, 8, 2], [9, 10, 2, 0, 0]]), torch.tensor([5, 3])
    tgt = torch.tensor([[4, 5, 6, 2], [7, 8, 2, 0]])
    with torch.no_grad():
        enc = model.encode(src, src_len)
        with_weights, without = model.decode_outputs(enc, tgt), model.decode_outputs(enc, tgt, weights=False)
    assert with_weights[3] is not None and with_weights[3].shape == (2, 4, 5) and without[3] is None
    for a, b in zip(with_weights[:3], without[:3], strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)


def test_steps_compute_what_teacher_forcing_computes() -> None:
    model = network()
    src = torch.tensor([[5, 6, 7, 8, 2], [9, 10, 2, 0, 0], [11, 2, 0, 0, 0]])
    src_len = torch.tensor([5, 3, 2])
    tgt = torch.tensor([[4, 5, 6, 2], [7, 8, 2, 0], [9, 2, 0, 0]])
    with torch.no_grad():
        forced = torch.log_softmax(model(src, src_len, tgt), -1)
        stepped = stepped_log_probs(model, src, src_len, tgt)
    real = tgt != 0
    assert (forced - stepped).abs()[real].max() <= 1e-5


def test_padding_and_later_tokens_change_nothing_before_them() -> None:
    model = network(seed=1)
    src, src_len = torch.tensor([[5, 6, 7, 2]]), torch.tensor([4])
    with torch.no_grad():
        full = torch.log_softmax(model(src, src_len, torch.tensor([[8, 9, 10, 2]])), -1)
        part = torch.log_softmax(model(src, src_len, torch.tensor([[8, 9]])), -1)
        other = torch.log_softmax(model(src, src_len, torch.tensor([[8, 9, 12, 13]])), -1)
        padded = torch.log_softmax(model(torch.tensor([[5, 6, 7, 2, 0, 0, 0]]), src_len, torch.tensor([[8, 9]])), -1)
    assert torch.allclose(full[:, :2], part, atol=1e-6) and torch.allclose(other[:, :3], full[:, :3], atol=1e-6)
    assert torch.allclose(padded, part, atol=1e-6)
    assert not torch.allclose(full[:, 3], other[:, 3])  # the token after a change does change


def test_the_beam_search_scores_its_candidates_as_the_model_does() -> None:
    model = network(seed=2)
    found = beam_search(model, [5, 6, 7], beam_size=4, max_length=6)
    assert len(found) == 4
    for cand in found:
        b = sequences_batch([[5, 6, 7]], [list(cand.tokens)])
        with torch.no_grad():
            plain = float(sequence_log_probs(model, b.src, b.src_len, b.tgt, b.tgt_len)[0])
        assert abs(cand.logp - plain) <= 1e-4, (cand, plain)


def test_dropout_is_off_when_it_scores_and_on_when_it_trains() -> None:
    model = network(seed=3, dropout=0.5)
    src, src_len, tgt = torch.tensor([[5, 6, 2]]), torch.tensor([3]), torch.tensor([[7, 8, 2]])
    with torch.no_grad():
        a, b = model(src, src_len, tgt), model(src, src_len, tgt)
        assert torch.equal(a, b)
        model.train()
        torch.manual_seed(0)
        c = model(src, src_len, tgt)
    assert not torch.allclose(a, c)


def test_options_are_checked() -> None:
    with pytest.raises(ValueError, match="none of the recurrent options \\(--cell-type, --bidirectional\\)"):
        arch_config("transformer", cell_type="lstm", bidirectional=True)
    with pytest.raises(ValueError, match="none of the recurrent options \\(--attention\\)"):
        arch_config("transformer", attention="dot")  # its own placeholder value, given: refused too
    with pytest.raises(ValueError, match="none of the recurrent options \\(--bidirectional, --cell, --summary\\)"):
        arch_config("transformer", model_options=("cell", "summary"), bidirectional=False)
    assert arch_config("rnnsearch", model_options=("cell", "summary")) == arch_config("rnnsearch")
    with pytest.raises(ValueError, match="heads are the transformer's option; rnnsearch takes none"):
        arch_config("rnnsearch", heads=4)
    with pytest.raises(ValueError, match="at least 1 head"):
        ArchConfig("transformer", "gru", 4, False, 0, "dot", "top", heads=0)
    with pytest.raises(ValueError, match="divisible by its --heads 3"):
        build_model(CONFIG, arch_config("transformer", heads=3))
    assert arch_config("transformer").layers == 4 and arch_config("transformer").heads == 4
    assert unused_sizes(arch_config("transformer")) == ("maxout_dim", "output_rank") and not unused_sizes(None)


def test_files_store_the_heads_and_the_recurrent_files_stay_as_they_were(tmp_path: Path) -> None:
    path = tiny_arch_checkpoint(tmp_path / "t.pt", "transformer", layers=2, heads=2)
    ckpt = load_checkpoint(str(path))
    assert ckpt.arch == arch_config("transformer", layers=2, heads=2)
    assert ckpt.arch is not None and ckpt.arch.to_dict()["heads"] == 2
    assert "heads" not in arch_config("rnnsearch").to_dict()  # type: ignore[union-attr]
    # A file whose options name a recurrent cell for its transformer is refused by name.
    payload = torch.load(str(path), weights_only=False)
    payload["arch"]["cell_type"] = "lstm"
    torch.save(payload, str(tmp_path / "bad.pt"))
    with pytest.raises(CheckpointError, match="recurrent options"):
        load_checkpoint(str(tmp_path / "bad.pt"))
    # Its maxout and output-rank sizes shape no weight, and need not.
    model = ckpt.build_model()
    save_checkpoint(str(tmp_path / "again.pt"), model, ckpt.src_vocab, ckpt.tgt_vocab, info={"purpose": "tests"})
    assert load_checkpoint(str(tmp_path / "again.pt")).arch == ckpt.arch


def test_train_nmt_trains_and_resumes_it(tmp_path: Path) -> None:
    out = str(tmp_path / "m.pt")
    common = [
        *("train-nmt", str(TINY_MOSES / "dev.en"), str(TINY_MOSES / "dev.fr"), out, "--arch", "transformer"),
        *("--layers", "2", "--heads", "2", "--embed-dim", "8", "--hidden-dim", "16", "--vocab-size", "40"),
        *("--dropout", "0.1", "--valid-every", "2", "--threads", "1", "--patience", "0"),
    ]
    r = CliRunner().invoke(cli, [*common, "--max-steps", "3"], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    assert "transformer (2 layers, 2 heads)" in r.output and "maxout_dim" not in r.output, r.output
    r = CliRunner().invoke(cli, [*common, "--max-steps", "5", "--resume"], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    ckpt = load_checkpoint(str(tmp_path / "m.last.pt"))
    assert ckpt.arch == arch_config("transformer", layers=2, heads=2, dropout=0.1)
    r = CliRunner().invoke(cli, [*common[:-6], "--heads", "3", "--max-steps", "2"], catch_exceptions=False)
    assert r.exit_code == 2 and "--embed-dim 8) must be divisible by its --heads 3" in r.output, r.output
    r = CliRunner().invoke(cli, [*common, "--maxout-dim", "8", "--max-steps", "2"], catch_exceptions=False)
    assert r.exit_code == 2 and "--maxout-dim: not a size of the transformer" in r.output, r.output


def test_a_wrong_state_position_would_be_caught() -> None:
    """The check above is sensitive: steps that forget their last position (the state of one
    step fewer) give log-probabilities far from teacher forcing's."""
    model = network(seed=4)
    src, src_len, tgt = torch.tensor([[5, 6, 7, 2]]), torch.tensor([4]), torch.tensor([[4, 5, 6, 2]])
    with torch.no_grad():
        forced = torch.log_softmax(model(src, src_len, tgt), -1)
        enc = model.encode(src, src_len)
        y_prev = model.previous_word_embeddings(tgt)
        state = model.start(enc)
        width = 2 * 2 * CONFIG.embed_dim
        for i in range(3):
            state, *_ = model.step(y_prev[:, i], state, enc)
            if i == 1:
                state = state[:, width:]  # drop the first position's keys and values
        _, top, ctx, _ = model.step(y_prev[:, 3], state, enc)
        wrong = torch.log_softmax(model.readout(top, y_prev[:, 3], ctx), -1)
    assert (wrong - forced[:, 3]).abs().max() > 1e-2
