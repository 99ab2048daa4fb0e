"""``python -m benchmarks.training_profile``: where the time of a training step goes.

``make bench`` says how fast ``Loop.step`` runs against the machine's matrix-product rate;
this says why. It profiles the steps (``torch.profiler``, the same batches of a real table's
pairs as the benchmark: ``training_steps.benchmark_trainer``) and prints

* the step without the profiler: pairs/s, useful GFLOP/s (3x the forward products of the pairs,
  ``flops.pair_flops``) and its share of the machine's 2048^3 float32 product rate, both of its
  best rate measured once and of its rate timed between the steps (the same seconds as theirs);
* the step's phases, the named ranges of ``Loop.step`` (batch, forward, backward, clip,
  optimizer), each split into time inside operators and time between them (Python, dispatch);
* the operators' own time by kind: matrix products (with the rate the profiler's FLOP count
  gives them), element-wise, softmax and loss, copies and indexing, reductions, autograd's
  bookkeeping, the rest;
* the matrix products by shape, the costliest first, each with its GFLOP/s: how far the small
  products of a batch of short phrases stay from the rate of a large one.
* the ceiling of those products (``product_ceiling``; float32, ``--no-ceiling`` to skip): each
  shape timed alone, and the step's rate if they ran that fast and all else were free; then the
  families of products where the step loses most against their alone time, their time in the
  step taken call by call in plain steps (the same batches once more, ``plain_products``): under
  the profiler, products that allocate a large output run far slower than in a plain step.

The profiler adds a few microseconds per operator; the profiled step's time is printed next to
the plain one so that the overhead can be read off. The steps keep their freed memory for reuse
as the training commands do (``allocator.keep_freed_memory``, through ``benchmark_trainer``):
under glibc's defaults it went back to the system and was page-faulted in again every step,
which the profiler made worse (docs/training-speed.md, "Where the time of a step goes").
Shortlists come from the timed lines (filled up to the preset's size, as in
``parts.shortlists``), not the whole table, so that a profile takes a minute.
"""

from __future__ import annotations

import itertools
import json
import tempfile
import time
from pathlib import Path
from typing import Any

import click
import torch
from torch.profiler import ProfilerActivity, profile

from benchmarks import parts, plain_products, product_ceiling, training_steps
from benchmarks.profile_analysis import analyse
from phrase_rescorer.data.pairs import load_pairs
from phrase_rescorer.training.optim import KERNELS
from phrase_rescorer.training.run_settings import TrainConfig


def _rates(by_library: dict[str, float]) -> str:
    """e.g. "blas 94.1, onednn 108.4 GFLOP/s"."""
    return ", ".join(f"{lib} {rate:.1f}" for lib, rate in by_library.items()) + " GFLOP/s"


def _ms(by_library: dict[str, float]) -> str:
    """e.g. "blas 120.3 ms, onednn 101.2 ms"."""
    return ", ".join(f"{lib} {ms:,.1f} ms" for lib, ms in by_library.items())


def report(fig: dict[str, Any], cpu_rate: float) -> None:
    say = click.echo
    step = fig["step_ms"]
    say(
        f"\nstep without the profiler: {step:,.1f} ms ({fig['pairs_per_s']:,.1f} pairs/s, useful "
        f"{fig['useful_gflops']:.1f} GFLOP/s = {100 * fig['useful_gflops'] / cpu_rate:.0f}% of the fp32 matmul "
        f"rate; {100 * fig['beside_fraction']:.0f}% of the {fig['beside_gflops']:.1f} GFLOP/s of the faster product "
        f"timed between the steps, {_rates(fig['beside_by_library'])}); with it: {fig['profiled_step_ms']:,.1f} ms"
    )
    if fig["page_faults_per_step"] is not None:
        say(
            f"minor page faults per timed step: {fig['page_faults_per_step']:,.0f} (after "
            f"{fig['warmup_steps']} warm-up steps)"
        )
    say("\nphases of Loop.step (ms per step; 'between' = Python and dispatch outside any operator)")
    for name, p in fig["phases"].items():
        say(f"  {name:<10} {p['ms']:>9,.1f}  between operators {p['outside_operators_ms']:>8,.1f}")
    say(
        "\noperators' own time by kind (ms per step, share of the profiled step; 'outside any operator' = "
        "Python, dispatch and named ranges)"
    )
    prof = fig["profiled_step_ms"]
    for kind, ms in [*fig["kinds_ms"].items(), ("outside any operator", fig["outside_operators_ms"])]:
        extra = f"   {fig['matmul_gflops']:.1f} GFLOP/s" if kind == "matrix products" else ""
        say(f"  {kind:<22} {ms:>9,.1f}  {100 * ms / prof:>5.1f}%{extra}")
    say("\ncostliest operators (own time, ms per step)")
    for name, ms in fig["top_operators"]:
        say(f"  {name:<40} {ms:>9,.1f}")
    say("\ncostliest matrix products by input shapes (ms per step, calls per step, GFLOP/s)")
    for s in fig["matmul_shapes"]:
        say(f"  {s['op']:<12} {s['shapes']:<44} {s['ms']:>8,.1f} {s['calls']:>6,.1f} {s['gflops']:>7.1f}")
    c = fig.get("ceiling")
    if c:
        say(
            f"\nceiling of these products: their {c['shapes']} shapes timed alone, operands in cache, "
            f"{_ms(c['alone_ms_by_library'])} per step, {c['alone_ms']:,.1f} ms at the faster per shape "
            f"(in the step: {c['step_ms']:,.1f} ms timed call by call without the profiler, "
            f"{fig['kinds_ms']['matrix products']:,.1f} under it); with everything "
            f"else free a step would run its useful FLOPs at {c['useful_gflops']:.1f} GFLOP/s = "
            f"{100 * c['share']:.0f}% of the faster 2048^3 product timed with them ({_rates(c['bound_by_library'])})"
        )
        say(
            "  where the step loses most against them (rows x depth x width, N: every count met; "
            "ms per step: in the step without the profiler, alone)"
        )
        for d in c["by_family"][:8]:
            say(f"  {d['family']:<24} {d['step_ms']:>8,.1f} {d['alone_ms']:>8,.1f}")


