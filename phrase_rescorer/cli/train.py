"""``train``: fit the RNN Encoder-Decoder to the unique pairs of a phrase table."""

from __future__ import annotations

from typing import Any

import click

from ..data.pairs import PairSet, load_pairs
from ..training.run_settings import TrainConfig
from . import cli
from .common import NamedPath, progress
from .training_options import training_options
from .training_run import run_training

#: The paper's settings but for two: gradients clipped at 5 (the paper: 1) and initial weights of
#: standard deviation 0.05 (the paper: 0.01), the recipe of every measurement in docs/training.md
#: (a network trained for hours reads its source sooner than from the paper's start).
PHRASE_DEFAULTS = TrainConfig(clip_norm=5.0, init_std=0.05)


@cli.command()
@click.argument("table", type=click.Path(allow_dash=True))
@click.argument("model_out", type=NamedPath(stream="standard output"))
@click.option(
    "--extract", is_flag=True, help="TABLE is a Moses extract file (src ||| tgt ||| alignment), not a phrase table."
)
@training_options(data="table", inputs="TABLE", defaults=PHRASE_DEFAULTS, arch="cho2014", preset="paper")
@click.pass_context
def train(ctx: click.Context, table: str, model_out: str, extract: bool, **options: Any) -> None:
    """Train the RNN Encoder-Decoder on the unique phrase pairs of TABLE (.gz or - for stdin)
    and write the best network by held-out likelihood to MODEL_OUT.

    \b
    Also written: MODEL_OUT without .pt plus .last.pt (the latest state, for --resume) and .log
    (JSON lines). Ctrl-C or SIGTERM saves the latest state; the same command with --resume
    continues exactly where it stopped. Without --max-steps, --max-time or --epochs, training
    runs until --patience validations bring no improvement.

    \b
    Example (the paper's network, an hour on one core; then rescore-phrase-table -m fwd.pt):
      phrase-rescorer train model/phrase-table.gz fwd.pt --preset paper --max-time 3600 -threads 1

    \b
    On several GPUs or machines, start the same command with torchrun
    (docs/distributed.md), e.g.  torchrun --nproc-per-node 4 -m phrase_rescorer train TABLE MODEL_OUT ...
    """

    def load() -> tuple[PairSet, str]:
        with progress(ctx, "reading", in_bytes=True) as bar:
            pairs = load_pairs(table, extract=extract, on_progress=bar.update_to)
        return pairs, f"{table}: {pairs.lines_read:,} lines"

    run_training(ctx, inputs=(table,), load=load, model_out=model_out, trained_on="phrase pairs", **options)
