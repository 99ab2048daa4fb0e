"""``rescore`` (also the ``rescore-phrase-table`` program), ``moses-ini`` and ``moses-step``."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click
import torch

from ..cpu_features import cpu_features
from ..moses.columns import START_WEIGHT
from ..parallel import distributed
from ..rescoring.scorers import SCORERS
from . import cli
from .common import (
    UserError,
    device_option,
    is_quiet,
    model_option,
    resolve_device,
    say,
    threads_option,
    warn,
)
from .progress import Progress

if TYPE_CHECKING:
    from ..rescoring.options import ProgressCallback, RescoreSummary


def _quiet_option(f: Callable[..., Any]) -> Callable[..., Any]:
    return click.option(
        "-q", "--quiet", is_flag=True, help="No progress bar or summary on stderr (errors still)."
    )(f)


def _rescore_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """The options that change the numbers (shared by ``rescore`` and ``moses-step``)."""
    for option in reversed(
        [
            click.option(
                "--score-format",
                type=click.Choice(["prob", "logprob", "neglogprob"]),
                default="prob",
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
                help="Divide log p(target|source) by the number of target tokens + 1 (end of sequence). "
                "Default: the paper's unnormalized sum (MERT's word penalty compensates).",
            ),
            click.option(
                "--unk-feature",
                is_flag=True,
                help="Also append the paper's \"WP\" feature: the number n of source and target "
                "words outside the network's shortlist, written as exp(n) so that Moses sees n "
                "(n capped at 88: exp(88) is near the largest float32, which Moses parses). "
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
                default=8192,
                show_default=True,
                help="Lines read, sorted by length and scored together; memory grows with it. "
                "A window is extended to the end of the current source phrase (up to 8x), so "
                "each source is encoded once.",
            ),
            device_option,
            threads_option,
            click.option(
                "--dtype",
                type=click.Choice(["float32", "bfloat16"]),
                default="float32",
                show_default=True,
                help="Compute precision of the network (sums are accumulated in float64). "
                "bfloat16 (prefix scorer only) is approximate: with a trained small network its log p "
                "differed from float32's by 0.023 on average and by up to 0.13 over 3,000 real "
                "pairs (README, Performance). Faster only on GPUs and on CPUs with AMX-BF16 or "
                "AVX512-BF16; elsewhere many times slower (a warning says so).",
            ),
            click.option(
                "--scorer",
                type=click.Choice(list(SCORERS)),
                default=next(iter(SCORERS)),
                show_default=True,
                help="prefix: exact, computes each distinct source prefix and each distinct target "
                "prefix of a source once (the fastest). batched: each source encoded once, "
                "length-sorted batches. reference: the plain path, file order, no sharing (slower; "
                "for checking).",
            ),
        ]
    ):
        f = option(f)
    return f


def _options_dict(kw: dict[str, Any]) -> dict[str, Any]:
    return {
        "score_format": kw["score_format"],
        "normalize": kw["normalize"],
        "unk_feature": kw["unk_feature"],
        "batch_size": kw["batch_size"],
        "window": kw["window"],
        "window_cap": 8 * kw["window"],
        "device": str(resolve_device(kw["device"])),
        "dtype": _dtype(kw["dtype"], kw["scorer"], kw["device"]),
        "scorer": kw["scorer"],
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


def _table_progress(quiet: bool, desc: str) -> tuple[Progress, ProgressCallback]:
    """Progress over the input's bytes with lines and pairs/s, and the engine's callback."""
    bar = Progress(desc, quiet=quiet, in_bytes=True)

    def tick(lines: int, position: int, size: int | None) -> None:
        elapsed = bar.elapsed
        bar.set_postfix(f"{lines:,} lines, {lines / elapsed:,.0f} pairs/s" if elapsed > 0 else f"{lines:,} lines")
        bar.update_to(position, size)

    return bar, tick


_warn = warn  # warnings are shown even under --quiet: they are about the output's usability


#: -h/--help also when a command runs as a program of its own (rescore-phrase-table).
COMMAND_SETTINGS = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


@cli.command(context_settings=COMMAND_SETTINGS)
# readable=False: the library reports an unreadable IN or OUT (exit 6), not click (exit 2)
@click.argument("in_path", metavar="IN", type=click.Path(allow_dash=True, readable=False))
@click.argument("out_path", metavar="OUT", type=click.Path(allow_dash=True, readable=False))
@model_option("model_path")
@_rescore_options
@_quiet_option
@click.pass_context
def rescore(ctx: click.Context, in_path: str, out_path: str, model_path: str, quiet: bool, **kw: Any) -> None:
    """Append the RNN Encoder-Decoder's p(target|source) to every line of the Moses phrase table
    IN, writing OUT (.gz by name; - for stdin/stdout).

    IN may be a stem, as EMS gives it: when IN does not exist but IN.gz does, IN.gz is read
    and OUT written as OUT.gz.

    The new column is the direct direction, that of Moses' column 3: p(e|f) in Moses' notation,
    where f is the source. It is written as a probability, exp(log p), since Moses takes the log
    of every column: the decoder's feature is the network's log p(target|source).

    Every line is kept, in order and byte for byte, with the new column(s) at the end of its
    scores field; nothing is dropped or truncated, and memory does not grow with the table.
    The closing line on stderr gives lines, time, pairs/s and a signature of every setting
    that changes the numbers. Then point moses.ini at OUT with `phrase-rescorer moses-ini`.

    \b
    Example:
      rescore-phrase-table model/phrase-table.gz model/phrase-table.rnn.gz --model rnn.pt

    \b
    Under torchrun every process rescores one part of IN and the parts are joined into OUT
    (README, "Beyond one machine"), e.g.
      torchrun --nproc-per-node 4 -m phrase_rescorer rescore IN OUT --model rnn.pt
    """
    from ..moses.stems import resolve_stems
    from ..rescoring.engine import rescore_table

    options = _options_dict(kw)
    paths = resolve_stems(in_path, out_path)
    in_path, out_path = paths.input, paths.output
    if paths.note and not (quiet or is_quiet(ctx)) and distributed.Launch.from_env() is None:
        say(ctx, paths.note)
    if distributed.Launch.from_env() is not None:
        summary = _rescore_sharded(ctx, in_path, out_path, model_path, quiet, options)
        if summary is not None and not (quiet or is_quiet(ctx)):
            click.echo(summary.closing_line(), err=True)
        return
    quiet = quiet or is_quiet(ctx)
    bar, tick = _table_progress(quiet, "rescore")
    with bar:
        summary = rescore_table(
            in_path, out_path, model_path, on_progress=tick, on_warning=_warn, **options
        )
    if not quiet:
        click.echo(summary.closing_line(), err=True)


def _rescore_sharded(ctx: click.Context, in_path: str, out_path: str, model_path: str,
                     quiet: bool, options: dict[str, Any]) -> RescoreSummary | None:
    """``rescore`` as one of the processes of a torchrun job; the summary on rank 0."""
    from ..parallel.rescoring import rescore_sharded

    try:
        group, device = distributed.start(torch.device(options["device"]), backend="gloo",
                                          timeout=distributed.RESCORE_TIMEOUT)
    except distributed.DistributedError as e:
        raise UserError(str(e)) from e
    ctx.call_on_close(group.close)
    quiet = quiet or is_quiet(ctx) or not group.is_main
    index_bar = Progress("index", quiet=quiet, in_bytes=True)

    def on_index(position: int, size: int) -> None:
        index_bar.update_to(position, size)
        if position >= size:
            index_bar.close()

    bar, tick = _table_progress(quiet, f"rescore (part 1 of {group.world_size})")
    with index_bar, bar:
        summary = rescore_sharded(in_path, out_path, model_path, group, on_progress=tick,
                                  on_warning=_warn, on_index=on_index,
                                  **{**options, "device": str(device)})
    return summary if group.is_main else None


@cli.command("moses-ini", context_settings=COMMAND_SETTINGS)
@click.argument("in_ini", metavar="IN.ini", type=click.Path(exists=True, dir_okay=False))
@click.argument("out_ini", metavar="OUT.ini", type=click.Path(allow_dash=True, dir_okay=False))
@click.option("--table", required=True, type=click.Path(),
              help="The rescored table (written into the ini as an absolute path). For a "
              "PhraseDictionaryCompact, the binarized table (prefix or .minphr); for PhraseDictionaryOnDisk or "
              "ProbingPT, its directory (its recorded score count is checked).")
@click.option("--name", default="TranslationModel0", show_default=True,
              help="The phrase dictionary to patch (its name=, or Moses' default TypeN).")
@click.option("--weight", "weights", type=float, multiple=True,
              help="Starting weight of each added feature: once for all, or once per added "
              f"feature  [default: {START_WEIGHT}, which fits the scale of log p(target|source), "
              "about -12 per phrase pair against -0.5 to -6 for Moses' own columns].")
@click.option("--features", type=click.IntRange(min=1), default=None,
              help="How many columns were added  [default: read off --table when it is a "
              "readable text table, else 1].")
@_quiet_option
@click.pass_context
def moses_ini(ctx: click.Context, in_ini: str, out_ini: str, table: str, name: str,
              weights: tuple[float, ...], features: int | None, quiet: bool) -> None:
    """Write OUT.ini: IN.ini with the phrase dictionary NAME pointing at TABLE, num-features
    increased by the added columns and its weight line extended; every other line as it was.

    Refused (exit 5) when IN.ini does not match the table it points at (when that table is
    readable), when TABLE does not have num-features + K columns, or when NAME is not there.

    OUT.ini must be tuned before it is used to translate: run mert-moses.pl on it, in a new
    --working-dir. The added weight is only a starting point; its default is chosen so that the
    new feature weighs about as much as one of Moses' own phrase-table features, not the best
    value for your system. The new column is p(target|source), the direction of Moses' column 3
    (p(e|f) in Moses' notation, where f is the source).

    \b
    Example:
      phrase-rescorer moses-ini model/moses.ini model/moses.rnn.ini \\
          --table model/phrase-table.rnn.gz
    """
    from ..moses.ini import patch_moses_ini_file

    result = patch_moses_ini_file(in_ini, out_ini, table, name=name, weights=weights or (START_WEIGHT,),
                                  features=features)
    if not (quiet or is_quiet(ctx)):
        say(ctx, f"{result.name} ({result.type}): num-features {result.old_features} -> "
                 f"{result.new_features}, path -> {result.new_path}")
        for note in result.checked:
            say(ctx, f"checked: {note}")
        if out_ini != "-":
            say(ctx, f"wrote {out_ini}; tune it in a fresh mert-moses.pl --working-dir")


@cli.command("moses-step", context_settings=COMMAND_SETTINGS)
@click.argument("model_dir", type=click.Path(exists=True, file_okay=False))
@model_option("model_path", required=False)
@click.option("--network", hidden=True, type=click.Path(dir_okay=False),
              help="Deprecated name of -m/--model.")
@click.option("--ini", "ini_in", default=None, type=click.Path(exists=True, dir_okay=False),
              help="The moses.ini to start from [default: MODEL_DIR/moses.ini, else the newest "
              "EMS MODEL_DIR/moses.ini.N].")
@click.option("--name", default="TranslationModel0", show_default=True,
              help="The phrase dictionary of moses.ini to patch.")
@click.option("--weight", "weights", type=float, multiple=True,
              help=f"Starting weight of each added feature  [default: {START_WEIGHT}; see moses-ini -h].")
@click.option("--moses", "moses_dir", default=None, metavar="DIR",
              help="Moses installation for the printed command  [default: $MOSES].")
@click.option("--moses-dir", "moses_dir_old", default=None, hidden=True, help="Deprecated name of --moses.")
@click.option("--dev-source", default="DEV.SRC", show_default=True, help="Tuning source text (tokenized as the table).")
@click.option("--dev-reference", default="DEV.REF", show_default=True, help="Tuning reference text.")
@click.option("--working-dir", default=None,
              help="mert-moses.pl working directory [default: a fresh MODEL_DIR/../mert-work-rnn].")
@_rescore_options
@_quiet_option
@click.pass_context
def moses_step(ctx: click.Context, model_dir: str, model_path: str | None, network: str | None,
               ini_in: str | None, name: str, weights: tuple[float, ...], moses_dir: str | None,
               moses_dir_old: str | None, dev_source: str, dev_reference: str, working_dir: str | None,
               quiet: bool, **kw: Any) -> None:
    """Rescore a Moses model directory: the table that moses.ini's NAME loads (its path=, e.g.
    MODEL_DIR/phrase-table.gz) -> MODEL_DIR/phrase-table.rnn.gz, and MODEL_DIR/moses.ini ->
    MODEL_DIR/moses.rnn.ini; then print the mert-moses.pl command to tune it (stdout), in a
    fresh working directory. In an EMS model/ directory the newest moses.ini.N is followed and
    the outputs keep EMS's version number (phrase-table.rnn.N.gz, moses.rnn.ini.N)."""
    from ..moses.model_dir import format_command, rescore_model_dir

    model_path = _renamed(model_path, network, "-m/--model", "--network")
    moses_dir = _renamed(moses_dir, moses_dir_old, "--moses", "--moses-dir")
    if model_path is None:
        raise click.MissingParameter(ctx=ctx, param_hint="'-m' / '--model'", param_type="option")
    if distributed.Launch.from_env() is not None:
        raise UserError("moses-step runs as one process; under torchrun, run `rescore` (which "
                        "shares the work), then `moses-ini` as one process")
    quiet = quiet or is_quiet(ctx)
    bar, tick = _table_progress(quiet, "rescore")
    with bar:
        result = rescore_model_dir(
            model_dir, model_path, ini_in=ini_in, name=name, weights=weights or (START_WEIGHT,),
            moses_dir=moses_dir,
            dev_source=dev_source, dev_reference=dev_reference, working_dir=working_dir,
            on_progress=tick, on_warning=_warn, **_options_dict(kw),
        )
    if not quiet:
        click.echo(result.summary.closing_line(), err=True)
        click.echo(f"wrote {result.table}\nwrote {result.ini} ({result.patch.name}: num-features "
                   f"{result.patch.old_features} -> {result.patch.new_features})", err=True)
    if not quiet:
        placeholders = [p for p in (dev_source, dev_reference) if p in ("DEV.SRC", "DEV.REF")]
        hint = f" (replace {' and '.join(placeholders)} by your tuning set)" if placeholders else ""
        click.echo(f"next, tune in a fresh working directory{hint}:", err=True)
    click.echo(format_command(result.mert_command))


def _renamed(value: str | None, old_value: str | None, name: str, old_name: str) -> str | None:
    """An option given by its deprecated name: accepted, with a warning (both: refused)."""
    if old_value is None:
        return value
    if value is not None:
        raise UserError(f"{old_name} is the old name of {name}: give {name} only")
    _warn(f"{old_name} is deprecated; use {name}")
    return old_value


__all__ = ["rescore", "moses_ini", "moses_step"]
