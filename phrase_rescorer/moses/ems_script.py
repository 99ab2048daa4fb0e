"""EMS's train-model.perl, told how many scores the phrase table really has.

EMS writes every moses.ini through train-model.perl step 9: create-config for
``model/moses.ini.N``, and the tuning and evaluation filters for the pseudo-config they filter
(experiment.perl, ``get_config_tables``: ``my $cmd = &get_training_setting(9);``, then
``-phrase-translation-table TABLE`` with no score count for a phrase-based table). train-model.perl
then writes ``num-features=$basic_weight_count``, 4 unless ``-score-options`` says otherwise,
whatever the table holds; a table with the RNN column (5 scores) stops tuning with the decoder's
"Size of scoreVector != number (5!=4)". Given ``PATH:IMPL:N`` instead, train-model.perl uses
N (train-model.perl: ``my @toks = split(/:/,$file)`` ... ``if (@toks == 3) {
$basic_weight_count = $toks[2]; }``).

This program is meant as EMS's ``TRAINING:script`` (``get_training_setting``: ``my $cmd =
"$training_script ";``)::

    script = "/path/to/phrase_rescorer/bin/ems-train-model $moses-script-dir/training/train-model.perl"

It runs the train-model.perl named first with the other arguments unchanged, except that, when
step 9 is among the steps run, each ``-phrase-translation-table PATH[:IMPL]`` whose PATH (or
PATH.gz) is a readable text table becomes ``PATH:IMPL:N`` with N the scores on its first line.
A table given with its count already (``PATH:IMPL:N``), a binarized one, or one that is not
there yet is passed on as it was. ``-mmsapt`` at step 9 is refused: such a system has no
phrase-table file (moses builds the phrase pairs from the corpus while decoding), so EMS skips
the rescoring step (``custom-phrase-table-pruning ... ignore-if: mmsapt``) and the RNN column
cannot be added.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from .. import __version__
from ..errors import EXIT_INTERNAL, EXIT_OK, EXIT_OS, EXIT_SIGPIPE, EXIT_USAGE, UsageError
from ..output_targets import drop_stdout
from .table_files import table_columns

#: train-model.perl implementations whose table is a text file: 0 phrase-based
#: (PhraseDictionaryMemory), 6 hierarchical in memory.
TEXT_IMPLEMENTATIONS = ("0", "6")
TABLE_OPTION = "phrase-translation-table"

USAGE = """Options (before TRAIN-MODEL.PERL):
  -q, --quiet  no notes on stderr (errors still)
  --version    show the version and exit
  -h, --help   show this message and exit

Runs train-model.perl with ARGS. When step 9 (the moses.ini) is run, each
-phrase-translation-table PATH that is a text table (PATH or PATH.gz) is given its real score
count (PATH:0:N), so that the moses.ini says num-features=N. For EMS, in [TRAINING]:

  script = "/path/to/phrase_rescorer/bin/ems-train-model $moses-script-dir/training/train-model.perl"
"""


class EmsScriptError(UsageError):
    """A train-model.perl call whose moses.ini could not describe the rescored table."""


def _option(arg: str) -> tuple[str, str | None] | None:
    """(name, value given with ``=``) for a Getopt::Long option (``-x``, ``--x``, ``-x=v``)."""
    if not arg.startswith("-") or arg == "-":
        return None
    name, sep, value = arg.lstrip("-").partition("=")
    return name, (value if sep else None)


def _steps(args: Sequence[str]) -> tuple[int, int]:
    """The first and last train-model.perl steps run (1 to 9 unless given)."""
    found = {"first-step": 1, "last-step": 9}
    for i, arg in enumerate(args):
        opt = _option(arg)
        if opt and opt[0] in found:
            value = opt[1] if opt[1] is not None else (args[i + 1] if i + 1 < len(args) else "")
            if value.isdigit():  # else train-model.perl will say what is wrong
                found[opt[0]] = int(value)
    return found["first-step"], found["last-step"]


def with_score_count(value: str) -> tuple[str, str | None]:
    """``value`` of -phrase-translation-table with the table's score count, and a note for the
    user (None when it is passed on unchanged)."""
    tokens = value.split(":")
    if len(tokens) >= 3:
        return value, None
    path = tokens[0]
    implementation = tokens[1] if len(tokens) == 2 else "0"
    if implementation not in TEXT_IMPLEMENTATIONS:
        return value, None
    columns = table_columns(path)
    if columns is None:
        return value, None
    new = f"{path}:{implementation}:{columns}"
    return new, f"{path}: {columns} scores per line: passing -{TABLE_OPTION} {new}"


def rewrite(args: Sequence[str]) -> tuple[list[str], list[str]]:
    """The train-model.perl arguments to run instead of ``args``, and notes for the user."""
    first, last = _steps(args)
    if not first <= 9 <= last:
        return list(args), []
    out: list[str] = []
    notes: list[str] = []
    expect_table = False
    for arg in args:
        if expect_table:
            arg, note = with_score_count(arg)
            notes += [note] if note else []
            expect_table = False
            out.append(arg)
            continue
        opt = _option(arg)
        if opt and opt[0] == "mmsapt":
            raise EmsScriptError(
                "TRAINING:mmsapt builds the phrase pairs from the corpus while decoding: there is "
                "no phrase-table file for the RNN column (EMS skips custom-phrase-table-pruning "
                "when mmsapt is set). Remove mmsapt to use the rescored table"
            )
        if opt and opt[0] == TABLE_OPTION:
            if opt[1] is None:
                expect_table = True
            else:
                value, note = with_score_count(opt[1])
                notes += [note] if note else []
                arg = f"-{TABLE_OPTION}={value}"
        out.append(arg)
    return out, notes


def _print(text: str) -> int:
    """``text`` on stdout; EXIT_OK, or EXIT_SIGPIPE, quietly, when the reader went away (``| head``)."""
    try:
        print(text, flush=True)
    except BrokenPipeError:
        drop_stdout()
        return EXIT_SIGPIPE
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    """``ems-train-model [-q] TRAIN-MODEL.PERL ARGS...``: run it (exec) with the rewritten ARGS."""
    argv = list(sys.argv[1:] if argv is None else argv)
    prog = "ems-train-model"
    usage = f"Usage: {prog} [-q] TRAIN-MODEL.PERL [ARGS...]"
    quiet = False
    while argv and argv[0].startswith("-"):  # this program's own options, before the script
        option = argv.pop(0)
        if option in ("-h", "--help"):
            return _print(f"{usage}\n\n{USAGE}")
        if option == "--version":
            return _print(f"{prog}, version {__version__}")
        if option in ("-q", "--quiet"):
            quiet = True
            continue
        print(f"{usage}\n{prog}: error: no such option: {option} (-h for help)", file=sys.stderr)
        return EXIT_USAGE
    if not argv:
        print(f"{usage}\n\n{USAGE}", file=sys.stderr)
        return EXIT_USAGE
    script, args = argv[0], argv[1:]
    if not (os.path.isfile(script) and os.access(script, os.X_OK)):
        print(f"{prog}: error: {script}: not an executable file (give train-model.perl first)", file=sys.stderr)
        return EXIT_OS
    try:
        new_args, notes = rewrite(args)
    except EmsScriptError as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        return e.exit_code
    for note in notes if not quiet else []:
        print(f"{prog}: {note}", file=sys.stderr)
    sys.stderr.flush()
    os.execv(script, [script, *new_args])
    return EXIT_INTERNAL  # not reached
