"""``moses-ini`` and ``moses-step``: a rescored table into a Moses configuration."""

from __future__ import annotations

from typing import Any

import click

from ..moses.columns import START_WEIGHT
from ..parallel import distributed
from . import cli
from .common import InputPath, UserError, is_quiet, model_option, say, warn
from .rescore import MODELS_HELP, options_dict, rescore_options, table_progress


@cli.command("moses-ini")
@click.argument("in_ini", metavar="IN.ini", type=InputPath(dir_okay=False))
@click.argument("out_ini", metavar="OUT.ini", type=click.Path(allow_dash=True))
@click.option(
    "--table",
    required=True,
    type=click.Path(),
    help="The rescored table, written into the ini as an absolute path: a text table "
    "(plain or .gz; a stem T is read as T.gz), a Compact table (prefix or .minphr), an OnDisk "
    "or ProbingPT directory. The line's type becomes the one that loads it; its score count "
    "is checked.",
)
@click.option(
    "--binarize",
    type=click.Choice(["compact", "probing", "ondisk"]),
    default=None,
    help="Binarize the text table --table first, with your Moses' processPhraseTableMin, "
    "CreateProbingPT or CreateOnDiskPt and the table's score count, into T.minphr, T.probing/ "
    "or T.bin/ beside it (T: the table's name without .gz), and point the ini at that.",
)
@click.option(
    "--moses",
    "moses_dir",
    default=None,
    metavar="DIR",
    help="Moses installation whose binarizer --binarize runs  [default: $MOSES].",
)
@click.option(
    "--name",
    default="TranslationModel0",
    show_default=True,
    help="The phrase dictionary to patch (its name=, or Moses' default TypeN).",
)
@click.option(
    "--weight",
    "weights",
    type=float,
    multiple=True,
    help="Starting weight of each added feature, a finite number: once for all, or once per "
    f"added feature  [default: {START_WEIGHT}, which fits the scale of log p(target|source), "
    "about -12 per phrase pair against -0.5 to -6 for Moses' own columns].",
)
@click.option(
    "--features",
    type=click.IntRange(min=1),
    default=None,
    help="How many columns were added  [default: the table's score count minus num-features].",
)
@click.pass_context
def moses_ini(
    ctx: click.Context,
    in_ini: str,
    out_ini: str,
    table: str,
    binarize: str | None,
    moses_dir: str | None,
    name: str,
    weights: tuple[float, ...],
    features: int | None,
) -> None:
    """Write OUT.ini: IN.ini with the phrase dictionary NAME pointing at TABLE, num-features
    increased by the added columns and its weight line extended; every other line as it was.

    Refused (exit 5) when IN.ini does not match the table it points at (when that table is
    readable), when TABLE is not a phrase table in a form Moses loads (text, Compact .minphr,
    OnDisk or ProbingPT directory), when it does not have num-features + K scores (binarized
    tables: the count they were made with), when NAME is not there, or a weight is not finite.

    OUT.ini must be tuned before it is used to translate: run mert-moses.pl on it, in a new
    --working-dir. The added weight is only a starting point; its default is chosen so that the
    new feature weighs about as much as one of Moses' own phrase-table features, not the best
    value for your system. The new column is p(target|source), the direction of Moses' column 3
    (p(e|f) in Moses' notation, where f is the source); an inverse network's is p(source|target).
    A table rescored with several networks (rescore -m A -m B) has as many added columns, each
    given the starting weight (or its own --weight).

    \b
    Examples:
      phrase-rescorer moses-ini model/moses.ini model/moses.rnn.ini \\
          --table model/phrase-table.rnn.gz
      phrase-rescorer moses-ini model/moses.ini model/moses.rnn.ini \\
          --table model/phrase-table.rnn.gz --binarize compact --moses $MOSES
    """
    from ..moses.ini_file import patch_moses_ini_file
    from ..moses.toolkit import MosesNotFound

    try:
        result = patch_moses_ini_file(
            in_ini,
            out_ini,
            table,
            binarize=binarize,
            moses_dir=moses_dir,
            name=name,
            weights=weights or (START_WEIGHT,),
            features=features,
        )
    except MosesNotFound as e:
        raise UserError(f"--binarize: {e}", e.exit_code) from None
    if not is_quiet(ctx):
        kind = result.type if result.new_type in ("", result.type) else f"{result.type} -> {result.new_type}"
        say(
            ctx,
            f"{result.name} ({kind}): num-features {result.old_features} -> "
            f"{result.new_features}, path -> {result.new_path}",
        )
        for note in result.checked:
            say(ctx, f"checked: {note}")
        if out_ini != "-":
            say(ctx, f"wrote {out_ini}; tune it in a fresh mert-moses.pl --working-dir")


