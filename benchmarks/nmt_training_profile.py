"""``python -m benchmarks.nmt_training_profile``: where the time of a sentence network's training step goes.

``make profile-training`` does this for the phrase network; this profiles ``train-nmt``'s steps
as the README's recipes train them: ``--network rnnsearch`` (``--preset medium --dropout 0.3
--label-smoothing 0.1``, Adam, batches of at most 1,000 padded target tokens) or ``--network
transformer`` (the same with ``--embed-dim 128 --hidden-dim 256 --batch-tokens 2000``,
docs/architectures.md), on the corpus those recipes train on (``../shared/data/moses-en-fr/corpus``;
without it, synthetic sentences of its lengths: ``--synthetic``). The training run is built as
``train-nmt`` builds it (``phrase_task``, ``Loop``) and the batches are its first epoch's, after a
fixed warm-up (``--warmup``; ``training_steps.timed_steps`` otherwise waits for the heap to
settle, up to 300 steps, minutes at this size). It prints

* the FLOPs of one step from the batches' shapes: 3x the forward pass's products
  (``flops.sentence_flops``: the backward pass costs two forward passes' products), each pair
  alone ("useful") and as the padded batch computes them; the padding's share of the tokens;
* the machine's product rate measured in the same run: the 2048^3 product (float32 in the BLAS
  and oneDNN; bfloat16 where the CPU has bf16 units or ``--bf16`` is given) and each product
  shape of the steps timed alone (``product_ceiling``): the steps/s those rates would allow with
  everything else free, against the steps/s measured (without the profiler);
* where the time of a profiled step goes, by part of the network, forward and backward: the
  batch (collation and padding), the embeddings, the encoder, the attention, the decoder's
  recurrence (the transformer: its layers), the readout, the output layer over the shortlist,
  the softmax and the label-smoothed loss, the rest of the backward pass, the clipping, the
  optimizer. The parts are named ranges opened around the network's modules and methods only
  while the profile runs (``instrumented``): outside a profile the network runs unchanged. The
  backward pass's operators are given to the part whose forward operators they differentiate
  (``profile_analysis.phase_times``);
* the operators' own time by kind (matrix products, element-wise, ...: ``profile_analysis``).
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import json
import tempfile
import time
import types
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import click
import numpy as np
import torch
from torch import nn
from torch.profiler import ProfilerActivity, profile, record_function

from benchmarks import parts, plain_products, product_ceiling, training_steps
from benchmarks.flops import sentence_flops
from benchmarks.profile_analysis import PART, analyse, phase_times
from phrase_rescorer.allocator import keep_freed_memory
from phrase_rescorer.cli.train_nmt import NMT_DEFAULTS
from phrase_rescorer.cpu_features import cpu_features
from phrase_rescorer.data.corpus import load_sentence_pairs
from phrase_rescorer.model import transformer
from phrase_rescorer.model.architectures import ArchConfig, arch_config
from phrase_rescorer.model.cho2014 import ModelConfig
from phrase_rescorer.parallel.distributed import Group
from phrase_rescorer.training import smoothed_output, stacked_log_probs
from phrase_rescorer.training.loop import Loop
from phrase_rescorer.training.phrase_task import phrase_task
from phrase_rescorer.training.stacked_log_probs import is_stacked_network

CORPUS = parts.REPO.parent / "shared" / "data" / "moses-en-fr" / "corpus"
#: The README's recipes (README.md, docs/architectures.md): the sizes over the preset's, the
#: architecture's options, the training settings over ``train-nmt``'s defaults.
RECIPES: dict[str, dict[str, dict[str, Any]]] = {
    "rnnsearch": {"sizes": {}, "arch": {"dropout": 0.3}, "train": {"label_smoothing": 0.1}},
    "transformer": {
        "sizes": {"embed_dim": 128, "hidden_dim": 256},
        "arch": {"dropout": 0.3},
        "train": {"label_smoothing": 0.1, "batch_tokens": 2000},
    },
}
#: The parts of the profile's table, in its order (the names of ``instrumented``'s ranges).
PARTS = (
    "embedding",
    "encoder",
    "attention",
    "decoder recurrence",
    "decoder layers",
    "readout",
    "output layer",
    "softmax and loss",
)


def recipe_run(
    pairs: Any, cfg: Any, arch: ArchConfig, preset: str, sizes: dict[str, int | None], checkpoint: Path
) -> tuple[Any, Loop]:
    """The training run ``train-nmt`` builds for ``pairs`` (``phrase_task`` and its ``Loop``), on the CPU,
    one process; the network's weights drawn from ``cfg``'s seed."""
    cpu = torch.device("cpu")
    task = phrase_task(
        pairs,
        cfg,
        cpu,
        Group(),
        preset="small" if preset == "quick" else preset,
        sizes=sizes,
        subwords=None,
        cell=ModelConfig.cell,
        summary=ModelConfig.summary,
        arch=arch,
        direction="forward",
        languages=(None, None),
        argv=[],
        trained_on="sentence pairs",
    )
    keep_freed_memory()  # as the training commands do
    return task, Loop(task, cfg.loop, str(checkpoint), cpu, Group())


def machine_line(machine: dict[str, Any]) -> str:
    """The header's line on the machine (``parts.machine()``) and the threads torch uses."""
    return (
        f"machine: {machine['cpu']}, {machine['logical_cpus']} logical CPUs, torch {machine['torch']}, "
        f"{torch.get_num_threads()} threads, CPU features: {machine['cpu_features']}, load average "
        f"{machine['load_average']:.1f}"
    )


