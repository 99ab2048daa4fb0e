from __future__ import annotations

import numpy as np
import pytest

from phrase_rescorer.data.vocab import EOS_ID, PAD_ID, SPECIALS, UNK_ID, Vocabulary
from phrase_rescorer.moses.words import split_words


def test_tokenize_keeps_tokens_exactly() -> None:
    assert split_words("l&apos; homme &#124; a") == ["l&apos;", "homme", "&#124;", "a"]
    assert split_words("a  b\tc") == ["a", "b", "c"]
    assert split_words("a\u00a0b c") == ["a\u00a0b", "c"]  # non-breaking space is no separator


def test_shortlist_order_and_tie_break() -> None:
    types = ["b", "a", "c", "d", "é"]
    counts = np.array([5, 5, 9, 1, 5])
    v = Vocabulary.from_counts(types, counts, size=6)
    assert v.tokens == [*SPECIALS, "c", "a", "b"]  # count desc, then UTF-8 bytes asc
    assert Vocabulary.from_counts(list(reversed(types)), counts[::-1], 6) == v
    assert (v.id("<pad>"), v.id("<unk>"), v.id("</s>")) == (PAD_ID, UNK_ID, EOS_ID)
    assert v.encode(["c", "zzz", "a"]) == [3, UNK_ID, 4]
    assert v.count_unknown(["c", "zzz", "d"]) == 2
    assert list(v.lookup_table(types)) == [5, 4, 3, UNK_ID, UNK_ID]


def test_bad_vocabularies_are_refused() -> None:
    with pytest.raises(ValueError):
        Vocabulary(["a", "b"])
    with pytest.raises(ValueError):
        Vocabulary([*SPECIALS, "a", "a"])
    with pytest.raises(ValueError):
        Vocabulary.from_counts(["a"], np.array([1]), size=3)
