"""The training computation (``training.packed_log_probs``, ``training.optim``) against the plain one
(``sequence_log_probs``, torch's Adadelta): the same log p and gradients within float32
rounding, the same optimizer update bit for bit, and a training run whose first losses are those
of the plain computation with the plain optimizer."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from phrase_rescorer.data.batching import collate
from phrase_rescorer.data.pairs import load_pairs
from phrase_rescorer.model.cho2014 import GRU, ModelConfig, RNNEncoderDecoder, sequence_log_probs
from phrase_rescorer.parallel.distributed import Group
from phrase_rescorer.training.loop import Loop
from phrase_rescorer.training.optim import ChunkedAdadelta
from phrase_rescorer.training.packed_log_probs import PackedLogProbs, _active_counts, _written_out
from phrase_rescorer.training.phrase_task import PhraseTask
from phrase_rescorer.training.run_settings import TrainConfig, prepare_data
from phrase_rescorer.training.target_log_probs import picked_log_probs
from phrase_rescorer.training.task_interface import LoopConfig
from tests.helpers.synthetic import mapping_table

SIZES = dict(src_vocab_size=30, tgt_vocab_size=25, embed_dim=8, hidden_dim=12, maxout_dim=6, output_rank=5)


def _batch(gen: torch.Generator, B: int, S: int, T: int) -> tuple[torch.Tensor, ...]:
    """Right-padded batches with ragged lengths, length 1 and the full width included."""
    src_len = torch.randint(1, S + 1, (B,), generator=gen)
    tgt_len = torch.randint(1, T + 1, (B,), generator=gen)
    src_len[0], tgt_len[1], src_len[2], tgt_len[2] = S, T, 1, 1
    src = torch.randint(3, SIZES["src_vocab_size"], (B, S), generator=gen)
    tgt = torch.randint(3, SIZES["tgt_vocab_size"], (B, T), generator=gen)
    src[torch.arange(S) >= src_len.unsqueeze(1)] = 0
    tgt[torch.arange(T) >= tgt_len.unsqueeze(1)] = 0
    return src, src_len, tgt, tgt_len


def test_active_counts() -> None:
    assert _active_counts([5, 3, 3, 1], 6) == [4, 3, 3, 1, 1, 0]
    assert _active_counts([], 2) == [0, 0]


@pytest.mark.parametrize("cell", ["reset_before", "reset_after"])
@pytest.mark.parametrize("summary", ["tanh", "last"])
def test_same_log_probs_and_gradients(cell: str, summary: str) -> None:
    torch.manual_seed(0)
    model = RNNEncoderDecoder(ModelConfig(**SIZES, cell=cell, summary=summary))
    model.reset_parameters(std=0.3)  # far from uniform outputs, so that a wrong term shows
    packed = PackedLogProbs(model)
    src, src_len, tgt, tgt_len = _batch(torch.Generator().manual_seed(1), 9, 6, 5)

    want = sequence_log_probs(model, src, src_len, tgt, tgt_len)
    want.sum().backward()
    want_grads = {n: p.grad for n, p in model.named_parameters()}  # None where unused
    model.zero_grad(set_to_none=True)
    got = packed(src, src_len, tgt, tgt_len)
    got.sum().backward()

    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    for n, p in model.named_parameters():
        if want_grads[n] is None:
            assert p.grad is None, n
        else:
            torch.testing.assert_close(p.grad, want_grads[n], atol=1e-5, rtol=1e-4, msg=n)


def _reference_step(trainer: PhraseTask, opt: torch.optim.Optimizer, idx: np.ndarray) -> float:
    """The plain training step: sequence_log_probs, torch's Adadelta and clipping."""
    batch = collate(trainer.data.encoded, idx)
    loss = -sequence_log_probs(trainer.network, batch.src, batch.src_len, batch.tgt, batch.tgt_len).sum() / len(idx)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(trainer.network.parameters(), trainer.cfg.clip_norm)
    opt.step()
    return float(loss.detach())


