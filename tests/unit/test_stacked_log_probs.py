"""``training.stacked_log_probs`` and ``training.transformer_log_probs`` against the model's own
objective (``label_smoothing.SmoothedLogProbs`` / ``packed_log_probs.PlainLogProbs`` over the
teacher-forced logits): the same per-pair values and the same gradient of every weight, dropout on
(the same masks drawn), for rnnsearch (its encoder packed), gnmt (LSTM: the encoder itself) and the
transformer (its output layer over the real positions only), label smoothing 0 and 0.1; within
float32 rounding, and to 1e-12 in float64."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch import nn

from phrase_rescorer.model.architectures import arch_config, build_model
from phrase_rescorer.model.cho2014 import ModelConfig
from phrase_rescorer.training.deferred_weights import DeferredWeights
from phrase_rescorer.training.label_smoothing import SmoothedLogProbs, training_objective
from phrase_rescorer.training.loop import TrainingError
from phrase_rescorer.training.packed_log_probs import PlainLogProbs
from phrase_rescorer.training.stacked_log_probs import StackedLogProbs, is_stacked_network
from phrase_rescorer.training.transformer_log_probs import TransformerLogProbs

pytestmark = pytest.mark.usefixtures("one_thread")

SIZES = ModelConfig(src_vocab_size=30, tgt_vocab_size=25, embed_dim=8, hidden_dim=6, maxout_dim=5, output_rank=4)


def _batch() -> tuple[torch.Tensor, ...]:
    torch.manual_seed(1)
    src_len, tgt_len = torch.tensor([3, 7, 1, 7, 4]), torch.tensor([2, 5, 6, 1, 3])
    src, tgt = torch.randint(3, 30, (5, 7)), torch.randint(3, 25, (5, 6))
    for b in range(5):
        src[b, src_len[b] :] = 0
        tgt[b, tgt_len[b] :] = 0
    return src, src_len, tgt, tgt_len


def _run(objective: nn.Module, model: nn.Module, batch: tuple[torch.Tensor, ...]) -> list[torch.Tensor]:
    model.zero_grad()
    model.train()
    torch.manual_seed(5)  # the dropout masks
    value = objective(*batch)
    (value * torch.arange(1.0, len(value) + 1, dtype=value.dtype)).sum().backward()
    return [value.detach(), *(p.grad if p.grad is not None else torch.zeros_like(p) for p in model.parameters())]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("arch", ["rnnsearch", "gnmt"])
@pytest.mark.parametrize("eps", [0.0, 0.1])
def test_equals_the_models_objective(dtype: torch.dtype, arch: str, eps: float) -> None:
    torch.manual_seed(0)
    options: dict[str, Any] = {"dropout": 0.3} if arch == "rnnsearch" else {"dropout": 0.3, "layers": 2}
    model = build_model(SIZES, arch_config(arch, **options)).to(dtype)
    model.reset_parameters(0.5)  # far from linear, so that a wrong term shows
    assert is_stacked_network(model)
    plain = SmoothedLogProbs(model, eps) if eps else PlainLogProbs(model)
    want = _run(plain, model, _batch())
    got = _run(StackedLogProbs(model, eps), model, _batch())
    tol = 1e-12 if dtype == torch.float64 else 1e-5  # float64: the order of the sums; float32: its rounding
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w, rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("eps", [0.0, 0.1])
def test_the_transformers_equals_its_objective(dtype: torch.dtype, eps: float) -> None:
    torch.manual_seed(0)
    model = build_model(SIZES, arch_config("transformer", dropout=0.3, layers=2, heads=2)).to(dtype)
    model.reset_parameters(0.5)
    assert isinstance(training_objective(model, eps), TransformerLogProbs)
    plain = SmoothedLogProbs(model, eps) if eps else PlainLogProbs(model)
    want = _run(plain, model, _batch())
    got = _run(TransformerLogProbs(model, eps), model, _batch())
    tol = 1e-12 if dtype == torch.float64 else 1e-5
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w, rtol=tol, atol=tol)


@pytest.mark.parametrize("eps", [0.0, 0.1])
def test_the_transformers_under_bf16_autocast(eps: float) -> None:
    torch.manual_seed(0)
    model = build_model(SIZES, arch_config("transformer", dropout=0.3, layers=2, heads=2))
    model.reset_parameters(0.5)
    with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
        want = _run(SmoothedLogProbs(model, eps) if eps else PlainLogProbs(model), model, _batch())
        got = _run(TransformerLogProbs(model, eps), model, _batch())
    for g, w in zip(got, want, strict=True):
        assert torch.isfinite(g).all()
        assert float((g.float() - w.float()).norm()) <= 0.05 * float(w.float().norm()) + 1e-6


def test_other_networks_are_not_stacked() -> None:
    for arch in ("cho2014", "transformer"):
        assert not is_stacked_network(build_model(SIZES, arch_config(arch)))


@pytest.mark.parametrize("arch", ["rnnsearch", "gnmt"])
@pytest.mark.parametrize("eps", [0.0, 0.1])
def test_under_bf16_autocast_equals_the_models_objective(arch: str, eps: float) -> None:
    """``--bf16`` trains under autocast: the step runs (a product of a bfloat16 gradient with a
    float32 weight once failed), and its values and gradients are the plain objective's under the
    same autocast to bfloat16's rounding (8 bits of mantissa: a few % of each tensor's norm)."""
    torch.manual_seed(0)
    model = build_model(SIZES, arch_config(arch, dropout=0.3))
    model.reset_parameters(0.5)
    with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
        want = _run(SmoothedLogProbs(model, eps) if eps else PlainLogProbs(model), model, _batch())
        got = _run(StackedLogProbs(model, eps), model, _batch())
    for g, w in zip(got, want, strict=True):
        assert torch.isfinite(g).all()
        assert float((g.float() - w.float()).norm()) <= 0.05 * float(w.float().norm()) + 1e-6


@pytest.mark.parametrize("arch", ["rnnsearch", "gnmt"])
def test_the_decoder_steps_products_computed_another_way(arch: str) -> None:
    """``decode_outputs(..., project, recurrent)`` applies ``recurrent`` to every product with the
    previous state (GRU and LSTM cells, the attention's query), ``project`` to the cells' inputs:
    in float64 with ``DeferredWeights`` for both, the model's decoder and gradients to 1e-12."""
    torch.manual_seed(0)
    options: dict[str, Any] = {"layers": 2} if arch == "gnmt" else {}
    model = build_model(SIZES, arch_config(arch, **options)).double()
    model.reset_parameters(0.5)
    src, src_len, tgt, _ = _batch()
    calls: list[str] = []

    def outputs(project: Any, recurrent: Any) -> list[torch.Tensor]:
        model.zero_grad()
        tops, _, ctxs, _ = model.decode_outputs(model.encode(src, src_len), tgt, project, recurrent)
        (tops.sum() + ctxs.square().sum()).backward()
        return [tops.detach(), ctxs.detach(), *(p.grad for p in model.parameters() if p.grad is not None)]

    def counted(steps: DeferredWeights) -> Any:
        def linear(layer: nn.Linear, x: torch.Tensor) -> torch.Tensor:
            calls.append(next(name for name, m in model.named_modules() if m is layer))
            return steps.linear(layer, x)

        return linear

    want = outputs(None, None)
    steps = DeferredWeights()
    got = outputs(counted(steps), counted(steps))
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w, rtol=1e-12, atol=1e-12)
    recurrent = {name.rsplit(".", 1)[-1] for name in calls}
    assert recurrent == ({"W", "U", "W_a"} if arch == "gnmt" else {"W", "U_rz", "U", "W_a"})  # LSTM: U only


