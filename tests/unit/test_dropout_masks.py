"""``training.dropout_masks``: the generator is Philox4x32-10 (Random123's published answers), the
loop's words are that generator's at the documented counters (AVX2 and plain C alike), the
forward and backward passes are torch's dropout arithmetic x * noise and g * noise exactly, the
masks keep 1 - p of the elements, do not depend on the thread count, follow ``torch.manual_seed``,
and torch's dropout runs where the loop does not apply; training swaps the modules only where
asked."""

from __future__ import annotations

import ctypes
import os
import platform
import shlex
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
from click.testing import CliRunner
from torch import nn

from phrase_rescorer.cli import cli
from phrase_rescorer.model.architectures import arch_config, build_model
from phrase_rescorer.model.cho2014 import ModelConfig
from phrase_rescorer.training import dropout_masks
from phrase_rescorer.training.log import read_log
from phrase_rescorer.training.loop import TrainingError
from phrase_rescorer.training.run_settings import TrainConfig
from tests.helpers.synthetic import mapping_table
from tests.helpers.train_options import TASKS

LIB = dropout_masks.LIBRARY.load()
needs_loop = pytest.mark.skipif(LIB is None, reason=f"the loop cannot be built here: {dropout_masks.problem()}")

#: Random123's kat_vectors, the three "philox4x32 10" lines: counter (4 words), key (2), words (4).
KNOWN_ANSWERS = [
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    (
        (0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344),
        (0xA4093822, 0x299F31D0),
        (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1),
    ),
]


def _words(lib: ctypes.CDLL, counters: np.ndarray, key: tuple[int, int]) -> np.ndarray:
    out = np.ascontiguousarray(counters, dtype=np.uint32).copy()
    lib.philox_words(out.ctypes.data, len(out), *key)
    return out


