"""docs/layout.md ("How the code is laid out") names every module of the package in its
subpackage's entry (the folder's line and the indented lines that continue it), so the layout a
reader sees is the one on disk."""

from __future__ import annotations

import re

from tests.helpers.paths import REPO


def _layout_lines() -> dict[str, str]:
    page = (REPO / "docs" / "layout.md").read_text(encoding="utf-8")
    section = page.split("# How the code is laid out", 1)[1]
    block = section.split("```", 2)[1]
    lines: dict[str, str] = {}
    folder = None
    for line in block.splitlines():
        match = re.match(r" {0,2}([\w_]+/)\s+(.*)", line)
        if match:  # a folder's entry starts at the margin (a subpackage two spaces in)
            folder = match.group(1)
            lines[folder] = match.group(2)
        elif folder is not None and line.startswith(" " * 4):  # its text continued, indented
            lines[folder] += " " + line.strip()
    return lines


def test_every_module_is_named_on_its_subpackage_line() -> None:
    lines = _layout_lines()
    missing = []
    for path in sorted([*(REPO / "phrase_rescorer").rglob("*.py"), *(REPO / "benchmarks").glob("*.py")]):
        if path.name in ("__init__.py", "__main__.py"):
            continue
        folder = path.parent.name + "/"
        text = lines.get(folder, "")
        if not re.search(rf"(?<![\w.]){re.escape(path.name)}(?!\w)", text):
            missing.append(path.relative_to(REPO).as_posix())
    assert not missing, f"modules missing from docs/layout.md: {missing}"


def test_the_check_sees_a_missing_module() -> None:
    lines = _layout_lines()
    assert "engine.py" in lines["rescoring/"]
    assert "no_such_module.py" not in lines["rescoring/"]


def test_an_entry_continued_on_indented_lines_is_read_whole() -> None:
    lines = _layout_lines()
    # the last module of a long entry stands on a continuation line
    assert "training_profile.py" in lines["benchmarks/"] and "bench.py" in lines["benchmarks/"]
    assert "nbest.py" in lines["moses/"] and "phrase_table.py" in lines["moses/"]
