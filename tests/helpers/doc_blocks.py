"""The shell blocks of the README and the results pages, and a runner that runs them as a user does.

Every fenced block of these pages carries one mark in its info string:

- ```` ```sh ````: runs as written with this package alone; ``tests/cli/test_doc_examples.py``
  runs these blocks, in order, section by section;
- ```` ```sh moses ````: needs a Moses build (``$MOSES``); ``tests/integration/test_readme_pipeline.py``
  runs every ``sh`` and ``sh moses`` block of the README, in order;
- ```` ```sh long ````: a measurement that takes hours (a results page's commands): not run; its
  commands and options are checked like every documented command;
- ```` ```sh install ````: installs packages (network, a virtual environment): not run; its
  ``make`` targets and pip extras are checked to exist;
- ```` ```python ````: Python run with this package, in the same directory after the blocks
  before it (what they wrote), by the same tests as the ``sh`` blocks;
- ```` ```text ````: not commands (a synopsis, an output).

A page may have no indented code block: every command is in a marked fence.
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tests.helpers.paths import PYTHON, REPO

MARKS = ("sh", "sh moses", "sh long", "sh install", "python", "text")
#: The pages whose every block is marked.
MARKED_PAGES = ("README.md", "docs/results.md", "docs/results-archive.md")
#: The programs a block runs from the checkout (bin/), with this test run's Python.
PROGRAMS = ("phrase-rescorer", "rescore-phrase-table", "moses-rescore-step")


@dataclass(frozen=True)
class Block:
    page: str
    section: str  # the heading above it (## or ###)
    mark: str  # the fence's info string
    text: str
    line: int  # 1-based line of the opening fence


def blocks(page: str) -> list[Block]:
    """The fenced blocks of ``page`` (relative to the repository), with their section and mark."""
    found: list[Block] = []
    section, mark, start, body = "", None, 0, []  # type: ignore[var-annotated]
    for number, line in enumerate((REPO / page).read_text(encoding="utf-8").splitlines(), 1):
        if mark is None and line.startswith("#") and not line.startswith("#!"):
            section = line.lstrip("#").strip()
        if line.startswith("```"):
            if mark is None:
                mark, start, body = line[3:].strip(), number, []
            else:
                found.append(Block(page, section, mark, "\n".join(body) + "\n", start))
                mark = None
        elif mark is not None:
            body.append(line)
    return found


def indented_code_lines(page: str) -> list[int]:
    """Lines of indented code blocks (4 spaces after a blank line, outside fences and lists)."""
    lines = (REPO / page).read_text(encoding="utf-8").splitlines()
    fenced, found, previous = False, [], ""
    for number, line in enumerate(lines, 1):
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and line.startswith("    ") and line.strip() and not previous.strip():
            found.append(number)
        previous = line
    return found


def sections(page: str, marks: tuple[str, ...]) -> dict[str, list[Block]]:
    """The blocks with one of ``marks``, by section, in the page's order."""
    by_section: dict[str, list[Block]] = {}
    for block in blocks(page):
        if block.mark in marks:
            by_section.setdefault(block.section, []).append(block)
    return by_section


class Runner:
    """Runs blocks one after another in one directory, as one shell session would: a variable a
    block sets is seen by the next. The directory holds a link to the checkout's ``tests/`` (the
    data the README names) and the package's programs on PATH, run by this test run's Python."""

    def __init__(self, directory: Path, env: dict[str, str] | None = None) -> None:
        self.directory = directory
        (directory / "tests").symlink_to(REPO / "tests")
        programs = directory / ".bin"
        programs.mkdir()
        for name in PROGRAMS:
            script = programs / name
            script.write_text(f'#!/bin/sh\nexec "{PYTHON}" "{REPO / "bin" / name}" "$@"\n')
            script.chmod(0o755)
        self.env = dict(os.environ)
        self.env |= env or {}
        self.env["PATH"] = f"{programs}{os.pathsep}{self.env.get('PATH', '')}"
        self.env["PYTHONPATH"] = str(REPO)
        self.env.setdefault("OMP_NUM_THREADS", "1")
        self.state = directory / ".state"  # the shell's variables, kept between blocks
        self.state.write_text("")
        self.ran: list[Block] = []

    def run(self, block: Block, timeout: float = 600) -> subprocess.CompletedProcess:
        if block.mark == "python":  # the package's Python, in the directory the blocks before it wrote in
            return self._check(block, [PYTHON, "-c", block.text], timeout)
        script = (
            f"set -e -o pipefail\n. {self.state}\n{block.text}\n"
            f"declare -p | grep -E '^declare (--|-x) [A-Za-z_][A-Za-z0-9_]*=' "
            f"| grep -vE ' (BASH[A-Z_]*|EUID|PPID|SHELLOPTS|UID|PWD|OLDPWD|_)=' > {self.state}.new\n"
            f"mv {self.state}.new {self.state}\n"
        )
        return self._check(block, ["bash", "-c", script], timeout)

    def _check(self, block: Block, argv: list[str], timeout: float) -> subprocess.CompletedProcess:
        done = subprocess.run(argv, cwd=self.directory, env=self.env, capture_output=True, text=True, timeout=timeout)
        assert done.returncode == 0, (
            f"{block.page}:{block.line} ({block.section}) exited {done.returncode}:\n{block.text}\n"
            f"--- stderr ---\n{done.stderr[-4000:]}"
        )
        self.ran.append(block)
        return done


def makefile_targets() -> set[str]:
    text = (REPO / "Makefile").read_text()
    return set(re.findall(r"^([a-z][\w-]*):", text, re.MULTILINE))
