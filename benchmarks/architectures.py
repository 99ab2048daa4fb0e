"""Rescoring throughput per architecture: part of ``make bench``, or alone with
``python -m benchmarks.architectures``.

For each architecture (cho2014, rnnsearch, gnmt, transformer with their default options) a random-weight
network of one size (``small`` by default: H=256, E=64, 8,000-word shortlists taken from the
timed lines) rescores the first ``--lines`` lines of a table through the engine, with the
``prefix`` scorer (the default: PrefixScorer for cho2014, StackedPrefixScorer for the others)
and the ``batched`` one (BatchedScorer, StackedScorer: each source encoded once, every target
decoded on its own), ``--repeats`` times each, interleaved so that both see the same machine
load. It prints the share of the plain decoder steps that the targets' prefix tries hold (the
bound on what sharing them gains), pairs/s (median and range), the prefix / batched ratio
(median of the per-run ratios) and the largest score difference between the two, which must stay within
1e-4 + 1e-5 |log p| (float32 rounding; the exit status is 1 otherwise).
"""

from __future__ import annotations

import json
import statistics
import tempfile
from pathlib import Path
from typing import Any

import click
import numpy as np
import torch

from benchmarks import parts
from benchmarks.flops import TrieCounter
from phrase_rescorer.errors import EXIT_INTERNAL
from phrase_rescorer.model.architectures import ARCH_NAMES, arch_config, build_model
from phrase_rescorer.model.checkpoint import load_checkpoint, save_checkpoint

ATOL, RTOL = 1e-4, 1e-5
SCORERS = ("prefix", "batched")


def arch_rescoring(table: str, lines: int, size: str, work: Path, repeats: int) -> dict[str, Any]:
    """Pairs/s of each scorer for each architecture on the first ``lines`` lines of ``table``,
    printed and returned (with ``scores_equal``: prefix and batched agree for every one)."""
    say = click.echo
    head = work / "arch-head.gz"
    n = parts.head_of_table(table, lines or None, head)
    src, tgt = parts.shortlists(str(head), parts.preset_vocab_size(size))
    config = parts.model_config(size, src, tgt)
    say(
        f"\nrescoring per architecture ({size} size: H={config.hidden_dim}, E={config.embed_dim}, "
        f"V={config.tgt_vocab_size:,}; random weights; first {n:,} lines of {table}; {repeats} interleaved "
        f"run{'s' if repeats > 1 else ''} each; {torch.get_num_threads()} threads; engine time)"
    )
    out: dict[str, Any] = {"lines": n, "size": size, "scores_equal": True}
    for arch in ARCH_NAMES:
        path = work / f"{arch}.pt"
        torch.manual_seed(1)
        save_checkpoint(
            str(path), build_model(config, arch_config(arch)), src, tgt, info={"purpose": "benchmark (random weights)"}
        )
        checkpoint = load_checkpoint(str(path))
        if arch == ARCH_NAMES[0]:  # the windows are the same for every architecture
            counter = TrieCounter()
            parts.rescore(checkpoint, head, work / "count.gz", counter, "cpu")
            c = counter.count
            out["decoder_step_share"] = share = c.decoder_nodes / max(1, c.target_steps)
            say(
                f"  {c.lines / max(1, c.sources):.2f} targets per source; their prefix tries hold {100 * share:.1f}% "
                f"of the plain decoder steps (sharing them alone gains at most {1 / share:.2f}x)"
            )
            say(f"  {'architecture':<13} {'scorer':<30} {'pairs/s: median [min-max]'}")
        seconds: dict[str, list[float]] = {name: [] for name in SCORERS}
        used: dict[str, str] = {}
        for r in range(repeats):
            for name in SCORERS[r % 2 :] + SCORERS[: r % 2]:
                summary = parts.rescore(checkpoint, head, work / f"{arch}-{name}.gz", name, "cpu")
                seconds[name].append(summary.seconds)
                used[name] = _scorer_class(summary.signature)
        got, want = (parts.log_probs(work / f"{arch}-{name}.gz") for name in SCORERS)
        diff = float(np.abs(got - want).max()) if n else 0.0
        equal = bool(len(got) == len(want) == n and np.all(np.abs(got - want) <= ATOL + RTOL * np.abs(want)))
        ratios = [b / p for p, b in zip(seconds["prefix"], seconds["batched"], strict=True)]
        figures: dict[str, Any] = {
            "ratio": statistics.median(ratios),
            "ratios": ratios,
            "max_abs_diff": diff,
            "scores_equal": equal,
        }
        for name in SCORERS:
            rates = [n / s for s in seconds[name]]
            figures[name] = {"scorer": used[name], "pairs_per_s": statistics.median(rates), "runs": rates}
            say(
                f"  {arch:<13} {f'{name} ({used[name]})':<30} "
                f"{statistics.median(rates):,.0f} [{min(rates):,.0f}-{max(rates):,.0f}]"
            )
        say(
            f"  {arch:<13} prefix / batched: {figures['ratio']:.2f}x; max |prefix - batched| = {diff:.2e} "
            f"(allowed 1e-4 + 1e-5 |log p|): {'equal' if equal else 'DIFFERENT'}"
        )
        out[arch] = figures
        out["scores_equal"] = out["scores_equal"] and equal
    return out


def _scorer_class(signature: str) -> str:
    """The class of the scorer a run used, from its signature (which names the registered
    cho2014 scorers by their ``--scorer`` names and the others by their class)."""
    field = next((f for f in signature.split("|") if f.startswith("scorer:")), "scorer:?")[len("scorer:") :]
    return {"prefix": "PrefixScorer", "batched": "BatchedScorer"}.get(field, field)


@parts.command
@parts.table_option
@click.option(
    "--lines",
    type=click.IntRange(min=0),
    default=2000,
    show_default=True,
    help="Lines timed (the head of the table); 0 for all.",
)
@click.option(
    "--size",
    type=click.Choice(["small", "quick", "paper"]),
    default="small",
    show_default=True,
    help="Network size (quick: H=32, for a smoke run).",
)
@click.option("--repeats", type=click.IntRange(min=1), default=3, show_default=True)
@parts.threads_option
@parts.json_option
def main(table: str | None, lines: int, size: str, repeats: int, threads: int | None, json_path: str | None) -> None:
    """Rescoring pairs/s per architecture, prefix-sharing scorer against the batched one."""

    if threads:
        torch.set_num_threads(threads)
    table = parts.default_table(table)
    click.echo(f"machine: {parts.machine()['cpu']}")
    with tempfile.TemporaryDirectory(prefix="phrase-rescorer-bench-") as tmp:
        figures = arch_rescoring(table, lines, size, Path(tmp), repeats)
    if json_path:
        Path(json_path).write_text(json.dumps(figures, indent=2) + "\n")
    if not figures["scores_equal"]:
        raise SystemExit(EXIT_INTERNAL)  # the scores differ from the reference: a bug


if __name__ == "__main__":
    main()
