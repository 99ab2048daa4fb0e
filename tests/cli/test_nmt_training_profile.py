"""The profile of the sentence networks' training step (``python -m benchmarks.nmt_training_profile``,
``make profile-training-nmt``): its table accounts for the profiled step, its FLOP count is the
networks' own, and its named ranges leave the networks as they were (the timings themselves are
not checked: they depend on the machine)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from torch.profiler import ProfilerActivity, profile, record_function

from phrase_rescorer.model.architectures import arch_config, build_model
from phrase_rescorer.model.cho2014 import ModelConfig
from tests.helpers.paths import PYTHON, cli_env

TINY = ModelConfig(src_vocab_size=40, tgt_vocab_size=50, embed_dim=16, hidden_dim=32, maxout_dim=16, output_rank=8)
SOURCES = [[5, 6, 7], [8], [9, 10, 11, 12, 13]]
TARGETS = [[5, 6, 7, 8], [9], [10, 11]]


@pytest.mark.slow
@pytest.mark.parametrize(
    "network,reduced",
    [
        ("rnnsearch", []),
        ("transformer", []),
        ("rnnsearch", ["--bf16-steps", "--bf16-output"]),
        ("transformer", ["--bf16-output"]),
    ],
)
def test_nmt_training_profile_accounts_for_the_step(tmp_path: Path, network: str, reduced: list[str]) -> None:
    """Every part of the network is found, forward and backward, and the parts add up to the
    profiled step; the FLOPs, the padding and (rnnsearch) the products' ceiling are reported;
    ``--bf16-steps --bf16-output`` profiles that step and adds the bf16 product's rate."""
    out = tmp_path / "profile.json"
    args = ["--network", network, "--preset", "quick", "--synthetic", "300", "--batch-tokens", "300"]
    args += ["--steps", "2", "--warmup", "2", "--threads", "1", "--json", str(out)]
    args += reduced
    if network == "transformer":
        args.append("--no-ceiling")
    r = subprocess.run(
        [PYTHON, "-m", "benchmarks.nmt_training_profile", *args],
        env=cli_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    f = json.loads(out.read_text())
    own = {
        "rnnsearch": ["encoder", "attention", "decoder recurrence", "readout"],
        "transformer": ["encoder", "attention", "decoder layers"],
    }
    expected = ["embedding", *own[network], "output layer", "softmax and loss"]
    rows = f["parts"]
    for part in expected:
        assert rows[part]["forward"] > 0 and rows[part]["backward"] > 0, part
    assert list(rows) == [
        "batching and padding",
        *expected,
        "forward, between the parts",
        "backward: engine, gradient accumulation",
        "gradient clipping",
        "optimizer",
        "Python between the phases",
    ]
    assert sum(r["total"] for r in rows.values()) == pytest.approx(f["profiled_step_ms"])
    assert 0 < f["useful_gflop"] <= f["padded_gflop"]
    assert 0 <= f["padding"]["source"] < 1 and 0 <= f["padding"]["target"] < 1
    assert "fp32" in f["rate_2048"] and f["beside_fraction"] > 0
    assert (f["bf16_steps"], f["bf16_output"]) == ("--bf16-steps" in reduced, "--bf16-output" in reduced)
    assert ("bf16" in f["rate_2048"]) >= bool(reduced)
    says = {0: "float32;", 1: "bf16 output layer;", 2: "bf16 decoder steps and bf16 output layer;"}[len(reduced)]
    assert f"{says} 2 steps after 2" in r.stdout
    assert "FLOPs of a step from the shapes" in r.stdout and "where the time goes" in r.stdout
    assert "softmax and loss" in r.stdout and "Python between the phases" in r.stdout
    if network == "rnnsearch":
        c = f["ceilings"]["fp32"]
        assert c["shapes"] > 0 and c["product_flops_per_step"] > 0 and set(f["ceilings"]) == set(f["rate_2048"])
        assert "at the step's own" in r.stdout
    else:
        assert "ceilings" not in f


@pytest.mark.parametrize("network", ["rnnsearch", "transformer"])
def test_sentence_flops_count_the_networks_products(network: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The count from the shapes (``flops.sentence_flops``) is torch's count of the forward pass's
    products: of the padded batch, and of each pair alone. torch's counter does not count the
    CPU's fused attention kernel, so the transformer's attentions run as the plain ``attend``
    here: the same products."""
    from torch.utils.flop_counter import FlopCounterMode

    from phrase_rescorer.model import transformer

    monkeypatch.setattr(transformer, "attend_values", lambda q, k, v, h, a: transformer.attend(q, k, v, h, a)[0])

    from benchmarks.flops import sentence_flops
    from phrase_rescorer.data.batching import sequences_batch

    arch = arch_config(network, dropout=0.3)
    assert arch is not None
    net = build_model(TINY, arch)

    def counted(sources: list[list[int]], targets: list[list[int]]) -> int:
        b = sequences_batch(sources, targets)
        with FlopCounterMode(display=False) as m:
            net(b.src, b.src_len, b.tgt)
        return m.get_total_flops()

    s, t = np.array([len(x) for x in SOURCES]), np.array([len(x) for x in TARGETS])
    assert sentence_flops(TINY, arch, s, t, padded=True) == counted(SOURCES, TARGETS)
    assert sentence_flops(TINY, arch, s, t) == sum(counted([a], [b]) for a, b in zip(SOURCES, TARGETS, strict=True))


def test_sentence_flops_refuse_other_architectures() -> None:
    from benchmarks.flops import sentence_flops

    two_layers = arch_config("rnnsearch", layers=2)
    assert two_layers is not None
    with pytest.raises(ValueError, match="rnnsearch"):
        sentence_flops(TINY, two_layers, np.array([3]), np.array([4]))


def test_backward_work_goes_to_the_part_of_its_forward_operator() -> None:
    """An operator that makes no autograd node records the number of the next one made: the
    embedding's backward pass belongs to the range of the embedding, not to the range of the
    indexing before it (``profile_analysis.phase_times``)."""
    from benchmarks.profile_analysis import phase_times

    embedding = torch.nn.Embedding(10, 4)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        with record_function("phase.a"):
            ids = torch.tensor([[1, 2, 3]])[:, :-1] + 1
        with record_function("phase.b"):
            y = embedding(ids)
        with record_function("train.backward"):
            y.sum().backward()
    times = phase_times(prof, 1)
    assert "backward.phase.b" in times and "backward.phase.a" not in times
    assert {"phase.a", "phase.b", "train.backward", "backward.other"} <= set(times)


@pytest.mark.parametrize("network", ["rnnsearch", "transformer"])
def test_the_named_ranges_leave_the_network_as_it_was(network: str) -> None:
    """Inside ``instrumented`` the parts run in named ranges; after it, no instance keeps a
    wrapper and the module functions (the transformer's, the stacked networks' training
    computation's) are their own again; the logits are unchanged."""
    from benchmarks.nmt_training_profile import _parts_of, instrumented
    from phrase_rescorer.data.batching import sequences_batch
    from phrase_rescorer.model import transformer
    from phrase_rescorer.training import smoothed_output, stacked_log_probs
    from phrase_rescorer.training.label_smoothing import training_objective

    arch = arch_config(network)
    net: Any = training_objective(build_model(TINY, arch), 0.1)
    attend = transformer.attend
    functions = (stacked_log_probs.packed_encoder, smoothed_output.smoothed_target_log_probs)
    b = sequences_batch(SOURCES, TARGETS)
    before = net.model(b.src, b.src_len, b.tgt)
    with instrumented(net, network), profile(activities=[ProfilerActivity.CPU]) as prof:
        inside = net.model(b.src, b.src_len, b.tgt)
    names = {e.name for e in prof.events() if e.name.startswith("phase.")}
    assert {"phase.embedding", "phase.output layer"} <= names and len(names) >= 4
    for owner, attr, _ in _parts_of(net, network):
        assert owner in (transformer, stacked_log_probs, smoothed_output) or attr not in vars(owner), (owner, attr)
    assert transformer.attend is attend
    assert (stacked_log_probs.packed_encoder, smoothed_output.smoothed_target_log_probs) == functions
    assert torch.equal(before, inside) and torch.equal(before, net.model(b.src, b.src_len, b.tgt))


@pytest.mark.slow
def test_nmt_step_ab_alternates_two_precisions(tmp_path: Path) -> None:
    """``python -m benchmarks.nmt_step_ab`` builds the recipe twice, names each side's precision
    and prints the per-batch ratio; an unknown precision is refused before any work."""
    args = ["--preset", "quick", "--synthetic", "300", "--batch-tokens", "300", "--batches", "3", "--warmup", "1"]
    args += ["--threads", "1", "--b", "bf16_steps,bf16_output"]
    r = subprocess.run(
        [PYTHON, "-m", "benchmarks.nmt_step_ab", *args], env=cli_env(), capture_output=True, text=True, timeout=300
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "A: float32, B: bf16 decoder steps and bf16 output layer; 3 batches after 1" in r.stdout
    assert "A/B per batch: median" in r.stdout and "(quartiles" in r.stdout and ", 3 batches)" in r.stdout
    for b, says in (("bf8", "unknown precision bf8"), ("bf16,bf16_steps", "--bf16 and --bf16-steps: give one")):
        bad = subprocess.run(
            [PYTHON, "-m", "benchmarks.nmt_step_ab", "--b", b], env=cli_env(), capture_output=True, text=True
        )
        assert bad.returncode == 2 and says in bad.stderr and "Traceback" not in bad.stderr, bad.stderr
