"""The training part of the benchmark: ``Loop.step`` at two network sizes and two precisions.

For each network size (the benchmark's preset and the other of paper/small; only the tiny
network with ``--quick``), each precision (float32; bfloat16 autocast unless ``--no-cpu-bf16``)
and each batch size: pairs/s, useful GFLOP/s (3x the forward matrix products of the pairs
trained, without padding: ``flops.pair_flops``) and that rate as a fraction of the machine's
float32 matrix-product rate, twice: of its best rate measured once before (``matmul_fraction``)
and of its rate timed between the steps (``beside_fraction``, the steadier figure where the
machine's speed drifts; the faster of torch's BLAS and oneDNN, both timed there). Float32 at
the benchmark's own size is also timed on one thread (on a busy machine one thread can be the
faster setting).

``adadelta_update``, timed before the steps: the Adadelta update alone on the benchmark's network: torch's operations in
cache-sized pieces (``chunked``) against the one C loop (``compiled``, the default), interleaved,
on one thread and on all, with the memory traffic the loop implies (7 floats per parameter).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
import torch
from torch import nn

from benchmarks import parts, training_steps
from phrase_rescorer.data.pairs import PairSet
from phrase_rescorer.data.vocab import Vocabulary
from phrase_rescorer.model.architectures import build_model
from phrase_rescorer.model.cho2014 import ModelConfig
from phrase_rescorer.training import adadelta_loop, dropout_masks
from phrase_rescorer.training.optim import ChunkedAdadelta, CompiledAdadelta


def sizes_timed(preset: str) -> list[str]:
    if preset == "quick":
        return ["quick"]
    return [preset, "small" if preset == "paper" else "paper"]


def cpu_training(
    pairs: PairSet,
    preset: str,
    src: Vocabulary,
    tgt: Vocabulary,
    batches: list[int],
    steps: int,
    work: Path,
    cpu_rate: float,
    bf16: bool,
) -> dict[str, Any]:
    """Time the training steps; print one line per setting; the figures by setting."""
    say = click.echo
    threads = torch.get_num_threads()
    out: dict[str, Any] = {}
    say(
        "\ntraining on the CPU (Loop.step: log p, backward, clipping, Adadelta; useful GFLOP/s = 3x the "
        "forward products of the pairs)"
    )
    say(
        f"  {'network':<8} {'precision':<9} {'batch':>5} {'threads':>7} {'pairs/s':>9} {'useful GFLOP/s':>15} "
        f"{'% of fp32 matmul':>17} {'% of best beside':>17} {'faults/step':>12}"
    )
    for size in sizes_timed(preset):
        config, s, t = parts.size_variant(size, src, tgt)
        for dtype in ("float32", "bfloat16") if bf16 else ("float32",):
            for n in sorted({threads, 1} if (size == preset and dtype == "float32") else {threads}, reverse=True):
                torch.set_num_threads(n)
                try:
                    for b in batches:
                        fig = training_steps.training_figures(
                            config, pairs, s, t, b, steps, torch.device("cpu"), work, dtype == "bfloat16", True
                        )
                        rate, useful, beside = fig.pairs_per_s, fig.useful_gflops, fig.beside_fraction
                        key = f"{size} {dtype}, batch {b}, {n} thread{'s' if n > 1 else ''}"
                        out[key] = {
                            "pairs_per_s": rate,
                            "useful_gflops": useful,
                            "matmul_fraction": useful / cpu_rate,
                            "beside_gflops": fig.beside_gflops,
                            "beside_fraction": beside,
                            "beside_by_library": fig.beside_by_library,
                            "warmup_steps": fig.warmup_steps,
                            "page_faults_per_step": fig.page_faults_per_step,
                        }
                        say(
                            f"  {size:<8} {dtype:<9} {b:>5} {n:>7} {rate:>9,.1f} {useful:>15.1f} "
                            f"{100 * useful / cpu_rate:>16.0f}% {100 * (beside or 0):>16.0f}% "
                            f"{fig.page_faults_per_step or 0:>12,.0f}"
                        )
                finally:
                    torch.set_num_threads(threads)
    return out


def interleaved_ms(calls: Callable[[], dict[str, Callable[[], object]]], steps: int) -> dict[int, dict[str, float]]:
    """Milliseconds per call of each of ``calls()`` (made anew for each thread count), medians of
    ``steps`` interleaved calls after one each, on one thread and on torch's threads: by thread count."""
    threads = torch.get_num_threads()
    out: dict[int, dict[str, float]] = {}
    for t in sorted({1, threads}):
        torch.set_num_threads(t)
        try:
            kinds = calls()
            times: dict[str, list[float]] = {k: [] for k in kinds}
            for i in range(steps + 1):
                for k, call in kinds.items():
                    start = time.perf_counter()
                    call()
                    if i:
                        times[k].append(time.perf_counter() - start)
        finally:
            torch.set_num_threads(threads)
        out[t] = {k: 1e3 * statistics.median(v) for k, v in times.items()}
    return out


