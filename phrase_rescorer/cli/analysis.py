"""``suggest``, ``compare``, ``embed``, ``plot-log``: look at what a trained network learned."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import click

from ..analysis import compare as cmp
from ..analysis import embed as emb
from ..analysis import plots
from ..analysis import suggest as sug
from ..analysis.table_groups import GroupFilter, Reservoir, normalize, phrase_groups
from ..data.vocab import Vocabulary, tokenize_phrase
from ..errors import EXIT_INPUT
from ..model.architectures import Network
from ..model.checkpoint import Checkpoint, load_checkpoint
from ..output import check_distinct_paths
from ..training.log import TrainingLogError, read_training_curves
from . import cli
from .common import UserError, device_option, model_option, progress, resolve_device, say, threads_option
from .text import TypedPhrases, detok_options, display, typed_options

T = TypeVar("T")
FORMATS = click.Choice(["text", "tsv", "json"])
MODEL = model_option()
FORMAT = click.option("--format", "fmt", type=FORMATS, default="text", show_default=True, help="Report format.")


#: The line each analysis command says about the network's direction (``train --direction``).
DIRECTION_LINES = {
    "forward": "direction: forward, p(target|source): the network reads the table's source phrases "
    "and predicts its targets",
    "inverse": "direction: inverse, p(source|target): the network reads the table's target phrases "
    "and predicts its sources (typed phrases are target phrases; a table's groups are "
    "those of one target)",
}


def _load(path: str, device: str) -> tuple[Checkpoint, Network, Vocabulary, Vocabulary]:
    """The network of ``path``, after saying its direction on stderr."""
    ckpt = load_checkpoint(path)
    if ckpt.subwords is not None:
        raise UserError(
            f"{path}: a subword model; suggest, compare and embed read word models only (rescore reads both)"
        )
    ctx = click.get_current_context(silent=True)
    if ctx is not None:
        say(ctx, DIRECTION_LINES[ckpt.direction])
    return ckpt, ckpt.build_model(resolve_device(device)), ckpt.src_vocab, ckpt.tgt_vocab


def _looked_up(ctx: click.Context, typed: Iterable[str], reader: TypedPhrases) -> list[tuple[str, str]]:
    """(typed, table form) of each non-blank typed phrase; says the ones that changed."""
    forms = [(p, reader.table_form(p)) for p in typed if tokenize_phrase(p)]
    for p, form in forms:
        if normalize(p) != form:
            say(ctx, f'looked up "{p}" as "{form}"')
    return [(p, form) for p, form in forms if form]


@contextmanager
def _pictures() -> Iterator[None]:
    """Missing plotting libraries become a usage error that says how to install them."""
    try:
        yield
    except plots.PlotsUnavailable as e:
        raise UserError(str(e), e.exit_code) from e


def _counted(items: Iterable[T], bar: Any) -> Iterator[T]:
    for item in items:
        bar.update()
        yield item


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
    ckpt, net, src_vocab, tgt_vocab = _load(model, device)
    show = display(ckpt, model, raw, detok, source_lang, target_lang)
    reader = TypedPhrases(ckpt, model, raw, source_lang, lowercase)
    typed = list(phrases) if phrases else sys.stdin.read().splitlines()
    items = [(p, reader.table_form(p)) for p in typed if tokenize_phrase(p)]
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
@click.option("--plot", type=click.Path(dir_okay=False), help="Also draw the score scatter plot into this PNG.")
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
    ckpt, net, src_vocab, tgt_vocab = _load(model, device)
    tm_column = tm_column or (1 if ckpt.inverse else cmp.DEFAULT_TM_COLUMN)
    show = display(ckpt, model, raw, detok, source_lang, target_lang)
    keep = GroupFilter(min_length, max_length, min_targets, min_count, max_count)
    reader = TypedPhrases(ckpt, model, raw, source_lang, lowercase)
    given = [form for _, form in _looked_up(ctx, sources, reader)] or None
    with progress(ctx, "compare", " sources") as bar:
        groups = _counted(phrase_groups(table, tm_column, ckpt.inverse), bar)
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
        with _pictures():
            plots.score_scatter(
                report.scatter_table,
                report.scatter_network,
                plot,
                f"ln table score ({cmp.column_name(tm_column)})",
                title,
            )
        say(ctx, f"scatter plot: {plot}")


# --- embed --------------------------------------------------------------------------------------


@cli.command()
@MODEL
@click.option("-o", "--out", required=True, type=click.Path(file_okay=False), help="Output folder (created).")
@click.option(
    "-t",
    "--table",
    type=click.Path(allow_dash=True),
    help="Phrase table to sample source phrases from (for the phrase representations).",
)
@click.option("--phrase", "phrases", multiple=True, help="A source phrase to represent (repeatable).")
@click.option(
    "--num-phrases",
    default=1000,
    show_default=True,
    type=click.IntRange(min=0),
    help="How many sources to sample from --table (seeded, uniform).",
)
@click.option(
    "--min-length",
    default=1,
    show_default=True,
    type=click.IntRange(min=1),
    help="Sample only sources of at least this many words.",
)
@click.option("--seed", default=1, show_default=True, help="Seed of the phrase sample and of t-SNE.")
@click.option("--plot", is_flag=True, help="Also draw 2-D t-SNE maps as PNG (needs the plots extra).")
@click.option(
    "--plot-words",
    default=1000,
    show_default=True,
    type=click.IntRange(min=3),
    help="The most frequent words of each side to put on the word maps.",
)
@click.option(
    "--labels",
    default=120,
    show_default=True,
    type=click.IntRange(min=0),
    help="At most this many labels per map (frequent words / short phrases first, none overlapping).",
)
@click.option("--perplexity", default=30.0, show_default=True, type=click.FloatRange(min=1), help="t-SNE perplexity.")
@typed_options
@device_option
@threads_option
@click.pass_context
def embed(
    ctx: click.Context,
    model: str,
    out: str,
    table: str | None,
    phrases: tuple[str, ...],
    num_phrases: int,
    min_length: int,
    seed: int,
    plot: bool,
    plot_words: int,
    labels: int,
    perplexity: float,
    raw: bool,
    source_lang: str | None,
    lowercase: bool | None,
    device: str,
) -> None:
    """Export the source and target word embeddings and the phrase representations c of chosen
    source phrases as TSV files for the TensorBoard projector (Figs. 4 and 5 of the paper); with
    --plot also draw them as t-SNE maps. Prints the paths written. --phrase is typed as it reads
    and Moses-tokenized like suggest's; labels are unescaped (--raw: as in the table).

    \b
    View: load a NAME.vectors.tsv and its NAME.metadata.tsv at https://projector.tensorflow.org,
    or run `tensorboard --logdir OUT` (OUT holds a projector_config.pbtxt).
    """
    ckpt, net, src_vocab, tgt_vocab = _load(model, device)
    show = display(ckpt, model, raw).source
    kind = emb.representation_kind(net)
    if kind != "cho2014":
        say(ctx, f"phrase representation: {emb.REPRESENTATION[kind]}")
    reader = TypedPhrases(ckpt, model, raw, source_lang, lowercase)
    chosen = list(dict.fromkeys(form for _, form in _looked_up(ctx, phrases, reader)))
    if table is not None and num_phrases:
        pool: Reservoir[str] = Reservoir(num_phrases, seed)
        with progress(ctx, "sample", " sources") as bar:
            for g in _counted(phrase_groups(table, inverse=ckpt.inverse), bar):
                if g.length >= min_length:
                    pool.offer(g.source)
        given = set(chosen)
        chosen += [p for p in pool.in_stream_order() if p not in given]
    os.makedirs(out, exist_ok=True)
    spaces = emb.word_spaces(net, src_vocab, tgt_vocab, show)
    if chosen:
        spaces.append(emb.phrase_space(net, src_vocab, chosen, show))
    written = [path for space in spaces for path in emb.write_space(out, space)]
    written.append(emb.write_projector_config(out, spaces))
    if plot:
        with _pictures():
            written += emb.draw_maps(
                spaces,
                out,
                plot_words,
                labels,
                perplexity,
                seed,
                on_space=lambda name, n: say(ctx, f"t-SNE of {n} {name} ..."),
            )
    for path in written:
        click.echo(path)


# --- plot-log -----------------------------------------------------------------------------------


@cli.command("plot-log")
@click.argument("log", type=click.Path(dir_okay=False))
@click.option("-o", "--out", required=True, type=click.Path(dir_okay=False), help="PNG file to write.")
@click.pass_context
def plot_log(ctx: click.Context, log: str, out: str) -> None:
    """Training curves from the LOG written by `train --log`: the training loss and the
    validation perplexity (beside a unigram model's) against the step. Prints the PNG's path."""
    check_distinct_paths(log, out)  # the log, replaced by its picture
    try:
        records = read_training_curves(log)
    except TrainingLogError as e:
        raise UserError(str(e), e.exit_code) from e
    if records.skipped_lines:
        say(ctx, f"{log}: skipped {records.skipped_lines} line(s) that are not JSON records")
    with _pictures():
        plots.training_curves(records, out)
    click.echo(out)
