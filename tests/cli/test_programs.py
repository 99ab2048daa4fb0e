"""Every program a user is told to run exists both as a file in bin/ (from a checkout) and as a
console script of the installed package (pip install), under the same name."""

from __future__ import annotations

import importlib
import os
import re
import subprocess

import pytest

from tests.helpers.paths import PYTHON, REPO, cli_env


def console_scripts() -> dict[str, str]:
    """``[project.scripts]`` of pyproject.toml (name = "module:function" lines; no tomllib on 3.10)."""
    section = (REPO / "pyproject.toml").read_text().split("[project.scripts]", 1)[1].split("\n[", 1)[0]
    return dict(re.findall(r'^([\w-]+) = "([\w.]+:\w+)"$', section, re.M))


SCRIPTS = console_scripts()
BIN = sorted(p.name for p in (REPO / "bin").iterdir() if p.is_file())


def test_every_bin_program_is_a_console_script() -> None:
    assert sorted(SCRIPTS) == BIN


def test_the_readme_and_the_docs_name_only_installed_programs() -> None:
    texts = [(REPO / "README.md").read_text(), *(page.read_text() for page in sorted((REPO / "docs").glob("*.md")))]
    # not $MOSES/bin/..., nor a Moses program named in a quoted error ("a usable Moses: bin/moses ...")
    told = {name for text in texts for name in re.findall(r"(?<![\w/])(?<!Moses: )bin/([a-z][a-z-]+)", text)}
    told |= {
        name
        for name in ("phrase-rescorer", "rescore-phrase-table", "moses-rescore-step")
        if any(name in text for text in texts)
    }
    assert "moses-rescore-step" in texts[0] and "ems-train-model" in told
    assert told <= set(SCRIPTS), told - set(SCRIPTS)


@pytest.mark.parametrize("name", sorted(SCRIPTS))
@pytest.mark.slow
def test_console_script_and_bin_file_give_the_same_help(name: str) -> None:
    module, function = SCRIPTS[name].split(":")
    assert callable(getattr(importlib.import_module(module), function))
    entry = subprocess.run(
        [PYTHON, "-c", f"import sys; sys.argv = [{name!r}, '-h']; from {module} import {function}; {function}()"],
        capture_output=True,
        text=True,
        env=cli_env(),
        timeout=120,
    )
    script = subprocess.run(
        [PYTHON, str(REPO / "bin" / name), "-h"], capture_output=True, text=True, env=cli_env(), timeout=120
    )
    assert entry.returncode == script.returncode == 0, entry.stderr + script.stderr
    assert entry.stdout == script.stdout and f"Usage: {name}" in entry.stdout


@pytest.mark.parametrize(
    ("name", "args"),
    [(name, ["-h"]) for name in sorted(SCRIPTS)]
    + [("phrase-rescorer", ["train", "-h"]), ("phrase-rescorer", ["--version"])],
)
def test_help_to_a_reader_gone_is_141_without_a_traceback(name: str, args: list[str]) -> None:
    """``PROGRAM -h | head -1``: when the reader has left before the help is written (the pipe's
    read end closed first, so the write always meets EPIPE), every program exits 141 as a
    shell's SIGPIPE would, saying nothing (no BrokenPipeError traceback, no exit 1)."""
    read, write = os.pipe()
    os.close(read)
    try:
        done = subprocess.run(
            [PYTHON, str(REPO / "bin" / name), *args], stdout=write, stderr=subprocess.PIPE, env=cli_env(), timeout=120
        )
    finally:
        os.close(write)
    assert (done.returncode, done.stderr.decode()) == (141, "")


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_every_program_has_version_and_quiet(name: str) -> None:
    done = subprocess.run(
        [PYTHON, str(REPO / "bin" / name), "--version"], capture_output=True, text=True, env=cli_env(), timeout=120
    )
    assert done.returncode == 0 and done.stdout.startswith(f"{name}, version "), done.stderr
    helped = subprocess.run(
        [PYTHON, str(REPO / "bin" / name), "-h"], capture_output=True, text=True, env=cli_env(), timeout=120
    )
    assert re.search(r"^\s+-q, --quiet\s", helped.stdout, re.M), helped.stdout