def _threads(t: int) -> str:
    return f"{t} thread{'s' if t > 1 else ''}"


def dropout_masks_figures(steps: int, shape: tuple[int, int] = (2000, 128), p: float = 0.3) -> dict[str, Any]:
    """Milliseconds per dropout of a ``shape`` float32 activation, forward and backward, torch's
    ``nn.Dropout`` against the C loop's masks (``interleaved_ms``; a transformer step of the
    README's recipe has 22 of about this size)."""
    say = click.echo
    if dropout_masks.LIBRARY.load() is None:
        say(f"\ndropout alone: the loop cannot be built here ({dropout_masks.problem()})")
        return {"problem": dropout_masks.problem()}
    x = torch.randn(shape, requires_grad=True)
    g = torch.randn(shape)
    modules = {"torch": nn.Dropout(p).train(), "compiled": dropout_masks.CounterDropout(p).train()}

    def through(module: nn.Module) -> Callable[[], object]:
        return lambda: module(x).backward(g)

    def calls() -> dict[str, Callable[[], object]]:
        return {k: through(m) for k, m in modules.items()}

    out: dict[str, Any] = {"shape": list(shape), "p": p}
    say(f"\ndropout alone ({shape[0]:,} x {shape[1]:,}, p {p}; ms forward and backward, medians of {steps})")
    for t, ms in interleaved_ms(calls, steps).items():
        out[_threads(t)] = ms
        say(
            f"  {_threads(t):9s}: torch {ms['torch']:.2f}, compiled {ms['compiled']:.2f} "
            f"({ms['torch'] / ms['compiled']:.1f}x)"
        )
    return out


def adadelta_update(config: ModelConfig, steps: int) -> dict[str, Any]:
    """Milliseconds per Adadelta update of ``config``'s parameters, chunked against compiled
    (``interleaved_ms``)."""
    say = click.echo
    params = list(build_model(config, None).parameters())
    n = sum(p.numel() for p in params)
    for p in params:
        p.grad = torch.randn_like(p) * 0.01
    if adadelta_loop.load() is None:
        say(f"\nAdadelta update alone: the compiled loop cannot be built here ({adadelta_loop.problem()})")
        return {"problem": adadelta_loop.problem()}
    kinds = {"chunked": ChunkedAdadelta, "compiled": CompiledAdadelta}

    def calls() -> dict[str, Callable[[], object]]:
        return {k: make(params, lr=1.0, rho=0.95, eps=1e-6).step for k, make in kinds.items()}

    out: dict[str, Any] = {"parameters": n}
    say(f"\nAdadelta update alone ({n / 1e6:.1f} M parameters; ms per update, medians of {steps})")
    for t, ms in interleaved_ms(calls, steps).items():
        out[_threads(t)] = ms
        say(
            f"  {_threads(t):9s}: chunked {ms['chunked']:.1f}, compiled {ms['compiled']:.1f} "
            f"({ms['chunked'] / ms['compiled']:.1f}x; the loop moves {28 * n / ms['compiled'] / 1e6:.1f} GB/s)"
        )
    return out
