"""Words split as Moses splits them (moses/words.py): at spaces and tabs alone, every other kind
of Unicode whitespace kept inside its word, the same for every reader of a text."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from phrase_rescorer.data.corpus import read_sentences
from phrase_rescorer.moses.nbest import read_nbest
from phrase_rescorer.moses.words import WORD_SEPARATORS, split_words
from phrase_rescorer.reranking.nbest_features import read_matrix

#: Every character Python's str.split() splits at but the newline, which ends a line.
SPACES = [chr(c) for c in range(sys.maxunicode + 1) if chr(c).isspace() and chr(c) != "\n"]


def test_the_kinds_of_space_are_all_there() -> None:
    wanted = {" ", "\t", "\r", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x1f", "\x85", "\xa0", "\u1680", "\u2009"}
    wanted |= {"\u2028", "\u2029", "\u202f", "\u205f", "\u3000"}
    assert wanted <= set(SPACES)


@pytest.mark.parametrize("space", SPACES, ids=[f"U+{ord(s):04X}" for s in SPACES])
def test_only_spaces_and_tabs_separate_words(space: str) -> None:
    text = f"{space}le{space}chat noir{space}"
    if space in WORD_SEPARATORS:
        assert split_words(text) == ["le", "chat", "noir"]
    else:  # Moses' Tokenize(str, " \t"): part of the word
        assert split_words(text) == [f"{space}le{space}chat", f"noir{space}"]


def test_runs_and_ends_separate_nothing() -> None:
    assert split_words("") == [] and split_words(" \t ") == []
    assert split_words("  a \t\tb  ") == ["a", "b"]


def test_every_reader_splits_alike(tmp_path: Path) -> None:
    """A text's lines, an n-best list's hypotheses and MBR's words: the same words."""
    hyps = [f"le{space}chat noir" for space in SPACES]
    text, nbest = tmp_path / "t.fr", tmp_path / "l.nbest"
    text.write_bytes("".join(f"{h}\n" for h in hyps).encode("utf-8"))
    nbest.write_bytes("".join(f"{i} ||| {h} ||| F0= -1 ||| -1\n" for i, h in enumerate(hyps)).encode("utf-8"))
    want = [split_words(h) for h in hyps]
    assert list(read_sentences(str(text))) == want
    assert [line.tokens for line in read_nbest(str(nbest))] == want
    assert [split_words(h) for h in read_matrix(str(nbest)).hypotheses] == want