@pytest.mark.parametrize("arch", ["rnnsearch", "gnmt"])
@pytest.mark.parametrize("eps", [0.0, 0.1])
def test_bf16_steps_approximates_the_objective(arch: str, eps: float) -> None:
    """``--bf16-steps``: values and every gradient within 5 % of the float32 objective's norm
    (bfloat16 keeps 8 bits of mantissa), finite, and not the float32 computation."""
    torch.manual_seed(0)
    options: dict[str, Any] = {"dropout": 0.3} if arch == "rnnsearch" else {"dropout": 0.3, "layers": 2}
    model = build_model(SIZES, arch_config(arch, **options))
    model.reset_parameters(0.5)
    want = _run(StackedLogProbs(model, eps), model, _batch())
    got = _run(training_objective(model, eps, bf16_steps=True), model, _batch())
    assert not torch.equal(got[0], want[0])
    for g, w in zip(got, want, strict=True):
        assert g.dtype == torch.float32 and torch.isfinite(g).all()
        assert float((g - w).norm()) <= 0.05 * float(w.norm()) + 1e-6


@pytest.mark.parametrize("arch", ["rnnsearch", "gnmt", "transformer"])
@pytest.mark.parametrize("eps", [0.0, 0.1])
def test_bf16_output_approximates_the_objective(arch: str, eps: float) -> None:
    """``--bf16-output`` (alone, and with ``--bf16-steps`` where there are decoder steps): values
    and every gradient within 5 % of the float32 objective's norm, finite, not the float32
    computation, and not that of the decoder steps alone."""
    torch.manual_seed(0)
    options: dict[str, Any] = {"dropout": 0.3} if arch == "rnnsearch" else {"dropout": 0.3, "layers": 2}
    if arch == "transformer":
        options["heads"] = 2
    model = build_model(SIZES, arch_config(arch, **options))
    model.reset_parameters(0.5)
    want = _run(training_objective(model, eps), model, _batch())
    both = arch != "transformer"
    got = _run(training_objective(model, eps, bf16_output=True), model, _batch())
    runs = [got]
    if both:
        runs.append(_run(training_objective(model, eps, bf16_steps=True, bf16_output=True), model, _batch()))
    for run in runs:
        assert not torch.equal(run[0], want[0])
        for g, w in zip(run, want, strict=True):
            assert g.dtype == torch.float32 and torch.isfinite(g).all()
            assert float((g - w).norm()) <= 0.05 * float(w.norm()) + 1e-6
    if both:
        steps_only = _run(training_objective(model, eps, bf16_steps=True), model, _batch())
        assert not torch.equal(runs[1][0], steps_only[0])


def test_bf16_output_needs_a_sentence_network() -> None:
    with pytest.raises(TrainingError, match="--bf16-output: only the sentence networks"):
        training_objective(build_model(SIZES, arch_config("cho2014")), 0.0, bf16_output=True)


def test_bf16_steps_needs_decoder_steps() -> None:
    for arch in ("cho2014", "transformer"):
        with pytest.raises(TrainingError, match="--bf16-steps: only the recurrent attention networks"):
            training_objective(build_model(SIZES, arch_config(arch)), 0.0, bf16_steps=True)


def test_an_empty_source_row_is_the_models_encoder() -> None:
    torch.manual_seed(0)
    model = build_model(SIZES, arch_config("rnnsearch"))
    src, src_len, tgt, tgt_len = _batch()
    src_len = src_len.clone()
    src_len[2] = 0
    src[2] = 0
    want = _run(PlainLogProbs(model), model, (src, src_len, tgt, tgt_len))
    got = _run(StackedLogProbs(model, 0.0), model, (src, src_len, tgt, tgt_len))
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-5, equal_nan=True)  # attention over nothing
