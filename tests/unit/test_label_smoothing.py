"""Label smoothing (``--label-smoothing EPS``) changes the training loss only: the smoothed
log-likelihood is the mixture it is defined as, 0 gives the old training computation exactly,
and validation and scores are the model's log p whatever the run's smoothing."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from phrase_rescorer.data.batching import collate
from phrase_rescorer.data.pairs import load_pairs
from phrase_rescorer.data.vocab import PAD_ID
from phrase_rescorer.model.architectures import arch_config, build_model
from phrase_rescorer.model.checkpoint import load_checkpoint
from phrase_rescorer.model.cho2014 import ModelConfig, sequence_log_probs
from phrase_rescorer.parallel.distributed import Group
from phrase_rescorer.rescoring.scorers import make_scorer
from phrase_rescorer.training.label_smoothing import SmoothedLogProbs, smoothed_log_probs, training_objective
from phrase_rescorer.training.loop import Loop, TrainingError, check_same_run
from phrase_rescorer.training.packed_log_probs import PackedLogProbs
from phrase_rescorer.training.phrase_task import PhraseTask
from phrase_rescorer.training.run_settings import TrainConfig, prepare_data
from phrase_rescorer.training.stacked_log_probs import StackedLogProbs
from phrase_rescorer.training.task_interface import LoopConfig
from phrase_rescorer.training.transformer_log_probs import TransformerLogProbs
from tests.helpers.synthetic import mapping_table

pytestmark = pytest.mark.usefixtures("one_thread")

SIZES = ModelConfig(src_vocab_size=30, tgt_vocab_size=25, embed_dim=8, hidden_dim=12, maxout_dim=6, output_rank=5)


def _batch() -> tuple[torch.Tensor, ...]:
    src = torch.tensor([[5, 9, 12, 2], [7, 2, 0, 0], [3, 4, 2, 0]])
    tgt = torch.tensor([[4, 8, 20, 2], [6, 2, 0, 0], [11, 2, 0, 0]])
    return src, torch.tensor([4, 2, 3]), tgt, torch.tensor([4, 2, 2])


@pytest.mark.parametrize("arch", ["cho2014", "rnnsearch"])
def test_the_smoothed_log_likelihood_is_the_mixture(arch: str) -> None:
    torch.manual_seed(0)
    model = build_model(SIZES, arch_config(arch))
    model.reset_parameters(0.3)
    src, src_len, tgt, tgt_len = _batch()
    logits = model(src, src_len, tgt)
    # eps 0: log p(target|source) exactly as the one definition computes it
    assert torch.equal(
        smoothed_log_probs(logits, tgt, tgt_len, 0.0), sequence_log_probs(model, src, src_len, tgt, tgt_len)
    )
    # eps 0.1: sum over positions of sum_v q(v) log p(v), q = 0.9 onehot + 0.1 / K off <pad>
    logp = torch.log_softmax(logits.double(), -1)
    want = torch.zeros(3, dtype=torch.float64)
    for b in range(3):
        for t in range(int(tgt_len[b])):
            q = torch.full((SIZES.tgt_vocab_size,), 0.1 / (SIZES.tgt_vocab_size - 1), dtype=torch.float64)
            q[PAD_ID] = 0.0
            q[tgt[b, t]] += 0.9
            want[b] += (q * logp[b, t]).sum()
    got = smoothed_log_probs(logits, tgt, tgt_len, 0.1)
    torch.testing.assert_close(got.double(), want, rtol=1e-5, atol=1e-5)
    assert float((got - sequence_log_probs(model, src, src_len, tgt, tgt_len)).detach().abs().max()) > 1e-2
    with pytest.raises(ValueError, match="below 1"):
        smoothed_log_probs(logits, tgt, tgt_len, 1.0)


@pytest.mark.parametrize("objective", [SmoothedLogProbs, StackedLogProbs, TransformerLogProbs])
@pytest.mark.parametrize("eps", [-0.1, 1.0, 1.5])
def test_every_objective_refuses_a_smoothing_outside_0_to_1(objective: type, eps: float) -> None:
    with pytest.raises(ValueError, match="label smoothing must be at least 0 and below 1"):
        objective(torch.nn.Linear(2, 2), eps)


def test_smoothing_0_is_the_old_training_computation() -> None:
    torch.manual_seed(0)
    model = build_model(SIZES, arch_config("cho2014"))
    assert type(training_objective(model, 0.0)) is PackedLogProbs
    assert isinstance(training_objective(model, 0.1), SmoothedLogProbs)
    # the stacked networks and the transformer compute both in a faster order
    # (tests/unit/test_stacked_log_probs.py)
    for arch, faster in (("rnnsearch", StackedLogProbs), ("transformer", TransformerLogProbs)):
        model = build_model(SIZES, arch_config(arch))
        assert type(training_objective(model, 0.0)) is type(training_objective(model, 0.1)) is faster
    with pytest.raises(TrainingError, match="label smoothing must be at least 0 and below 1"):
        TrainConfig(label_smoothing=1.0)


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return mapping_table(tmp_path_factory.mktemp("table") / "pt.gz", 200)


def _trainer(table: Path, out: Path, arch: str, eps: float | None) -> Loop:
    smoothing = {} if eps is None else {"label_smoothing": eps}
    loop = LoopConfig(lr=1e-3)
    cfg = TrainConfig(batch_size=16, valid_fraction=0.1, optimizer="adam", init_std=0.3, loop=loop, **smoothing)  # type: ignore[arg-type]
    data = prepare_data(load_pairs(str(table)), 40, cfg)
    config = ModelConfig(len(data.src_vocab), len(data.tgt_vocab), 16, 16, 8, 8)
    device = torch.device("cpu")
    return Loop(PhraseTask(data, config, cfg, device, arch=arch_config(arch)), loop, str(out), device, Group())


@pytest.mark.parametrize("arch", ["cho2014", "rnnsearch"])
def test_only_the_training_loss_changes(table: Path, tmp_path: Path, arch: str) -> None:
    """Three runs of the same seed (the same starting weights): without the option, with 0 and
    with 0.1. The first step's loss: the old one exactly with 0 (for rnnsearch the plain
    -sum log p / pairs itself), another one with 0.1. Validation and the scores of the saved
    networks before that step: identical in all three."""
    runs = {eps: _trainer(table, tmp_path / f"{eps}.pt", arch, eps) for eps in (None, 0.0, 0.1)}
    d = runs[None].task.data
    idx = d.train_idx[:16]
    held = {eps: t.validate(scheduled=True) for eps, t in runs.items()}  # also saves the networks
    for eps in (0.0, 0.1):
        assert held[eps]["valid_token_ppl"] == held[None]["valid_token_ppl"]
    sources = [
        list(map(int, d.encoded.src_tokens[d.encoded.src_offsets[i] : d.encoded.src_offsets[i + 1]]))
        for i in d.valid_idx
    ]
    targets = [
        list(map(int, d.encoded.tgt_tokens[d.encoded.tgt_offsets[i] : d.encoded.tgt_offsets[i + 1]]))
        for i in d.valid_idx
    ]
    index = np.arange(len(sources))
    scores = {
        eps: make_scorer("prefix", load_checkpoint(str(tmp_path / f"{eps}.pt")).build_model(), "cpu").score(
            sources, targets, index
        )
        for eps in runs
    }
    assert np.array_equal(scores[0.1], scores[None]) and np.array_equal(scores[0.0], scores[None])

    if arch == "rnnsearch":
        batch = collate(d.encoded, idx)
        with torch.no_grad():
            plain = -sequence_log_probs(
                runs[None].task.network, batch.src, batch.src_len, batch.tgt, batch.tgt_len
            ).sum() / len(idx)
    losses = {eps: float(t.step(idx)) for eps, t in runs.items()}
    assert losses[0.0] == losses[None]
    assert abs(losses[0.1] - losses[None]) > 1e-3
    if arch == "rnnsearch":
        assert losses[None] == float(plain)


def test_resume_refuses_another_smoothing(table: Path, tmp_path: Path) -> None:
    before = _trainer(table, tmp_path / "a.pt", "rnnsearch", 0.1).task.record()
    now = _trainer(table, tmp_path / "b.pt", "rnnsearch", 0.0).task.record()
    with pytest.raises(TrainingError, match="label_smoothing was 0.1, now 0.0"):
        check_same_run(before, now, "a.last.pt", 10)
    old = {k: v for k, v in now.items() if k != "label_smoothing"}  # saved before the option existed
    check_same_run(old, now, "a.last.pt", 10)