def _noise(lib: ctypes.CDLL, n: int, key: tuple[int, int], p: float) -> torch.Tensor:
    """The documented noise of n elements, from the generator's words: element i takes word
    (i / 8) % 4 of the counter 8 (i / 32) + i % 8 (counter words: its low and high halves, 0, 0)."""
    i = np.arange(n, dtype=np.int64)
    counter = 8 * (i // 32) + i % 8
    blocks = np.zeros((int(counter.max()) + 1, 4), dtype=np.uint32)
    blocks[:, 0] = np.arange(len(blocks)) & 0xFFFFFFFF
    blocks[:, 1] = np.arange(len(blocks)) >> 32
    words = _words(lib, blocks, key)[counter, (i // 8) % 4]
    kept = torch.from_numpy((words >= dropout_masks.drop_below(p)).astype(np.float32))
    return kept * dropout_masks.scale(p)  # 1 * scale or 0 * scale: torch's noise, exactly


@needs_loop
@pytest.mark.parametrize("counter, key, expected", KNOWN_ANSWERS)
def test_the_generator_gives_the_published_answers(counter, key, expected) -> None:
    assert tuple(int(w) for w in _words(LIB, np.array([counter]), key)[0]) == expected


def _forward(x: torch.Tensor, key: tuple[int, int], p: float, lib: ctypes.CDLL | None = None) -> torch.Tensor:
    return dropout_masks.apply(lib or LIB, x, key, p)


@needs_loop
@pytest.mark.parametrize("shape", [(1,), (31,), (3, 37), (300, 1001)])  # a partial group; two threads' worth
@pytest.mark.parametrize("p", [0.1, 0.3, 0.5])
def test_the_loop_applies_the_documented_noise_with_torchs_arithmetic(shape: tuple[int, ...], p: float) -> None:
    torch.manual_seed(0)
    x = torch.randn(shape)
    x.view(-1)[0] = float("inf")  # torch's x * noise: inf * 0 is NaN, as in torch's dropout
    key = (0x12345678, 0x9ABCDEF0)
    noise = _noise(LIB, x.numel(), key, p).view(shape)
    y, expected = _forward(x, key, p), x * noise
    finite = expected.isfinite()
    assert torch.equal(y.isnan(), expected.isnan())
    assert torch.equal(y[finite].view(torch.int32), expected[finite].view(torch.int32))  # bit for bit, -0 too


@needs_loop
def test_forward_and_backward_equal_torchs_dropout_with_the_same_noise() -> None:
    x = torch.randn(200, 129, requires_grad=True)
    module = dropout_masks.CounterDropout(0.3).train()
    torch.manual_seed(7)
    y = module(x)
    g = torch.randn_like(y)
    y.backward(g)
    torch.manual_seed(7)
    noise = _noise(LIB, x.numel(), dropout_masks.draw_key(), 0.3).view(x.shape)
    assert torch.equal(y.detach().view(torch.int32), (x.detach() * noise).view(torch.int32))
    assert x.grad is not None and torch.equal(x.grad.view(torch.int32), (g * noise).view(torch.int32))


@pytest.mark.parametrize("p", [0.1, 0.15, 0.3, 0.5, 0.9])
def test_the_scale_is_torchs_own(p: float) -> None:
    """torch's noise: ``noise.bernoulli_(1 - p); noise.div_(1 - p)`` (ATen's Dropout.cpp,
    ``_dropout_impl``), 1 / (1 - p) rounded in float32, not the double's rounding."""
    torch.manual_seed(0)
    kept = nn.functional.dropout(torch.ones(1000), p, True)
    assert set(kept[kept != 0].tolist()) == {dropout_masks.scale(p)}


@needs_loop
def test_the_masks_keep_one_minus_p_of_the_elements() -> None:
    n, p = 1 << 20, 0.3
    kept = (_forward(torch.ones(n), (3, 4), p) != 0).double().mean().item()
    assert abs(kept - (1 - p)) < 5 * (p * (1 - p) / n) ** 0.5  # five standard deviations
    assert dropout_masks.drop_below(0.0) == 0 and _forward(torch.ones(100), (3, 4), 0.0).eq(1).all()


@needs_loop
def test_the_masks_are_the_same_on_any_thread_count() -> None:
    x = torch.randn(500, 600)
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = _forward(x, (1, 2), 0.3)
        torch.set_num_threads(2)
        two = _forward(x, (1, 2), 0.3)
    finally:
        torch.set_num_threads(before)
    assert torch.equal(one, two)


@needs_loop
@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"), reason="the AVX2 path is x86's")
def test_the_plain_c_path_draws_the_avx2_paths_words() -> None:
    compiler = shlex.split(os.environ.get("CC") or "cc")
    try:
        plain = ctypes.CDLL(str(dropout_masks.LIBRARY.build(compiler, extra=("-mno-avx2",))))
    except (OSError, RuntimeError) as e:
        pytest.skip(f"no build without AVX2 here: {e}")
    dropout_masks._declare(plain)
    x = torch.randn(77, 131)
    assert torch.equal(_forward(x, (9, 10), 0.3, plain), _forward(x, (9, 10), 0.3))


@needs_loop
def test_the_run_seed_fixes_the_masks_and_each_call_draws_new_ones() -> None:
    module = dropout_masks.CounterDropout(0.5).train()
    x = torch.ones(1000)
    torch.manual_seed(3)
    first, second = module(x), module(x)
    torch.manual_seed(3)
    assert torch.equal(module(x), first) and not torch.equal(first, second)


def test_evaluation_and_rate_zero_leave_the_input_as_it_is() -> None:
    x = torch.randn(10, 10)
    assert dropout_masks.CounterDropout(0.3).eval()(x) is x
    assert dropout_masks.CounterDropout(0.0).train()(x) is x
    with pytest.raises(ValueError, match="below 1"):
        dropout_masks.CounterDropout(1.0)


def test_torchs_dropout_runs_where_the_loop_does_not_apply(monkeypatch: pytest.MonkeyPatch) -> None:
    module = dropout_masks.CounterDropout(0.5).train()
    x = torch.ones(4000, dtype=torch.bfloat16)
    torch.manual_seed(5)
    expected = nn.functional.dropout(x, 0.5, True)
    torch.manual_seed(5)
    assert torch.equal(module(x), expected)  # another dtype: torch's draws
    monkeypatch.setattr(dropout_masks.LIBRARY, "load", lambda: None)  # no loop: the same
    x32 = torch.ones(4000)
    torch.manual_seed(5)
    expected = nn.functional.dropout(x32, 0.5, True)
    torch.manual_seed(5)
    assert torch.equal(module(x32), expected)


def test_training_swaps_the_dropouts_and_keeps_the_state() -> None:
    arch = arch_config("transformer", dropout=0.3)
    network = build_model(
        replace(ModelConfig(), embed_dim=32, hidden_dim=64, src_vocab_size=50, tgt_vocab_size=50), arch
    )
    keys = list(network.state_dict())
    plain = sum(type(m) is nn.Dropout for m in network.modules())
    assert plain > 0 and dropout_masks.counter_dropout(network) == plain
    assert not any(type(m) is nn.Dropout for m in network.modules())
    assert list(network.state_dict()) == keys


def test_an_unknown_dropout_kernel_is_refused() -> None:
    assert TrainConfig().dropout_kernel == "compiled"
    with pytest.raises(TrainingError, match="unknown dropout kernel"):
        TrainConfig(dropout_kernel="fast")


@needs_loop
def test_a_resumed_run_draws_the_masks_of_the_uninterrupted_one(tmp_path: Path) -> None:
    """The key comes from torch's generator, whose state the run's files keep: a run stopped at
    step 5 and resumed to 10 has the losses and weights of the run that went straight to 10."""
    table = mapping_table(tmp_path / "pt.gz", 120)
    options = [*TASKS[0].options, "--batch-size", "16", "--seed", "3", "--log-every", "1", "--patience", "0"]
    options += ["--arch", "rnnsearch", "--dropout", "0.3"]

    def train(out: Path, *more: str) -> None:
        r = CliRunner().invoke(cli, ["train", str(table), str(out), *options, *more], catch_exceptions=False)
        assert r.exit_code == 0, r.output

    (tmp_path / "a").mkdir(), (tmp_path / "b").mkdir()
    train(tmp_path / "a" / "m.pt", "--max-steps", "10")
    train(tmp_path / "b" / "m.pt", "--max-steps", "5")
    train(tmp_path / "b" / "m.pt", "--max-steps", "10", "--resume")

    def losses(d: Path) -> list[float]:
        return [e["loss"] for e in read_log(str(d / "m.log")) if e["event"] == "train"]

    assert losses(tmp_path / "a") == losses(tmp_path / "b") and len(losses(tmp_path / "a")) == 10
    a = torch.load(tmp_path / "a" / "m.last.pt", weights_only=False)["state_dict"]
    b = torch.load(tmp_path / "b" / "m.last.pt", weights_only=False)["state_dict"]
    assert all(torch.equal(a[k], b[k]) for k in a)
