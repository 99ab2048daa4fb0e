"""One training run from the command line, for every training command (``train``,
``train-nmt``): the options checked, the data prepared, progress and summaries, signals turned
into a resumable stop. The commands differ only in what they read. ``train-lm`` shares the
process group and the signal handling."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

import click
import torch

from ..allocator import keep_freed_memory
from ..cpu_features import cpu_features
from ..data.pairs import PairSet
from ..data.subwords import SubwordError
from ..errors import EXIT_OS
from ..model.architectures import arch_config
from ..model.cho2014 import ModelConfig
from ..output import check_distinct_paths, check_not_an_input
from ..parallel import distributed
from ..training import adadelta_loop, products
from ..training.optim import CompiledAdadelta
from ..training.run_record import Interrupted
from ..training.run_settings import TrainConfig, TrainingError, companion_path, prepare_data, preset_sizes
from ..training.trainer import Trainer
from .common import Terminated, UserError, progress, resolve_device, say, warn
from .progress import Progress
from .training_options import ARCH as _ARCH
from .training_options import SIZES as _SIZES

#: What a network of each direction scores, in the data's own names of its sides.
_DIRECTION_SAYS = {"forward": "p(target|source)", "inverse": "p(source|target)"}


def _optimizer_says(trainer: Trainer) -> str:
    """e.g. "adadelta (compiled update)", for the model summary line."""
    if trainer.cfg.optimizer != "adadelta":
        return trainer.cfg.optimizer
    return "adadelta (" + ("compiled" if isinstance(trainer.opt, CompiledAdadelta) else "chunked") + " update)"


def run_training(
    ctx: click.Context,
    *,
    inputs: tuple[str, ...],
    load: Callable[[], tuple[PairSet, str]],
    model_out: str,
    trained_on: str,
    direction: str = "forward",
    preset: str,
    arch: str,
    vocab_size: int | None,
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
    line); ``inputs`` are the files it reads (never overwritten by an output). ``direction``
    inverse trains on the pairs read the other way (``PairSet.swapped``), with the languages
    swapped as well: a model file's source language is the one its network reads."""
    sizes = {k: options.pop(k) for k in _SIZES}
    try:
        arch_options = arch_config(arch, **{k: options.pop(k) for k in _ARCH})
    except ValueError as e:
        raise UserError(str(e)) from e
    cfg = TrainConfig(**options)
    group, dev = join_group(ctx, device)
    if cfg.bf16 and dev.type == "cpu":
        warning = cpu_features().bf16_warning()
        if warning:
            warn(f"--bf16: {warning}")
    if cfg.optimizer == "adadelta" and cfg.optimizer_kernel == "compiled" and dev.type == "cpu":
        problem = adadelta_loop.problem()  # builds the loop (under a second, once per machine)
        if problem:
            warn(f"--optimizer-kernel compiled: the loop cannot be built here ({problem}); Adadelta runs chunked")
    if dev.type == "cpu":
        try:
            products.library()  # a misspelt PHRASE_RESCORER_PRODUCTS refused now, not at the first step
        except ValueError as e:
            raise UserError(str(e)) from e
    directory = os.path.dirname(os.path.abspath(model_out))
    if not os.path.isdir(directory):
        raise UserError(f"{model_out}: output directory does not exist", EXIT_OS)
    last_path = companion_path(model_out, ".last.pt")
    for output in (model_out, last_path, log_path or companion_path(model_out, ".log")):
        for given in inputs:  # an input, overwritten by a model after hours
            check_distinct_paths(given, output)
    check_not_an_input(log_path or "", (("model file", model_out), ("saved state", last_path)))  # --log m.pt
    if resume and not os.path.exists(last_path):
        raise UserError(f"--resume: no {last_path} to resume from")
    requested_vocab, model_sizes = preset_sizes(preset, vocab_size=vocab_size, **sizes)

    inverse = direction == "inverse"
    if inverse:  # the network reads the target side: its own source language is the target's
        source_lang, target_lang = target_lang, source_lang
    pairs, read_summary = load()
    if inverse:
        pairs = pairs.swapped()
    try:
        data = prepare_data(pairs, requested_vocab, cfg, subwords)
        config = ModelConfig(
            src_vocab_size=len(data.src_vocab),
            tgt_vocab_size=len(data.tgt_vocab),
            cell=cell,
            summary=summary,
            **model_sizes,
        )
        keep_freed_memory()
        trainer = Trainer(
            data,
            config,
            cfg,
            model_out,
            dev,
            argv=sys.argv,
            group=group,
            languages=(source_lang, target_lang),
            arch=arch_options,
            record={"trained_on": trained_on, "direction": direction},
        )
        if resume:
            trainer.resume()
    except (TrainingError, SubwordError) as e:
        raise UserError(str(e), e.exit_code) from e
    say(
        ctx,
        f"{read_summary}, {data.unique_pairs:,} unique pairs; training on {len(data.train_idx):,} "
        f"({data.skipped_long:,} longer than {cfg.max_length} tokens skipped), {data.heldout:,} held out "
        f"({len(data.valid_idx):,} scored per validation)",
    )
    vocabularies = "subword vocabularies" if data.subwords else "shortlists"
    say(
        ctx,
        f"model: {_DIRECTION_SAYS[direction]}, {preset} preset, {vocabularies} "
        f"{len(data.src_vocab):,}/{len(data.tgt_vocab):,}, "
        + ", ".join(f"{k} {v}" for k, v in model_sizes.items())
        + (f", {cell} GRU" if arch_options is None or arch_options.cell_type == "gru" else ", LSTM")
        + (
            ""
            if arch_options is None
            else f", {arch} ({arch_options.layers} layers, {arch_options.attention} attention)"
        )
        + f"; {_optimizer_says(trainer)}, device {dev}"
        + (" (bf16)" if cfg.bf16 else ""),
    )
    if group.distributed:
        say(
            ctx,
            f"{group.world_size} processes ({group.backend}): global batch "
            f"{trainer.global_batch} = {cfg.batch_size} pairs x {group.world_size}",
        )

    bars: list[Progress] = []
    postfix: dict[str, str] = {}

    def report(kind: str, event: dict[str, Any]) -> None:
        if kind == "start":
            bars.append(
                stack.enter_context(progress(ctx, "train", " steps", total=cfg.max_steps, initial=event["step"]))
            )
            if event["step"]:
                bars[0].write(f"resumed at step {event['step']}, epoch {event['epoch']}")
        elif kind == "step":
            bars[0].update(1)
        elif kind in ("train", "valid"):
            if kind == "train":
                postfix.update(loss=f"{event['loss']:.3f}", pairs_s=f"{event['pairs_per_s']:.0f}")
            elif event["valid_token_ppl"] is not None:
                postfix["valid_ppl"] = f"{event['valid_token_ppl']:.2f}"
            bars[0].set_postfix(", ".join(f"{k}={v}" for k, v in postfix.items()))

    stack = contextlib.ExitStack()
    try:
        with stack, deferred_signals() as caught:
            reason = trainer.fit(
                log_path or companion_path(model_out, ".log"),
                append_log=resume,
                report=report,
                stop=lambda: caught[0] if caught else None,
            )
    except Interrupted as e:
        raise UserError(
            f"interrupted at step {e.step}; the state is saved in {e.last_path}: run "
            "the same command with --resume to continue",
            e.exit_code,
        ) from e
    p, unigram = trainer.p, trainer.info["unigram_token_ppl"]
    say(ctx, f"stopped ({reason}) after {p.step:,} steps, {p.epoch} full epochs")
    if p.best is not None:
        say(
            ctx,
            f"held-out per-token perplexity ({p.best['pairs']:,} pairs): network "
            f"{p.best['token_ppl']:.2f} (best, step {p.best['step']:,}), unigram baseline "
            f"{unigram:.2f}; mean log {_DIRECTION_SAYS[direction]} {p.best['mean_logp']:.3f}",
        )
    else:
        say(ctx, "no held-out pairs (--valid-fraction 0 or a tiny table): the last network is kept")
    say(ctx, f"wrote {model_out} (best), {last_path} (latest, for --resume)")


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
