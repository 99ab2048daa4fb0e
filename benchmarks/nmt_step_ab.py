"""``python -m benchmarks.nmt_step_ab``: two precisions of a sentence network's training step, batch by batch.

On a shared VM whose speed drifts by a third between minutes, two processes timed one after the
other compare the machine as much as the code. This builds the README's recipe twice in one
process (``nmt_training_profile.recipe_run``: the same corpus, the same seed, so the same initial
weights and the same batches), A with the products' precision ``--a`` and B with ``--b``, and
runs each batch of the first epoch through A and then B (the order swapped every batch), so
that both see the same minutes of the machine. It prints the median of A's time over B's per
batch with its quartiles (above 1: B is faster) and each side's median milliseconds. The two
networks train on their own from the same start; their steps stay comparable in work (the
same batch shapes), not in values.

A precision is a comma-separated list of ``bf16``, ``bf16_steps``, ``bf16_output`` (train-nmt's
``--bf16``, ``--bf16-steps``, ``--bf16-output``) or ``fp32`` for none.
"""

from __future__ import annotations

import itertools
import statistics
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import click
import torch

from benchmarks import parts
from benchmarks.nmt_training_profile import RECIPES, machine_line, recipe_pairs, recipe_run
from phrase_rescorer.cli.train_nmt import NMT_DEFAULTS
from phrase_rescorer.model.architectures import arch_config
from phrase_rescorer.training.loop import TrainingError
from phrase_rescorer.training.run_settings import TrainConfig

#: The names a precision may hold: ``TrainConfig``'s fields of train-nmt's precision options.
FLAGS = ("bf16", "bf16_steps", "bf16_output")


def precision_config(base: TrainConfig, text: str) -> TrainConfig:
    """``base`` with the precision ``text``: ``"bf16_steps,bf16_output"`` sets those fields, ``"fp32"``
    (or nothing) none; an unknown name, or names train-nmt refuses together, is a usage error."""
    names = [n.strip() for n in text.split(",") if n.strip() and n.strip() != "fp32"]
    unknown = [n for n in names if n not in FLAGS]
    if unknown:
        raise click.BadParameter(f"unknown precision {', '.join(unknown)}; expected fp32 or {', '.join(FLAGS)}")
    try:
        fields: dict[str, Any] = dict.fromkeys(names, True)
        return replace(base, **fields)
    except TrainingError as e:
        raise click.BadParameter(str(e)) from e


def quartiles(values: list[float]) -> tuple[float, float, float]:
    """The lower quartile, the median and the upper quartile (``statistics.quantiles``' exclusive method)."""
    if len(values) < 2:
        return values[0], values[0], values[0]
    low, mid, high = statistics.quantiles(values, n=4)
    return low, mid, high


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--network", type=click.Choice(sorted(RECIPES)), default="rnnsearch", show_default=True)
@click.option("--preset", type=click.Choice(["medium", "quick"]), default="medium", show_default=True)
@click.option("--a", "a_text", default="fp32", show_default=True, help="A's precision (see above)")
@click.option("--b", "b_text", required=True, help="B's precision, e.g. bf16_steps,bf16_output")
@click.option("--batches", type=click.IntRange(1), default=30, show_default=True, help="batches timed")
@click.option("--warmup", type=click.IntRange(0), default=8, show_default=True, help="batches first, untimed")
@click.option(
    "--batch-tokens", type=click.IntRange(1), default=None, help="padded target tokens a batch (default: the recipe's)"
)
@click.option("--synthetic", type=click.IntRange(1), default=None, help="N synthetic pairs instead of the corpus")
@click.option("--threads", type=click.IntRange(1), default=None, help="torch threads (default: torch's)")
def main(
    network: str,
    preset: str,
    a_text: str,
    b_text: str,
    batches: int,
    warmup: int,
    batch_tokens: int | None,
    synthetic: int | None,
    threads: int | None,
) -> None:
    """Time the recipe's training step with precision A against B, alternated batch by batch."""
    if threads:
        torch.set_num_threads(threads)
    machine = parts.machine()
    say = click.echo
    recipe = RECIPES[network]
    sizes = dict(parts.QUICK_SIZES if preset == "quick" else recipe["sizes"])
    base = replace(NMT_DEFAULTS, **recipe["train"])
    if batch_tokens:
        base = replace(base, batch_tokens=batch_tokens)
    a_cfg = precision_config(base, a_text)
    b_cfg = precision_config(base, b_text)
    arch = arch_config(network, **recipe["arch"])
    assert arch is not None
    say(f"phrase_rescorer training step A/B, {time.strftime('%Y-%m-%d %H:%M %Z')}")
    say(machine_line(machine))
    with tempfile.TemporaryDirectory(prefix="phrase-rescorer-ab-") as tmp:
        work = Path(tmp)
        pairs, read = recipe_pairs(work, synthetic)
        runs = [
            recipe_run(pairs, cfg, arch, preset, sizes, work / f"{side}.pt")
            for side, cfg in (("a", a_cfg), ("b", b_cfg))
        ]
        plan = runs[0][0].plan(0)
        say(
            f"corpus: {read}; network: {network}, {preset}; batches of at most {base.batch_tokens:,} padded target "
            f"tokens; A: {a_cfg.precision}, B: {b_cfg.precision}; {batches} batches after {warmup}, "
            "alternated (A then B, B then A)"
        )
        ms: list[list[float]] = [[], []]
        for i, batch in enumerate(itertools.islice(itertools.cycle(plan), warmup + batches)):
            order = (0, 1) if i % 2 == 0 else (1, 0)
            took = [0.0, 0.0]
            for side in order:
                t = time.perf_counter()
                runs[side][1].step(batch)
                took[side] = (time.perf_counter() - t) * 1e3
            if i >= warmup:
                ms[0].append(took[0])
                ms[1].append(took[1])
    ratios = [a / b for a, b in zip(*ms, strict=True)]
    low, mid, high = quartiles(ratios)
    say(
        f"A/B per batch: median {mid:.3f} (quartiles {low:.3f}-{high:.3f}, {len(ratios)} batches); "
        f"A {statistics.median(ms[0]):.0f} ms, B {statistics.median(ms[1]):.0f} ms a step (medians)"
    )


if __name__ == "__main__":
    main()