@parts.command
@parts.table_option
@click.option(
    "--lines",
    type=click.IntRange(min=1),
    default=20000,
    show_default=True,
    help="Pairs trained on: the head of the table.",
)
@click.option(
    "--preset",
    type=click.Choice(["paper", "small", "quick"]),
    default="paper",
    show_default=True,
    help="Network size (quick: a tiny network, for a smoke run).",
)
@click.option("--batch", type=click.IntRange(min=1), default=64, show_default=True)
@click.option(
    "--steps",
    type=click.IntRange(min=1),
    default=5,
    show_default=True,
    help="Steps timed, and then profiled (after the warm-up steps of the benchmark).",
)
@click.option("--bf16", is_flag=True, help="Profile bf16 autocast training.")
@click.option(
    "--optimizer-kernel",
    type=click.Choice(KERNELS),
    default=TrainConfig.optimizer_kernel,
    show_default=True,
    help="Adadelta's update, as train's option of that name.",
)
@click.option(
    "--ceiling/--no-ceiling",
    default=True,
    show_default=True,
    help="Time the profiled steps' products in plain steps and each of their shapes alone (float32 "
    "only; about 20 s at paper size on 2 threads): the rate a step of those products could reach "
    "with all else free, and where the step loses against it.",
)
@parts.threads_option
@parts.json_option
def main(
    table: str | None,
    lines: int,
    preset: str,
    batch: int,
    steps: int,
    bf16: bool,
    optimizer_kernel: str,
    ceiling: bool,
    threads: int | None,
    json_path: str | None,
) -> None:
    """Profile training steps on the CPU and print where their time goes."""
    if threads:
        torch.set_num_threads(threads)
    table = parts.default_table(table)
    machine = parts.machine()
    say = click.echo
    say(f"phrase_rescorer training profile, {time.strftime('%Y-%m-%d %H:%M %Z')}")
    say(
        f"machine: {machine['cpu']}, {machine['logical_cpus']} logical CPUs, torch {machine['torch']}, "
        f"{torch.get_num_threads()} threads, CPU features: {machine['cpu_features']}, load average "
        f"{machine['load_average']:.1f}"
    )
    cpu = torch.device("cpu")
    cpu_rate = parts.matmul_gflops(cpu)
    rates = {
        lib: cpu_rate if lib == "blas" else parts.matmul_gflops(cpu, library=lib)
        for lib in parts.product_libraries(cpu)
    }
    say(f"machine fp32 matrix product (2048^3, best of 5): {_rates(rates)}")
    with tempfile.TemporaryDirectory(prefix="phrase-rescorer-profile-") as tmp:
        work = Path(tmp)
        head = work / "head.gz"
        n = parts.head_of_table(table, lines, head)
        src, tgt = parts.shortlists(str(head), parts.preset_vocab_size(preset))
        config = parts.model_config(preset, src, tgt)
        trainer, plan = training_steps.benchmark_trainer(
            config, load_pairs(str(head)), src, tgt, batch, torch.device("cpu"), work, bf16, optimizer_kernel
        )
        say(
            f"table: {table}: first {n:,} lines; network: {preset} (H={config.hidden_dim}, E={config.embed_dim}, "
            f"V={config.src_vocab_size:,}/{config.tgt_vocab_size:,}); batch {batch}; "
            f"{'bf16 autocast' if bf16 else 'float32'}; {type(trainer.task.optimizer).__name__}; {steps} steps"
        )
        timed = training_steps.timed_steps(trainer, plan, steps, config, torch.device("cpu"), beside=True)
        warm = timed.warmup_steps
        batches = list(itertools.islice(itertools.cycle(plan), warm, warm + steps))  # the timed ones
        products = None
        if ceiling and not bf16:  # the same batches, their products timed without the profiler
            products = plain_products.time_products(lambda: [trainer.step(b) for b in batches], steps)
        trainer.step(plan[0])  # warm-up again before the profile
        with profile(activities=[ProfilerActivity.CPU], record_shapes=True, with_flops=True) as prof:
            t = time.perf_counter()
            for b in batches:
                trainer.step(b)
            wall = time.perf_counter() - t
    fig = analyse(prof, steps, wall)
    mean_batch = sum(map(len, batches)) / steps
    fig.update(
        step_ms=mean_batch * 1e3 / timed.pairs_per_s,
        pairs_per_s=timed.pairs_per_s,
        useful_gflops=timed.useful_gflops,
        beside_gflops=timed.beside_gflops,
        beside_fraction=timed.beside_fraction,
        beside_by_library=timed.beside_by_library,
        warmup_steps=timed.warmup_steps,
        page_faults_per_step=timed.page_faults_per_step,
        cpu_matmul_gflops=cpu_rate,
        machine=machine,
        preset=preset,
        batch=batch,
        bf16=bf16,
        optimizer=type(trainer.task.optimizer).__name__,
        lines=n,
    )
    if products is not None:
        fig["ceiling"] = product_ceiling.ceiling(*products, timed.useful_gflops * fig["step_ms"] * 1e6)
    report(fig, cpu_rate)
    if ceiling and bf16:
        say("\nceiling of the products: not timed under --bf16 (the products are timed in float32 only)")
    if json_path:
        Path(json_path).write_text(json.dumps(fig, indent=2, default=str) + "\n")


if __name__ == "__main__":
    main()
