"""The commands the README and the docs/ pages show are today's: every ``phrase-rescorer``,
``rescore-phrase-table`` and ``moses-rescore-step`` command of a code block or an inline code
span (and every span such as `train --resume`, a subcommand with its options) names a
subcommand that exists, and every option it gives is one of that command's."""

from __future__ import annotations

import re
import shlex

import click
import pytest

from phrase_rescorer.cli import cli
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
