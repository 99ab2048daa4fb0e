"""The rescoring part of the benchmark (``bench``): the prefix scorer against the reference scorer.

Interleaved timed runs of both scorers through the engine on the same lines (the reference also
on one thread on a multi-core machine, and the prefix scorer in bfloat16 when asked): pairs/s,
their ratio (median of the per-run ratios), the useful GFLOP/s against the machine's measured
matrix-product rate, the prefix scorer's bound and the fraction of it reached, and whether the
scores of both agree to 1e-4 + 1e-5 |log p| (float32 rounding).
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

import click
import numpy as np
import torch

from benchmarks import parts
from phrase_rescorer.rescoring.prefix import PrefixScorer

ATOL, RTOL = 1e-4, 1e-5


def _median_range(xs: list[float]) -> str:
    return f"{statistics.median(xs):,.0f} [{min(xs):,.0f}-{max(xs):,.0f}]"


def cpu_rescoring(
    checkpoint, head: Path, work: Path, n: int, repeats: int, unshared: int, shared: int, cpu_rate: float, bf16: bool
) -> dict[str, Any]:
    """Interleaved timed runs of the prefix scorer and of the reference scorer (with torch's
    threads and, on a multi-core machine, with one thread: on a busy machine the plain path can
    be faster on one thread, and the ratio is taken against its faster setting)."""
    say = click.echo
    threads = torch.get_num_threads()
    runs: dict[str, tuple[str, int]] = {"prefix": ("prefix", threads), "reference": ("reference", threads)}
    if threads > 1:
        runs["reference-1t"] = ("reference", 1)
    if bf16:
        runs["prefix-bf16"] = ("prefix bfloat16", threads)
        bf16_scorer = PrefixScorer(checkpoint.build_model("cpu"), "cpu", dtype=torch.bfloat16)
    seconds: dict[str, list[float]] = {label: [] for label in runs}
    outs = {label: work / f"{label}.gz" for label in runs}
    labels = list(runs)
    for r in range(repeats):
        for label in labels[r % len(labels) :] + labels[: r % len(labels)]:
            name, t = runs[label]
            torch.set_num_threads(t)
            scorer = bf16_scorer if label == "prefix-bf16" else name
            try:
                seconds[label].append(parts.rescore(checkpoint, head, outs[label], scorer, "cpu").seconds)
            finally:
                torch.set_num_threads(threads)
    best = min((label for label in runs if label.startswith("reference")), key=lambda k: statistics.median(seconds[k]))
    ratios = [ref / pre for pre, ref in zip(seconds["prefix"], seconds[best], strict=True)]
    got, want = parts.log_probs(outs["prefix"]), parts.log_probs(outs["reference"])
    diff = np.abs(got - want)
    scores_ok = bool(len(got) == len(want) == n and np.all(diff <= ATOL + RTOL * np.abs(want)))
    say(f"\nrescoring on the CPU ({repeats} interleaved runs each; engine time, model loading excluded)")
    say(f"  {'scorer':<28} {'pairs/s: median [min-max]':<28} {'useful GFLOP/s':>15} {'% of matmul':>12}")
    out: dict[str, Any] = {}
    for label, secs in seconds.items():
        rates = [n / s for s in secs]
        useful = unshared / statistics.median(secs) / 1e9
        out[label] = {
            "pairs_per_s": statistics.median(rates),
            "runs": rates,
            "useful_gflops": useful,
            "threads": runs[label][1],
        }
        what = f"{runs[label][0]} ({runs[label][1]} thread{'s' if runs[label][1] > 1 else ''})"
        say(f"  {what:<28} {_median_range(rates):<28} {useful:>15.1f} {100 * useful / cpu_rate:>11.0f}%")
    ratio = statistics.median(ratios)
    say(f"  prefix / {best}: {ratio:.2f}x (median of the per-run ratios {', '.join(f'{x:.2f}' for x in ratios)})")
    say(
        f"  scores: max |prefix - reference| = {diff.max():.2e} (allowed 1e-4 + 1e-5 |log p|): "
        f"{'equal' if scores_ok else 'DIFFERENT'}"
    )
    if bf16:
        d = np.abs(parts.log_probs(outs["prefix-bf16"]) - got)
        out["prefix-bf16"].update(max_abs_diff=float(d.max()), mean_abs_diff=float(d.mean()))
        say(
            f"  prefix bfloat16 (approximate) - prefix float32: max {d.max():.3g}, mean {d.mean():.3g} "
            "(log p; this random network's outputs are near uniform, a trained network's error is larger)"
        )
    # The bound: the reference's products at its measured fraction of the machine's rate, the
    # prefix scorer's (a share of them) at the full rate: ratio <= 1 / (fraction x share).
    reference_fraction = out[best]["useful_gflops"] / cpu_rate
    bound = 1 / (reference_fraction * (shared / unshared))
    say(
        f"  bound for prefix / {best}: 1 / ({100 * reference_fraction:.0f}% of matmul x {100 * shared / unshared:.1f}%"
        f" of the FLOPs) = {bound:.2f}x; reached {100 * ratio / bound:.0f}% of it"
    )
    executed = out["prefix"]["useful_gflops"] * shared / unshared
    out["prefix"]["computed_gflops"] = executed
    say(
        f"  the prefix scorer's own matrix products ran at {executed:.1f} GFLOP/s "
        f"({100 * executed / cpu_rate:.0f}% of the machine's matrix product rate)"
    )
    return {
        **out,
        "ratio": ratio,
        "ratio_against": best,
        "bound": bound,
        "bound_fraction": ratio / bound,
        "ratios": ratios,
        "max_abs_diff": float(diff.max()),
        "scores_equal": scores_ok,
    }
