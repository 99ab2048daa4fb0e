"""Binarizing a rescored text table with the user's own Moses, in one step with ``moses-ini``.

Each binarizer is told the table's own score count (the one thing users get wrong: each
defaults to 4, see :mod:`.binarized`), writes into a fresh temporary directory beside the
result, and the result is checked (its recorded count read back) and then renamed into place,
so that an interrupted or failed run leaves nothing at the final name. Names, from the text
table ``T.gz`` (``.gz``/``.txt`` dropped): ``T.minphr`` (Compact; the ini says ``path=T``),
``T.probing/`` (ProbingPT), ``T.bin/`` (OnDisk).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile

from ..errors import IniError
from .table_forms import FEATURE_TYPES, TableForm, TableFormError, table_form
from .toolkit import MosesToolkit

#: What ``--binarize KIND`` runs, from the Moses directory.
PROGRAMS = {"compact": "bin/processPhraseTableMin", "probing": "bin/CreateProbingPT", "ondisk": "bin/CreateOnDiskPt"}
KINDS = tuple(PROGRAMS)


class BinarizeError(IniError):
    """The binarizer failed, or made something other than the table asked for."""


def binarized_path(text_table: str, kind: str) -> str:
    """Where ``kind`` of ``text_table`` goes: the ini's ``path=`` (for Compact, the prefix)."""
    prefix = re.sub(r"(\.txt)?(\.gz)?$", "", text_table)
    return prefix + {"compact": "", "probing": ".probing", "ondisk": ".bin"}[kind]


def planned_form(text: TableForm, kind: str) -> TableForm:
    """The table that binarizing ``tokenizer`` as ``kind`` will make (for the checks made before)."""
    return TableForm(kind, binarized_path(text.path, kind), text.scores)


def _argv(toolkit: MosesToolkit, kind: str, table: str, out: str, scores: int) -> list[str]:
    program = toolkit.path(PROGRAMS[kind])
    n = str(scores)
    if kind == "compact":
        return [program, "-in", table, "-out", out, "-nscores", n, "-threads", "1"]
    if kind == "probing":
        return [program, "--input-pt", table, "--output-dir", out, "--num-scores", n]
    return [program, "1", "1", n, "100", "2", table, out]


def _move_into_place(made: str, final: str, scratch: str) -> None:
    """Rename ``made`` to ``final``; an existing ``final`` is moved into ``scratch`` first (a
    directory cannot be replaced by one rename)."""
    if os.path.isdir(final) and not os.path.islink(final):
        os.rename(final, os.path.join(scratch, "previous"))
    os.replace(made, final)


def binarize_table(toolkit: MosesToolkit, text: TableForm, kind: str) -> TableForm:
    """Binarize the text table ``tokenizer`` as ``kind`` with ``toolkit``'s binarizer; the table made."""
    target = binarized_path(text.path, kind)
    final = target + ".minphr" if kind == "compact" else target
    scratch = tempfile.mkdtemp(
        prefix=f".{os.path.basename(final)}.", suffix=".tmp", dir=os.path.dirname(os.path.abspath(final))
    )
    try:
        out = os.path.join(scratch, "table")
        argv = _argv(toolkit, kind, os.path.abspath(text.path), out, text.scores)
        with open(os.path.join(scratch, "log"), "w+b") as log:
            rc = subprocess.run(
                argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, cwd=scratch, check=False
            ).returncode
            log.seek(0)
            said = [line for line in log.read().decode(errors="replace").splitlines() if line.strip()]
        made = out + ".minphr" if kind == "compact" else out
        if rc != 0 or not os.path.exists(made):
            why = f"exit {rc}" if rc >= 0 else f"killed by signal {-rc}"
            errors = [line for line in said if line.lstrip().lower().startswith("error")]
            last = f": {(errors or said)[-1].strip()}" if said else ""
            raise BinarizeError(f"{' '.join(argv[:1])} failed on {text.path} ({why}){last}")
        try:
            got = table_form(made)
        except TableFormError as e:
            raise BinarizeError(f"{argv[0]} made no readable {FEATURE_TYPES[kind]} table: {e}") from None
        if got.kind != kind or got.scores != text.scores:
            raise BinarizeError(
                f"{argv[0]} made a {got.feature_type} table with {got.scores} scores, "
                f"not a {FEATURE_TYPES[kind]} with {text.scores}"
            )
        _move_into_place(made, final, scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return TableForm(kind, target, text.scores)
