"""The ``phrase-rescorer`` command line: option parsing only, the work is done by the library.

Subcommands live in one module per family (``inspect_table``, ``train``, ``rescore``, ``moses``,
``analysis``, ``embed_plot``, ``experiment``) and register themselves on the group below. Errors a
user can fix (bad input, a wrong model file, a moses.ini that does not match its table, a full
disk) end the run with one clear line on stderr and the exit code of ``errors.EXIT_CODES``, never
a traceback.
"""

from __future__ import annotations

import sys

import click

from ..errors import EXIT_CODES
from .common import add_common_options, run_guarded


@click.group("phrase-rescorer")
@click.pass_context
def cli(ctx: click.Context) -> None:
    """Add the RNN Encoder-Decoder feature of Cho et al. (2014) to a Moses phrase table.

    \b
    Typical use:
      phrase-rescorer inspect model/phrase-table.gz
      phrase-rescorer train model/phrase-table.gz rnn.pt --preset paper
      rescore-phrase-table model/phrase-table.gz model/phrase-table.rnn.gz --model rnn.pt
      phrase-rescorer moses-ini model/moses.ini model/moses.rnn.ini --table model/phrase-table.rnn.gz
      phrase-rescorer experiment --ini model/moses.ini --dev D.en D.fr --test T.en T.fr \\
          --model rnn.pt --runs 3 --out exp/      (the MERT A/B: does the column help?)

    Run any command with -h for its options.
    """
    ctx.ensure_object(dict)


def _register() -> None:
    from . import inspect_table  # noqa: F401  (each module adds its commands to ``cli``)

    for name in (
        "train",
        "train_nmt",
        "rescore",
        "moses",
        "analysis",
        "embed_plot",
        "translate",
        "average",
        "experiment",
        "lm",
        "nbest",
        "rerank",
        "hybrid",
        "score",
    ):
        try:
            __import__(f"{__name__}.{name}")
        except ModuleNotFoundError as e:
            if e.name != f"{__name__}.{name}":
                raise
    for command in (cli, *cli.commands.values()):
        add_common_options(command)


_register()


def main(startup_mask: set[int] | None = None) -> None:
    """``phrase-rescorer`` (``startup_mask``: see ``entry``)."""
    run_guarded(cli, prog_name="phrase-rescorer", startup_mask=startup_mask)


def rescore_main(startup_mask: set[int] | None = None) -> None:
    """``rescore-phrase-table``: the ``rescore`` subcommand as a program of its own."""
    command = cli.commands.get("rescore")
    if command is None:  # pragma: no cover - the package always ships it
        sys.exit("rescore-phrase-table: the rescoring command is not installed")
    run_guarded(command, prog_name="rescore-phrase-table", startup_mask=startup_mask)


def moses_step_main(startup_mask: set[int] | None = None) -> None:
    """``moses-rescore-step``: the ``moses-step`` subcommand as a program of its own."""
    run_guarded(cli.commands["moses-step"], prog_name="moses-rescore-step", startup_mask=startup_mask)


__all__ = ["cli", "main", "rescore_main", "moses_step_main", "EXIT_CODES"]