def recipe_pairs(
    work: Path, synthetic: int | None, source: str | None = None, target: str | None = None
) -> tuple[Any, str]:
    """The sentence pairs to train on and what they are: ``synthetic`` pairs written under ``work``,
    else SOURCE and TARGET, else the recipes' corpus, else (no corpus here) 29,000 synthetic pairs."""
    if source is None and target is None and synthetic is None and not (CORPUS / "train.tok.lc.en").exists():
        synthetic = 29_000
    if synthetic:
        src_path, tgt_path = synthetic_corpus(synthetic, work)
        read = f"{synthetic:,} synthetic sentence pairs"
    else:
        src_path = Path(source or CORPUS / "train.tok.lc.en")
        tgt_path = Path(target or CORPUS / "train.tok.lc.fr")
        read = f"{src_path} + {tgt_path.name}"
    return load_sentence_pairs(str(src_path), str(tgt_path)).pairs, read


def synthetic_corpus(pairs: int, out: Path, seed: int = 1) -> tuple[Path, Path]:
    """Two line-aligned files of ``pairs`` random sentences with the corpus's lengths (English
    13 +- 4.5 tokens, French 14 +- 5, at least 1) over Zipf-distributed vocabularies of 10,000
    words a side: what the profile reads where the corpus is absent."""
    rng = np.random.default_rng(seed)
    paths = []
    for side, (mean, sd) in (("en", (13, 4.5)), ("fr", (14, 5.0))):
        lengths = np.clip(rng.normal(mean, sd, pairs).round().astype(int), 1, 60)
        words = np.minimum(rng.zipf(1.2, int(lengths.sum())), 10_000)
        lines = np.split(words, np.cumsum(lengths)[:-1])
        path = out / f"synthetic.{side}"
        path.write_text("".join(" ".join(f"{side}{w}" for w in line) + "\n" for line in lines))
        paths.append(path)
    return paths[0], paths[1]


