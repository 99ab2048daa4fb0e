"""One training run from the command line, for every training command (``train``,
``train-nmt``, ``train-lm``): the loop run with a progress display (its outputs: ``training_outputs``), signals
turned into a resumable stop; and the phrase commands' run (``train``, ``train-nmt``), which differ
only in what they read."""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

import click
import torch
from click.core import ParameterSource

from ..allocator import keep_freed_memory
from ..cpu_features import cpu_features
from ..data.pairs import PairSet
from ..data.subwords import SubwordError
from ..data.units import check_units, choose_units
from ..model.arch_options import RECURRENT_MODEL_OPTIONS
from ..model.architectures import ArchConfig, arch_config, sizes_problem, unused_sizes
from ..model.kinds import ModelFile, network_kind
from ..parallel import distributed
from ..training import adadelta_loop, dropout_masks, products
from ..training.loop import Interrupted, TrainingError, fit
from ..training.optim import CompiledAdadelta
from ..training.phrase_task import DIRECTION_SAYS, phrase_task
from ..training.run_files import companion_path
from ..training.run_record import recorded_units
from ..training.run_settings import TrainConfig, preset_sizes
from ..training.smoothed_output import BF16_OUTPUT_NETWORKS
from ..training.stacked_log_probs import BF16_STEPS_NETWORKS
from ..training.task_interface import LoopConfig, RunState, Task
from .common import Terminated, UserError, progress, resolve_device, say, warn
from .loop_options import loop_config
from .progress import Progress
from .training_options import ARCH as _ARCH
from .training_options import SIZES as _SIZES
from .training_outputs import check_outputs, own_outputs, resumed_state

#: Where an option left at its default comes from (not the command line, nor the environment).
_DEFAULTS = (None, ParameterSource.DEFAULT, ParameterSource.DEFAULT_MAP)


def run_loop(
    ctx: click.Context,
    task: Task,
    cfg: LoopConfig,
    model_out: str,
    *,
    device: torch.device,
    group: distributed.Group,
    resume: bool | ModelFile,
    log_path: str | None,
) -> tuple[str, RunState]:
    """``fit`` with a progress display; a signal becomes a resumable stop and its exit code
    (``resume``: the ``.last.pt`` read by ``training_outputs.resumed_state``)."""
    bars: list[Progress] = []
    postfix: dict[str, str] = {}

    def report(kind: str, event: dict[str, Any]) -> None:
        if kind == "start":
            bars.append(
                stack.enter_context(
                    progress(ctx, "train", " steps", total=cfg.max_steps or cfg.lr_decay_steps, initial=event["step"])
                )
            )
            if event["step"]:
                bars[0].write(f"resumed at step {event['step']}, epoch {event['epoch']}")
        elif kind == "step":
            bars[0].update(1)
        elif kind == "cool_down":
            bars[0].write(
                f"step {event['step']:,}: the cool-down begins, the rate falling to 0 at step "
                f"{event['lr_decay_steps']:,} ({event['steps_per_s']:.2f} steps/s, the rate of the seconds before)"
            )
        elif kind in ("train", "valid"):
            if kind == "train":
                rate = event[f"{task.unit}_per_s"]
                postfix.update(loss=f"{event['loss']:.3f}", **{f"{task.unit}_s": f"{rate:.0f}"})
                if "lr" in event:
                    postfix["lr"] = f"{event['lr']:.3g}"
            elif event["valid_token_ppl"] is not None:
                postfix["valid_ppl"] = f"{event['valid_token_ppl']:.2f}"
                bars[0].write(
                    f"step {event['step']:,}, epoch {event['epoch']}: held-out perplexity "
                    f"{event['valid_token_ppl']:.2f}"
                    + (" (best)" if event["best"] else "")
                    + (_bleu_says(event) if "valid_bleu" in event else "")
                )
            bars[0].set_postfix(", ".join(f"{k}={v}" for k, v in postfix.items()))

    stack = contextlib.ExitStack()
    try:
        with stack, deferred_signals() as caught:
            return fit(
                task,
                cfg,
                model_out,
                device=device,
                group=group,
                resume=resume,
                log_path=log_path,
                report=report,
                stop=lambda: caught[0] if caught else None,
            )
    except TrainingError as e:
        raise UserError(str(e), e.exit_code) from e
    except Interrupted as e:
        raise UserError(
            f"interrupted at step {e.step}; the state is saved in {e.last_path}: run "
            "the same command with --resume to continue",
            e.exit_code,
        ) from e


