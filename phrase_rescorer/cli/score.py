"""``score``: ln p of each line of a text (a CSLM) or of each sentence pair (a translation network)."""

from __future__ import annotations

import click

from ..errors import EXIT_INPUT
from . import cli
from .common import (
    NamedPath,
    UserError,
    device_option,
    max_tokens_option,
    progress,
    resolve_device,
    say,
    threads_option,
    warn,
)


@cli.command("score")
@click.argument("src_path", metavar="SRC", type=click.Path(allow_dash=True, readable=False))
@click.argument("tgt_path", metavar="[TGT]", required=False, type=click.Path(allow_dash=True, readable=False))
@click.option(
    "-m",
    "--model",
    "--models",
    "model_path",
    required=True,
    type=NamedPath(),
    help="A CSLM (train-lm), a translation network (train-nmt) or a phrase network (train).",
)
@click.option(
    "-o",
    "--output",
    "out_path",
    default="-",
    show_default=True,
    type=click.Path(allow_dash=True, readable=False),
    help="The scores, one line per input line (compressed by name: .gz .bz2 .xz .zst).",
)
@click.option(
    "--normalize",
    is_flag=True,
    help="Divide each line's ln p by its word count (the predicted tokens + 1 for </s>): ln p per word.",
)
@click.option(
    "--word-scores",
    is_flag=True,
    help="Follow each score with ' ||| WordScores= ' and the ln p of every predicted token and of "
    "</s> (never normalised; they sum to the line's ln p).",
)
@click.option(
    "--summary",
    type=click.Choice(["cross-entropy", "ce-mean-words", "ce-sum", "perplexity"]),
    is_flag=False,
    flag_value="cross-entropy",
    default=None,
    help="Write only this figure of the whole text instead of the line scores (marian-scorer's): "
    "cross-entropy (-ln p per line, the default of a bare --summary), ce-mean-words (-ln p per "
    "word), ce-sum (-ln p of all), perplexity (per word).",
)
@max_tokens_option
@click.option(
    "--skip-long",
    is_flag=True,
    help="Instead of refusing a line (pair) with more tokens than --max-tokens, do not score it and "
    "write -inf (ln 0) for it, so that the output keeps one line per input line (corpus "
    "filtering); the summaries count the lines scored.",
)
@device_option
@threads_option
@click.pass_context
def score(
    ctx: click.Context,
    src_path: str,
    tgt_path: str | None,
    model_path: str,
    out_path: str,
    normalize: bool,
    word_scores: bool,
    summary: str | None,
    max_tokens: int,
    skip_long: bool,
    device: str,
) -> None:
    """Score every line of SRC (a CSLM) or every line pair of SRC and TGT (a translation
    network) with the network MODEL: one natural-log probability out per line in, in order.

    \b
    a CSLM                    ln p(SRC-line </s>), <s> before the first word; give SRC alone
    a translation network     ln p(TGT-line </s> | SRC-line)
    an inverse network        ln p(SRC-line </s> | TGT-line) (train-nmt --direction inverse:
                              the network reads TGT)
    a phrase network (train)  as a translation network, on phrase pairs or sentences

    These are the numbers `nbest` appends for the same sentence. A line's word count is the
    number of tokens the network predicts (the words of the scored line, or its subword units
    for a subword network) plus one for </s>: --normalize divides by it, --word-scores lists
    that many values, and the closing summary on stderr (lines, words, total ln p, per-word
    perplexity exp(-total/words)) counts it. Words outside the network's shortlist score
    p(<unk>). SRC, TGT and -o may be - (stdin, stdout) and compressed (input by content, output
    by name). Both texts are read and checked (UTF-8, the same number of lines, no line of more
    than --max-tokens tokens unless --skip-long) before the first line is scored.

    \b
    Corpus filtering by dual cross-entropy (docs/scoring.md):
      phrase-rescorer score corpus.en corpus.fr -m nmt.pt --normalize -o fwd.txt
      phrase-rescorer score corpus.en corpus.fr -m nmt-inv.pt --normalize -o inv.txt
    """
    from ..model.files import CheckpointError
    from ..output import check_distinct_paths, check_output_path
    from ..scoring.api import load
    from ..scoring.sentences import score_texts
    from ..scoring.texts import Text, check_aligned

    check_output_path(out_path)
    for given in (src_path, tgt_path):
        if given is not None:
            check_distinct_paths(given, out_path, model=model_path)
    if src_path == "-" and tgt_path == "-":
        raise UserError("only one of SRC and TGT can be standard input")
    if summary is not None and (normalize or word_scores):
        given = "--normalize" if normalize else "--word-scores"
        raise UserError(
            f"--summary writes one figure of the whole text instead of the line scores: {given} has no line to change"
        )
    dev = str(resolve_device(device))
    try:
        model = load(model_path, dev)
    except ValueError as e:
        if isinstance(e, CheckpointError):
            raise
        raise UserError(str(e)) from e
    is_lm = model.is_language_model
    if is_lm and tgt_path is not None:
        raise UserError(f"{model_path} is a language model (CSLM): it scores one text; give SRC alone")
    if not is_lm and tgt_path is None:
        raise UserError(
            f"{model_path} is a translation network: it scores sentence pairs; give SRC and TGT "
            "(line i of TGT the translation of line i of SRC)"
        )
    source = Text(src_path, max_tokens, skip_long=skip_long)
    if source.lines == 0:  # an empty output, or a summary of nothing (nan), would hide the step that failed
        raise UserError(f"{src_path}: empty text: no lines to score", EXIT_INPUT)
    target = Text(tgt_path, max_tokens, skip_long=skip_long) if tgt_path is not None else None
    if target is not None:
        check_aligned(source, target)
    with progress(ctx, "score", " lines", total=source.lines) as bar:
        result = score_texts(
            model.feature,
            source,
            target,
            out_path,
            normalize=normalize,
            word_scores=word_scores,
            summary=summary,
            on_progress=bar.update_to,
            on_warning=warn,
        )
    if result.skipped:
        warn(
            f"{result.skipped:,} line{'s' if result.skipped > 1 else ''} of more than --max-tokens "
            f"{max_tokens:,} tokens not scored: written as -inf (--skip-long)"
        )
    say(
        ctx,
        f"{result.lines:,} lines, {result.words:,} words (tokens + </s>), total ln p "
        f"{result.logp:.4f}, {result.ce_mean_words:.4f} nats per word, perplexity "
        f"{result.perplexity:.4f}; {result.unknown:,} words outside the shortlist; "
        f"{result.seconds:.1f} s",
    )