def _parts_of(net: nn.Module, network: str) -> list[tuple[object, str, str]]:
    """(owner, attribute, part) of every module or method of the training objective ``net`` that
    a profile names; "network": the network's own forward, between its parts."""
    m: Any = net.model
    named: list[tuple[object, str, str]] = [
        (net, "forward", "softmax and loss"),
        (m, "forward", "network"),
        (m.src_embed, "forward", "embedding"),
        (m.tgt_embed, "forward", "embedding"),
    ]
    if network == "transformer":
        named += [
            (m, "_inputs", "embedding"),
            (m.encoder_norm, "forward", "encoder"),
            (transformer, "attend", "attention"),
            (transformer, "attend_values", "attention"),
        ]
        named += [(layer, "forward", "encoder") for layer in m.encoder_layers]
        named += [(layer, "forward", "decoder layers") for layer in m.decoder_layers]
        named += [(layer.memory_kv, "forward", "decoder layers") for layer in m.decoder_layers]
        named += [  # the training computation of transformer_log_probs
            (m, "decode_outputs", "network"),
            (m.decoder_norm, "forward", "output layer"),
            (smoothed_output, "smoothed_target_log_probs", "output layer"),  # its softmax and loss too
        ]
        return [*named, (m, "readout", "output layer")]
    d = m.decoder
    if is_stacked_network(m):  # the training computation of stacked_log_probs
        named += [
            (stacked_log_probs, "packed_encoder", "encoder"),
            (m, "decode_outputs", "network"),
            (d, "readout_features", "readout"),
            (smoothed_output, "smoothed_target_log_probs", "output layer"),  # its softmax and loss too
        ]
    return [
        *named,
        (m.encoder, "forward", "encoder"),
        (d.attention, "keys", "attention"),
        (d.attention, "forward", "attention"),
        (d, "start", "decoder recurrence"),
        (d, "step", "decoder recurrence"),
        (d, "readout", "readout"),
        (d.G_l, "forward", "output layer"),
    ]


def _ranged(fn: Callable[..., Any], part: str) -> Callable[..., Any]:
    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        with record_function(PART + part):
            return fn(*args, **kwargs)

    return run


@contextlib.contextmanager
def instrumented(net: nn.Module, network: str) -> Iterator[None]:
    """Inside: every part of ``net`` (``_parts_of``) runs in a named range ``phase.PART``; outside,
    the modules, methods and functions are the network's own again."""
    done: list[tuple[object, str, Any]] = []  # (owner, attribute, the owner's own value or None)
    try:
        for owner, attr, part in _parts_of(net, network):
            own = vars(owner).get(attr) if isinstance(owner, types.ModuleType) or attr in vars(owner) else None
            done.append((owner, attr, own))
            setattr(owner, attr, _ranged(getattr(owner, attr), part))
        yield
    finally:
        for owner, attr, own in reversed(done):
            if own is None:
                delattr(owner, attr)  # the class's method again
            else:
                setattr(owner, attr, own)


def padding(encoded: Any, batches: list[np.ndarray]) -> dict[str, float]:
    """The padding's share of each side's tokens (</s> included) in ``batches``."""
    out = {}
    for side, lengths in (("source", encoded.src_lengths), ("target", encoded.tgt_lengths)):
        real = sum(int(lengths[b].sum()) + len(b) for b in batches)
        padded = sum(len(b) * (int(lengths[b].max()) + 1) for b in batches)
        out[side] = 1 - real / padded
    return out


def by_part(times: dict[str, float], profiled_ms: float) -> dict[str, dict[str, float | None]]:
    """The table of where the time goes (``phase_times``' ranges by part): forward, backward and
    total milliseconds per step (None: a part with no forward or backward side); the last row is
    the profiled step's time outside every phase of ``Loop.step``."""
    t = lambda *names: sum(times.get(n, 0.0) for n in names)  # noqa: E731
    rows: dict[str, dict[str, float | None]] = {"batching and padding": {"forward": t("train.batch"), "backward": None}}
    for p in PARTS:
        if PART + p in times or f"backward.{PART}{p}" in times:
            rows[p] = {"forward": t(PART + p), "backward": t(f"backward.{PART}{p}")}
    rows["forward, between the parts"] = {
        "forward": t("train.forward", PART + "network"),
        "backward": t("backward.train.forward", f"backward.{PART}network"),
    }
    rows["backward: engine, gradient accumulation"] = {
        "forward": None,
        "backward": t("train.backward", "backward.other"),
    }
    rows["gradient clipping"] = {"forward": None, "backward": None, "total": t("train.clip")}
    rows["optimizer"] = {"forward": None, "backward": None, "total": t("train.optimizer")}
    for r in rows.values():
        r.setdefault("total", (r["forward"] or 0.0) + (r["backward"] or 0.0))
    named = sum(r["total"] or 0.0 for r in rows.values())
    rows["Python between the phases"] = {"forward": None, "backward": None, "total": profiled_ms - named}
    return rows


