"""``train-nmt``: fit one of the tool's networks to the sentence pairs of a parallel corpus, for
the sentence-level n-best feature (``nbest --source``).

A sibling of ``train`` rather than a switch of it: it reads two line-aligned text files instead
of one table, and its defaults are those of sentence-level NMT (the rnnsearch attention network,
Adam, batches cut by tokens, sentences up to 80 tokens), where the phrase defaults are the
paper's. Everything else (presets, subwords, resume, limits, logs, torchrun) is ``train``'s, from
the same options and the same run (``training_options``, ``training_run``).
"""

from __future__ import annotations

from typing import Any

import click

from ..data.corpus import load_sentence_pairs
from ..data.pairs import PairSet
from ..training.run_settings import TrainConfig
from ..training.task_interface import LoopConfig
from . import cli
from .common import NamedPath, progress
from .training_options import training_options
from .training_run import run_training

#: Sentence-level defaults, from the measurements in docs/nmt.md ("The README's measurement").
NMT_DEFAULTS = TrainConfig(
    optimizer="adam",
    batch_tokens=1000,
    max_length=80,
    init_std=0.05,
    clip_norm=5.0,
    valid_fraction=0.03,
    loop=LoopConfig(lr=1e-3, valid_every=200, patience=5),
)


@cli.command("train-nmt")
@click.argument("source", type=click.Path(allow_dash=True))
@click.argument("target", type=click.Path(allow_dash=True))
@click.argument("model_out", type=NamedPath(stream="standard output"))
@training_options(
    data="corpus", inputs="SOURCE, TARGET", defaults=NMT_DEFAULTS, arch="rnnsearch", preset="small", units="auto"
)
@click.option(
    "--right-to-left",
    is_flag=True,
    help="Write the target from its last word to its first: a network of the same p(target | "
    "source), factored the other way, whose errors differ from the left-to-right one's (a further "
    "n-best feature beside it: experiment --nmt L2R.pt --nmt R2L.pt). The model file records it; "
    "nbest, score, experiment and translate reverse and restore the words themselves. "
    "With --direction inverse the side reversed is the source, the one that network writes.",
)
@click.option(
    "--valid-bleu",
    type=click.IntRange(0),
    default=0,
    show_default=True,
    metavar="N",
    help="Each validation also translates the first N held-out pairs greedily and logs their "
    "tokenized BLEU (valid_bleu in the log): a yardstick for comparing runs of different "
    "architectures or settings, whose perplexities need not rank them as translators. "
    "0: off. Costs a greedy search per pair at each validation: 300 pairs of the medium preset "
    "took 16 s on two CPU threads, against 4 s for the perplexity of 869.",
)
@click.pass_context
def train_nmt(ctx: click.Context, source: str, target: str, model_out: str, **options: Any) -> None:
    """Train a network on the sentence pairs of a parallel corpus: SOURCE and TARGET hold one
    tokenized sentence per line, line i of TARGET the translation of line i of SOURCE (plain or
    compressed; one of them may be - for stdin). The best network by held-out likelihood goes to
    MODEL_OUT, for `phrase-rescorer nbest NBEST OUT -m MODEL_OUT --source SOURCE_TEXT`.

    \b
    Use the corpus the Moses system was trained on, tokenized and cased as its phrase table
    (e.g. the train.tok.lc.* files given to train-model.perl). Line pairs with an empty side
    are skipped, duplicates kept once; files of different lengths are refused.
    Also written, as by train: MODEL_OUT's .last.pt (for --resume) and .log (JSON lines).

    \b
    Example (stops after 30 minutes on two threads; what such a network reaches: docs/results.md):
      phrase-rescorer train-nmt train.tok.lc.en train.tok.lc.fr nmt.pt --max-time 1800 --threads 2
    """

    def load() -> tuple[PairSet, str]:
        with progress(ctx, "reading", " line pairs") as bar:
            corpus = load_sentence_pairs(source, target, on_progress=bar.update_to)
        skipped = f" ({corpus.empty:,} with an empty side skipped)" if corpus.empty else ""
        return corpus.pairs, f"{source} + {target}: {corpus.lines:,} line pairs{skipped}"

    run_training(ctx, inputs=(source, target), load=load, model_out=model_out, trained_on="sentence pairs", **options)
