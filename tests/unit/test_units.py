"""Words or subword units, chosen from the data (``data.units``): the share of tokens a shortlist
leaves outside, measured as the shortlist is built, and the choice at the threshold, from either
side, of a size by the stated rule; a resumed run's recorded choice kept."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from phrase_rescorer.data.corpus import load_sentence_pairs
from phrase_rescorer.data.pairs import PairSet
from phrase_rescorer.data.units import MAX_UNCOVERED, MIN_SUBWORDS, choose_units, uncovered_shares

#: Special symbols and the two words "a" and "b".
SHORTLIST = 5


def corpus(tmp_path: Path, rare: int, rare_side: str = "target") -> PairSet:
    """100 distinct sentence pairs of 10 tokens a side over "a" and "b" (the shortlist's words),
    in ``rare`` of them on ``rare_side`` the last token a word of its own (outside): ``rare`` of
    the side's 1,000 tokens uncovered, none of the other side's."""
    lines = [" ".join(w) for w in itertools.islice(itertools.product("ab", repeat=10), 100)]
    rare_lines = [" ".join([*line.split()[:9], f"r{i}"]) if i < rare else line for i, line in enumerate(lines)]
    src, tgt = (lines, rare_lines) if rare_side == "target" else (rare_lines, lines)
    (tmp_path / "s").write_text("".join(x + "\n" for x in src))
    (tmp_path / "t").write_text("".join(x + "\n" for x in tgt))
    return load_sentence_pairs(str(tmp_path / "s"), str(tmp_path / "t")).pairs


def test_the_shares_are_the_tokens_outside_each_sides_shortlist(tmp_path: Path) -> None:
    assert uncovered_shares(corpus(tmp_path, 15), SHORTLIST) == (0.0, 0.015)
    assert uncovered_shares(corpus(tmp_path, 16, "source"), SHORTLIST) == (0.016, 0.0)
    assert uncovered_shares(corpus(tmp_path, 16), 100) == (0.0, 0.0)  # a shortlist that holds every word


@pytest.mark.parametrize("side", ["source", "target"])
def test_auto_chooses_subwords_above_the_threshold_on_either_side(tmp_path: Path, side: str) -> None:
    assert MAX_UNCOVERED == 0.015
    at = choose_units(corpus(tmp_path, 15, side), "auto", SHORTLIST, None)
    assert (at.units, at.subwords) == ("words", None)
    assert at.says.startswith("units: words (the 5-word shortlists leave ")
    assert at.record is not None and at.record["units"] == "words" and at.record["max_uncovered"] == MAX_UNCOVERED
    above = choose_units(corpus(tmp_path, 16, side), "auto", SHORTLIST, None)
    assert (above.units, above.subwords) == ("subwords", MIN_SUBWORDS)  # the shortlist's size, at least 300
    assert "more than 1.5 %" in above.says and f"1.60 % of the {side} tokens" in above.says, above.says
    assert above.record is not None and above.record["uncovered"][side] == 0.016


def test_given_units_are_not_measured_and_record_nothing(tmp_path: Path) -> None:
    pairs = corpus(tmp_path, 50)
    assert choose_units(pairs, "words", SHORTLIST, None).units == "words"
    assert choose_units(pairs, "subwords", 8000, None).subwords == 8000  # the shortlist's size
    for units in ("subwords", "words"):  # train's default words with --subwords N: subword units
        given = choose_units(corpus(tmp_path, 0), units, 8000, 1000)
        assert (given.units, given.subwords, given.record) == ("subwords", 1000, None)


def test_a_resumed_runs_choice_is_kept(tmp_path: Path) -> None:
    """The choice the run made, not one made again (another threshold, another shortlist size)."""
    pairs = corpus(tmp_path, 50)
    kept = {"units": "words", "subwords": None, "chosen_by": "auto", "uncovered": {"source": 0.0, "target": 0.001}}
    words = choose_units(pairs, "auto", SHORTLIST, None, kept)
    assert (words.units, words.record) == ("words", kept)
    assert words.says == "units: words, as the resumed run chose them"
    subwords = choose_units(corpus(tmp_path, 0), "auto", SHORTLIST, None, {"units": "subwords", "subwords": 700})
    assert (subwords.units, subwords.subwords, subwords.record) == ("subwords", 700, None)  # none measured
    measured = choose_units(pairs, "auto", SHORTLIST, None, {"units": "subwords"})  # no size recorded: measured again
    assert measured.units == "subwords" and measured.subwords == MIN_SUBWORDS and measured.record is not None
