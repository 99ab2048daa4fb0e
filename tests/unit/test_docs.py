"""The documentation as a whole: docs/index.md lists every page of docs/; every relative link of
the README, the docs, the tests' and moses_configs' notes and the changelog reaches a file (and,
where it names one, a heading of that page); no line of those pages is longer than 200
characters.

Two kinds of line are exempt from the length limit: a table row (a Markdown table cannot wrap a
cell) and a line of a ```` ```text ```` fence (program output, such as an error message, quoted
as the one line it is)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.helpers.paths import REPO

MAX_LINE = 200


def pages() -> list[Path]:
    """The pages whose links and lines are checked."""
    return [
        REPO / "README.md",
        REPO / "CHANGELOG.md",
        REPO / "tests" / "README.md",
        *sorted((REPO / "docs").glob("*.md")),
        REPO / "docs" / "img" / "README.md",
        *sorted((REPO / "moses_configs").glob("*.md")),
    ]


def _name(page: Path) -> str:
    return page.relative_to(REPO).as_posix() if page.is_relative_to(REPO) else page.name


def prose(text: str, code: bool = False) -> list[tuple[int, str]]:
    """The lines outside fenced blocks, with their numbers; inline code spans blanked unless
    ``code``."""
    found, fence = [], False
    for number, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("```"):
            fence = not fence
            continue
        if not fence:
            found.append((number, line if code else re.sub(r"`[^`]*`", "``", line)))
    return found


def links(text: str) -> list[tuple[int, str]]:
    """The targets of the inline links and images ``[text](target)`` and of reference
    definitions ``[name]: target``, outside code."""
    found = []
    for number, line in prose(text):
        found += [(number, target) for target in re.findall(r"\]\(<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\)", line)]
        found += [(number, target) for target in re.findall(r"^\s*\[[^\]]+\]:\s+(\S+)", line)]
    return found


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, code marks and punctuation dropped, spaces
    as hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """The anchors of ``page``'s headings (a repeated heading's second as ``-1``, and so on)."""
    seen: dict[str, int] = {}
    found = set()
    for _, line in prose(page.read_text(encoding="utf-8"), code=True):
        match = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if match is None:
            continue
        base = slug(match.group(1))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def broken_links(page: Path) -> list[str]:
    """The links of ``page`` that reach no file, or no heading of the page they name."""
    wrong = []
    for number, target in links(page.read_text(encoding="utf-8")):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        reached = (page.parent / path).resolve() if path else page
        if not reached.exists():
            wrong.append(f"{_name(page)}:{number}: {target}: no such file")
        elif anchor and reached.suffix == ".md" and anchor not in anchors(reached):
            wrong.append(f"{_name(page)}:{number}: {target}: no heading #{anchor} in {reached.name}")
    return wrong


def long_lines(page: Path) -> list[str]:
    wrong, fence = [], None
    for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
        if line.lstrip().startswith("```"):
            fence = line.strip()[3:].strip() if fence is None else None
            continue
        exempt = fence == "text" or (fence is None and line.lstrip().startswith("|"))
        if len(line) > MAX_LINE and not exempt:
            wrong.append(f"{_name(page)}:{number}: {len(line)} characters")
    return wrong


def test_the_index_lists_every_page_of_docs() -> None:
    index = REPO / "docs" / "index.md"
    listed = {Path(target.partition("#")[0]).name for _, target in links(index.read_text(encoding="utf-8"))}
    missing = sorted(p.name for p in (REPO / "docs").glob("*.md") if p.name != "index.md" and p.name not in listed)
    assert not missing, f"pages of docs/ not listed in docs/index.md: {missing}"


def test_the_readme_links_the_index() -> None:
    assert "docs/index.md" in {target for _, target in links((REPO / "README.md").read_text(encoding="utf-8"))}


@pytest.mark.parametrize("page", pages(), ids=_name)
def test_every_relative_link_reaches_a_file_and_its_heading(page: Path) -> None:
    wrong = broken_links(page)
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("page", pages(), ids=_name)
def test_no_line_is_longer_than_the_limit(page: Path) -> None:
    wrong = long_lines(page)
    assert not wrong, f"lines over {MAX_LINE} characters (wrap them):\n" + "\n".join(wrong)


def test_the_checks_see_a_broken_link_a_missing_heading_and_a_long_line(tmp_path: Path) -> None:
    (tmp_path / "other.md").write_text("# Other page\n\n## A `code` heading (2026-11-29)\n\ntext\n")
    page = tmp_path / "page.md"
    page.write_text(
        "[fine](other.md) [fine too](other.md#a-code-heading-2026-11-29) [web](https://example.org)\n"
        "[gone](missing.md) [no heading](other.md#no-such-heading) `[in code](missing.md)`\n"
        + "x" * 201
        + "\n| "
        + "y" * 300
        + " |\n```text\n"
        + "z" * 300
        + "\n```\n```\n"
        + "w" * 201
        + "\n```\n"
    )
    assert [w.split(": ", 1)[1] for w in broken_links(page)] == [
        "missing.md: no such file",
        "other.md#no-such-heading: no heading #no-such-heading in other.md",
    ]
    assert [w.split(":", 1)[1] for w in long_lines(page)] == ["3: 201 characters", "9: 201 characters"]
    assert slug("The paper's Table 1 on the bundled en→fr system") == "the-papers-table-1-on-the-bundled-enfr-system"