def _rates(by_library: dict[str, float]) -> str:
    return ", ".join(f"{lib} {rate:,.1f}" for lib, rate in by_library.items()) + " GFLOP/s"


def report(fig: dict[str, Any]) -> None:
    say = click.echo
    step_s = fig["step_ms"] / 1e3
    pad = fig["padding"]
    say(
        f"batches: {fig['pairs_per_step']:,.1f} pairs a step, {fig['tokens_per_step']['source']:,.0f} source and "
        f"{fig['tokens_per_step']['target']:,.0f} target tokens (</s> included); padding: "
        f"{100 * pad['source']:.1f}% of the source positions, {100 * pad['target']:.1f}% of the target positions"
    )
    say(
        f"\nFLOPs of a step from the shapes (the forward pass's products x3 for forward and backward): "
        f"{fig['useful_gflop']:,.1f} GFLOP each pair alone, {fig['padded_gflop']:,.1f} GFLOP as the padded "
        f"batches compute them"
    )
    say(
        f"step without the profiler: {fig['step_ms']:,.1f} ms = {1 / step_s:,.2f} steps/s, useful "
        f"{fig['useful_gflops']:,.1f} GFLOP/s ({100 * fig['beside_fraction']:.0f}% of the faster fp32 2048^3 "
        f"product timed between the steps, {_rates(fig['beside_by_library'])})"
    )
    for dtype, rates in fig["rate_2048"].items():
        bound = max(rates.values()) / fig["useful_gflop"]  # steps/s
        say(
            f"  {dtype} 2048^3 product, best of 5: {_rates(rates)}: the step's useful FLOPs at that rate: "
            f"{bound:,.2f} steps/s; measured {1 / step_s:,.2f} = {100 / step_s / bound:.0f}% of it"
        )
    for c in list(fig.get("ceilings", {}).values())[:1]:
        say(
            f"  the step's matrix products, timed call by call in plain steps: {c['step_ms']:,.1f} ms "
            f"= {100 * c['step_ms'] / fig['step_ms']:.0f}% of the step"
        )
    for dtype, c in fig.get("ceilings", {}).items():
        steps_s = c["useful_gflops"] / fig["useful_gflop"]
        say(
            f"  {dtype} at the step's own {c['shapes']} product shapes, each timed alone: "
            f"{_ms(c['alone_ms_by_library'])} a step ({c['product_flops_per_step'] / 1e9:,.1f} GFLOP of products "
            f"of known shape, forward and backward); at the faster per shape {c['alone_ms']:,.1f} ms: "
            f"{steps_s:,.2f} steps/s with all else free (the unknown shapes at their time in the step: "
            f"{c['unknown_ms']:,.1f} ms) = {100 * c['share']:.1f}% of the {dtype} 2048^3 bound"
        )
    prof = fig["profiled_step_ms"]
    say(
        f"\nwhere the time goes (ms per step under the profiler: {prof:,.1f} ms, without it {fig['step_ms']:,.1f}; "
        "backward: the backward pass's operators of the part's forward operators)"
    )
    say(f"  {'part':<40} {'forward':>9} {'backward':>9} {'total':>9} {'share':>7}")
    for name, r in fig["parts"].items():
        cells = " ".join("{:>9}".format("-" if r[k] is None else f"{r[k]:,.1f}") for k in ("forward", "backward"))
        say(f"  {name:<40} {cells} {r['total']:>9,.1f} {100 * r['total'] / prof:>6.1f}%")
    say("\noperators' own time by kind (ms per step, share of the profiled step)")
    for kind, ms in [*fig["kinds_ms"].items(), ("outside any operator", fig["outside_operators_ms"])]:
        extra = f"   {fig['matmul_gflops']:.1f} GFLOP/s" if kind == "matrix products" else ""
        say(f"  {kind:<22} {ms:>9,.1f}  {100 * ms / prof:>5.1f}%{extra}")
    say("\ncostliest matrix products by input shapes (ms per step, calls per step, GFLOP/s)")
    for s in fig["matmul_shapes"][:6]:
        say(f"  {s['op']:<12} {s['shapes']:<44} {s['ms']:>8,.1f} {s['calls']:>6,.1f} {s['gflops']:>7.1f}")


