"""The training loop's options come from its one config (``LoopConfig``): every setting is an option
of every training command, with the default of that command's config, and what is given on the
command line is what the loop gets."""

from __future__ import annotations

from dataclasses import fields

import click

from phrase_rescorer.cli import cli
from phrase_rescorer.cli.lm import LM_DEFAULTS
from phrase_rescorer.cli.loop_options import loop_config
from phrase_rescorer.cli.train import PHRASE_DEFAULTS
from phrase_rescorer.cli.train_nmt import NMT_DEFAULTS
from phrase_rescorer.training.task_interface import LoopConfig

#: Each training command, its arguments and its config's loop settings.
COMMANDS = {
    "train": (["pt.gz", "m.pt"], PHRASE_DEFAULTS.loop),
    "train-nmt": (["s.en", "t.fr", "m.pt"], NMT_DEFAULTS.loop),
    "train-lm": (["text.fr", "m.pt"], LM_DEFAULTS.loop),
}
NOT_OFFERED = {"train-lm": {"keep_checkpoints"}}  # the CSLM keeps no networks to average


def options(command: str) -> dict[str, click.Option]:
    return {p.name: p for p in cli.commands[command].params if isinstance(p, click.Option) and p.name}


def test_every_setting_of_the_loop_is_an_option_with_the_commands_default() -> None:
    assert PHRASE_DEFAULTS.loop != NMT_DEFAULTS.loop != LM_DEFAULTS.loop  # three sets of defaults
    for command, (_, defaults) in COMMANDS.items():
        offered = options(command)
        for setting in fields(LoopConfig):
            name = setting.name
            if name in NOT_OFFERED.get(command, ()):
                assert name not in offered, (command, name)
                continue
            option = offered[name]
            assert option.opts[0] == "--" + name.replace("_", "-"), (command, name)
            assert option.default == getattr(defaults, name), (command, name)
            assert option.show_default == (option.default is not None), (command, name)


def test_the_loop_gets_the_commands_defaults_and_what_is_given() -> None:
    for command, (arguments, defaults) in COMMANDS.items():
        ctx = cli.commands[command].make_context(command, [*arguments])
        assert loop_config(dict(ctx.params)) == defaults, command
        given = ["--seed", "7", "--lr", "0.5", "--max-epochs", "3", "--warmup-steps", "9", "--log-every", "2"]
        ctx = cli.commands[command].make_context(command, [*arguments, *given])
        params = dict(ctx.params)
        loop = loop_config(params)
        assert (loop.seed, loop.lr, loop.epochs, loop.warmup_steps, loop.log_every) == (7, 0.5, 3, 9, 2), command
        assert not {f.name for f in fields(LoopConfig)} & set(params), command  # taken out of the options
