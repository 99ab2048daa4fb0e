"""The Adadelta updates of ``training.optim``: the compiled loop against torch's own update, the
choice a run makes, the loop's cache, and the fall-back where the loop cannot be built."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import torch

from phrase_rescorer.training import adadelta_loop
from phrase_rescorer.training.optim import ChunkedAdadelta, CompiledAdadelta, clipped_step, make_optimizer
from phrase_rescorer.training.run_settings import TrainConfig, TrainingError

#: Stated tolerance against torch's update, per step: float32 rounding (the loop's square roots
#: are correctly rounded, torch's vectorized ones may be a unit in the last place off).
RTOL, ATOL = 1e-6, 1e-8  # atol: a few units in the last place of a step near 1e-3

#: Every size class: one element, under and over a vector's width, over a thread's share.
SHAPES = [(7, 5), (100,), (3, 4, 5), (1,), (17,), (300, 1000), (2, 2**18 + 3)]


def _needs_compiler() -> None:
    if adadelta_loop.load() is None:
        pytest.skip(f"the compiled Adadelta loop cannot be built here: {adadelta_loop.problem()}")


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_compiled_loop_follows_torchs_adadelta_within_float32_rounding(threads: int) -> None:
    _needs_compiler()
    torch.manual_seed(threads)
    a = [torch.randn(s) for s in SHAPES]
    a.append(torch.randn(6, 4).t())  # not contiguous: torch's own update
    a.append(torch.randn(9, dtype=torch.float64))  # not float32: the chunked update
    b = [x.clone() for x in a]
    mine = CompiledAdadelta(a, lr=0.7, rho=0.95, eps=1e-6)
    torchs = torch.optim.Adadelta(b, lr=0.7, rho=0.95, eps=1e-6, foreach=False)
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        for step in range(5):
            for x, y in zip(a, b, strict=True):
                x.grad = torch.randn(x.shape, dtype=x.dtype) * 10**-step
                y.grad = x.grad.clone()
            mine.step()
            torchs.step()
            for x, y in zip(a, b, strict=True):
                torch.testing.assert_close(x, y, rtol=RTOL, atol=ATOL)
                if x.dtype != torch.float32 or not x.is_contiguous():
                    assert torch.equal(x, y)  # torch's own update
    finally:
        torch.set_num_threads(before)
    s1, s2 = mine.state_dict(), torchs.state_dict()
    for k in s2["state"]:
        assert torch.equal(s1["state"][k]["step"], s2["state"][k]["step"])
        for name in ("square_avg", "acc_delta"):
            torch.testing.assert_close(s1["state"][k][name], s2["state"][k][name], rtol=RTOL, atol=ATOL)
    restored = CompiledAdadelta(b, lr=0.7, rho=0.95, eps=1e-6)  # a run resumes across the kinds
    restored.load_state_dict(s2)
    assert torch.equal(restored.state_dict()["state"][5]["acc_delta"], s2["state"][5]["acc_delta"])


def test_a_long_run_does_not_drift_from_torchs() -> None:
    """200 steps with gradients of every scale from 1e-4 to 100 (weights of about 0.01 to 1,
    moved by about 1e-3 a step): the differences stay at float32 rounding of the weights."""
    _needs_compiler()
    gen = torch.Generator().manual_seed(1)
    a = [torch.randn(4099, generator=gen) * 0.01]
    b = [a[0].clone()]
    mine = CompiledAdadelta(a, lr=1.0, rho=0.95, eps=1e-6)
    torchs = torch.optim.Adadelta(b, lr=1.0, rho=0.95, eps=1e-6, foreach=False)
    for i in range(200):
        g = torch.randn(4099, generator=gen) * 10.0 ** (i % 7 - 4)
        a[0].grad, b[0].grad = g, g.clone()
        mine.step()
        torchs.step()
    ours, theirs = a[0].detach(), b[0].detach()
    scale = theirs.abs().max().item()
    apart = (ours - theirs).abs() / scale
    print(f"after 200 steps: at most {apart.max().item():.2e}, mean {apart.mean().item():.2e} of the largest weight")
    assert apart.max().item() <= 1e-6 and apart.mean().item() <= 1e-7


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("max_norm", [0.5, 1e9])  # clipped, and a factor of exactly 1
def test_the_clipping_inside_the_loop_is_clip_grad_norm_then_the_step(threads: int, max_norm: float) -> None:
    """``clipped_step`` with the compiled loop (the clipping's factor applied as the loop reads
    each gradient) against ``clip_grad_norm_`` and then the same loop: the same parameters and
    states bit for bit, every kind of parameter (contiguous float32, non-contiguous, float64);
    the gradients left as backward made them."""
    _needs_compiler()
    torch.manual_seed(7)
    a = [torch.randn(s) for s in SHAPES]
    a.append(torch.randn(6, 4).t())
    a.append(torch.randn(9, dtype=torch.float64))
    b = [x.clone() for x in a]
    mine, plain = CompiledAdadelta(a, lr=1.0, rho=0.95), CompiledAdadelta(b, lr=1.0, rho=0.95)
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        for step in range(4):
            for x, y in zip(a, b, strict=True):
                x.grad = torch.randn(x.shape, dtype=x.dtype) * 10 ** (1 - step)
                y.grad = x.grad.clone()
            grads = [x.grad.clone() for x in a]
            clipped_step(mine, max_norm)
            torch.nn.utils.clip_grad_norm_(b, max_norm)
            plain.step()
            for x, y, g in zip(a, b, grads, strict=True):
                assert torch.equal(x, y)
                assert torch.equal(x.grad, g)
    finally:
        torch.set_num_threads(before)
    for k, state in plain.state_dict()["state"].items():
        for name in ("square_avg", "acc_delta"):
            assert torch.equal(mine.state_dict()["state"][k][name], state[name])


def test_the_chunked_update_clips_as_torch_does() -> None:
    """Without the compiled loop, ``clipped_step`` is ``clip_grad_norm_`` and torch's update."""
    torch.manual_seed(8)
    a = [torch.randn(100), torch.randn(3, 5)]
    b = [x.clone() for x in a]
    mine = ChunkedAdadelta(a, lr=1.0, rho=0.95)
    torchs = torch.optim.Adadelta(b, lr=1.0, rho=0.95, foreach=False)
    for x, y in zip(a, b, strict=True):
        x.grad = torch.randn(x.shape) * 10
        y.grad = x.grad.clone()
    clipped_step(mine, 1.0)
    torch.nn.utils.clip_grad_norm_(b, 1.0)
    torchs.step()
    for x, y in zip(a, b, strict=True):
        assert torch.equal(x, y) and torch.equal(x.grad, y.grad)


