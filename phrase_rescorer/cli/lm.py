"""``train-lm``: the paper's CSLM, a feed-forward n-gram LM of the target language."""

from __future__ import annotations

import sys
from typing import Any

import click

from ..allocator import keep_freed_memory
from ..data.corpus import read_sentences
from ..lm.network import PRESETS
from ..lm.task import LMTask, LMTrainConfig, prepare_lm_data
from ..training.run_files import companion_path
from . import cli
from .common import InputPath, NamedPath, say
from .lm_report import kenlm_perplexities, report_training
from .loop_options import loop_config, loop_options
from .training_outputs import check_outputs, own_outputs, resumed_state
from .training_run import join_group, run_loop

LM_DEFAULTS = LMTrainConfig()


def _loop_options(f: Any) -> Any:
    for option in reversed(loop_options(LM_DEFAULTS.loop, "TEXT, --valid")):
        f = option(f)
    return f


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
@click.argument("model_out", type=NamedPath(stream="standard output"))
@click.option(
    "--preset",
    "preset_name",
    type=click.Choice(sorted(PRESETS)),
    default="small",
    show_default=True,
    help="paper: the paper's 7-gram CSLM (512-d embeddings, rectified layers 1536 and 1024); "
    "small: a 5-gram with 256-d embeddings, layers 1024 and 512, dropout 0.2 (how long each "
    "trains: docs/results.md). The options below override.",
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
    default=LM_DEFAULTS.batch_size,
    show_default=True,
    help="n-grams per step; under torchrun, per process (a step then takes this x processes).",
)
@click.option("--language", help="The text's language (recorded in the model file).")
@click.option(
    "--kenlm",
    "kenlm_path",
    type=InputPath(dir_okay=False),  # refused before training, not after it
    help="Also report this KenLM model's perplexity on the --valid and --test texts (ARPA or "
    "binary; through bin/query of --moses / $MOSES), with the same OOV convention. Not on the "
    "1% held out of TEXT: the n-gram LM was estimated on TEXT, those sentences included.",
)
@click.option("--moses", "moses_dir", type=click.Path(file_okay=False), help="Moses directory [default: $MOSES].")
@_loop_options
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
    KenLM's "excluding OOVs" does; with --kenlm both models are measured on the --valid and
    --test texts.

    \b
    Writes MODEL_OUT (the best network by held-out perplexity), MODEL_OUT's .last.pt (the
    latest state; the same command with --resume continues it) and a JSON-lines log.

    \b
    Example:
      phrase-rescorer train-lm corpus/train.tok.lc.fr cslm.pt --valid corpus/val.tok.lc.fr \\
          --kenlm lm.fr.5gram.arpa.gz --max-time 1200

    On several GPUs or machines, start the same command with torchrun (docs/distributed.md).
    """
    loop = loop_config(kw)
    check_outputs(model_out, (text, valid_path, test_path, kenlm_path), log_path, resume)
    group, dev = join_group(ctx, device)
    own_outputs(ctx, model_out, group)
    last = resumed_state(model_out, resume, "cslm")
    test_sentences = None if test_path is None else list(read_sentences(test_path))
    kenlm = None  # KenLM's figures, measured now: a file that is not an LM is refused before training
    if kenlm_path is not None:
        kenlm = (
            kenlm_path,
            kenlm_perplexities(moses_dir, kenlm_path, {"held-out": valid_path, str(test_path): test_path}),
        )
    data = prepare_lm_data(
        text,
        valid_path,
        kw.pop("vocab_size"),
        preset_name,
        **{k: kw.pop(k) for k in ("order", "embed_dim", "hidden", "dropout")},
    )
    settings = LMTrainConfig(loop=loop, **kw)
    config, train, valid = data.config, data.train, data.valid
    say(
        ctx,
        f"{text}: {data.train_sentences:,} sentences, {len(train[1]):,} predicted tokens; held out "
        f"{len(data.valid_sentences):,} sentences, {len(valid[1]):,} tokens; shortlist {len(data.vocab):,}",
    )
    say(
        ctx,
        f"CSLM: {config.order}-gram, embeddings {config.embed_dim}, layers "
        f"{','.join(map(str, config.hidden))}, dropout {config.dropout}; device {dev}"
        + (
            f"; {group.world_size} processes ({group.backend}), "
            f"{settings.batch_size * group.world_size} n-grams per step"
            if group.distributed
            else ""
        ),
    )
    info = {
        "argv": sys.argv[1:],
        "seed": loop.seed,
        "language": language,
        "preset": preset_name,
        "train_sentences": data.train_sentences,
    }
    keep_freed_memory()
    task = LMTask(data, settings, dev, info, group)
    reason, p = run_loop(ctx, task, loop, model_out, device=dev, group=group, resume=last or False, log_path=log_path)
    if group.is_main:  # rank 0 reports and measures the test text
        report_training(
            ctx,
            model_out,
            reason,
            p,
            test=(test_path, test_sentences),
            kenlm=kenlm,
            log_path=log_path or companion_path(model_out, ".log"),
        )
