"""``rerank-tune`` and ``rerank``: n-best reranking with Moses' MERT."""

from __future__ import annotations

import errno
import math
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

from ..errors import EXIT_INPUT
from ..reranking.mert import OPTIMIZERS
from . import cli
from .common import InputPath, UserError, feature_names, say, threads_value_option

if TYPE_CHECKING:
    from ..reranking.mbr import Mbr


def mbr_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """``--mbr``, ``--mbr-size``, ``--mbr-scale``: Moses' decoder's ``-mbr``, ``-mbr-size``,
    ``-mbr-scale``, applied to a list's lines under the reranking weights; the command gets
    ``mbr``, ``mbr_size`` and ``mbr_scale`` (None where not given), :func:`mbr_rule` makes them a rule."""
    from ..reranking.mbr import DEFAULT_SCALE, DEFAULT_SIZE

    for option in reversed(
        (
            click.option(
                "--mbr",
                "mbr",
                is_flag=True,
                help="Choose each sentence's hypothesis by minimum Bayes risk, as Moses' -mbr: the one of "
                "least expected 1 - BLEU against the others, each weighted by exp(scale * its weighted sum), "
                "instead of the highest weighted sum.",
            ),
            click.option(
                "--mbr-size",
                type=click.IntRange(1),
                help=f"MBR: the hypotheses of highest weighted sum compared, per sentence  [default: {DEFAULT_SIZE}].",
            ),
            click.option(
                "--mbr-scale",
                type=click.FloatRange(0.0),
                help="MBR: the scale of the weighted sums in the probabilities (0: all alike; larger: nearer "
                f"the highest sum's choice)  [default: {DEFAULT_SCALE:g}].",
            ),
        )
    ):
        command = option(command)
    return command


def mbr_rule(mbr: bool, size: int | None, scale: float | None) -> Mbr | None:
    """The rule the MBR options ask for; --mbr-size or --mbr-scale without --mbr refused."""
    from ..reranking.mbr import DEFAULT_SCALE, DEFAULT_SIZE, Mbr

    if not mbr:
        given = [name for name, value in (("--mbr-size", size), ("--mbr-scale", scale)) if value is not None]
        if given:
            raise UserError(f"{' and '.join(given)} without --mbr: add --mbr to choose by minimum Bayes risk")
        return None
    if scale is not None and not math.isfinite(scale):
        raise UserError(f"--mbr-scale {scale}: give a finite number >= 0")
    return Mbr(DEFAULT_SCALE if scale is None else scale, DEFAULT_SIZE if size is None else size)


