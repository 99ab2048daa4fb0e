"""docs/layout.md ("How the code is laid out") names every module of the package on its
subpackage's line, so the layout a reader sees is the one on disk."""

from __future__ import annotations

import re

from tests.helpers.paths import REPO


def _layout_lines() -> dict[str, str]:
    page = (REPO / "docs" / "layout.md").read_text(encoding="utf-8")
    section = page.split("# How the code is laid out", 1)[1]
    block = section.split("```", 2)[1]
    lines: dict[str, str] = {}
    for line in block.splitlines():
        match = re.match(r"\s*([\w_]+/)\s+(.*)", line)
        if match:
            lines[match.group(1)] = match.group(2)
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
