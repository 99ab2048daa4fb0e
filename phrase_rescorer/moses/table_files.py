"""The text tables a moses.ini names: where the file is, and how many scores its lines carry."""

from __future__ import annotations

import os

from .phrase_table import PhraseTableError
from .table_reader import InputTable


def existing_table(path: str) -> str:
    """``path``, or ``path.gz`` when only that exists: a table named by its stem, as EMS names
    them (train-model.perl writes ``$ttable_file.gz``), is the file a decoder can open."""
    if not os.path.exists(path) and os.path.isfile(path + ".gz"):
        return path + ".gz"
    return path


def table_columns(path: str, gz_fallback: bool = True) -> int | None:
    """Scores on the first line of the text table at ``path`` (or ``path.gz``, as Moses tries
    for a text table); None when there is no readable text table there."""
    for candidate in (path, path + ".gz") if gz_fallback else (path,):
        if not os.path.isfile(candidate):
            continue
        try:
            with InputTable(candidate) as table:
                entry = next(iter(table), None)
        except PhraseTableError:
            return None
        if entry is None:
            return None
        return len(entry.raw[: entry.scores_end].split(b"|||")[2].split())
    return None