def test_first_losses_equal_the_plain_computation(tmp_path: Path) -> None:
    table = mapping_table(tmp_path / "pt.gz", 200)
    cfg = TrainConfig(batch_size=16, init_std=0.1, valid_fraction=0.0, loop=LoopConfig(seed=5))
    data = prepare_data(load_pairs(str(table)), 40, cfg)
    config = ModelConfig(
        src_vocab_size=len(data.src_vocab),
        tgt_vocab_size=len(data.tgt_vocab),
        embed_dim=8,
        hidden_dim=16,
        maxout_dim=8,
        output_rank=4,
    )
    fast_task = PhraseTask(data, config, cfg, torch.device("cpu"))
    fast = Loop(fast_task, cfg.loop, str(tmp_path / "a.pt"), torch.device("cpu"), Group())
    plain = PhraseTask(data, config, cfg, torch.device("cpu"))
    plain_opt = torch.optim.Adadelta(
        plain.network.parameters(), lr=cfg.loop.lr, rho=cfg.rho, eps=cfg.eps, foreach=False
    )
    rng = np.random.default_rng(0)
    got, want = [], []
    for _ in range(12):
        idx = np.sort(rng.choice(data.train_idx, 16, replace=False))
        got.append(float(fast.step(idx)))
        want.append(_reference_step(plain, plain_opt, idx))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    assert len(set(got)) > 1  # the weights moved between the steps
    for a, b in zip(fast_task.network.parameters(), plain.network.parameters(), strict=True):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-4)


def test_chunked_adadelta_is_torchs_adadelta_bit_for_bit() -> None:
    torch.manual_seed(0)
    shapes = [(7, 5), (100,), (3, 4, 5), (1,)]
    a = [torch.randn(s) for s in shapes]
    b = [x.clone() for x in a]
    mine = ChunkedAdadelta(a, lr=0.7, rho=0.95, eps=1e-6, chunk=16)  # pieces cut inside tensors
    torchs = torch.optim.Adadelta(b, lr=0.7, rho=0.95, eps=1e-6, foreach=False)
    for step in range(4):
        for x, y in zip(a, b, strict=True):
            x.grad = torch.randn(x.shape) * 10**-step
            y.grad = x.grad.clone()
        mine.step()
        torchs.step()
        for x, y in zip(a, b, strict=True):
            assert torch.equal(x, y)
    # The same state, so that a run resumes with either.
    s1, s2 = mine.state_dict(), torchs.state_dict()
    for k in s2["state"]:
        for name in ("step", "square_avg", "acc_delta"):
            assert torch.equal(s1["state"][k][name], s2["state"][k][name])
    restored = ChunkedAdadelta(b, lr=0.7, rho=0.95, eps=1e-6)
    restored.load_state_dict(s2)
    assert torch.equal(restored.state_dict()["state"][0]["acc_delta"], s2["state"][0]["acc_delta"])


def test_picked_log_probs_equal_cross_entropy() -> None:
    """The in-place log-prob pick against torch's cross_entropy: values and the logits' gradient."""
    gen = torch.Generator().manual_seed(4)
    logits = (3 * torch.randn(11, 40, generator=gen, dtype=torch.float64)).requires_grad_()
    targets = torch.randint(0, 40, (11,), generator=gen)
    targets[3] = targets[4]  # two rows with the same target
    weight = torch.randn(11, generator=gen, dtype=torch.float64)
    want = -torch.nn.functional.cross_entropy(logits, targets, reduction="none")
    (want_grad,) = torch.autograd.grad((want * weight).sum(), logits)
    got = picked_log_probs(logits, targets)
    (got_grad,) = torch.autograd.grad((got * weight).sum(), logits)
    torch.testing.assert_close(got, want, atol=1e-12, rtol=1e-12)
    torch.testing.assert_close(got_grad, want_grad, atol=1e-12, rtol=1e-12)


def test_autocast_and_the_other_cell_take_the_step_by_step_path() -> None:
    """The written-out recurrence runs only with the model's default cell outside autocast."""
    before = GRU(3, 4, cell="reset_before")
    cpu = torch.device("cpu")
    assert _written_out(before, cpu)
    assert not _written_out(GRU(3, 4, cell="reset_after"), cpu)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert not _written_out(before, cpu)
