"""What a ``--table`` is on disk: which of the four forms Moses loads, and its score count.

=========================  ==============================================  ===================
form                       on disk                                          score count from
=========================  ==============================================  ===================
PhraseDictionaryMemory     a text table, plain or gzip named ``.gz``        its first line
                           (``T``, or ``T.gz`` for a stem, as EMS names
                           tables)
PhraseDictionaryCompact    ``P.minphr`` (given as ``P`` or ``P.minphr``;     the file's header
                           Moses appends ``.minphr`` to a path without it)
PhraseDictionaryOnDisk     a directory holding ``Misc.dat``                 ``NumScores N``
ProbingPT                  a directory holding ``config`` and               ``num_scores N``
                           ``probing_hash.dat``
=========================  ==============================================  ===================

A text table compressed otherwise (bzip2, xz, zstd, or gzip under another name) is refused:
Moses decompresses a text table by its name, gzip only (moses/InputFileStream.cpp: ``if
(filePath.size() > 3 && filePath.substr(filePath.size() - 3, 3) == ".gz") { m_streambuf = new
gzfilebuf(filePath.c_str()); }``, else the raw bytes), and tells the table's kind from that
first line (RuleTableLoaderFactory.cpp: ``if (tokens.size() == 1) { if (tokens[0] == "1") ...
"Unsupported compact rule table format: "``): a bzip2 or xz table loads only when its raw bytes
before the first newline happen to hold a blank, a zstd one never
(tests/integration/test_moses_ini_tables.py, with the real moses).

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

from ..compression import HEAD_BYTES, CompressionError, format_of_head
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


def _check_compression(path: str) -> None:
    """Refuse a text table that Moses would not decompress (the module's docstring says why)."""
    try:
        with open(path, "rb") as f:
            fmt = format_of_head(f.read(HEAD_BYTES))
    except (OSError, CompressionError):
        return  # unreadable or not read at all: the score count's reading says so
    if fmt is None or (fmt == "gzip" and path.endswith(".gz")):
        return
    if fmt == "gzip":
        raise TableFormError(
            f"{path}: a gzip table whose name does not end in .gz: Moses decompresses a text table "
            f"by its name; rename it {os.path.basename(path)}.gz"
        )
    raise TableFormError(
        f"{path}: a text table compressed with {fmt}, which Moses does not load (it decompresses "
        "gzip only, told by the name's .gz): recompress it with gzip (NAME.gz) or give it plain"
    )


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
        _check_compression(path)
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