#: The options that lower the products' precision, and the settings they set.
_REDUCED_PRECISION = {"--bf16": "bf16", "--bf16-steps": "bf16_steps", "--bf16-output": "bf16_output"}


def _precision_says(cfg: TrainConfig) -> str:
    """The summary line's note of the products' precision: "" for float32."""
    return "" if cfg.precision == "float32" else f" ({cfg.precision})"


def _bleu_says(event: dict[str, Any]) -> str:
    return f", greedy BLEU {event['valid_bleu']:.2f} ({event['valid_bleu_pairs']:,} pairs)"


def _network_says(arch: str, options: ArchConfig | None, cell: str) -> str:
    """What the summary line says of the network: its cells, and its family's layers."""
    if options is None:
        return f", {cell} GRU"
    if options.heads:
        return f", {arch} ({options.layers} layers, {options.heads} heads)"
    cells = f", {cell} GRU" if options.cell_type == "gru" else ", LSTM"
    return f"{cells}, {arch} ({options.layers} layers, {options.attention} attention)"


def run_training(
    ctx: click.Context,
    *,
    inputs: tuple[str, ...],
    load: Callable[[], tuple[PairSet, str]],
    model_out: str,
    trained_on: str,
    direction: str = "forward",
    right_to_left: bool = False,
    valid_bleu: int = 0,
    preset: str,
    arch: str,
    vocab_size: int | None,
    units: str,
    subwords: int | None,
    cell: str,
    summary: str,
    device: str,
    resume: bool,
    log_path: str | None,
    source_lang: str | None,
    target_lang: str | None,
    **options: Any,
) -> None:
    """Train and report. ``load()`` reads the data: (the pairs, "what was read" for the summary
    line); ``inputs`` are the files it reads (never overwritten by an output)."""
    sizes = {k: options.pop(k) for k in _SIZES}
    try:
        check_units(units, ctx.get_parameter_source("units") not in _DEFAULTS, subwords)
        given = [k for k in RECURRENT_MODEL_OPTIONS if ctx.get_parameter_source(k) not in _DEFAULTS]
        arch_options = arch_config(arch, model_options=given, **{k: options.pop(k) for k in _ARCH})
    except ValueError as e:
        raise UserError(str(e)) from e
    unused = [f"--{k.replace('_', '-')}" for k in unused_sizes(arch_options) if sizes.get(k) is not None]
    if unused:
        raise UserError(
            f"{' and '.join(unused)}: not a size of the {arch} (it has no maxout readout, and its output "
            "matrix is the target embedding); leave it out"
        )
    problem = sizes_problem(preset_sizes(preset, **sizes)[1]["embed_dim"], arch_options)
    if problem:
        raise UserError(problem)
    if options.get("bf16_steps") and (arch_options is None or arch_options.heads):
        raise UserError(BF16_STEPS_NETWORKS)  # before the data is read
    if options.get("bf16_output") and arch_options is None:
        raise UserError(BF16_OUTPUT_NETWORKS)
    loop = loop_config(options)
    cfg = TrainConfig(loop=loop, **options)
    group, dev = join_group(ctx, device)
    reduced = [flag for flag, on in _REDUCED_PRECISION.items() if getattr(cfg, on)]
    if reduced and dev.type == "cpu":
        warning = cpu_features().bf16_warning()
        if warning:
            warn(f"{' and '.join(reduced)}: {warning}")
    if cfg.optimizer == "adadelta" and cfg.optimizer_kernel == "compiled" and dev.type == "cpu":
        problem = adadelta_loop.problem()  # builds the loop (under a second, once per machine)
        if problem:
            warn(f"--optimizer-kernel compiled: the loop cannot be built here ({problem}); Adadelta runs chunked")
    rates = (arch_options.dropout, arch_options.embedding_dropout) if arch_options is not None else ()
    if cfg.dropout_kernel == "compiled" and dev.type == "cpu" and any(rates):
        problem = dropout_masks.problem()
        if problem:
            warn(f"--dropout-kernel compiled: the loop cannot be built here ({problem}); torch's dropout runs")
    if dev.type == "cpu":
        try:
            products.library()  # a misspelt PHRASE_RESCORER_PRODUCTS refused now, not at the first step
        except ValueError as e:
            raise UserError(str(e)) from e
    family, _ = network_kind({"trained_on": trained_on})
    check_outputs(model_out, inputs, log_path, resume, loop.keep_checkpoints)
    own_outputs(ctx, model_out, group)
    last = resumed_state(model_out, resume, family)
    kept = recorded_units(last) if last is not None and units == "auto" else None
    pairs, read_summary = load()
    try:
        keep_freed_memory()
        choice = choose_units(pairs, units, preset_sizes(preset, vocab_size=vocab_size)[0], subwords, kept)
        say(ctx, choice.says)
        task = phrase_task(
            pairs,
            cfg,
            dev,
            group,
            preset=preset,
            sizes={"vocab_size": vocab_size, **sizes},
            subwords=choice.subwords,
            units=choice.record,
            cell=cell,
            summary=summary,
            arch=arch_options,
            direction=direction,
            languages=(source_lang, target_lang),
            argv=sys.argv,
            trained_on=trained_on,
            right_to_left=right_to_left,
            valid_bleu=valid_bleu,
        )
    except (TrainingError, SubwordError) as e:
        raise UserError(str(e), e.exit_code) from e
    data, config = task.data, task.config
    say(
        ctx,
        f"{read_summary}, {data.unique_pairs:,} unique pairs; training on {len(data.train_idx):,} "
        f"({data.skipped_long:,} longer than {cfg.max_length} tokens skipped), {data.heldout:,} held out "
        f"({len(data.valid_idx):,} scored per validation)",
    )
    vocabularies = "subword vocabularies" if data.subwords else "shortlists"
    optimizer = cfg.optimizer
    if optimizer == "adadelta":
        optimizer += " (" + ("compiled" if isinstance(task.optimizer, CompiledAdadelta) else "chunked") + " update)"
    say(
        ctx,
        f"model: {DIRECTION_SAYS[direction]}{' written right to left' if right_to_left else ''}, "
        f"{preset} preset, {vocabularies} "
        f"{len(data.src_vocab):,}/{len(data.tgt_vocab):,}, "
        + ", ".join(f"{k} {getattr(config, k)}" for k in _SIZES if k not in unused_sizes(arch_options))
        + _network_says(arch, arch_options, cell)
        + f"; {optimizer}, device {dev}"
        + _precision_says(cfg),
    )
    if group.distributed:
        say(
            ctx,
            f"{group.world_size} processes ({group.backend}): global batch "
            + (
                f"{task.global_batch} = {cfg.batch_size} pairs x {group.world_size}"
                if task.global_tokens is None
                else f"of {task.global_tokens:,} padded target tokens = {cfg.batch_tokens:,} x {group.world_size}"
            ),
        )
    reason, p = run_loop(ctx, task, loop, model_out, device=dev, group=group, resume=last or False, log_path=log_path)
    say(ctx, f"stopped ({reason}) after {p.step:,} steps, {p.epoch} full epochs")
    if p.best is not None:
        say(
            ctx,
            f"held-out per-token perplexity ({p.best['pairs']:,} pairs): network "
            f"{p.best['token_ppl']:.2f} (best, step {p.best['step']:,}), unigram baseline "
            f"{task.info['unigram_token_ppl']:.2f}; mean log {DIRECTION_SAYS[direction]} {p.best['mean_logp']:.3f}",
        )
    else:
        say(ctx, "no held-out pairs (--valid-fraction 0 or a tiny table): the last network is kept")
    say(ctx, f"wrote {model_out} (best), {companion_path(model_out, '.last.pt')} (latest, for --resume)")


def join_group(ctx: click.Context, device: str) -> tuple[distributed.Group, torch.device]:
    """This process's group and device (under torchrun: its place among the processes, its GPU),
    closed with the command; only rank 0 reports (progress, summaries), errors still show."""
    try:
        group, dev = distributed.start(resolve_device(device))
    except distributed.DistributedError as e:
        raise UserError(str(e), e.exit_code) from e
    ctx.call_on_close(group.close)
    if not group.is_main:
        ctx.find_root().ensure_object(dict)["quiet"] = True
    return group, dev


@contextlib.contextmanager
def deferred_signals() -> Iterator[list[int]]:
    """SIGINT/SIGTERM/SIGHUP only note themselves, for the training loop to stop between two steps
    with a resumable state; a second signal stops at once."""
    caught: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield caught
        return

    def handler(signum: int, frame: Any) -> None:
        if caught:
            raise KeyboardInterrupt if signum == signal.SIGINT else Terminated(signum)
        caught.append(signum)

    previous = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    try:
        yield caught
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
