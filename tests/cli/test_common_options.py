"""-q/--quiet and --version: one definition, on the three programs and on every subcommand,
before or after the subcommand."""

from __future__ import annotations

import subprocess
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from phrase_rescorer import __version__
from phrase_rescorer.cli import cli
from tests.helpers.paths import PYTHON, REPO, cli_env


def _opts(command: click.Command) -> list[tuple[str, ...]]:
    return [tuple(p.opts) for p in command.params if isinstance(p, click.Option)]


def test_every_command_has_quiet_and_version_once() -> None:
    quiet = {id(p.callback) for c in (cli, *cli.commands.values()) for p in c.params if "--quiet" in p.opts}
    assert len(quiet) == 1  # one definition
    for name, command in {"(group)": cli, **cli.commands}.items():
        opts = _opts(command)
        assert opts.count(("-q", "--quiet")) == 1, name
        assert opts.count(("--version",)) == 1, name


@pytest.mark.parametrize("name", sorted(cli.commands))
def test_version_after_every_subcommand(name: str) -> None:
    r = CliRunner().invoke(cli, [name, "--version"], prog_name="phrase-rescorer")
    assert r.exit_code == 0 and r.output == f"phrase-rescorer, version {__version__}\n", r.output


@pytest.mark.parametrize("program", ["phrase-rescorer", "rescore-phrase-table", "moses-rescore-step"])
def test_the_three_programs_say_their_version(program: str) -> None:
    r = subprocess.run([PYTHON, str(REPO / "bin" / program), "--version"], capture_output=True, text=True,
                       env=cli_env(), timeout=120)
    assert r.returncode == 0 and r.stdout == f"{program}, version {__version__}\n", r.stderr


def test_quiet_before_or_after_the_subcommand(tmp_path: Path) -> None:
    table = tmp_path / "t.txt"
    table.write_bytes(b"a ||| le ||| 0.5 0.5 0.5 0.5\n")
    loud = CliRunner().invoke(cli, ["inspect", str(table)])
    assert loud.exit_code == 0 and "inspect: 1 lines done" in loud.stderr
    for args in (["-q", "inspect", str(table)], ["inspect", "-q", str(table)], ["inspect", str(table), "--quiet"]):
        r = CliRunner().invoke(cli, args)
        assert r.exit_code == 0 and r.stderr == "", (args, r.stderr)
        assert r.stdout == loud.stdout
