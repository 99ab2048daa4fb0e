"""The scores field of a phrase-table line, cut out in one place (``moses.score_fields``):
whatever fields follow it (alignment, counts, sparse features), and when it is empty."""

from __future__ import annotations

import pytest

from phrase_rescorer.moses.phrase_table import Entry, parse_line
from phrase_rescorer.moses.score_fields import score_field, scores


def _entry(raw: bytes, check_scores: bool = True) -> Entry:
    source, target, end = parse_line(raw, "t", 1, check_scores=check_scores)
    return Entry(1, raw, b"\n", source, target, end)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (b"a ||| b ||| 0.5 0.25", [b"0.5", b"0.25"]),
        (b"a ||| b ||| 0.5 0.25 0.125 0.0625 ||| 0-0 ||| 3 4 2 |||", [b"0.5", b"0.25", b"0.125", b"0.0625"]),
        (b"the house ||| la maison ||| 1e-05 2.718 ||| 0-0 1-1 ||| 1 1 1 ||| ||| ", [b"1e-05", b"2.718"]),
    ],
)
def test_scores_are_the_third_field(raw: bytes, expected: list[bytes]) -> None:
    entry = _entry(raw)
    assert scores(entry) == expected
    assert score_field(entry).split() == expected == raw.split(b" ||| ")[2].split()


def test_an_empty_scores_field_has_no_scores() -> None:
    assert scores(_entry(b"a ||| b |||", check_scores=False)) == []
