"""``train-lm``: the paper's CSLM, a feed-forward n-gram LM of the target language."""

from __future__ import annotations

import contextlib
import os
import sys
from typing import Any

import click

from ..allocator import keep_freed_memory
from ..errors import EXIT_INPUT
from ..lm.network import PRESETS, preset
from . import cli
from .common import UserError, device_option, progress, say, threads_option
from .progress import Progress
from .training_run import deferred_signals, join_group


def _hidden(ctx: click.Context, param: click.Parameter, value: str | None) -> tuple[int, ...] | None:
    if value is None:
        return None
    try:
        sizes = tuple(int(v) for v in value.split(","))
    except ValueError:
        raise click.BadParameter("a comma-separated list of layer sizes, e.g. 1536,1024") from None
    if not sizes or min(sizes) < 1:
        raise click.BadParameter("layer sizes must be positive")
    return sizes


@cli.command("train-lm")
@click.argument("text", type=click.Path(allow_dash=True))
@click.argument("model_out", type=click.Path(dir_okay=False))
@click.option(
    "--preset",
    "preset_name",
    type=click.Choice(sorted(PRESETS)),
    default="small",
    show_default=True,
    help="paper: the paper's 7-gram CSLM (512-d embeddings, rectified layers 1536 and 1024); "
    "small: a 5-gram with 256-d embeddings, layers 1024 and 512, dropout 0.2 (about 20 "
    "minutes to its best held-out perplexity on 400k words and two cores). The options "
    "below override.",
)
@click.option("--order", type=click.IntRange(2), help="n of the n-gram model (n - 1 context words).")
@click.option("--embed-dim", type=click.IntRange(1), help="Embedding size of each context word.")
@click.option("--hidden", callback=_hidden, help="Rectified layer sizes, comma-separated (e.g. 1536,1024).")
@click.option("--dropout", type=click.FloatRange(0, 1, max_open=True), help="Dropout after each layer.")
@click.option(
    "--vocab-size",
    type=click.IntRange(5),
    default=15000,
    show_default=True,
    help="Shortlist size, the 4 special symbols included; other words are <unk>.",
)
@click.option(
    "--valid",
    "valid_path",
    type=click.Path(allow_dash=False),
    help="Held-out text (e.g. the dev set's reference) [default: 1% of TEXT's sentences, "
    "chosen by a hash of the sentence, left out of training].",
)
@click.option(
    "--test",
    "test_path",
    type=click.Path(allow_dash=False),
    help="After training, also report the best network's perplexity on this text (e.g. the "
    "test set's reference), next to KenLM's with --kenlm.",
)
@click.option(
    "--batch-size",
    type=click.IntRange(1),
    default=256,
    show_default=True,
    help="n-grams per step; under torchrun, per process (a step then takes this x processes).",
)
@click.option(
    "--lr", type=click.FloatRange(0, min_open=True), default=1e-3, show_default=True, help="Adam's learning rate."
)
@click.option(
    "--patience",
    type=click.IntRange(1),
    default=3,
    show_default=True,
    help="Stop after this many epochs without a better held-out perplexity (the paper: 10).",
)
@click.option("--max-epochs", type=click.IntRange(1), help="Stop after this many epochs.")
@click.option("--max-steps", type=click.IntRange(1), help="Stop after this many steps.")
@click.option("--max-time", type=click.FloatRange(0, min_open=True), help="Stop after this many seconds.")
@click.option(
    "--valid-every",
    type=click.IntRange(1),
    default=1000,
    show_default=True,
    help="Also measure (and save the latest state) every N steps, not only after each epoch.",
)
@click.option("--seed", type=int, default=1, show_default=True)
@click.option("--resume", is_flag=True, help="Continue the run saved in MODEL_OUT's .last.pt.")
@click.option(
    "--log", "log_path", type=click.Path(dir_okay=False), help="JSON-lines training log [default: MODEL_OUT with .log]."
)
@click.option("--language", help="The text's language (recorded in the model file).")
@click.option(
    "--kenlm",
    "kenlm_path",
    type=click.Path(exists=True, dir_okay=False),  # refused before training, not after it
    help="Also report this KenLM model's perplexity on the held-out text (ARPA or binary; "
    "through bin/query of --moses / $MOSES), with the same OOV convention.",
)
@click.option("--moses", "moses_dir", type=click.Path(file_okay=False), help="Moses directory [default: $MOSES].")
@device_option
@threads_option
@click.pass_context
def train_lm(
    ctx: click.Context,
    text: str,
    model_out: str,
    preset_name: str,
    valid_path: str | None,
    test_path: str | None,
    resume: bool,
    log_path: str | None,
    language: str | None,
    kenlm_path: str | None,
    moses_dir: str | None,
    device: str,
    **kw: Any,
) -> None:
    """Train the CSLM on TEXT (tokenized target-language text, one sentence a line: the text
    the n-gram LM was built from; plain, .gz or -) and write MODEL_OUT.

    Sentence boundaries are an n-gram LM's: <s> before the first word, </s> predicted at the
    end. The held-out perplexity counts </s> and leaves out words outside the shortlist, as
    KenLM's "excluding OOVs" does; with --kenlm both models are measured on the same text.

    \b
    Writes MODEL_OUT (the best network by held-out perplexity), MODEL_OUT's .last.pt (the
    latest state; the same command with --resume continues it) and a JSON-lines log.

    \b
    Example:
      phrase-rescorer train-lm corpus/train.tok.lc.fr cslm.pt --valid corpus/dev.tok.lc.fr \\
          --kenlm lm/fr.5gram.blm --max-time 1200

    On several GPUs or machines, start the same command with torchrun (docs/distributed.md).
    """
    from ..data.corpus import read_sentences
    from ..lm.text import build_vocabulary, split_held_out, text_ngrams
    from ..lm.trainer import LMTrainConfig, LMTrainer, LMTrainingError, last_path
    from ..moses.toolkit import MosesNotFound, find_moses
    from ..output import check_distinct_paths, check_not_an_input, check_output_path
    from ..training.log import EventLog
    from ..training.run_record import Interrupted
    from .lm_report import report_training

    for output in (model_out, last_path(model_out), log_path or _companion(model_out, ".log")):
        check_output_path(output, by_name=False)  # refused now, not at the first save
        for given in (text, valid_path, test_path):
            if given is not None:
                check_distinct_paths(given, output)  # a text, overwritten by a model after hours
    check_not_an_input(log_path or "", (("model file", model_out), ("saved state", last_path(model_out))))
    group, dev = join_group(ctx, device)
    query = None
    if kenlm_path is not None:
        try:
            query = find_moses(moses_dir, needs=("bin/query",)).path("bin/query")
        except MosesNotFound as e:
            raise UserError(f"--kenlm: {e}", e.exit_code) from e
    sentences = list(read_sentences(text))
    if valid_path is not None:
        train_sentences, valid_sentences = sentences, list(read_sentences(valid_path))
    else:
        train_sentences, valid_sentences = split_held_out(sentences)
    if not train_sentences or not valid_sentences:
        raise UserError(f"{text}: too few sentences to train and hold some out", EXIT_INPUT)
    vocab = build_vocabulary(train_sentences, kw["vocab_size"])
    config = preset(
        preset_name,
        order=kw["order"],
        embed_dim=kw["embed_dim"],
        hidden=kw["hidden"],
        dropout=kw["dropout"],
        vocab_size=len(vocab),
    )
    train = text_ngrams(config.order, vocab, train_sentences)
    valid = text_ngrams(config.order, vocab, valid_sentences)
    settings = LMTrainConfig(
        batch_size=kw["batch_size"],
        lr=kw["lr"],
        max_epochs=kw["max_epochs"],
        max_steps=kw["max_steps"],
        max_time=kw["max_time"],
        patience=kw["patience"],
        valid_every=kw["valid_every"],
        seed=kw["seed"],
    )
    say(
        ctx,
        f"{text}: {len(train_sentences):,} sentences, {len(train[1]):,} predicted tokens; held out "
        f"{len(valid_sentences):,} sentences, {len(valid[1]):,} tokens; shortlist {len(vocab):,}",
    )
    say(
        ctx,
        f"CSLM: {config.order}-gram, embeddings {config.embed_dim}, layers "
        f"{','.join(map(str, config.hidden))}, dropout {config.dropout}; device {dev}"
        + (
            f"; {group.world_size} processes ({group.backend}), {kw['batch_size'] * group.world_size} n-grams per step"
            if group.distributed
            else ""
        ),
    )
    info = {
        "argv": sys.argv[1:],
        "seed": kw["seed"],
        "language": language,
        "preset": preset_name,
        "train_sentences": len(train_sentences),
    }
    bars: list[Progress] = []
    with contextlib.ExitStack() as stack:
        log_file = log_path or _companion(model_out, ".log")
        log = stack.enter_context(EventLog(log_file if group.is_main else os.devnull, append=resume))
        caught = stack.enter_context(deferred_signals())
        try:
            keep_freed_memory()
            trainer = LMTrainer(
                model_out,
                config,
                vocab,
                train,
                valid,
                settings,
                info=info,
                log=log,
                resume=resume,
                on_progress=lambda text: bars[0].write(text),
                stop=lambda: caught[0] if caught else None,
                on_step=lambda step, loss, rate: _show_step(bars[0], step, loss, rate),
                device=dev,
                group=group,
            )
            bars.append(
                stack.enter_context(
                    progress(ctx, "train-lm", " steps", total=kw["max_steps"], initial=trainer.state.step)
                )
            )
            if resume:
                bars[0].write(f"resumed at step {trainer.state.step:,}, epoch {trainer.state.epoch}")
            log.write(
                {
                    "event": "start",
                    "step": trainer.state.step,
                    "epoch": trainer.state.epoch,
                    "resumed": resume,
                    "train_tokens": len(train[1]),
                    "valid_tokens": len(valid[1]),
                    "argv": sys.argv[1:],
                }
            )
            reason = trainer.run()
            log.write(
                {
                    "event": "end",
                    "step": trainer.state.step,
                    "epoch": trainer.state.epoch,
                    "reason": reason,
                    "elapsed": trainer.state.elapsed,
                }
            )
        except LMTrainingError as e:
            raise UserError(str(e), e.exit_code) from e
        except Interrupted as e:
            raise UserError(
                f"interrupted at step {e.step}; the state is saved in {e.last_path}: run "
                "the same command with --resume to continue",
                e.exit_code,
            ) from e
    if not group.is_main:
        return  # rank 0 reports and measures the test text
    report_training(
        ctx,
        trainer,
        reason,
        valid_sentences=valid_sentences,
        test_path=test_path,
        kenlm=(query, kenlm_path) if query is not None and kenlm_path is not None else None,
    )


def _show_step(bar: Progress, step: int, loss: float, rate: float) -> None:
    bar.update_to(step)
    bar.set_postfix(f"loss={loss:.3f}, ngrams/s={rate:,.0f}")


def _companion(model_out: str, suffix: str) -> str:
    return (model_out[:-3] if model_out.endswith(".pt") else model_out) + suffix