@cli.command("rerank-tune")
@click.argument("nbest_path", metavar="NBEST", type=click.Path(allow_dash=True))
@click.argument("reference", metavar="REF", type=InputPath(dir_okay=False))
@click.argument("weights_out", metavar="WEIGHTS", type=click.Path())
@click.option(
    "--init",
    "init_path",
    type=InputPath(dir_okay=False),
    help="Start weights: the tuned moses.ini that decoded NBEST (its [weight] section), or a "
    "weights file; features it lacks (the added ones) start at 0 [default: all 0].",
)
@click.option("--moses", "moses_dir", type=click.Path(file_okay=False), help="Moses directory [default: $MOSES].")
@click.option(
    "--work-dir",
    type=click.Path(file_okay=False),
    help="Keep extractor's and the optimiser's files here [default: a temporary directory, removed].",
)
@click.option(
    "--restarts",
    type=click.IntRange(0),
    default=20,
    show_default=True,
    help="mert's random restarts (-n, as mert-moses.pl's --random-restarts).",
)
@click.option(
    "--optimizer",
    type=click.Choice(OPTIMIZERS),
    default=OPTIMIZERS[0],
    show_default=True,
    help="Moses' optimiser: mert (Powell's search from the start weights, as mert-moses.pl runs it) or "
    "kbmira (batch MIRA, 60 passes from the start weights, as mert-moses.pl --batch-mira runs it).",
)
@click.option("--seed", type=int, default=1, show_default=True, help="The optimiser's random seed (-r).")
@click.option(
    "--leave-out",
    "leave_out",
    metavar="FEATURE",
    multiple=True,
    help="Tune without FEATURE, a name of NBEST's first line (e.g. TranslationModel0; repeat the option "
    "or separate names by commas, as mert-moses.pl's --activate-features lists them): the optimiser never "
    "sees it and WEIGHTS gives it 0, as if the list had no such feature, so rerank and bundle take the "
    "whole list unchanged. Compare with and without it by --held-out.",
)
@click.option(
    "--choose-leave-out",
    "choose",
    metavar="FEATURES",
    multiple=True,
    help="Let held-out dev BLEU choose whether to leave FEATURES out too (names as --leave-out takes "
    "them, one set an option; repeat for more sets): every set's held-out lines are computed as --held-out "
    "computes them (--leave-out's features alone first), and the set of the highest held-out BLEU, the first "
    "of equal ones, is tuned into WEIGHTS. Costs two tunings on half the list a set.",
)
@click.option(
    "--held-out",
    "heldout_out",
    type=click.Path(allow_dash=True),
    help="Also write to FILE ('-': stdout; compressed as its name says) each dev sentence's hypothesis "
    "chosen by weights tuned without it (the even and the odd sentences, each half chosen by the weights "
    "tuned on the other: the same optimiser, start weights, seed, restarts and threads) and print their "
    "BLEU: a dev figure that can compare feature sets, as the tuned list's own cannot (it is the tuning "
    "set's). Costs two more tunings on half the list, after WEIGHTS is written (none more with "
    "--choose-leave-out, which computes them first).",
)
@mbr_options
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
    optimizer: str,
    seed: int,
    leave_out: tuple[str, ...],
    choose: tuple[str, ...],
    heldout_out: str | None,
    mbr: bool,
    mbr_size: int | None,
    mbr_scale: float | None,
    threads: int,
) -> None:
    """Tune the weights of every dense feature of the n-best list NBEST (the dev set's, with the
    added features, e.g. from phrase-rescorer nbest) for BLEU against REF, with Moses' own
    bin/extractor and bin/mert (Powell's search, random restarts, as mert-moses.pl runs them;
    or bin/kbmira with --optimizer kbmira); write them to WEIGHTS, one "Name= w1 w2 ..." line
    per feature.

    Start from the decoder's tuned weights (--init moses.ini), the new features at 0: the
    search then starts at the decoder's 1-best (with --leave-out, from those weights with the
    features left out at 0). Then apply WEIGHTS to other lists with phrase-rescorer rerank. To
    choose between feature sets on dev, compare their --held-out BLEU (two-fold: every dev
    sentence chosen by weights that never saw its reference), e.g. with and without
    --leave-out for Moses' own features on a list that the networks' candidates joined, or let
    --choose-leave-out make that choice (one command for every pair). With
    --mbr the weights are tuned as without it, and the dev BLEU printed (and the held-out lines)
    are those of the MBR choice: give rerank the same MBR options.

    \b
    Example:
      phrase-rescorer rerank-tune dev.cslm.nbest dev.fr rerank.weights --init moses.ini
      phrase-rescorer rerank test.cslm.nbest rerank.weights test.reranked.fr
    """
    from ..experiment.bleu import tokenized_bleu
    from ..moses.toolkit import find_moses
    from ..output import OutputError, check_distinct_outputs, check_not_an_input, check_output_path
    from ..reranking.tune import HeldOutError, tune_on_dev, work_paths

    rule = mbr_rule(mbr, mbr_size, mbr_scale)
    left_out = feature_names(leave_out)
    choices = [feature_names((value,), "--choose-leave-out") for value in choose]
    inputs = (("n-best list", nbest_path), ("reference", reference), ("start weights (--init)", init_path))
    check_output_path(weights_out)
    check_not_an_input(weights_out, inputs)
    if heldout_out is not None:
        check_output_path(heldout_out)
        check_not_an_input(heldout_out, inputs)
        check_distinct_outputs(heldout_out, (("weights", weights_out),))
    if work_dir is not None:  # what extractor and mert write there must not be an input
        paths = work_paths(heldout_out is not None, len(choices))
        for name in paths:
            try:
                check_not_an_input(os.path.join(work_dir, name), inputs)
            except OutputError as e:
                raise OutputError(
                    str(e.filename), f"{e.strerror} (rerank-tune writes {name} in --work-dir): give another --work-dir"
                ) from None
        for name in sorted({os.path.dirname(p) for p in paths} - {""}):  # heldout/, heldout/tune0/, ...
            path = os.path.join(work_dir, name)
            if os.path.lexists(path) and not os.path.isdir(path):
                raise OutputError(
                    path,
                    f"not a directory (rerank-tune writes {name}/ in --work-dir): give another --work-dir",
                    errno.ENOTDIR,
                )
    try:
        tune_on_dev(
            find_moses(moses_dir, needs=("bin/extractor", f"bin/{optimizer}")),
            nbest_path,
            reference,
            weights_out,
            init=init_path,
            work_dir=work_dir,
            optimizer=optimizer,
            leave_out=left_out,
            leave_out_name="--leave-out",
            choices=choices,
            choices_name="--choose-leave-out",
            seed=seed,
            restarts=restarts,
            threads=threads,
            mbr=rule,
            heldout_out=heldout_out,
            heldout_name="--held-out",
            bleu=lambda lines, refs: tokenized_bleu(lines, refs).score,
            title=f"phrase-rescorer rerank-tune {os.path.basename(nbest_path)}",
            say=lambda line: say(ctx, line),
        )
    except HeldOutError as e:
        raise UserError(f"--held-out: a half's tuning failed ({weights_out} is written): {e}", e.exit_code) from e


