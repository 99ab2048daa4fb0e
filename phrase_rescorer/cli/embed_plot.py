"""``embed``, ``plot-log``, ``plot-experiment``: a network's word and phrase representations for
the TensorBoard projector (and as t-SNE maps), the curves of a training log, an experiment's BLEU."""

from __future__ import annotations

import os

import click

from ..analysis import embed as emb
from ..analysis import plots
from ..analysis.picture_outputs import check_picture_output
from ..analysis.table_groups import Reservoir, phrase_groups
from ..output import check_distinct_paths
from ..training.log import TrainingLogError, read_training_curves
from . import cli
from .analysis_common import MODEL, counted, load_word_network, looked_up, pictures
from .common import NamedPath, UserError, device_option, progress, say, threads_option
from .text import TypedPhrases, display, typed_options

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
    ckpt, net, src_vocab, tgt_vocab = load_word_network(model, device)
    show = display(ckpt, model, raw).source
    kind = emb.representation_kind(net)
    if kind != "cho2014":
        say(ctx, f"phrase representation: {emb.REPRESENTATION[kind]}")
    reader = TypedPhrases(ckpt, model, raw, source_lang, lowercase)
    chosen = list(dict.fromkeys(form for _, form in looked_up(ctx, phrases, reader)))
    if table is not None and num_phrases:
        pool: Reservoir[str] = Reservoir(num_phrases, seed)
        with progress(ctx, "sample", " sources") as bar:
            for g in counted(phrase_groups(table, inverse=ckpt.inverse), bar):
                if g.length >= min_length:
                    pool.offer(g.source)
        given = set(chosen)
        chosen += [p for p in pool.in_stream_order() if p not in given]
    os.makedirs(out, exist_ok=True)
    spaces = emb.word_spaces(net, src_vocab, tgt_vocab, show)
    if chosen:
        spaces.append(emb.phrase_space(net, src_vocab, chosen, show))
    if plot:
        for space in spaces:
            check_picture_output(emb.map_path(out, space))
    written = [path for space in spaces for path in emb.write_space(out, space)]
    written.append(emb.write_projector_config(out, spaces))
    if plot:
        with pictures():
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
@click.argument("log", type=NamedPath())
@click.option(
    "-o", "--out", required=True, type=click.Path(), help="Picture to write: .png, .pdf or .svg, as its name says."
)
@click.pass_context
def plot_log(ctx: click.Context, log: str, out: str) -> None:
    """Training curves from the LOG written by `train`, `train-nmt` or `train-lm` (--log, by
    default MODEL_OUT's .log): the training loss and the held-out perplexity, each against the
    step and against the minutes of training, beside a unigram model's perplexity (train,
    train-nmt) or KenLM's (train-lm --kenlm); and the held-out pairs' greedy BLEU of a
    train-nmt run with --valid-bleu. Prints the picture's path; an existing OUT is replaced only
    if it is a picture.

    \b
    Example:
      phrase-rescorer plot-log nmt.log -o nmt-curves.png"""
    check_distinct_paths(log, out)  # the log, replaced by its picture
    check_picture_output(out)
    try:
        records = read_training_curves(log)
    except TrainingLogError as e:
        raise UserError(str(e), e.exit_code) from e
    if records.skipped_lines:
        say(ctx, f"{log}: skipped {records.skipped_lines} line(s) that are not JSON records")
    with pictures():
        plots.training_curves(records, out)
    click.echo(out)


# --- plot-experiment ----------------------------------------------------------------------------


@cli.command("plot-experiment")
@click.argument("out_dir", metavar="OUT_DIR", type=NamedPath(file_okay=False))
@click.option(
    "-o",
    "--out",
    type=click.Path(),
    help="Picture to write: .png, .pdf or .svg, as its name says  [default: OUT_DIR/experiment.png].",
)
def plot_experiment(out_dir: str, out: str | None) -> None:
    """BLEU of an experiment's systems, dev and test side by side, from its --out directory
    OUT_DIR (its experiment.json): each MERT run a dot, the mean with its 95 % bootstrap
    interval (sentences resampled, every run kept). Works on an unfinished experiment too (the
    runs done so far). Prints the picture's path; an existing OUT is replaced only if it is a
    picture.

    \b
    Example:
      phrase-rescorer plot-experiment work/exp -o work/exp/bleu.png"""
    from ..experiment.report import REPORT_NAME, read_report

    out = out or os.path.join(out_dir, "experiment.png")
    check_distinct_paths(os.path.join(out_dir, REPORT_NAME), out)
    check_picture_output(out)
    report = read_report(out_dir)
    with pictures():
        plots.experiment_chart(report, out)
    click.echo(out)
