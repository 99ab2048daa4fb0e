"""``suggest``, ``compare``: what a trained network generates for source phrases, and how it ranks
a phrase table's targets beside the table's own score."""

from __future__ import annotations

import os
import sys

import click

from ..analysis import compare as cmp
from ..analysis import plots
from ..analysis import suggest as sug
from ..analysis.picture_outputs import check_picture_output
from ..analysis.table_groups import GroupFilter, phrase_groups
from ..errors import EXIT_INPUT
from ..moses.words import split_words
from . import cli
from .analysis_common import MODEL, counted, load_word_network, looked_up, pictures
from .common import UserError, device_option, progress, say, threads_option
from .text import TypedPhrases, detok_options, display, typed_options

FORMATS = click.Choice(["text", "tsv", "json"])
FORMAT = click.option("--format", "fmt", type=FORMATS, default="text", show_default=True, help="Report format.")


def _print_report(fmt: str, text: str, header: tuple[str, ...], rows: list[tuple[str, ...]], json_text: str) -> None:
    if fmt == "json":
        click.echo(json_text)
    elif fmt == "tsv":
        for row in [header, *rows]:
            click.echo("\t".join(row))
    else:
        click.echo(text, nl=False)


# --- suggest ------------------------------------------------------------------------------------


@cli.command()
@click.argument("phrases", nargs=-1)
@MODEL
@click.option(
    "--beam-size",
    "--beam",
    "beam_size",
    default=10,
    show_default=True,
    type=click.IntRange(min=0),
    help="Beam width (0: no beam search; 1: greedy decoding).",
)
@click.option(
    "--samples",
    default=50,
    show_default=True,
    type=click.IntRange(min=0),
    help="How many phrases to sample (0: no sampling).",
)
@click.option(
    "--temperature",
    default=1.0,
    show_default=True,
    type=click.FloatRange(min=0, min_open=True),
    help="Sampling temperature (log p is always reported at temperature 1).",
)
@click.option(
    "--top",
    default=5,
    show_default=True,
    type=click.IntRange(min=1),
    help="Candidates to print per method: the best distinct ones by log p.",
)
@click.option("--seed", default=1, show_default=True, help="Seed of the sampler (the same for every phrase).")
@click.option(
    "--max-length",
    type=click.IntRange(min=1),
    help="Longest target, in tokens, before </s> is forced [default: 2 x source length + 10].",
)
@click.option("--allow-unk", is_flag=True, help="Let the network propose <unk>.")
@click.option(
    "--length-alpha",
    "--alpha",
    "length_alpha",
    default=0.0,
    show_default=True,
    type=click.FloatRange(min=0),
    help="GNMT's length normalisation: rank beam candidates by log p / ((5+|Y|)^a / 6^a); "
    "GNMT used 0.2. 0 ranks by log p, as the paper.",
)
@click.option(
    "--coverage-beta",
    default=0.0,
    show_default=True,
    type=click.FloatRange(min=0),
    help="GNMT's coverage penalty b * sum_i log(min(sum_j attention_ij, 1)), added to the "
    "rank of beam candidates (attention models); GNMT used 0.2.",
)
@click.option("--table", type=click.Path(), help="Phrase table: mark the candidates it already has for the source.")
@typed_options
@detok_options
@FORMAT
@device_option
@threads_option
def suggest(
    phrases: tuple[str, ...],
    model: str,
    beam_size: int,
    samples: int,
    temperature: float,
    top: int,
    seed: int,
    max_length: int | None,
    allow_unk: bool,
    length_alpha: float,
    coverage_beta: float,
    table: str | None,
    raw: bool,
    source_lang: str | None,
    lowercase: bool | None,
    detok: bool,
    target_lang: str | None,
    fmt: str,
    device: str,
) -> None:
    """Target phrases the network generates for each source PHRASE (or each line of stdin), by
    beam search and by sampling, each with its log p(target | source): </s> included, the number
    `rescore` gives the pair. The paper's Table 3.

    Phrases are typed as they read ("Don't"): each is Moses-tokenized in the model's source
    language, escaped and, for a lowercased table, lowercased, as the table's phrases were
    (--raw: looked up exactly as typed); the text report shows what was looked up, and the
    phrases unescaped.

    \b
    Example:
      phrase-rescorer suggest -m rnn.pt "A man in a blue shirt" --table phrase-table.gz
    """
    if beam_size == 0 and samples == 0:
        raise UserError("nothing to do: --beam-size 0 and --samples 0")
    ckpt, net, src_vocab, tgt_vocab = load_word_network(model, device)
    show = display(ckpt, model, raw, detok, source_lang, target_lang)
    reader = TypedPhrases(ckpt, model, raw, source_lang, lowercase)
    typed = list(phrases) if phrases else sys.stdin.read().splitlines()
    items = [(p, reader.table_form(p)) for p in typed if split_words(p)]
    items = [(p, form) for p, form in items if form]
    if not items:
        raise UserError("no phrases given (as arguments or on stdin, one per line)")
    known = sug.table_targets(table, [form for _, form in items], ckpt.inverse) if table is not None else None
    settings = sug.Settings(
        beam_size, samples, temperature, top, seed, max_length, allow_unk, length_alpha, coverage_beta
    )
    results = [sug.suggest(net, src_vocab, tgt_vocab, form, settings, known, typed=p) for p, form in items]
    _print_report(fmt, sug.format_text(results, show), sug.TSV_HEADER, sug.tsv_rows(results), sug.to_json(results))


