"""``translate``: a network's own translation of every sentence of a text (beam search)."""

from __future__ import annotations

import click

from . import cli
from .common import device_option, model_option, progress, resolve_device, say, threads_option, warn


@cli.command("translate")
@click.argument("in_path", metavar="IN", type=click.Path(allow_dash=True, readable=False))
@click.argument("out_path", metavar="OUT", type=click.Path(allow_dash=True, readable=False))
@model_option(help="The trained network (written by phrase-rescorer train-nmt).")
@click.option(
    "--beam-size", "--beam", "beam_size", type=click.IntRange(1), default=5, show_default=True, help="Beam width."
)
@click.option(
    "--length-alpha",
    "--alpha",
    "alpha",
    type=click.FloatRange(0),
    default=0.6,
    show_default=True,
    help="GNMT's length normalisation ((5 + length) / 6) ^ alpha of the final ranking; 0 ranks "
    "by log p alone, which favours short output.",
)
@click.option("--max-length", type=click.IntRange(1), help="Longest output, in units  [default: 2 x source + 10]")
@device_option
@threads_option
@click.pass_context
def translate(
    ctx: click.Context,
    in_path: str,
    out_path: str,
    model: str,
    beam_size: int,
    alpha: float,
    max_length: int | None,
    device: str,
) -> None:
    """Translate IN (tokenized text, one sentence a line; - for stdin) with the network alone and
    write OUT (one line per line of IN, compressed by name; - for stdout).

    The stand-alone output of a sentence-level network (train-nmt), to score beside the Moses
    system whose n-best lists it reranks (nbest --source). The network never writes <unk>; a
    subword network's units are joined back into tokens. An inverse network (train-nmt
    --direction inverse) translates the other way.

    \b
    Example:
      phrase-rescorer translate test.en test.nmt.fr -m nmt.pt --beam-size 5 -threads 2
    """
    from ..analysis.translate import translate as run
    from ..data.corpus import read_sentences
    from ..model.checkpoint import load_checkpoint
    from ..model.kinds import phrase_network_warning
    from ..output import AtomicOutput, check_distinct_paths, check_output_path

    check_output_path(out_path)
    check_distinct_paths(in_path, out_path, model=model)
    checkpoint = load_checkpoint(model)
    texts = [" ".join(tokens) for tokens in read_sentences(in_path)]  # read whole: a bad line refused first
    warning = phrase_network_warning(model, checkpoint.info, "it translates as a phrase model")
    if warning is not None:
        warn(warning)
    dev = resolve_device(device)
    lines = 0
    with progress(ctx, "translate", " sentences", total=len(texts)) as bar, AtomicOutput(out_path) as out:
        for text in run(
            checkpoint,
            texts,
            beam_size=beam_size,
            alpha=alpha,
            max_length=max_length,
            device=dev,
            on_sentence=bar.update_to,
            name=in_path,
        ):
            out.write(text.encode("utf-8") + b"\n")
            lines += 1
    say(ctx, f"{in_path}: {lines:,} sentences translated with {model} (beam {beam_size}, alpha {alpha:g})")