@cli.command("moses-step")
@click.argument("model_dir", type=InputPath(file_okay=False))
@model_option("model_paths", required=False, multiple=True, help=MODELS_HELP)
@click.option("--network", hidden=True, type=click.Path(), help="Deprecated name of -m/--model.")
@click.option(
    "--ini",
    "ini_in",
    default=None,
    type=InputPath(dir_okay=False),
    help="The moses.ini to start from [default: MODEL_DIR/moses.ini, else the newest EMS MODEL_DIR/moses.ini.N].",
)
@click.option(
    "--name", default="TranslationModel0", show_default=True, help="The phrase dictionary of moses.ini to patch."
)
@click.option(
    "--weight",
    "weights",
    type=float,
    multiple=True,
    help=f"Starting weight of each added feature  [default: {START_WEIGHT}, as experiment "
    "--start-weights ini, which also keeps the ini's weights; see moses-ini -h].",
)
@click.option(
    "--moses",
    "moses_dir",
    default=None,
    metavar="DIR",
    help="Moses installation for the printed command  [default: $MOSES].",
)
@click.option("--moses-dir", "moses_dir_old", default=None, hidden=True, help="Deprecated name of --moses.")
@click.option("--dev-source", default="DEV.SRC", show_default=True, help="Tuning source text (tokenized as the table).")
@click.option("--dev-reference", default="DEV.REF", show_default=True, help="Tuning reference text.")
@click.option(
    "--working-dir", default=None, help="mert-moses.pl working directory [default: a fresh MODEL_DIR/../mert-work-rnn]."
)
@rescore_options
@click.pass_context
def moses_step(
    ctx: click.Context,
    model_dir: str,
    model_paths: tuple[str, ...],
    network: str | None,
    ini_in: str | None,
    name: str,
    weights: tuple[float, ...],
    moses_dir: str | None,
    moses_dir_old: str | None,
    dev_source: str,
    dev_reference: str,
    working_dir: str | None,
    **kw: Any,
) -> None:
    """Rescore a Moses model directory: the table that moses.ini's NAME loads (its path=, e.g.
    MODEL_DIR/phrase-table.gz) -> MODEL_DIR/phrase-table.rnn.gz, and MODEL_DIR/moses.ini ->
    MODEL_DIR/moses.rnn.ini; then print the mert-moses.pl command to tune it (stdout), in a
    fresh working directory. In an EMS model/ directory the newest moses.ini.N is followed and
    the outputs keep EMS's version number (phrase-table.rnn.N.gz, moses.rnn.ini.N). With -m given
    more than once, one column per network (num-features grows by as many, each with its
    starting weight). The printed command runs the decoder on this run's thread count
    (--threads / -threads).

    \b
    Example (after train-model.perl wrote model/moses.ini):
      phrase-rescorer moses-step model -m rnn.pt -threads 2"""
    from ..moses.step_files import format_command
    from ..pipeline.moses_step import rescore_model_dir
    from ..threads import current_threads

    model_path = _renamed(model_paths[0] if model_paths else None, network, "-m/--model", "--network")
    moses_dir = _renamed(moses_dir, moses_dir_old, "--moses", "--moses-dir")
    if model_path is None:
        raise click.MissingParameter(ctx=ctx, param_hint="'-m' / '--model'", param_type="option")
    if distributed.Launch.from_env() is not None:
        raise UserError(
            "moses-step runs as one process; under torchrun, run `rescore` (which "
            "shares the work), then `moses-ini` as one process"
        )
    quiet = is_quiet(ctx)
    bar, tick = table_progress(quiet, "rescore")
    with bar:
        result = rescore_model_dir(
            model_dir,
            list(model_paths) or [model_path],
            ini_in=ini_in,
            name=name,
            weights=weights or (START_WEIGHT,),
            moses_dir=moses_dir,
            dev_source=dev_source,
            dev_reference=dev_reference,
            working_dir=working_dir,
            threads=current_threads(),
            on_progress=tick,
            on_warning=warn,
            **options_dict(kw),
        )
    if not quiet:
        click.echo(result.summary.closing_line(), err=True)
        click.echo(
            f"wrote {result.table}\nwrote {result.ini} ({result.patch.name}: num-features "
            f"{result.patch.old_features} -> {result.patch.new_features})",
            err=True,
        )
    if not quiet:
        placeholders = [p for p in (dev_source, dev_reference) if p in ("DEV.SRC", "DEV.REF")]
        hint = f" (replace {' and '.join(placeholders)} by your tuning set)" if placeholders else ""
        click.echo(f"next, tune in a fresh working directory{hint}:", err=True)
    click.echo(format_command(result.mert_command))


@cli.command("moses-configs")
def moses_configs() -> None:
    """Print the directory of the Moses configuration files installed with phrase_rescorer:
    the EMS fragment (ems-rnn-rescoring.config), an annotated 5-feature moses.ini and their
    notes (README.md).

    \b
    Example:
      cat "$(phrase-rescorer moses-configs)/ems-rnn-rescoring.config"
    """
    from ..moses.configs import configs_dir

    click.echo(str(configs_dir()))


def _renamed(value: str | None, old_value: str | None, name: str, old_name: str) -> str | None:
    """An option given by its deprecated name: accepted, with a warning (both: refused)."""
    if old_value is None:
        return value
    if value is not None:
        raise UserError(f"{old_name} is the old name of {name}: give {name} only")
    warn(f"{old_name} is deprecated; use {name}")
    return old_value


__all__ = ["moses_configs", "moses_ini", "moses_step"]
