"""``translate``: a network's own translation of every sentence of a text (beam search)."""

from __future__ import annotations

import contextlib

import click

from . import cli
from .common import (
    UserError,
    batch_sentences_option,
    device_option,
    max_tokens_option,
    model_option,
    progress,
    resolve_device,
    say,
    threads_option,
    warn,
)


@cli.command("translate")
@click.argument("in_path", metavar="IN", type=click.Path(allow_dash=True, readable=False))
@click.argument("out_path", metavar="OUT", type=click.Path(allow_dash=True, readable=False))
@model_option(
    "models",
    multiple=True,
    help="The trained network (written by phrase-rescorer train-nmt); give -m again for an ensemble of networks "
    "of the same vocabularies, direction and order.",
)
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
@click.option(
    "--n-best-list",
    "-n-best-list",
    "nbest",
    nargs=2,
    type=(click.Path(allow_dash=True), click.IntRange(1)),
    metavar="FILE N",
    default=None,
    help="Also write each sentence's N best distinct candidates of the beam (N <= --beam-size) to FILE "
    "as a Moses n-best list (-n-best-list FILE N as in Moses), the network's log p as the feature "
    "--name: the network's candidates for merge-nbest.",
)
@click.option(
    "--name",
    "feature_name",
    default="NMT0",
    show_default=True,
    help="The feature of the network's log p in the --n-best-list FILE (as nbest names a translation network's).",
)
@batch_sentences_option(
    "Sentences whose beams are stepped together (groups of N lines from the first): fewer, larger "
    "network steps, each beam searched as alone; log p equal to one at a time within float32 rounding."
)
@max_tokens_option
@device_option
@threads_option
@click.pass_context
def translate(
    ctx: click.Context,
    in_path: str,
    out_path: str,
    models: tuple[str, ...],
    beam_size: int,
    alpha: float,
    max_length: int | None,
    nbest: tuple[str, int] | None,
    feature_name: str,
    batch: int,
    max_tokens: int,
    device: str,
) -> None:
    """Translate IN (tokenized text, one sentence a line; - for stdin) with the network alone and
    write OUT (one line per line of IN, compressed by name; - for stdout).

    The stand-alone output of a sentence-level network (train-nmt), to score beside the Moses
    system whose n-best lists it reranks (nbest --source). The network never writes <unk>; a
    subword network's units are joined back into tokens. An inverse network (train-nmt
    --direction inverse) translates the other way. A line of more than --max-tokens tokens is
    refused before the first is translated.

    With --n-best-list FILE N, FILE gets each sentence's N best distinct finished candidates, in
    the beam's final ranking (line i of IN is sentence ID i), as Moses writes its n-best lists:
    `ID ||| hypothesis ||| NMT0= log p ||| score`, log p the network's ln p(hypothesis </s> |
    source) (the value nbest gives the same pair, for a network of words) and score the one the
    beam ranked by (log p divided by GNMT's length normalisation with --length-alpha). An empty
    line of IN gets one empty hypothesis, its value 0 (the network reads no empty source).

    With -m given more than once the networks translate as one ensemble: at every step the beam
    extends the hypotheses by the log of the networks' probabilities averaged, and log p is the
    sum of those scores. The networks must read and write the same vocabularies (and subword
    units) in the same direction and order: the left-to-right networks of one corpus, say.

    With --batch-sentences N, each group of N lines (from the first) is searched together: one
    network step extends the live hypotheses of all of them, each beam kept, shrunk and ended as
    alone. The same candidates in fewer, larger steps; the products round differently in larger
    batches, so log p may differ in its last digits (about 1e-5) and a near-tie may rank the other way.

    \b
    Example:
      phrase-rescorer translate test.en test.nmt.fr -m nmt.pt --beam-size 5 -threads 2
      phrase-rescorer translate test.en test.nmt.fr -m nmt.pt --beam-size 12 -n-best-list test.nmt.nbest 12
      phrase-rescorer translate test.en test.ens.fr -m nmt.pt -m nmt.seed2.pt --beam-size 5 -threads 2
      phrase-rescorer translate test.en test.nmt.fr -m nmt.pt --batch-sentences 20 -threads 2
    """
    from ..analysis.translate import candidate_lines, ensemble_members, translate_nbest
    from ..data.corpus import read_sentences
    from ..data.line_limit import within_limit
    from ..model.checkpoint import load_checkpoint
    from ..model.kinds import phrase_network_warning
    from ..moses.nbest import check_feature_name
    from ..output import AtomicOutput, check_distinct_outputs, check_distinct_paths, check_output_path

    check_output_path(out_path)
    for model in models:
        check_distinct_paths(in_path, out_path, model=model)
    nbest_path, nbest_size = nbest if nbest is not None else (None, 0)
    if nbest_path is not None:
        if nbest_size > beam_size:
            raise UserError(
                f"--n-best-list {nbest_path} {nbest_size}: the beam finishes at most --beam-size "
                f"({beam_size}) candidates; give --beam-size {nbest_size} or more"
            )
        try:
            check_feature_name(feature_name)
        except ValueError as e:
            raise UserError(f"--name: {e}") from e
        if nbest_path == "-" and out_path == "-":
            raise UserError("OUT and --n-best-list are both '-' (stdout): give one of them a file")
        check_output_path(nbest_path)
        for model in models:
            check_distinct_paths(in_path, nbest_path, model=model)
        check_distinct_outputs(nbest_path, (("output", out_path),))
    checkpoints = ensemble_members([load_checkpoint(model, "phrase-rescorer translate -m") for model in models])
    # read whole: a bad line, or one longer than --max-tokens, refused first
    texts = [" ".join(tokens) for tokens in within_limit(in_path, read_sentences(in_path), max_tokens)]
    for model, checkpoint in zip(models, checkpoints, strict=True):
        warning = phrase_network_warning(model, checkpoint.info, "it translates as a phrase model")
        if warning is not None:
            warn(warning)
    dev = resolve_device(device)
    lines = candidates = 0
    with contextlib.ExitStack() as outputs:
        bar = outputs.enter_context(progress(ctx, "translate", " sentences", total=len(texts)))
        out = outputs.enter_context(AtomicOutput(out_path))
        nbest_out = None if nbest_path is None else outputs.enter_context(AtomicOutput(nbest_path))
        for found in translate_nbest(
            checkpoints,
            texts,
            beam_size=beam_size,
            alpha=alpha,
            max_length=max_length,
            device=dev,
            on_sentence=bar.update_to,
            name=in_path,
            batch=batch,
        ):
            out.write((found[0].text if found else "").encode("utf-8") + b"\n")
            if nbest_out is not None:
                written = candidate_lines(lines, found, nbest_size, feature_name)
                nbest_out.write(b"".join(written))
                candidates += len(written)
            lines += 1
    networks = models[0] if len(models) == 1 else f"the ensemble of {', '.join(models)}"
    said = f"{in_path}: {lines:,} sentences translated with {networks} (beam {beam_size}, alpha {alpha:g})"
    if nbest_path is not None:
        said += f"; {candidates:,} candidates in {nbest_path}"
    say(ctx, said)
