"""One name per option across the commands: -m/--model for the network everywhere (moses-step's
old --network still works, with a warning), --moses DIR where Moses is run."""

from __future__ import annotations

from pathlib import Path

import click
from click.testing import CliRunner

from phrase_rescorer.cli import cli
from phrase_rescorer.moses.ini import MosesIniError

NETWORK_COMMANDS = ("rescore", "moses-step", "suggest", "compare", "embed")


def test_the_network_is_minus_m_or_model_everywhere() -> None:
    for name in NETWORK_COMMANDS:
        options = [p for p in cli.commands[name].params if isinstance(p, click.Option) and "--model" in p.opts]
        assert len(options) == 1 and options[0].opts == ["-m", "--model"], name
    for name, command in cli.commands.items():
        visible = [o for p in command.params if isinstance(p, click.Option) and not p.hidden for o in p.opts]
        assert "--network" not in visible and "--moses-dir" not in visible, name
    assert "--moses" in [o for p in cli.commands["moses-step"].params for o in p.opts]


def test_moses_step_still_takes_network_and_moses_dir_with_a_warning(tmp_path: Path) -> None:
    empty = tmp_path / "model"
    empty.mkdir()
    r = CliRunner().invoke(cli, ["moses-step", str(empty), "--network", "rnn.pt", "--moses-dir", "/opt/moses"])
    assert isinstance(r.exception, MosesIniError), r.output  # accepted; then no phrase table there
    assert "warning: --network is deprecated; use -m/--model" in r.stderr
    assert "warning: --moses-dir is deprecated; use --moses" in r.stderr


def test_moses_step_refuses_both_names_and_neither(tmp_path: Path) -> None:
    r = CliRunner().invoke(cli, ["moses-step", str(tmp_path), "--network", "a.pt", "-m", "b.pt"])
    assert r.exit_code == 2 and "--network is the old name of -m/--model" in r.output
    r = CliRunner().invoke(cli, ["moses-step", str(tmp_path)])
    assert r.exit_code == 2 and "Missing option '-m' / '--model'" in r.output


def test_the_beam_search_options_have_one_spelling_in_both_commands() -> None:
    """suggest and translate both search with a beam: each takes the other's old spelling too."""
    for name in ("suggest", "translate"):
        opts = {o for p in cli.commands[name].params if isinstance(p, click.Option) for o in p.opts}
        assert {"--beam-size", "--beam", "--length-alpha", "--alpha"} <= opts, name
