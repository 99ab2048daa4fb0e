"""``inspect``: look at a phrase table before training on it."""

from __future__ import annotations

import json

import click

from ..data.table_stats import format_report, inspect_table
from ..errors import EXIT_INPUT
from . import cli
from .common import UserError, progress, threads_option


@cli.command()
@click.argument("table", type=click.Path(allow_dash=True))
@click.option("--vocab-size", default=15000, show_default=True,
              help="Shortlist size (per side, special symbols included) to report coverage for.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option("--max-reported", default=100, show_default=True,
              help="How many malformed lines to list (all are counted).")
@click.option("--strict", is_flag=True, help="Exit with status 3 if any line is malformed.")
@threads_option
@click.pass_context
def inspect(ctx: click.Context, table: str, vocab_size: int, as_json: bool, max_reported: int, strict: bool) -> None:
    """Report on TABLE (a Moses phrase table; .gz or - for stdin): lines, unique pairs and
    sources, targets per source, phrase lengths, shortlist coverage and every malformed line
    (file:line and why). Unlike the other commands it does not stop at the first bad line; it
    does stop (exit 3 or 6) on a file it cannot read to the end (truncated or corrupt compressed
    input, read error), whose figures would be short."""
    with progress(ctx, "inspect", " lines") as bar:
        stats = inspect_table(table, vocab_size, max_reported, on_progress=lambda lines, _size: bar.update_to(lines))
        bar.update_to(stats.lines)
    click.echo(json.dumps(stats.to_dict(), indent=2) if as_json else format_report(stats))
    if strict and stats.malformed_count:
        raise UserError(f"{table}: {stats.malformed_count} malformed line(s)", EXIT_INPUT)
