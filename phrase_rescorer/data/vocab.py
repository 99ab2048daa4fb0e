"""Shortlist vocabularies.

Phrase-table tokens are used exactly as they appear in the table: already tokenized, cased and
Moses-escaped (``&#124;``, ``&amp;`` ...). Nothing here re-tokenizes or un-escapes; a phrase is
split into tokens by ``moses.words.split_words``, at spaces and tabs exactly as the Moses decoder
splits it, so a token containing a non-breaking space stays one token.

Each side has its own shortlist of the N most frequent tokens (N counts the special symbols too;
the paper uses 15,000), counted over the unique phrase pairs. Ties are broken by the token's
UTF-8 bytes, so the same table always gives the same vocabulary. Everything outside the shortlist
maps to UNK.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

PAD, UNK, EOS = "<pad>", "<unk>", "</s>"
SPECIALS = (PAD, UNK, EOS)
PAD_ID, UNK_ID, EOS_ID = 0, 1, 2


class Vocabulary:
    """A shortlist: token <-> id, with ``<pad>`` = 0, ``<unk>`` = 1 and ``</s>`` = 2."""

    def __init__(self, tokens: Sequence[str]):
        if tuple(tokens[: len(SPECIALS)]) != SPECIALS:
            raise ValueError(f"a vocabulary must start with the special symbols {SPECIALS}")
        self.tokens: list[str] = list(tokens)
        self._ids: dict[str, int] = {t: i for i, t in enumerate(self.tokens)}
        if len(self._ids) != len(self.tokens):
            raise ValueError("vocabulary tokens must be unique")

    @classmethod
    def from_counts(cls, types: Sequence[str], counts: np.ndarray, size: int) -> Vocabulary:
        """The ``size`` - 3 most frequent of ``types`` (count desc, then UTF-8 bytes asc)."""
        if size <= len(SPECIALS):
            raise ValueError(f"vocabulary size must exceed {len(SPECIALS)} (the special symbols)")
        if len(types) != len(counts):
            raise ValueError("types and counts differ in length")
        order = sorted(
            (i for i in range(len(types)) if counts[i] > 0 and types[i] not in SPECIALS),
            key=lambda i: (-int(counts[i]), types[i].encode("utf-8")),
        )
        return cls(list(SPECIALS) + [types[i] for i in order[: size - len(SPECIALS)]])

    def __len__(self) -> int:
        return len(self.tokens)

    def __contains__(self, token: str) -> bool:
        return token in self._ids

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Vocabulary) and self.tokens == other.tokens

    def __hash__(self) -> int:
        return hash(tuple(self.tokens))

    def id(self, token: str) -> int:
        return self._ids.get(token, UNK_ID)

    def encode(self, tokens: Iterable[str]) -> list[int]:
        """Token ids, without the end-of-sequence symbol (the batching layer appends it)."""
        get = self._ids.get
        return [get(t, UNK_ID) for t in tokens]

    def decode(self, ids: Iterable[int]) -> list[str]:
        return [self.tokens[i] for i in ids]

    def lookup_table(self, types: Sequence[str]) -> np.ndarray:
        """int32 array mapping each of ``types`` (a full type inventory) to its shortlist id."""
        get = self._ids.get
        return np.fromiter((get(t, UNK_ID) for t in types), dtype=np.int32, count=len(types))

    def count_unknown(self, tokens: Iterable[str]) -> int:
        """How many of ``tokens`` fall outside the shortlist (the paper's "WP" feature counts these)."""
        ids = self._ids
        return sum(1 for t in tokens if t not in ids)


def shortlist_coverage(*id_arrays: np.ndarray) -> float | None:
    """Fraction of the token ids in ``id_arrays`` that are not UNK_ID (in the shortlists);
    None without tokens. Training records it for the held-out pairs, rescoring compares."""
    total = sum(ids.size for ids in id_arrays)
    if not total:
        return None
    return 1.0 - sum(int(np.count_nonzero(ids == UNK_ID)) for ids in id_arrays) / total