def test_a_run_gets_the_kernel_it_asks_for() -> None:
    params = [torch.nn.Parameter(torch.zeros(3))]
    assert type(make_optimizer(params, "adadelta", 1.0, 0.95, 1e-6, kernel="chunked")) is ChunkedAdadelta
    assert isinstance(make_optimizer(params, "adam", 1e-3, 0.95, 1e-6), torch.optim.Adam)
    expected = CompiledAdadelta if adadelta_loop.load() is not None else ChunkedAdadelta
    assert type(make_optimizer(params, "adadelta", 1.0, 0.95, 1e-6)) is expected
    with pytest.raises(ValueError, match="unknown Adadelta kernel 'fused'"):
        make_optimizer(params, "adadelta", 1.0, 0.95, 1e-6, kernel="fused")
    with pytest.raises(TrainingError, match="unknown optimizer kernel 'fused'; expected one of compiled, chunked"):
        TrainConfig(optimizer_kernel="fused")


def test_the_loop_is_built_once_into_the_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _needs_compiler()
    monkeypatch.setenv("PHRASE_RESCORER_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(adadelta_loop.LIBRARY, "_loaded", [])
    monkeypatch.setattr(adadelta_loop.LIBRARY, "openmp", False)  # one build (test_c_library: both)
    assert adadelta_loop.load() is not None
    (built,) = (tmp_path / "cache").iterdir()  # one library, no temporary left behind
    assert built.name.startswith("adadelta-") and built.suffix == ".so"
    stamp = built.stat().st_mtime_ns
    monkeypatch.setattr(adadelta_loop.LIBRARY, "_loaded", [])
    assert adadelta_loop.load() is not None
    assert built.stat().st_mtime_ns == stamp and len(list((tmp_path / "cache").iterdir())) == 1


def test_where_the_loop_cannot_be_built_the_run_goes_on_chunked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PHRASE_RESCORER_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("CC", str(tmp_path / "no-such-compiler"))
    monkeypatch.setattr(adadelta_loop.LIBRARY, "_loaded", [])
    monkeypatch.setattr(adadelta_loop.LIBRARY, "_problem", [])
    params = [torch.nn.Parameter(torch.zeros(3))]
    assert type(make_optimizer(params, "adadelta", 1.0, 0.95, 1e-6)) is ChunkedAdadelta
    problem = adadelta_loop.problem()
    assert problem is not None and "no-such-compiler" in problem
    with pytest.raises(RuntimeError, match="cannot be built here: .*no-such-compiler"):
        CompiledAdadelta(params)


def test_a_compiler_that_fails_is_named_with_its_first_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    failing = tmp_path / "cc"  # knows its target, cannot compile
    failing.write_text(
        '#!/bin/sh\ncase "$*" in *-dM*) echo "#define __FAKE__ 1"; exit 0;; esac\n'
        "echo 'cc: fatal: broken' >&2\nexit 1\n"
    )
    failing.chmod(0o755)
    monkeypatch.setenv("PHRASE_RESCORER_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("CC", str(failing))
    monkeypatch.setattr(adadelta_loop.LIBRARY, "_loaded", [])
    monkeypatch.setattr(adadelta_loop.LIBRARY, "_problem", [])
    assert adadelta_loop.load() is None
    assert adadelta_loop.problem() == f"{failing} failed: cc: fatal: broken"
    assert [p.name for p in (tmp_path / "cache").iterdir()] == []  # nothing half-built kept


def test_a_cached_library_that_does_not_load_is_built_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _needs_compiler()
    monkeypatch.setenv("PHRASE_RESCORER_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(adadelta_loop.LIBRARY, "openmp", False)  # the build load() takes
    built = adadelta_loop.LIBRARY.build(["cc"])  # built into the cache, not loaded
    built.write_bytes(b"")  # cut short, as by a crash before the data reached the disk
    monkeypatch.setenv("CC", "cc")
    monkeypatch.setattr(adadelta_loop.LIBRARY, "_loaded", [])
    assert adadelta_loop.load() is not None
    assert built.stat().st_size > 0 and len(list((tmp_path / "cache").iterdir())) == 1


def test_a_compiler_given_with_a_wrapper_is_run_as_such(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """CC="ccache gcc" and the like: the words of $CC are the command."""
    _needs_compiler()
    monkeypatch.setenv("PHRASE_RESCORER_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("CC", "env cc")
    monkeypatch.setattr(adadelta_loop.LIBRARY, "_loaded", [])
    assert adadelta_loop.load() is not None


def test_an_unwritable_cache_is_named_with_the_way_out(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _needs_compiler()
    blocked = tmp_path / "file"
    blocked.write_text("not a directory")
    monkeypatch.setenv("PHRASE_RESCORER_CACHE", str(blocked / "cache"))
    monkeypatch.setattr(adadelta_loop.LIBRARY, "_loaded", [])
    monkeypatch.setattr(adadelta_loop.LIBRARY, "_problem", [])
    if adadelta_loop.load() is not None:
        pytest.fail("a library was loaded from a cache that cannot exist")
    problem = adadelta_loop.problem()
    assert problem is not None and problem.endswith("set PHRASE_RESCORER_CACHE to a writable directory"), problem


def test_adam_is_torchs_fused_update_and_resumes_from_the_default_one() -> None:
    """A run's Adam takes the fused update: the default update's results to float64 rounding,
    over steps and across a state saved by the default update and loaded into it."""
    torch.manual_seed(0)
    a = [torch.nn.Parameter(torch.randn(s, dtype=torch.float64)) for s in [(30, 7), (5,)]]
    b = [torch.nn.Parameter(x.detach().clone()) for x in a]
    mine, torchs = make_optimizer(a, "adam", 1e-2, 0.95, 1e-6), torch.optim.Adam(b, lr=1e-2)
    assert mine.param_groups[0]["fused"]

    def steps(n: int) -> None:
        for _ in range(n):
            for x, y in zip(a, b, strict=True):
                x.grad = torch.randn_like(x)
                y.grad = x.grad.clone()
            mine.step()
            torchs.step()
        for x, y in zip(a, b, strict=True):
            torch.testing.assert_close(x, y, rtol=1e-12, atol=1e-12)

    steps(3)
    mine = make_optimizer(a, "adam", 1e-2, 0.95, 1e-6)
    mine.load_state_dict(copy.deepcopy(torchs.state_dict()))  # resumed from a state of the default update
    assert mine.param_groups[0]["fused"]
    steps(3)
    assert not make_optimizer([torch.zeros(2, dtype=torch.bfloat16)], "adam", 1e-3, 0.95, 1e-6).defaults["fused"]


def test_a_torch_without_the_cpu_fused_adam_keeps_the_default_update(monkeypatch) -> None:
    """pyproject admits torch from 2.1; its fused Adam ran on CUDA only before 2.4."""
    from phrase_rescorer.training import optim

    cpu = [torch.zeros(2)]
    assert optim.adam_fused(cpu)
    monkeypatch.setattr(torch, "__version__", "2.3.1+cpu")
    assert not optim.adam_fused(cpu)
    assert not make_optimizer(cpu, "adam", 1e-3, 0.95, 1e-6).defaults["fused"]