def _sizes(c: ModelConfig, arch: ArchConfig) -> str:
    if arch.name == "transformer":
        return f"d={c.embed_dim}, F={c.hidden_dim}, {arch.layers} layers of {arch.heads} heads"
    return f"E={c.embed_dim}, H={c.hidden_dim}, M={c.maxout_dim}, R={c.output_rank}"


def _ms(by_library: dict[str, float]) -> str:
    return ", ".join(f"{lib} {ms:,.1f} ms" for lib, ms in by_library.items())


@parts.command
@click.option(
    "--network",
    type=click.Choice(list(RECIPES)),
    default="rnnsearch",
    show_default=True,
    help="The recipe profiled (module text).",
)
@click.option(
    "--preset",
    type=click.Choice(["medium", "small", "quick"]),
    default="medium",
    show_default=True,
    help="Network size: the recipe's medium (the transformer's own widths over it); quick: a tiny network, "
    "for a smoke run.",
)
@click.option("--source", type=click.Path(exists=True, dir_okay=False), help="Source sentences [the corpus].")
@click.option("--target", type=click.Path(exists=True, dir_okay=False), help="Target sentences [the corpus].")
@click.option("--synthetic", type=click.IntRange(min=1), help="Profile on N synthetic sentence pairs instead.")
@click.option("--batch-tokens", type=click.IntRange(min=1), help="Padded target tokens a batch [the recipe's].")
@click.option("--steps", type=click.IntRange(min=1), default=5, show_default=True, help="Steps timed, then profiled.")
@click.option("--warmup", type=click.IntRange(min=1), default=10, show_default=True, help="Steps run before them.")
@click.option("--bf16", is_flag=True, help="Profile bf16 autocast training.")
@click.option(
    "--bf16-steps",
    is_flag=True,
    help="Profile train-nmt --bf16-steps (rnnsearch: the decoder steps' products in bf16).",
)
@click.option(
    "--bf16-output",
    is_flag=True,
    help="Profile train-nmt --bf16-output (the output layer's products in bf16; with --bf16-steps or alone).",
)
@click.option(
    "--ceiling/--no-ceiling",
    default=True,
    show_default=True,
    help="Time every product shape of the steps alone (a few seconds to a minute).",
)
@parts.threads_option
@parts.json_option
def main(
    network: str,
    preset: str,
    source: str | None,
    target: str | None,
    synthetic: int | None,
    batch_tokens: int | None,
    steps: int,
    warmup: int,
    bf16: bool,
    bf16_steps: bool,
    bf16_output: bool,
    ceiling: bool,
    threads: int | None,
    json_path: str | None,
) -> None:
    """Profile training steps of a sentence network on the CPU and print where their time goes."""
    if (source is None) != (target is None):
        raise click.UsageError("--source and --target go together")
    if threads:
        torch.set_num_threads(threads)
    machine = parts.machine()
    say = click.echo
    say(f"phrase_rescorer training profile of the sentence networks, {time.strftime('%Y-%m-%d %H:%M %Z')}")
    say(machine_line(machine))
    cpu = torch.device("cpu")
    dtypes = {"fp32": torch.float32}
    if bf16 or bf16_steps or bf16_output or cpu_features().bf16_units:
        dtypes["bf16"] = torch.bfloat16
    rate_2048 = {
        name: {lib: parts.matmul_gflops(cpu, dtype, library=lib) for lib in parts.product_libraries(cpu, dtype)}
        for name, dtype in dtypes.items()
    }
    recipe = RECIPES[network]
    sizes: dict[str, int | None] = dict(parts.QUICK_SIZES if preset == "quick" else recipe["sizes"])
    cfg = replace(NMT_DEFAULTS, bf16=bf16, bf16_steps=bf16_steps, bf16_output=bf16_output, **recipe["train"])
    if batch_tokens:
        cfg = replace(cfg, batch_tokens=batch_tokens)
    arch = arch_config(network, **recipe["arch"])
    assert arch is not None
    with tempfile.TemporaryDirectory(prefix="phrase-rescorer-profile-") as tmp:
        work = Path(tmp)
        pairs, read = recipe_pairs(work, synthetic, source, target)
        task, trainer = recipe_run(pairs, cfg, arch, preset, sizes, work / "nmt.pt")
        config = task.config
        plan = task.plan(0)
        say(
            f"corpus: {read}: {len(pairs):,} unique pairs; network: {network}, {preset} ({_sizes(config, arch)}, "
            f"V={config.src_vocab_size:,}/{config.tgt_vocab_size:,}), dropout {arch.dropout}, label smoothing "
            f"{cfg.label_smoothing}, batches of "
            f"at most {cfg.batch_tokens:,} padded target tokens, {type(task.optimizer).__name__}; "
            f"{cfg.precision}; "
            f"{steps} steps after {warmup}"
        )
        say("machine 2048^3 product (best of 5): " + "; ".join(f"{d} {_rates(r)}" for d, r in rate_2048.items()))
        encoded = task.data.encoded

        def forward_flops(s: np.ndarray, t: np.ndarray) -> int:
            return sentence_flops(config, arch, s, t)

        def padded_flops(s: np.ndarray, t: np.ndarray) -> int:
            return sentence_flops(config, arch, s, t, padded=True)

        timed = training_steps.timed_steps(
            trainer, plan, steps, config, cpu, beside=True, forward_flops=forward_flops, warmup_steps=warmup
        )
        batches = list(itertools.islice(itertools.cycle(plan), warmup, warmup + steps))  # the timed ones
        products = None
        if ceiling:  # the same batches, their products timed without the profiler
            products = plain_products.time_products(lambda: [trainer.step(b) for b in batches], steps)
        trainer.step(plan[0])  # warm-up again before the profile
        activities = [ProfilerActivity.CPU]
        with (
            instrumented(task.net, network),
            profile(activities=activities, record_shapes=True, with_flops=True) as prof,
        ):
            t = time.perf_counter()
            for b in batches:
                trainer.step(b)
            wall = time.perf_counter() - t
    fig = analyse(prof, steps, wall)
    mean_pairs = sum(map(len, batches)) / steps
    s_len, t_len = encoded.src_lengths, encoded.tgt_lengths
    fig.update(
        network=network,
        preset=preset,
        bf16=bf16,
        bf16_steps=bf16_steps,
        bf16_output=bf16_output,
        corpus=read,
        machine=machine,
        rate_2048=rate_2048,
        step_ms=mean_pairs * 1e3 / timed.pairs_per_s,
        pairs_per_step=mean_pairs,
        tokens_per_step={
            "source": sum(int(s_len[b].sum()) + len(b) for b in batches) / steps,
            "target": sum(int(t_len[b].sum()) + len(b) for b in batches) / steps,
        },
        padding=padding(encoded, batches),
        useful_gflop=3 * sum(forward_flops(s_len[b], t_len[b]) for b in batches) / steps / 1e9,
        padded_gflop=3 * sum(padded_flops(s_len[b], t_len[b]) for b in batches) / steps / 1e9,
        useful_gflops=timed.useful_gflops,
        beside_fraction=timed.beside_fraction,
        beside_by_library=timed.beside_by_library,
        parts=by_part(phase_times(prof, steps), wall * 1e3 / steps),
    )
    if products is not None:
        useful = fig["useful_gflop"] * 1e9
        fig["ceilings"] = {name: product_ceiling.ceiling(*products, useful, dtype) for name, dtype in dtypes.items()}
    report(fig)
    if json_path:
        Path(json_path).write_text(json.dumps(fig, indent=2, default=str) + "\n")


if __name__ == "__main__":
    main()
