"""``rescore`` (also the ``rescore-phrase-table`` program), and the rescoring options that
``moses-step`` (``cli.moses``) shares. Warnings are shown even under --quiet: they are about
the output's usability."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click
import torch

from ..cpu_features import cpu_features
from ..moses.score_format import SCORE_FORMATS
from ..parallel import distributed
from ..rescoring.options import DTYPES, WINDOW_EXTENSION, RescoreOptions
from ..rescoring.scorers import SCORERS
from . import cli
from .common import (
    UserError,
    device_option,
    is_quiet,
    max_tokens_option,
    model_option,
    resolve_device,
    say,
    threads_option,
    warn,
)
from .progress import Progress

if TYPE_CHECKING:
    from ..rescoring.options import ProgressCallback, RescoreSummary


#: The library's defaults, the options' defaults.
DEFAULTS = RescoreOptions()


def rescore_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """The options that change the numbers (shared by ``rescore`` and ``moses-step``)."""
    for option in reversed(
        [
            click.option(
                "--score-format",
                type=click.Choice(SCORE_FORMATS),
                default=DEFAULTS.score_format,
                show_default=True,
                help="prob: exp(log p(target|source)), what Moses needs, since it takes the log of "
                "every column on loading (its feature is then exactly log p(target|source)). "
                "Below exp(-100) "
                "the column holds exp(-100) = 3.72e-44: Moses floors every log score at -100, so "
                "the decoder sees -100 either way, and the column is never 0, inf or nan. "
                "logprob / neglogprob write log p or -log p for other consumers (never for "
                "the Moses decoder: it would take the log of a negative number).",
            ),
            click.option(
                "--normalize",
                is_flag=True,
                help="Divide log p(target|source) by the number of target tokens + 1 (end of sequence); "
                "an inverse network's log p(source|target) by the source tokens + 1. "
                "Default: the paper's unnormalized sum (MERT's word penalty compensates).",
            ),
            click.option(
                "--unk-feature",
                is_flag=True,
                help='Also append the paper\'s "WP" feature: the number n of source and target '
                "words outside the network's shortlist, written as exp(n) so that Moses sees n "
                "(n capped at 88: exp(88) is near the largest float32, which Moses parses). "
                "With several -m, one WP column, after all the networks' columns, counted with "
                "the first network's shortlists. "
                "With a subword model (train --subwords) no unit is ever "
                "unknown: n is 0.",
            ),
            click.option(
                "--batch-size",
                type=click.IntRange(min=1),
                default=None,
                help="Rows per network batch: prefix-trie nodes with --scorer prefix [default: 256 on "
                "CPU, 8192 on GPU], phrase pairs otherwise [default: 256; 64 with --scorer reference].",
            ),
            click.option(
                "--window",
                type=click.IntRange(min=1),
                default=DEFAULTS.window,
                show_default=True,
                help="Lines read, sorted by length and scored together; memory grows with it. "
                f"A window is extended to the end of the current source phrase (up to {WINDOW_EXTENSION}x), so "
                "each source is encoded once. Like --batch-size and --scorer, it changes scores "
                "by float rounding only: the last digits of log p, by less than 1e-6 of |log p| "
                "(docs/reproducibility.md).",
            ),
            device_option,
            threads_option,
            max_tokens_option,
            click.option(
                "--dtype",
                type=click.Choice(DTYPES),
                default=DEFAULTS.dtype,
                show_default=True,
                help="Compute precision of the network (sums are accumulated in float64). "
                "bfloat16 (prefix scorer only) is approximate: with a trained small network its log p "
                "differed from float32's by 0.023 on average and by up to 0.13 over 3,000 real "
                "pairs (docs/performance.md). Faster only on GPUs and on CPUs with AMX-BF16 or "
                "AVX512-BF16; elsewhere many times slower (a warning says so).",
            ),
            click.option(
                "--scorer",
                type=click.Choice(list(SCORERS)),
                default=DEFAULTS.scorer,
                show_default=True,
                help="prefix: exact, computes each distinct target prefix of a source once (and, "
                "for cho2014, each distinct source prefix): the fastest. batched: each source "
                "encoded once, each target decoded on its own in length-sorted batches. reference: "
                "the plain path, file order, no sharing (slower; for checking). All three work for "
                "every architecture.",
            ),
        ]
    ):
        f = option(f)
    return f


def options_dict(kw: dict[str, Any]) -> dict[str, Any]:
    return {
        "score_format": kw["score_format"],
        "normalize": kw["normalize"],
        "unk_feature": kw["unk_feature"],
        "batch_size": kw["batch_size"],
        "window": kw["window"],
        "window_cap": WINDOW_EXTENSION * kw["window"],
        "device": str(resolve_device(kw["device"])),
        "dtype": _dtype(kw["dtype"], kw["scorer"], kw["device"]),
        "scorer": kw["scorer"],
        "max_tokens": kw["max_tokens"],
    }


def _dtype(dtype: str, scorer: str, device: str) -> str:
    """The --dtype value, refused with a scorer that has no bfloat16 path; a warning when the
    CPU would emulate it."""
    if dtype != "float32" and scorer != "prefix":
        raise UserError(f"--dtype {dtype} works with --scorer prefix only, not {scorer}")
    if dtype == "bfloat16" and resolve_device(device).type == "cpu":
        warning = cpu_features().bf16_warning()
        if warning:
            warn(f"--dtype bfloat16: {warning}")
    return dtype


def table_progress(quiet: bool, desc: str) -> tuple[Progress, ProgressCallback]:
    """Progress over the input's bytes with lines and pairs/s, and the engine's callback."""
    bar = Progress(desc, quiet=quiet, in_bytes=True)

    def tick(lines: int, position: int, size: int | None) -> None:
        elapsed = bar.elapsed
        bar.set_postfix(f"{lines:,} lines, {lines / elapsed:,.0f} pairs/s" if elapsed > 0 else f"{lines:,} lines")
        bar.update_to(position, size)

    return bar, tick


MODELS_HELP = (
    "The trained network (written by phrase-rescorer train); given more than once, one "
    "column per network, in the order given, each in the network's direction (train "
    "--direction: forward adds p(target|source), inverse p(source|target))."
)


@cli.command()
# readable=False: the library reports an unreadable IN or OUT (exit 6), not click (exit 2)
@click.argument("in_path", metavar="IN", type=click.Path(allow_dash=True, readable=False))
@click.argument("out_path", metavar="OUT", type=click.Path(allow_dash=True, readable=False))
@model_option("model_paths", multiple=True, help=MODELS_HELP)
@rescore_options
@click.pass_context
def rescore(ctx: click.Context, in_path: str, out_path: str, model_paths: tuple[str, ...], **kw: Any) -> None:
    """Append the RNN Encoder-Decoder's p(target|source) to every line of the Moses phrase table
    IN, writing OUT (- for stdin/stdout); with -m given more than once, one column per network,
    in the order given, from one read of IN. IN may be plain or gzip, bzip2, xz or zstd, told by
    its content; OUT is compressed as its name says (.gz, .bz2, .xz, .zst; a name such as
    .lzma, .Z or .tgz is refused).

    IN may be a stem, as EMS gives it: when IN does not exist but IN.gz does, IN.gz is read
    and OUT written as OUT.gz.

    The new column is the direct direction, that of Moses' column 3: p(e|f) in Moses' notation,
    where f is the source. A network trained with --direction inverse adds p(source|target)
    instead, the direction of column 1. Each is written as a probability, exp(log p), since Moses
    takes the log of every column: the decoder's feature is the network's log p.

    Every line is kept, in order and byte for byte, with the new column(s) at the end of its
    scores field; nothing is dropped or truncated, and memory does not grow with the table.
    The closing line on stderr gives lines, time, pairs/s and a signature of every setting
    that changes the numbers. Then point moses.ini at OUT with `phrase-rescorer moses-ini`.

    \b
    Examples:
      rescore-phrase-table model/phrase-table.gz model/phrase-table.rnn.gz --model rnn.pt
      rescore-phrase-table model/phrase-table.gz model/phrase-table.rnn2.gz -m rnn.pt -m rnn-inverse.pt

    \b
    Under torchrun every process rescores one part of IN and the parts are joined into OUT
    (docs/distributed.md), e.g.
      torchrun --nproc-per-node 4 -m phrase_rescorer rescore IN OUT --model rnn.pt
    """
    from ..moses.stems import resolve_stems
    from ..rescoring.engine import rescore_table

    quiet = is_quiet(ctx)
    options = options_dict(kw)
    paths = resolve_stems(in_path, out_path)
    in_path, out_path = paths.input, paths.output
    if paths.note and not quiet and distributed.Launch.from_env() is None:
        say(ctx, paths.note)
    model_path = list(model_paths)
    if distributed.Launch.from_env() is not None:
        summary = _rescore_sharded(ctx, in_path, out_path, model_path, quiet, options)
        if summary is not None and not quiet:
            click.echo(summary.closing_line(), err=True)
        return
    bar, tick = table_progress(quiet, "rescore")
    with bar:
        summary = rescore_table(in_path, out_path, model_path, on_progress=tick, on_warning=warn, **options)
    if not quiet:
        click.echo(summary.closing_line(), err=True)


def _rescore_sharded(
    ctx: click.Context, in_path: str, out_path: str, model_path: list[str], quiet: bool, options: dict[str, Any]
) -> RescoreSummary | None:
    """``rescore`` as one of the processes of a torchrun job; the summary on rank 0."""
    from ..parallel.sharded_rescoring import rescore_sharded

    try:
        group, device = distributed.start(
            torch.device(options["device"]), backend="gloo", timeout=distributed.RESCORE_TIMEOUT
        )
    except distributed.DistributedError as e:
        raise UserError(str(e), e.exit_code) from e
    ctx.call_on_close(group.close)
    quiet = quiet or not group.is_main
    index_bar = Progress("index", quiet=quiet, in_bytes=True)

    def on_index(position: int, size: int) -> None:
        index_bar.update_to(position, size)
        if position >= size:
            index_bar.close()

    bar, tick = table_progress(quiet, f"rescore (part 1 of {group.world_size})")
    with index_bar, bar:
        summary = rescore_sharded(
            in_path,
            out_path,
            model_path,
            group,
            on_progress=tick,
            on_warning=warn,
            on_index=on_index,
            **{**options, "device": str(device)},
        )
    return summary if group.is_main else None


__all__ = ["rescore"]
