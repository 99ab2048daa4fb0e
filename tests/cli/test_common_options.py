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
from phrase_rescorer.cli.common import CONTEXT_SETTINGS
from phrase_rescorer.rescoring.options import RescoreOptions
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
    r = subprocess.run(
        [PYTHON, str(REPO / "bin" / program), "--version"], capture_output=True, text=True, env=cli_env(), timeout=120
    )
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


def test_threads_device_and_click_settings_are_defined_once() -> None:
    """--threads (applied while parsing, on every command that has it), --device and the click
    settings (-h, the help's width) are one definition each, also on the commands that hand the
    thread count on (experiment: the decoder, rerank-tune: mert)."""
    commands = {"(group)": cli, **cli.commands}
    threads = {name: p for name, c in commands.items() for p in c.params if "--threads" in p.opts}
    devices = {name: p for name, c in commands.items() for p in c.params if "--device" in p.opts}
    assert {"experiment", "rerank-tune", "rescore", "train"} <= set(threads)
    assert {"experiment", "rescore", "train"} <= set(devices)
    assert len({p.callback for p in threads.values()}) == 1
    assert {tuple(p.opts) for p in threads.values()} == {("--threads", "-threads")}
    assert len({(p.default, p.help) for p in devices.values()}) == 1
    assert all(c.context_settings == CONTEXT_SETTINGS for c in commands.values())
    r = CliRunner().invoke(cli.commands["experiment"], ["-h"])
    assert r.exit_code == 0 and "--threads N|all" in r.output


def test_rescoring_defaults_are_the_library_s() -> None:
    """rescore's and moses-step's option defaults are RescoreOptions' (the library's), not
    numbers of their own."""
    defaults = RescoreOptions()
    for name in ("rescore", "moses-step"):
        ctx = click.Context(cli.commands[name])
        given = {p.name: p.get_default(ctx) for p in cli.commands[name].params}
        for field in ("score_format", "normalize", "unk_feature", "batch_size", "window", "device", "dtype", "scorer"):
            assert given[field] == getattr(defaults, field), (name, field)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["moses-ini", "MISSING", "o.ini", "--table", "t.gz"], "MISSING: cannot read: No such file or directory"),
        (["rerank-tune", "FILE", "MISSING", "w"], "MISSING: cannot read: No such file or directory"),
        (["rerank-tune", "FILE", "FILE", "w", "--init", "DIR"], "--init: DIR: cannot read: a directory, not a file"),
        (["moses-step", "FILE"], "FILE: cannot read: not a directory"),
    ],
)
def test_a_missing_input_is_an_unreadable_input_as_everywhere(tmp_path: Path, args: list[str], message: str) -> None:
    """Inputs click checks before the command runs are reported as the library reports the
    others: the path, 'cannot read', exit 6 (the table's unreadable input), no usage text."""
    from phrase_rescorer.errors import EXIT_OS

    (tmp_path / "file").write_text("x\n")
    paths = {"MISSING": str(tmp_path / "missing"), "DIR": str(tmp_path), "FILE": str(tmp_path / "file")}
    r = subprocess.run(
        [PYTHON, "-m", "phrase_rescorer", *[paths.get(a, a) for a in args]], capture_output=True, env=cli_env()
    )
    for name, path in paths.items():
        message = message.replace(name, path)
    assert r.returncode == EXIT_OS and r.stderr.decode().splitlines() == [f"phrase-rescorer: error: {message}"]
