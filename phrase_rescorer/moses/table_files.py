"""The text tables a moses.ini names: where the file is, and how many scores its lines carry."""

from __future__ import annotations

import os

from .phrase_table import PhraseTableError
from .score_fields import scores
from .stems import existing_table
from .table_reader import InputTable


def table_columns(path: str, gz_fallback: bool = True) -> int | None:
    """Scores on the first line of the text table at ``path`` (or ``path.gz``, as Moses tries
    for a text table: ``stems.existing_table``); None when there is no readable text table there."""
    candidate = existing_table(path) if gz_fallback else path
    if not os.path.isfile(candidate):
        return None
    try:
        with InputTable(candidate) as table:
            entry = next(iter(table), None)
    except PhraseTableError:
        return None
    return None if entry is None else len(scores(entry))