# --- compare ------------------------------------------------------------------------------------


@cli.command()
@MODEL
@click.option("-t", "--table", required=True, type=click.Path(allow_dash=True), help="Phrase table (.gz or -).")
@click.option(
    "--tm-column",
    type=click.IntRange(min=1),
    help="1-based score column of the table to rank by. A train-model.perl table holds "
    "p(f|e) lex(f|e) p(e|f) lex(e|f) with f the source and e the target, so column 3 is the "
    "direct translation probability p(target|source), the one the paper compares  [default: "
    f"{cmp.DEFAULT_TM_COLUMN}; 1, p(source|target), for an inverse network, whose groups are "
    "those of one target phrase].",
)
@click.option(
    "--source",
    "sources",
    multiple=True,
    help="Compare this source phrase (repeatable); overrides the selection options.",
)
@click.option(
    "--min-length",
    default=4,
    show_default=True,
    type=click.IntRange(min=1),
    help="Select sources of at least this many words (the paper: 4).",
)
@click.option("--max-length", type=click.IntRange(min=1), help="... and at most this many.")
@click.option(
    "--min-targets",
    default=6,
    show_default=True,
    type=click.IntRange(min=1),
    help="Select sources with at least this many targets in the table.",
)
@click.option(
    "--min-count",
    type=float,
    help="Frequency band: sources seen at least this often (count(source) of the counts field).",
)
@click.option("--max-count", type=float, help="Frequency band: ... and at most this often.")
@click.option(
    "--max-sources",
    default=10,
    show_default=True,
    type=click.IntRange(min=1),
    help="How many of the qualifying sources to compare (a seeded uniform sample).",
)
@click.option("--top", default=3, show_default=True, type=click.IntRange(min=1), help="Targets per ranking.")
@click.option("--seed", default=1, show_default=True, help="Seed of the samples.")
@typed_options
@detok_options
@FORMAT
@click.option(
    "--plot", type=click.Path(), help="Also draw the score scatter plot into this picture (.png, .pdf or .svg)."
)
@click.option(
    "--scatter-pairs",
    default=2000,
    show_default=True,
    type=click.IntRange(min=0),
    help="Pairs of qualifying sources sampled for the scatter, the correlation and the source gain.",
)
@device_option
@threads_option
@click.pass_context
def compare(
    ctx: click.Context,
    model: str,
    table: str,
    tm_column: int | None,
    sources: tuple[str, ...],
    min_length: int,
    max_length: int | None,
    min_targets: int,
    min_count: float | None,
    max_count: float | None,
    max_sources: int,
    top: int,
    seed: int,
    raw: bool,
    source_lang: str | None,
    lowercase: bool | None,
    detok: bool,
    target_lang: str | None,
    fmt: str,
    plot: str | None,
    scatter_pairs: int,
    device: str,
) -> None:
    """The top targets of source phrases by the phrase table's own score next to the top targets
    by the network (the paper's Table 2); the rank correlation of the two scores and the
    network's source gain over a sample of pairs, and with --plot their scatter (Fig. 3).

    --source phrases are typed as they read and Moses-tokenized like suggest's; the text report
    shows phrases unescaped (--detok: detokenized, --raw: as in the table).

    \b
    Example:
      phrase-rescorer compare -m rnn.pt -t phrase-table.gz --plot scores.png
    """
    if plot and not scatter_pairs:
        raise UserError("--plot needs --scatter-pairs above 0")
    for low, high, what in ((min_length, max_length, "length"), (min_count, max_count, "count")):
        if low is not None and high is not None and high < low:
            raise UserError(f"--max-{what} {high:g} is below --min-{what} {low:g}: no source would qualify")
    if plot:
        from ..output import check_distinct_paths

        check_distinct_paths(table, plot, model=model)
        check_picture_output(plot)
    ckpt, net, src_vocab, tgt_vocab = load_word_network(model, device)
    tm_column = tm_column or (1 if ckpt.inverse else cmp.DEFAULT_TM_COLUMN)
    show = display(ckpt, model, raw, detok, source_lang, target_lang)
    keep = GroupFilter(min_length, max_length, min_targets, min_count, max_count)
    reader = TypedPhrases(ckpt, model, raw, source_lang, lowercase)
    given = [form for _, form in looked_up(ctx, sources, reader)] or None
    with progress(ctx, "compare", " sources") as bar:
        groups = counted(phrase_groups(table, tm_column, ckpt.inverse), bar)
        report = cmp.compare(
            groups, net, src_vocab, tgt_vocab, tm_column, given, keep, max_sources, top, scatter_pairs, seed
        )
    if not report.comparisons:
        why = "none of the --source phrases is in it" if given else "no source qualifies (see the selection options)"
        raise UserError(f"{table}: {why}", EXIT_INPUT)
    _print_report(fmt, cmp.format_text(report, display=show), cmp.TSV_HEADER, cmp.tsv_rows(report), cmp.to_json(report))
    if plot:
        rho = report.spearman
        title = f"{len(report.scatter_table)} phrase pairs of {os.path.basename(table)}"
        title += f"; Spearman {rho:.2f}" if rho is not None else ""
        with pictures():
            plots.score_scatter(
                report.scatter_table,
                report.scatter_network,
                plot,
                f"ln table score ({cmp.column_name(tm_column)})",
                title,
            )
        say(ctx, f"scatter plot: {plot}")
