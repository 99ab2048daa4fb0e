"""``inspect``: look at a phrase table before training on it."""

from __future__ import annotations

import json

import click

from ..data.table_stats import format_report, inspect_table
from ..errors import EXIT_INPUT
from ..model.kinds import TAKES, check_kind
from ..moses.columns import MOSES_COLUMNS, RNN_COUNT, network_column
from . import cli
from .common import UserError, model_option, progress, threads_option, warn


@cli.command()
@click.argument("table", type=click.Path(allow_dash=True))
@click.option(
    "--vocab-size",
    default=15000,
    show_default=True,
    help="Shortlist size (per side, special symbols included) to report coverage for.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option(
    "--max-reported", default=100, show_default=True, help="How many malformed lines to list (all are counted)."
)
@click.option("--strict", is_flag=True, help="Exit with status 3 if any line is malformed.")
@model_option(
    "model_paths",
    required=False,
    multiple=True,
    help="A network TABLE was rescored with, in the order given to rescore (repeatable): names "
    "each added column and its direction [default: a 5th (and 6th) score is taken to be "
    "one forward network's (and its WP count)].",
)
@click.option("--unk-feature", is_flag=True, help="TABLE was rescored with --unk-feature: its last column is WP.")
@threads_option
@click.pass_context
def inspect(
    ctx: click.Context,
    table: str,
    vocab_size: int,
    as_json: bool,
    max_reported: int,
    strict: bool,
    model_paths: tuple[str, ...],
    unk_feature: bool,
) -> None:
    """Report on TABLE (a Moses phrase table; .gz or - for stdin): lines, unique pairs and
    sources, targets per source, phrase lengths, shortlist coverage and every malformed line
    (file:line and why). Unlike the other commands it does not stop at the first bad line; it
    does stop (exit 3 or 6) on a file it cannot read to the end (truncated or corrupt compressed
    input, read error), whose figures would be short.

    \b
    Example (a table rescored with rescore -m rnn.pt -m rnn-inverse.pt):
      phrase-rescorer inspect model/phrase-table.rnn2.gz -m rnn.pt -m rnn-inverse.pt"""
    if unk_feature and not model_paths:
        raise UserError("--unk-feature names the last column after the networks' columns: give the networks (-m)")
    added = _added_columns(model_paths, unk_feature)
    with progress(ctx, "inspect", " lines") as bar:
        stats = inspect_table(table, vocab_size, max_reported, on_progress=lambda lines, _size: bar.update_to(lines))
        bar.update_to(stats.lines)
    named = len(MOSES_COLUMNS) + len(added) if added is not None else 0  # Moses' columns, then the added ones
    short = [count for count in stats.scores_per_line if count < named]
    if short:
        warn(
            f"{table}: lines of {short[0]} scores, but Moses' {len(MOSES_COLUMNS)} and the "
            f"{named - len(MOSES_COLUMNS)} column(s) that -m and --unk-feature name make {named}: was it "
            "rescored with these options? The column names below may be wrong"
        )
    if as_json:
        report = stats.to_dict()
        if added is not None:
            report["added_columns"] = [RNN_COUNT if kind == "wp" else network_column(kind) for kind in added]
        click.echo(json.dumps(report, indent=2))
    else:
        click.echo(format_report(stats, added))
    if strict and stats.malformed_count:
        raise UserError(f"{table}: {stats.malformed_count} malformed line(s)", EXIT_INPUT)


def _added_columns(model_paths: tuple[str, ...], unk_feature: bool) -> tuple[str, ...] | None:
    """What rescore appended, in order: each network's direction, then "wp" (None: not given)."""
    if not model_paths:  # the default naming (one forward network) already knows its WP column
        return None
    option = "phrase-rescorer inspect -m"
    kinds = (check_kind(p, option, *TAKES[option]).kind for p in model_paths)
    return tuple(direction for _, direction in kinds) + (("wp",) if unk_feature else ())
