"""``train``: fit the RNN Encoder-Decoder to the unique pairs of a phrase table."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Iterator
from typing import Any

import click

from ..cpu_features import cpu_features
from ..data.pairs import load_pairs
from ..data.subwords import SubwordError
from ..errors import EXIT_OS
from ..model.architectures import ARCH_NAMES, arch_config
from ..model.attention import ATTENTIONS
from ..model.cells import CELL_TYPES
from ..model.decoders import ATTENTION_FROM
from ..model.encoder_decoder import CELLS, PRESETS, SUMMARIES, ModelConfig
from ..output import check_distinct_paths
from ..parallel import distributed
from ..training.setup import TrainConfig, TrainingError, companion_path, prepare_data, preset_sizes
from ..training.trainer import Interrupted, Trainer
from . import cli
from .common import Terminated, UserError, device_option, progress, resolve_device, say, threads_option, warn
from .progress import Progress
from .text import language_option

_SIZES = ("embed_dim", "hidden_dim", "maxout_dim", "output_rank")
_ARCH = ("cell_type", "layers", "bidirectional", "residual_from", "attention", "attention_from")
#: The option defaults are the library's: one definition of each training setting.
_DEFAULTS = TrainConfig()
_MODEL_DEFAULTS = ModelConfig()


@cli.command()
@click.argument("table", type=click.Path(allow_dash=True))
@click.argument("model_out", type=click.Path(dir_okay=False))
@click.option("--extract", is_flag=True,
              help="TABLE is a Moses extract file (src ||| tgt ||| alignment), not a phrase table.")
@click.option("--preset", type=click.Choice(sorted(PRESETS)), default="paper", show_default=True,
              help="Model sizes: paper (15k shortlists, 100-d embeddings, 1000 hidden, 500 maxout, "
                   "rank 100) or small (8k, 64, 256, 128, 64). Each size option below overrides.")
@click.option("--vocab-size", type=click.IntRange(4),
              help="Shortlist size per side, special symbols included.")
@click.option("--embed-dim", type=click.IntRange(1), help="Word embedding size (both sides).")
@click.option("--hidden-dim", type=click.IntRange(1), help="GRU units of encoder and decoder.")
@click.option("--maxout-dim", type=click.IntRange(1), help="Readout units after maxout.")
@click.option("--output-rank", type=click.IntRange(1), help="Rank of the factorised output matrix.")
@click.option("--cell", type=click.Choice(CELLS), default=_MODEL_DEFAULTS.cell, show_default=True,
              help="reset_before: the paper's GRU; reset_after: the cuDNN-style variant.")
@click.option("--summary", type=click.Choice(SUMMARIES), default=_MODEL_DEFAULTS.summary, show_default=True,
              help="tanh: c = tanh(V h_N) as in the paper; last: c = h_N as in the original code.")
@click.option("--arch", type=click.Choice(ARCH_NAMES), default="cho2014", show_default=True,
              help="cho2014: the paper's network (Cho et al. 2014); rnnsearch: Bahdanau et al. 2015 "
                   "(bidirectional GRU encoder, additive attention); gnmt: Wu et al. 2016 scaled "
                   "to phrases (LSTM, bidirectional bottom layer, residual from layer 3, attention "
                   "from the bottom decoder layer; 4 layers). The options below override an "
                   "architecture's own (README, \"Architectures\"); cho2014 takes none.")
@click.option("--layers", type=click.IntRange(1), help="Encoder and decoder layers [rnnsearch 1, gnmt 4].")
@click.option("--cell-type", type=click.Choice(CELL_TYPES),
              help="Recurrent cell [rnnsearch gru, gnmt lstm]; --cell picks the GRU variant.")
@click.option("--attention", type=click.Choice(ATTENTIONS),
              help="none (a fixed summary, as cho2014), additive (Bahdanau), dot or general "
                   "(Luong) [additive].")
@click.option("--attention-from", type=click.Choice(ATTENTION_FROM),
              help="Decoder layer whose previous output queries the attention [rnnsearch top, gnmt bottom].")
@click.option("--bidirectional/--unidirectional", default=None,
              help="Bidirectional bottom encoder layer [yes for both].")
@click.option("--residual-from", type=click.IntRange(0),
              help="Residual connections from this layer up, 0 for none [rnnsearch 0, gnmt 3].")
@click.option("--subwords", type=click.IntRange(300),
              help="Split every token into subword units: learn at most this many units per side "
                   "on the table's own phrases (SentencePiece BPE with byte fallback, stored in "
                   "MODEL_OUT); a pair then scores as the sum of log p over its target's units plus "
                   "</s>. The table's tokens are read and written unchanged. No unit is ever "
                   "unknown, so rescore's --unk-feature (WP) column is 0 (written exp(0) = 1) with "
                   "such a model. Replaces --vocab-size.")
@click.option("--max-steps", type=click.IntRange(1), help="Stop after this many steps in all.")
@click.option("--max-time", type=click.FloatRange(0, min_open=True),
              help="Stop after this many seconds of this run.")
@click.option("--epochs", type=click.IntRange(1), help="Stop after this many passes in all.")
@click.option("--batch-size", type=click.IntRange(1), default=_DEFAULTS.batch_size, show_default=True,
              help="Unique pairs per minibatch. Under torchrun, per process: the global batch "
                   "is --batch-size x processes.")
@click.option("--seed", type=int, default=_DEFAULTS.seed, show_default=True,
              help="Initialisation and data order (same seed and data: same model).")
@click.option("--max-length", type=click.IntRange(1), default=_DEFAULTS.max_length, show_default=True,
              help="Pairs with a longer source or target do not train (scoring keeps every pair).")
@click.option("--valid-fraction", type=click.FloatRange(0, 0.5), default=_DEFAULTS.valid_fraction, show_default=True,
              help="Share of the unique pairs held out (chosen by the pair's hash).")
@click.option("--valid-max", type=click.IntRange(0), default=_DEFAULTS.valid_max, show_default=True,
              help="Held-out pairs scored at each validation (the first ones in table order).")
@click.option("--valid-every", type=click.IntRange(1), default=_DEFAULTS.valid_every, show_default=True,
              help="Steps between validations.")
@click.option("--patience", type=click.IntRange(0), default=_DEFAULTS.patience, show_default=True,
              help="Stop after this many validations without improvement (0: never).")
@click.option("--lr", type=click.FloatRange(0, min_open=True), default=_DEFAULTS.lr, show_default=True,
              help="Adadelta learning rate.")
@click.option("--rho", type=click.FloatRange(0, 1, max_open=True), default=_DEFAULTS.rho, show_default=True,
              help="Adadelta decay.")
@click.option("--eps", type=click.FloatRange(0, min_open=True), default=_DEFAULTS.eps, show_default=True,
              help="Adadelta epsilon.")
@click.option("--clip-norm", type=click.FloatRange(0, min_open=True), default=_DEFAULTS.clip_norm,
              show_default=True, help="Gradient-norm clipping threshold.")
@click.option("--init-std", type=click.FloatRange(0, min_open=True), default=_DEFAULTS.init_std, show_default=True,
              help="Standard deviation of the initial weights (the paper's 0.01; small networks trained "
                   "briefly use their source sooner from about 0.05).")
@device_option
@click.option("--bf16", is_flag=True,
              help="Matrix products in bfloat16 (autocast; weights and optimizer stay float32). "
                   "Costs exactness: products keep 8 significant bits (2-3 decimal digits); a small "
                   "network after 400 steps had a 9-12 % higher held-out perplexity than the same "
                   "run in float32 (README, Performance). Fast "
                   "only on GPUs and on CPUs with AMX-BF16 or AVX512-BF16; elsewhere many times "
                   "slower than float32 (a warning says so).")
@threads_option
@click.option("--resume", is_flag=True,
              help="Continue the run saved in MODEL_OUT's .last.pt (same TABLE and settings).")
@click.option("--log", "log_path", type=click.Path(dir_okay=False),
              help="JSON-lines training log  [default: MODEL_OUT without .pt, plus .log]")
@click.option("--log-every", type=click.IntRange(1), default=_DEFAULTS.log_every, show_default=True,
              help="Steps between training-loss log lines.")
@language_option("source", "Language of TABLE's source side (en), recorded in the model file: the analysis "
                           "commands tokenize typed phrases with it.")
@language_option("target", "Language of TABLE's target side (fr), recorded in the model file (--detok).")
@click.pass_context
def train(ctx: click.Context, table: str, model_out: str, extract: bool, preset: str, arch: str,
          vocab_size: int | None, subwords: int | None, cell: str, summary: str, device: str,
          resume: bool, log_path: str | None, source_lang: str | None,
          target_lang: str | None, **options: Any) -> None:
    """Train the RNN Encoder-Decoder on the unique phrase pairs of TABLE (.gz or - for stdin)
    and write the best network by held-out likelihood to MODEL_OUT.

    \b
    Also written: MODEL_OUT without .pt plus .last.pt (the latest state, for --resume) and .log
    (JSON lines). Ctrl-C or SIGTERM saves the latest state; the same command with --resume
    continues exactly where it stopped. Without --max-steps, --max-time or --epochs, training
    runs until --patience validations bring no improvement.

    \b
    On several GPUs or machines, start the same command with torchrun (README, "Beyond one
    machine"), e.g.  torchrun --nproc-per-node 4 -m phrase_rescorer train TABLE MODEL_OUT ...
    """
    sizes = {k: options.pop(k) for k in _SIZES}
    try:
        arch_options = arch_config(arch, **{k: options.pop(k) for k in _ARCH})
    except ValueError as e:
        raise UserError(str(e)) from e
    cfg = TrainConfig(**options)
    try:
        group, dev = distributed.start(resolve_device(device))
    except distributed.DistributedError as e:
        raise UserError(str(e), e.exit_code) from e
    ctx.call_on_close(group.close)
    if not group.is_main:  # one process reports (progress, summaries); errors still show
        ctx.find_root().ensure_object(dict)["quiet"] = True
    if cfg.bf16 and dev.type == "cpu":
        warning = cpu_features().bf16_warning()
        if warning:
            warn(f"--bf16: {warning}")
    directory = os.path.dirname(os.path.abspath(model_out))
    if not os.path.isdir(directory):
        raise UserError(f"{model_out}: output directory does not exist", EXIT_OS)
    last_path = companion_path(model_out, ".last.pt")
    for output in (model_out, last_path, log_path or companion_path(model_out, ".log")):
        check_distinct_paths(table, output)  # the table, overwritten by a model after hours
    if resume and not os.path.exists(last_path):
        raise UserError(f"--resume: no {last_path} to resume from")
    requested_vocab, model_sizes = preset_sizes(preset, vocab_size=vocab_size, **sizes)

    with progress(ctx, "reading", in_bytes=True) as bar:
        pairs = load_pairs(table, extract=extract, on_progress=bar.update_to)
    try:
        data = prepare_data(pairs, requested_vocab, cfg, subwords)
        config = ModelConfig(src_vocab_size=len(data.src_vocab), tgt_vocab_size=len(data.tgt_vocab),
                             cell=cell, summary=summary, **model_sizes)
        trainer = Trainer(data, config, cfg, model_out, dev, argv=sys.argv, group=group,
                          languages=(source_lang, target_lang), arch=arch_options)
        if resume:
            trainer.resume()
    except (TrainingError, SubwordError) as e:
        raise UserError(str(e), e.exit_code) from e
    say(ctx, f"{table}: {pairs.lines_read:,} lines, {data.unique_pairs:,} unique pairs; "
             f"training on {len(data.train_idx):,} ({data.skipped_long:,} longer than "
             f"{cfg.max_length} tokens skipped), {data.heldout:,} held out "
             f"({len(data.valid_idx):,} scored per validation)")
    vocabularies = "subword vocabularies" if data.subwords else "shortlists"
    say(ctx, f"model: {preset} preset, {vocabularies} {len(data.src_vocab):,}/{len(data.tgt_vocab):,}, "
             + ", ".join(f"{k} {v}" for k, v in model_sizes.items())
             + (f", {cell} GRU" if arch_options is None or arch_options.cell_type == "gru" else ", LSTM")
             + ("" if arch_options is None else
                f", {arch} ({arch_options.layers} layers, {arch_options.attention} attention)")
             + f"; device {dev}" + (" (bf16)" if cfg.bf16 else ""))
    if group.distributed:
        say(ctx, f"{group.world_size} processes ({group.backend}): global batch "
                 f"{trainer.global_batch} = {cfg.batch_size} pairs x {group.world_size}")

    bars: list[Progress] = []
    postfix: dict[str, str] = {}

    def report(kind: str, event: dict[str, Any]) -> None:
        if kind == "start":
            bars.append(stack.enter_context(progress(
                ctx, "train", " steps", total=cfg.max_steps, initial=event["step"])))
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
        with stack, _deferred_signals() as caught:
            reason = trainer.fit(log_path or companion_path(model_out, ".log"), append_log=resume,
                                 report=report, stop=lambda: caught[0] if caught else None)
    except Interrupted as e:
        raise UserError(f"interrupted at step {e.step}; the state is saved in {e.last_path}: run "
                        "the same command with --resume to continue",
                        e.exit_code) from e
    p, unigram = trainer.p, trainer.info["unigram_token_ppl"]
    say(ctx, f"stopped ({reason}) after {p.step:,} steps, {p.epoch} full epochs")
    if p.best is not None:
        say(ctx, f"held-out per-token perplexity ({p.best['pairs']:,} pairs): network "
                 f"{p.best['token_ppl']:.2f} (best, step {p.best['step']:,}), unigram baseline "
                 f"{unigram:.2f}; mean log p(target|source) {p.best['mean_logp']:.3f}")
    else:
        say(ctx, "no held-out pairs (--valid-fraction 0 or a tiny table): the last network is kept")
    say(ctx, f"wrote {model_out} (best), {last_path} (latest, for --resume)")


@contextlib.contextmanager
def _deferred_signals() -> Iterator[list[int]]:
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
