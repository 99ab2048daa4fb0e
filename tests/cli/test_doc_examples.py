"""The commands the README and the docs/ pages show are today's: every ``phrase-rescorer``,
``rescore-phrase-table`` and ``moses-rescore-step`` command of a code block or an inline code
span (and every span such as `train --resume`, a subcommand with its options) names a
subcommand that exists, and every option it gives is one of that command's. Every block of the
README and of the results pages (docs/results.md, docs/results-archive.md) carries a mark
(tests/helpers/doc_blocks.py), and the README's plain ``sh`` blocks run as written."""

from __future__ import annotations

import re
import shlex

import click
import pytest

from phrase_rescorer.cli import cli
from tests.helpers import doc_blocks
from tests.helpers.paths import REPO

#: The programs and the command each one runs (``python -m phrase_rescorer`` is phrase-rescorer).
PROGRAMS = {
    "phrase-rescorer": None,
    "phrase_rescorer": None,
    "rescore-phrase-table": "rescore",
    "moses-rescore-step": "moses-step",
}
SHELL_ENDS = ("|", "<", ">", "&&", ";", "2>")


def documents() -> dict[str, str]:
    pages = {"README.md": (REPO / "README.md").read_text()}
    pages |= {f"docs/{p.name}": p.read_text() for p in sorted((REPO / "docs").glob("*.md"))}
    return pages


def command_lines(text: str) -> list[str]:
    """Lines of fenced or indented code blocks (continuation lines joined) and inline code spans."""
    lines: list[str] = []
    fenced, pending = False, ""
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if fenced or line.startswith("    "):
            pending += line.strip().removeprefix("$ ")
            if pending.endswith("\\"):
                pending = pending[:-1] + " "
                continue
            lines.append(pending)
        pending = ""
        if not fenced:
            for span in re.findall(r"`([^`\n]+)`", line):
                words = span.split()
                # `train --resume`: a subcommand and its option, phrase-rescorer understood
                if len(words) > 1 and words[0] in cli.commands and words[1].startswith("-"):
                    span = f"phrase-rescorer {span}"
                lines.append(span)
    return lines


def invocation(line: str) -> tuple[str, list[str]] | None:
    """(program, its arguments up to a pipe or redirection), or None for a line that runs none."""
    try:
        words = shlex.split(line, comments=True)
    except ValueError:
        return None
    for i, word in enumerate(words):
        if word in PROGRAMS and (i == 0 or words[i - 1] in ("-m", "--no-python") or words[0] == "torchrun"):
            args = []
            for arg in words[i + 1 :]:
                if arg.startswith(SHELL_ENDS):
                    break
                args.append(arg)
            return word, args
    return None


def options_of(command: click.Command) -> set[str]:
    names = {"-h", "--help"}
    for param in command.params:
        if isinstance(param, click.Option):
            names |= {*param.opts, *param.secondary_opts}
    return names


def problems(program: str, args: list[str]) -> list[str]:
    """What in one documented command is not today's command line."""
    name = PROGRAMS[program]
    if name is None:
        globals_ = options_of(cli)
        while args and args[0] in globals_:
            args = args[1:]
        if not args:
            return []
        name, args = args[0], args[1:]
    command = cli.commands.get(name)
    if command is None:
        return [f"no command {name!r}"]
    known = options_of(command)
    wrong = []
    for arg in args:
        option = arg.lstrip("[").rstrip("]").split("=", 1)[0]
        if re.fullmatch(r"--?[a-zA-Z][\w-]*", option) and option not in known:
            wrong.append(f"{name}: no option {option}")
    return wrong


def documented_commands() -> list[tuple[str, str, str, list[str]]]:
    found = []
    for where, text in documents().items():
        for line in command_lines(text):
            run = invocation(line)
            if run:
                found.append((where, line, *run))
    return found


def test_the_documents_show_commands_of_every_program() -> None:
    programs = {program for _, _, program, _ in documented_commands()}
    assert {"phrase-rescorer", "phrase_rescorer", "rescore-phrase-table", "moses-rescore-step"} <= programs


