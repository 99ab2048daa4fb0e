"""What the rescoring engine checks of a table's scores field, line by line, before it adds to it.

* **One score count.** Moses refuses a text table whose lines do not all carry its
  ``num-features`` scores ("Size of scoreVector != number (5!=4)", checked with the real decoder
  in ``tests/integration/test_decoder.py``), hours later, when it loads it. A line whose count
  differs from the first line's is refused here, naming it.
* **No negative score.** Moses takes the log of every score (``LoaderStandard.cpp``,
  ``TransformScore``: ``log(score)``), so a negative number is a NaN feature: such a table is
  in the log domain (or broken), and a column added to it would be the only sound one. Zero is
  kept (Moses floors its log at -100).
* **Not rescored already.** A table whose last scores are, on every line of the first window,
  byte for byte the column(s) about to be added was rescored by this network with these
  settings already (``rescore`` given its own output, ``moses-step`` given a patched ini): a
  second identical column would only make MERT's search degenerate.

The checks read the bytes of the scores field only (``Entry.scores_end`` ends it; it begins
after the last ``|||`` before that). :func:`score_field` and :func:`scores` are what every
reader of a line's scores uses.
"""

from __future__ import annotations

from collections.abc import Sequence

from .phrase_table import Entry, PhraseTableError

_BARS = b"|||"


def score_field(entry: Entry) -> bytes:
    """The bytes of the entry's scores field: the one place a table line's scores are cut out."""
    return entry.raw[entry.raw.rfind(_BARS, 0, entry.scores_end) + 3 : entry.scores_end]


def scores(entry: Entry) -> list[bytes]:
    """The entry's scores, as written."""
    return score_field(entry).split()


class ScoreFieldCheck:
    """Refuses (``PhraseTableError``, ``path:line``) a line whose score count is not the first
    line's, or which holds a negative score. One instance per table."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.count: int | None = None
        self.first_line = 0

    def __call__(self, entry: Entry) -> None:
        field = score_field(entry)
        count = len(scores(entry))
        if self.count is None:
            self.count, self.first_line = count, entry.line_no
        elif count != self.count:
            raise PhraseTableError(
                self.path,
                entry.line_no,
                f"{count} scores, but line {self.first_line} has {self.count}: every line of a Moses "
                "table carries the same number (its num-features), or the decoder refuses the table",
            )
        if b"-" in field:
            for token in field.split():
                if token.startswith(b"-") and float(token) != 0.0:
                    raise PhraseTableError(
                        self.path,
                        entry.line_no,
                        f"negative score {token.decode()}: Moses takes the log of every score, so "
                        "they must be probabilities (> 0); a table of log-probabilities must be "
                        "turned back into probabilities (exp) first",
                    )


def already_rescored(window: Sequence[Entry], columns: Sequence[bytes]) -> bool:
    """True when every line of ``window`` already ends its scores with its new ``columns``."""
    return bool(window) and all(e.raw[: e.scores_end].endswith(b" " + c) for e, c in zip(window, columns, strict=True))
