"""What a ``--table`` is on disk: which of the four forms Moses loads, and its score count.

=========================  ==============================================  ===================
form                       on disk                                          score count from
=========================  ==============================================  ===================
PhraseDictionaryMemory     a text table, plain or gzip (``T``, or ``T.gz``  its first line
                           for a stem, as EMS names tables)
PhraseDictionaryCompact    ``P.minphr`` (given as ``P`` or ``P.minphr``;     the file's header
                           Moses appends ``.minphr`` to a path without it)
PhraseDictionaryOnDisk     a directory holding ``Misc.dat``                 ``NumScores N``
ProbingPT                  a directory holding ``config`` and               ``num_scores N``
                           ``probing_hash.dat``
=========================  ==============================================  ===================

Everything else is refused, saying what it is: a path that is none of these (nothing there, a
directory of something else, a file inside a binarized table's directory), a text file that is
not a phrase table, a ``.minphr`` whose header cannot be read. A decoder given the wrong form
fails late or badly: a PhraseDictionaryMemory line on a ``.minphr`` segfaults, on a ProbingPT
directory throws "Is a directory" (tests/integration/test_moses_ini_tables.py, with the real
moses).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from ..errors import IniError
from .binarized import binarized_score_count, compact_score_count
from .table_files import table_columns

#: The feature type that loads each form.
FEATURE_TYPES = {
    "text": "PhraseDictionaryMemory",
    "compact": "PhraseDictionaryCompact",
    "ondisk": "PhraseDictionaryOnDisk",
    "probing": "ProbingPT",
}
FORM_OF_TYPE = {v: k for k, v in FEATURE_TYPES.items()}


class TableFormError(IniError):
    """A ``--table`` that is not a phrase table in a form Moses loads."""


@dataclass(frozen=True)
class TableForm:
    kind: str  # a key of FEATURE_TYPES
    path: str  # what path= must say
    scores: int  # scores per phrase pair

    @property
    def feature_type(self) -> str:
        return FEATURE_TYPES[self.kind]


def _directory_kind(path: str) -> str | None:
    if os.path.isfile(os.path.join(path, "config")) and os.path.isfile(os.path.join(path, "probing_hash.dat")):
        return "probing"
    if os.path.isfile(os.path.join(path, "Misc.dat")):
        return "ondisk"
    return None


def _directory(path: str) -> TableForm:
    kind = _directory_kind(path)
    if kind is None:
        raise TableFormError(
            f"{path} is a directory but not a binarized phrase table: a ProbingPT table holds "
            "config and probing_hash.dat, an OnDisk table Misc.dat"
        )
    scores = binarized_score_count(FEATURE_TYPES[kind], path)
    if scores is None:
        recorded = "config (num_scores N)" if kind == "probing" else "Misc.dat (NumScores N)"
        raise TableFormError(f"{path}: a {FEATURE_TYPES[kind]} directory whose {recorded} cannot be read")
    return TableForm(kind, path, scores)


def _compact(path: str) -> TableForm:
    scores = compact_score_count(path)
    if scores is None:
        raise TableFormError(
            f"{path}: not a Compact phrase table made by processPhraseTableMin (its header cannot be read)"
        )
    return TableForm("compact", path, scores)


def table_form(path: str, prefer_compact: bool = False) -> TableForm:
    """The form of the table at ``path`` (see the module's table); :class:`TableFormError`
    when it is none of them. A stem ``P`` with both ``P.gz`` and ``P.minphr`` beside it is the
    Compact table when ``prefer_compact``, else the text table."""
    if os.path.isdir(path):
        return _directory(path)
    parent = os.path.dirname(os.path.abspath(path))
    inside = _directory_kind(parent)
    if inside is not None:
        raise TableFormError(f"{path} is a file inside the {FEATURE_TYPES[inside]} table {parent}: give the directory")
    if os.path.isfile(path):
        if path.endswith(".minphr"):
            return _compact(path)
        scores = table_columns(path, gz_fallback=False)
        if scores is None:
            raise TableFormError(
                f"{path}: not a readable phrase table (text or gzip, 'source ||| target ||| scores' on its first line)"
            )
        return TableForm("text", path, scores)
    if os.path.exists(path):
        raise TableFormError(f"{path}: not a regular file or a directory")
    candidates = [(path + ".minphr", _compact), (path + ".gz", None)]
    if not prefer_compact:
        candidates.reverse()
    for candidate, read in candidates:
        if os.path.isfile(candidate):
            if read is not None:
                return TableForm("compact", path, read(candidate).scores)
            return TableForm("text", candidate, table_form(candidate).scores)
    raise TableFormError(f"{path}: no such table (nor {path}.gz, nor {path}.minphr)")
