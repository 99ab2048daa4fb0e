"""`make demo` on a fresh clone: every file its commands name lies inside the repository, and
every input among them is a tracked file of it (nothing is read from beside the checkout)."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.helpers.paths import REAL_INI, REPO, SAMPLE, SAMPLE_INI

#: Paths the demo may name outside the repository.
ALLOWED_OUTSIDE = {"/dev/null"}
#: Where the demo writes (outputs, not inputs), relative to the repository.
WRITTEN = ("work/demo", ".venv")


def demo_commands() -> list[list[str]]:
    """The shell commands of `make demo`, every target remade (-B), none run (-n)."""
    r = subprocess.run(
        ["make", "-n", "-B", "--no-print-directory", "demo"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "MAKEFLAGS": ""},
    )
    assert r.returncode == 0, r.stderr
    text = r.stdout.replace("\\\n", " ")
    return [shlex.split(line) for line in text.splitlines() if line.strip()]


def named_paths(commands: list[list[str]]) -> set[str]:
    """Every word of the commands that names a file (contains a /), echo lines aside."""
    paths = set()
    for words in commands:
        if not words or words[0] == "echo":
            continue
        for word in words:
            value = word.split("=", 1)[1] if word.startswith("--") and "=" in word else word
            if "/" in value and "://" not in value:
                paths.add(value)
    return paths


def _lexical(path: Path) -> Path:
    """The absolute path with `..` folded, symlinks kept: a virtual environment's
    `.venv/bin/python` links to the system's interpreter, yet is named inside the repository."""
    return Path(os.path.normpath(path.absolute()))


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_the_demo_reads_nothing_outside_the_repository() -> None:
    assert "../shared" not in (REPO / "Makefile").read_text()
    paths = named_paths(demo_commands())
    root = _lexical(REPO)
    outside = {p for p in paths if p not in ALLOWED_OUTSIDE and not _lexical(REPO / p).is_relative_to(root)}
    assert not outside, f"make demo names files outside the repository: {sorted(outside)}"

    inputs = {_lexical(REPO / p).relative_to(root).as_posix() for p in paths if p not in ALLOWED_OUTSIDE}
    inputs = {p for p in inputs if not p.startswith(WRITTEN)}
    # The demo's two data inputs are among them (so the parsing above does see the commands).
    assert {SAMPLE.relative_to(REPO).as_posix(), SAMPLE_INI.relative_to(REPO).as_posix()} <= inputs
    if (REPO / ".git").exists():
        tracked = set(
            subprocess.run(
                ["git", "ls-files", "-z"], cwd=REPO, capture_output=True, text=True, check=True
            ).stdout.split("\0")
        )
        assert inputs <= tracked, f"demo inputs not in the repository: {sorted(inputs - tracked)}"
    else:
        assert all((REPO / p).is_file() for p in inputs), inputs


def test_the_bundled_ini_is_the_real_systems() -> None:
    text = SAMPLE_INI.read_text()
    assert "PhraseDictionaryMemory name=TranslationModel0 num-features=4" in text
    assert "TranslationModel0= 0.0912844 0.00190324 0.0646386 0.0407692" in text
    if not REAL_INI.exists():
        pytest.skip("../shared/data/moses-en-fr is not beside this checkout (the bundled copy is checked alone)")
    assert SAMPLE_INI.read_bytes() == REAL_INI.read_bytes()


def test_named_paths_sees_files_outside() -> None:
    """The check above can fail: a command naming ../shared is reported."""
    commands = [
        shlex.split("phrase-rescorer moses-ini ../shared/data/moses-en-fr/moses.ini out.ini --table=/x/t.gz"),
        shlex.split('echo "see tests/data/README.md"'),
    ]
    assert named_paths(commands) == {"../shared/data/moses-en-fr/moses.ini", "/x/t.gz"}


def test_lexical_paths_keep_links_and_fold_parents(tmp_path: Path) -> None:
    """A link inside the tree stays inside (a venv's python); `..` out of it is outside."""
    (tmp_path / "repo" / ".venv" / "bin").mkdir(parents=True)
    (tmp_path / "repo" / ".venv" / "bin" / "python").symlink_to("/usr/bin/env")
    root = _lexical(tmp_path / "repo")
    assert _lexical(root / ".venv/bin/python").is_relative_to(root)
    assert not _lexical(root / "../shared/data/x.gz").is_relative_to(root)
