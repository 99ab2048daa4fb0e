"""``rerank-tune`` and ``rerank``: n-best reranking with Moses' MERT."""

from __future__ import annotations

import os
import shutil
import tempfile

import click

from ..errors import EXIT_INPUT
from . import cli
from .common import UserError, say, threads_value_option


def _toolkit(moses_dir: str | None):  # type: ignore[no-untyped-def]
    from ..moses.toolkit import MosesNotFound, find_moses

    try:
        return find_moses(moses_dir, needs=("bin/extractor", "bin/mert"))
    except MosesNotFound as e:
        raise UserError(str(e), e.exit_code) from e


@cli.command("rerank-tune")
@click.argument("nbest_path", metavar="NBEST", type=click.Path(dir_okay=False, allow_dash=True))
@click.argument("reference", metavar="REF", type=click.Path(exists=True, dir_okay=False))
@click.argument("weights_out", metavar="WEIGHTS", type=click.Path(dir_okay=False))
@click.option(
    "--init",
    "init_path",
    type=click.Path(exists=True, dir_okay=False),
    help="Start weights: the tuned moses.ini that decoded NBEST (its [weight] section), or a "
    "weights file; features it lacks (the added ones) start at 0 [default: all 0].",
)
@click.option("--moses", "moses_dir", type=click.Path(file_okay=False), help="Moses directory [default: $MOSES].")
@click.option(
    "--work-dir",
    type=click.Path(file_okay=False),
    help="Keep extractor's and mert's files here [default: a temporary directory, removed].",
)
@click.option(
    "--restarts",
    type=click.IntRange(0),
    default=20,
    show_default=True,
    help="mert's random restarts (-n, as mert-moses.pl's --random-restarts).",
)
@click.option("--seed", type=int, default=1, show_default=True, help="mert's random seed (-r).")
@threads_value_option("mert's --threads: a number or 'all'  [default: 1, or OMP_NUM_THREADS when set].")
@click.pass_context
def rerank_tune(
    ctx: click.Context,
    nbest_path: str,
    reference: str,
    weights_out: str,
    init_path: str | None,
    moses_dir: str | None,
    work_dir: str | None,
    restarts: int,
    seed: int,
    threads: int,
) -> None:
    """Tune the weights of every dense feature of the n-best list NBEST (the dev set's, with the
    added features, e.g. from phrase-rescorer nbest) for BLEU against REF, with Moses' own
    bin/extractor and bin/mert (Powell's search, random restarts, as mert-moses.pl runs them);
    write them to WEIGHTS, one "Name= w1 w2 ..." line per feature.

    Start from the decoder's tuned weights (--init moses.ini), the new features at 0: the
    search then starts at the decoder's 1-best. Then apply WEIGHTS to other lists with
    phrase-rescorer rerank.

    \b
    Example:
      phrase-rescorer rerank-tune dev.cslm.nbest dev.fr rerank.weights --init moses.ini
      phrase-rescorer rerank test.cslm.nbest rerank.weights test.reranked.fr
    """
    from ..experiment.bleu import read_lines, tokenized_bleu
    from ..output import check_output_path
    from ..reranking.choose import output_lines
    from ..reranking.mert import RerankError, tune
    from ..reranking.nbest_features import read_matrix
    from ..reranking.weights import WeightsError, read_weights_file, vector, write_weights_file

    toolkit = _toolkit(moses_dir)
    check_output_path(weights_out)
    keep = work_dir is not None
    if work_dir is not None:
        os.makedirs(work_dir, exist_ok=True)
    directory = work_dir or tempfile.mkdtemp(prefix="rerank-")
    try:
        copy = os.path.join(directory, "nbest.txt")  # what extractor reads: plain text, any input
        matrix = read_matrix(nbest_path, copy_to=copy)
        refs = read_lines(reference)
        try:
            start = vector(
                read_weights_file(init_path) if init_path else {},
                matrix.layout,
                missing=0.0,
                source=init_path or "start",
            )
        except WeightsError as e:
            raise UserError(str(e), e.exit_code) from e
        try:
            before = tokenized_bleu(output_lines(matrix, start, len(refs)), refs)
        except ValueError as e:  # a sentence ID beyond the reference's lines
            raise UserError(f"{e} ({reference} has {len(refs):,} lines)", EXIT_INPUT) from e
        try:
            result = tune(toolkit, copy, [reference], start, directory, seed=seed, restarts=restarts, threads=threads)
        except RerankError as e:
            raise UserError(str(e), e.exit_code) from e
    finally:
        if not keep:
            shutil.rmtree(directory, ignore_errors=True)
    after = tokenized_bleu(output_lines(matrix, result.weights, len(refs)), refs)
    write_weights_file(
        weights_out,
        matrix.layout,
        result.weights,
        comment=f"phrase-rescorer rerank-tune {os.path.basename(nbest_path)}: dev BLEU "
        f"{before.score:.2f} -> {after.score:.2f}",
    )
    say(ctx, f"{nbest_path}: {len(matrix.sentences):,} hypotheses, features {' '.join(matrix.names)}")
    say(
        ctx,
        f"dev BLEU (tokenized, as MERT scores it): {before.score:.2f} with the start weights, "
        f"{after.score:.2f} reranked; wrote {weights_out}",
    )


@cli.command("rerank")
@click.argument("nbest_path", metavar="NBEST", type=click.Path(allow_dash=True))
@click.argument("weights_path", metavar="WEIGHTS", type=click.Path(exists=True, dir_okay=False))
@click.argument("out_path", metavar="OUT", type=click.Path(allow_dash=True))
@click.option(
    "--sentences", type=click.IntRange(0), help="Input sentences (lines of OUT) [default: the highest sentence ID + 1]."
)
@click.pass_context
def rerank(ctx: click.Context, nbest_path: str, weights_path: str, out_path: str, sentences: int | None) -> None:
    """Write to OUT the best hypothesis of each sentence of NBEST under WEIGHTS (from rerank-tune):
    the highest weighted sum of its dense features, the first of equal ones, one line per input
    sentence (an empty line for a sentence the list lacks)."""
    from ..output import AtomicOutput
    from ..reranking.choose import output_lines
    from ..reranking.nbest_features import read_matrix
    from ..reranking.weights import WeightsError, read_weights_file, vector

    matrix = read_matrix(nbest_path)
    try:
        weights = vector(read_weights_file(weights_path), matrix.layout, source=weights_path)
    except WeightsError as e:
        raise UserError(str(e), e.exit_code) from e
    try:
        lines = output_lines(matrix, weights, sentences)
    except ValueError as e:
        raise UserError(str(e), EXIT_INPUT) from e
    with AtomicOutput(out_path) as out:
        out.write("".join(line + "\n" for line in lines).encode("utf-8"))
    say(ctx, f"{nbest_path}: {len(lines):,} sentences reranked with {weights_path}")