@cli.command("rerank")
@click.argument("nbest_path", metavar="NBEST", type=click.Path(allow_dash=True))
@click.argument("weights_path", metavar="WEIGHTS", type=InputPath(dir_okay=False))
@click.argument("out_path", metavar="OUT", type=click.Path(allow_dash=True))
@click.option(
    "--sentences",
    type=click.IntRange(0),
    help="The input sentences: NBEST must list exactly as many (a check that it is complete)  "
    "[default: as many as it lists].",
)
@mbr_options
@click.pass_context
def rerank(
    ctx: click.Context,
    nbest_path: str,
    weights_path: str,
    out_path: str,
    sentences: int | None,
    mbr: bool,
    mbr_size: int | None,
    mbr_scale: float | None,
) -> None:
    """Write to OUT the best hypothesis of each sentence of NBEST under WEIGHTS (from rerank-tune):
    the highest weighted sum of its dense features, the first of equal ones, one line per input
    sentence. WEIGHTS must weigh exactly NBEST's features (a moses.ini: at least them).

    With --mbr, the hypothesis of least Bayes risk instead, as Moses' decoder chooses with -mbr
    -mbr-size N -mbr-scale S from its own list: the list should then be a distinct one
    (-n-best-list FILE N distinct), as the decoder's MBR list is.

    \b
    Example:
      phrase-rescorer rerank test.nmt.nbest rerank.weights test.reranked.fr --mbr --mbr-scale 2
    """
    from ..output import AtomicOutput, check_not_an_input, check_output_path
    from ..reranking.choose import output_lines
    from ..reranking.nbest_features import read_matrix
    from ..reranking.origins import origins
    from ..reranking.tune import described
    from ..reranking.weights import read_weights_file, vector

    rule = mbr_rule(mbr, mbr_size, mbr_scale)
    check_output_path(out_path)
    check_not_an_input(out_path, (("n-best list", nbest_path), ("weights", weights_path)))
    weights_file = read_weights_file(weights_path)
    matrix = read_matrix(nbest_path)
    if sentences is not None and sentences != matrix.sentence_count:
        raise UserError(
            f"{nbest_path} lists {matrix.sentence_count:,} sentences (IDs 0 to {matrix.sentence_count - 1}), "
            f"--sentences says {sentences:,}",
            EXIT_INPUT,
        )
    lines = output_lines(matrix, vector(weights_file, matrix.layout, source=weights_path), rule, source=weights_path)
    with AtomicOutput(out_path) as out:
        out.write("".join(line + "\n" for line in lines).encode("utf-8"))
    say(ctx, f"{nbest_path}: {len(lines):,} sentences reranked with {weights_path}{described(rule)}")
    chosen_from = origins(matrix, lines)
    if chosen_from is not None:
        say(ctx, f"chosen: {chosen_from.summary()}")