@pytest.mark.parametrize("where", sorted(documents()))
def test_every_documented_command_and_option_exists(where: str) -> None:
    wrong = [
        f"{line!r}: {problem}"
        for w, line, program, args in documented_commands()
        if w == where
        for problem in problems(program, args)
    ]
    assert not wrong, "\n".join(wrong)


def test_the_check_sees_a_wrong_command_and_a_wrong_option() -> None:
    assert problems(*invocation("rescore-phrase-table IN OUT --modle rnn.pt")) == ["rescore: no option --modle"]
    assert problems(*invocation("phrase-rescorer -q rescore-table IN OUT")) == ["no command 'rescore-table'"]
    assert problems(*invocation("torchrun --nproc-per-node 4 -m phrase_rescorer train T M --preset paper")) == []
    assert invocation("$MOSES/bin/moses -f moses.ini -threads 2") is None
    assert command_lines("the `train --bf16` option") == ["phrase-rescorer train --bf16"]


# --- The README's and the results page's blocks: each one marked, the plain ones run ----------------

RUNNABLE = doc_blocks.sections("README.md", ("sh", "python"))


@pytest.mark.parametrize("page", doc_blocks.MARKED_PAGES)
def test_every_block_carries_a_mark_and_no_command_hides_in_an_indented_block(page: str) -> None:
    unmarked = [f"{page}:{b.line}: ```{b.mark}" for b in doc_blocks.blocks(page) if b.mark not in doc_blocks.MARKS]
    assert not unmarked, "blocks without one of the marks " + repr(doc_blocks.MARKS) + ":\n" + "\n".join(unmarked)
    assert doc_blocks.indented_code_lines(page) == [], f"{page}: indented code blocks: put them in a marked fence"


@pytest.mark.parametrize("page", ["docs/results.md", "docs/results-archive.md"])
def test_every_command_of_the_results_pages_is_a_marked_measurement(page: str) -> None:
    marks = {b.mark for b in doc_blocks.blocks(page)}
    assert "sh long" in marks and marks <= {"sh long", "text"}, marks


def test_the_install_blocks_name_make_targets_and_extras_that_exist() -> None:
    targets = doc_blocks.makefile_targets()
    extras = set(re.findall(r"^(\w+) = \[", (REPO / "pyproject.toml").read_text(), re.MULTILINE))
    install = [b for b in doc_blocks.blocks("README.md") if b.mark == "sh install"]
    assert install
    for block in install:
        for line in block.text.splitlines():
            words = shlex.split(line, comments=True)
            if words[:1] == ["make"]:
                assert set(words[1:]) <= targets, line
            for extra in re.findall(r'"\.\[(\w+)\]"', line):
                assert extra in extras, line


def test_the_readme_runs_its_plain_blocks_and_leaves_moses_ones_to_the_moses_tests() -> None:
    marks = [b.mark for b in doc_blocks.blocks("README.md")]
    assert "sh" in marks and "sh moses" in marks and "python" in marks
    moses_words = re.compile(r"\$MOSES|mert-moses|multi-bleu|experiment\.perl|--moses")
    for block in doc_blocks.blocks("README.md"):
        if block.mark == "sh":
            assert not moses_words.search(block.text), f"README.md:{block.line} needs Moses: mark it sh moses"


@pytest.fixture(scope="module")
def readme_runner(tmp_path_factory: pytest.TempPathFactory) -> doc_blocks.Runner:
    return doc_blocks.Runner(tmp_path_factory.mktemp("readme"))


@pytest.mark.slow
@pytest.mark.parametrize("section", list(RUNNABLE))
def test_the_readme_blocks_run_as_written(section: str, readme_runner: doc_blocks.Runner) -> None:
    """The README's plain and Python blocks run in order in one directory, as a user runs them from the top
    of a checkout (each section's test first runs the earlier sections it has not yet run)."""
    for name in RUNNABLE:
        for block in RUNNABLE[name]:
            if block not in readme_runner.ran:
                readme_runner.run(block)
        if name == section:
            break
    assert all(b in readme_runner.ran for b in RUNNABLE[section])
