"""The building blocks of the architectures (cells, encoders, attention, decoders), their model
files, and the window scorer of the stacked architectures against the plain per-pair
computation. Tolerance as in test_scoring: |a - b| <= 1e-5 * max(1, |b|) in log space."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from phrase_rescorer.data.batching import sequences_batch
from phrase_rescorer.model.architectures import ArchConfig, arch_config, build_model
from phrase_rescorer.model.attention import Attention
from phrase_rescorer.model.checkpoint import load_checkpoint, save_checkpoint
from phrase_rescorer.model.cho2014 import ModelConfig, sequence_log_probs
from phrase_rescorer.model.encoders import Encoder, _run
from phrase_rescorer.rescoring.scorers import ReferenceScorer, make_scorer
from phrase_rescorer.rescoring.stacked_scorer import StackedScorer
from tests.helpers.rescore_data import ARCH_VARIANTS, sample_window, tiny_arch_checkpoint, tiny_checkpoint

pytestmark = pytest.mark.usefixtures("one_thread")

VARIANTS = ARCH_VARIANTS


def close(a: np.ndarray, b: np.ndarray, rel: float = 1e-5) -> bool:
    return bool(np.all(np.abs(a - b) <= rel * np.maximum(1.0, np.abs(b))))


def test_encoder_states_ignore_padding() -> None:
    torch.manual_seed(0)
    enc = Encoder("lstm", 6, 5, layers=3, bidirectional=True, residual_from=3)
    for p in enc.parameters():
        torch.nn.init.normal_(p, std=0.5)
    x = torch.randn(1, 4, 6)
    padded = torch.cat([x, torch.randn(1, 3, 6)], dim=1)
    m1, f1 = enc(x, torch.tensor([4]))
    m2, f2 = enc(padded, torch.tensor([4]))
    assert torch.allclose(m1, m2[:, :4], atol=1e-6) and torch.allclose(f1, f2, atol=1e-6)
    assert not torch.allclose(m1[:, 3], m1[:, 2])  # not a constant


def test_backward_direction_reads_the_phrase_reversed() -> None:
    torch.manual_seed(1)
    enc = Encoder("gru", 6, 5, bidirectional=True)
    x = torch.randn(2, 5, 6)
    lengths = torch.tensor([5, 3])
    memory, final = enc(x, lengths)
    assert enc.backward_cell is not None
    alone, last = _run(enc.backward_cell, x[1:, :3].flip(1), torch.ones(1, 3, dtype=torch.bool), reverse=False)
    assert torch.allclose(memory[1, :3, 5:], alone[0].flip(0), atol=1e-6)
    assert torch.allclose(final[1, 5:], last[0], atol=1e-6)  # <-h_1: the whole phrase read


@pytest.mark.parametrize("kind", ["additive", "dot", "general"])
def test_attention_weights_sum_to_one_and_skip_padding(kind: str) -> None:
    torch.manual_seed(2)
    att = Attention(kind, 4, 4, 4)
    memory = torch.randn(2, 5, 4)
    real = torch.tensor([[True] * 5, [True, True, False, False, False]])
    ctx, a = att(torch.randn(2, 4), att.keys(memory), memory, real)
    assert torch.allclose(a.sum(1), torch.ones(2)) and torch.all(a[1, 2:] == 0)
    assert torch.allclose(ctx, (a.unsqueeze(2) * memory).sum(1), atol=1e-6)


def test_options_are_checked() -> None:
    with pytest.raises(ValueError, match="no architecture option"):
        arch_config("cho2014", layers=2)
    with pytest.raises(ValueError, match="layer 3 at the lowest"):
        ArchConfig(residual_from=2)
    with pytest.raises(ValueError, match="use general"):
        build_model(ModelConfig(10, 10, 4, 4, 2, 2), arch_config("rnnsearch", attention="dot"))
    assert arch_config("cho2014") is None and arch_config("gnmt").cell_type == "lstm"


def test_decoder_state_depends_on_the_prefix_only() -> None:
    """log p of y_1..y_k under a longer target equals its value under the prefix alone: the
    condition for sharing decoder prefixes."""
    torch.manual_seed(3)
    m = build_model(ModelConfig(20, 20, 6, 8, 4, 4), arch_config("gnmt", layers=3)).eval()
    m.reset_parameters(0.4)  # type: ignore[operator]
    src, src_len = torch.tensor([[5, 6, 7, 2]]), torch.tensor([4])
    full = torch.log_softmax(m(src, src_len, torch.tensor([[8, 9, 10, 2]])), -1)
    part = torch.log_softmax(m(src, src_len, torch.tensor([[8, 9]])), -1)
    assert torch.allclose(full[:, :2], part, atol=1e-6)


@pytest.fixture(scope="module")
def window() -> tuple[list[list[int]], list[list[int]], np.ndarray]:
    return sample_window(150)


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_stacked_scorer_equals_the_plain_per_pair_computation(variant: str, window, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    sources, targets, index = window
    ckpt = load_checkpoint(str(tiny_arch_checkpoint(tmp_path / "m.pt", **VARIANTS[variant])))  # type: ignore[arg-type]
    model = ckpt.build_model()
    scorer = make_scorer("batched", model, "cpu", batch_size=7)  # sources and targets in many batches
    assert type(scorer) is StackedScorer  # the non-sharing path (``prefix`` shares decoder prefixes)
    got = scorer.score(sources, targets, index)
    with torch.inference_mode():
        plain = np.array(
            [float(sequence_log_probs(model, *_one(sources[int(j)], t))) for j, t in zip(index, targets, strict=True)]
        )
    assert close(got, plain) and np.ptp(plain) > 1.0  # and the scores differ from pair to pair
    assert close(ReferenceScorer(model).score(sources, targets, index), plain)


def _one(src: list[int], tgt: list[int]) -> tuple[torch.Tensor, ...]:
    b = sequences_batch([src], [tgt])
    return b.src, b.src_len, b.tgt, b.tgt_len


def test_model_files_record_the_architecture(tmp_path: Path) -> None:
    path = tiny_arch_checkpoint(tmp_path / "g.pt", "gnmt", layers=3, attention="general")
    raw = torch.load(path, weights_only=True)
    assert raw["format_version"] == 2 and raw["arch"]["attention"] == "general"
    ckpt = load_checkpoint(str(path))
    assert ckpt.arch == arch_config("gnmt", layers=3, attention="general")
    again = tmp_path / "again.pt"
    save_checkpoint(str(again), ckpt.build_model(), ckpt.src_vocab, ckpt.tgt_vocab)
    assert load_checkpoint(str(again)).fingerprint() == ckpt.fingerprint()
    other = tiny_arch_checkpoint(tmp_path / "o.pt", "gnmt", layers=3)  # same weights' shapes
    assert load_checkpoint(str(other)).fingerprint() != ckpt.fingerprint()
    cho = torch.load(tiny_checkpoint(tmp_path / "c.pt"), weights_only=True)
    assert cho["format_version"] == 1 and "arch" not in cho  # as written before architectures
    assert load_checkpoint(str(tmp_path / "c.pt")).arch is None


def test_worker_threads_split_windows_without_changing_scores(window, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    sources, targets, index = window
    model = load_checkpoint(str(tiny_arch_checkpoint(tmp_path / "m.pt", "gnmt", layers=3))).build_model()
    one = StackedScorer(model, "cpu", batch_size=16, workers=1).score(sources, targets, index)
    three = StackedScorer(model, "cpu", batch_size=16, workers=3).score(sources, targets, index)
    assert close(three, one) and torch.get_num_threads() == 1  # the caller's setting is restored
