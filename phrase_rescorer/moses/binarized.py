"""Moses' binarized phrase tables: which dictionary type loads which, how to make one with the
added column(s), and how many scores an existing one holds.

Checked with the Moses in ../shared/tools/moses (tests/integration): each binarizer must be told
the new score count, and a table made with the wrong count is not refused by the decoder:

* ``processPhraseTableMin -in T.gz -out P -nscores N`` writes ``P.minphr`` for
  ``PhraseDictionaryCompact path=P``;
* ``CreateOnDiskPt 1 1 N 100 2 T.gz DIR`` writes ``DIR/`` for ``PhraseDictionaryOnDisk
  path=DIR``; ``DIR/Misc.dat`` says ``NumScores N``;
* ``CreateProbingPT --input-pt T.gz --output-dir DIR --num-scores N`` writes ``DIR/`` for
  ``ProbingPT path=DIR`` (moses and moses2); ``--num-scores`` defaults to 4 and ``DIR/config``
  says ``num_scores N``. A 5-score table binarized with the default 4 crashes both decoders with
  a segmentation fault when the ini says num-features=5.
"""

from __future__ import annotations

import os
import re

#: Dictionary types that load a binarized table, with the command that makes one.
BINARIZED_TYPES = {
    "PhraseDictionaryCompact": "processPhraseTableMin -in {table} -out {prefix} -nscores {n} -threads 4",
    "PhraseDictionaryOnDisk": "CreateOnDiskPt 1 1 {n} 100 2 {table} {prefix}",
    "ProbingPT": "CreateProbingPT --input-pt {table} --output-dir {prefix} --num-scores {n}",
}

#: Where a binarized directory records its score count: (file, pattern).
_SCORE_COUNT = {
    "PhraseDictionaryOnDisk": ("Misc.dat", re.compile(r"^NumScores\s+(\d+)\s*$", re.M)),
    "ProbingPT": ("config", re.compile(r"^num_scores\s+(\d+)\s*$", re.M)),
}


def binarize_command(ftype: str, table: str, n: int | str) -> str:
    """The command that binarizes the text ``table`` (``n`` scores) for ``ftype``."""
    prefix = re.sub(r"(\.txt)?(\.gz)?$", "", table)
    if ftype != "PhraseDictionaryCompact":
        prefix += ".bin" if ftype == "PhraseDictionaryOnDisk" else ".probing"
    return BINARIZED_TYPES[ftype].format(table=table, prefix=prefix, n=n)


def binarized_score_count(ftype: str, path: str) -> int | None:
    """The score count that the binarized table at ``path`` says it holds; None when it does
    not say (a Compact table, or no table there)."""
    if ftype not in _SCORE_COUNT:
        return None
    name, pattern = _SCORE_COUNT[ftype]
    try:
        with open(os.path.join(path, name), "rb") as f:
            text = f.read(4096).decode("ascii", "replace")
    except OSError:
        return None
    match = pattern.search(text)
    return int(match.group(1)) if match else None
