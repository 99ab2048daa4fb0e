"""The training data: the unique (source, target) phrase pairs of a table, frequencies ignored.

The method of Cho et al. (2014) trains on each unique phrase pair once, however often it was seen,
so that the network learns regularities rather than the counts the table already holds. A Moses
phrase table has one line per pair; an ``extract`` file (``src ||| tgt ||| alignment``, from
Moses' extract step) repeats a pair once per occurrence. Both are read here and deduplicated.

Storage is compact: every token is interned into a per-side type inventory and pairs are kept as
flat int32 token-id arrays with int64 offsets and a 64-bit hash: 58.7 bytes per pair measured on
the 839,351-pair en-fr table (``PairSet.nbytes``), so a 10-million-line table needs about 600 MB.

Deduplication is exact: pairs are grouped by a 64-bit BLAKE2b hash of their token sequences and
every group of equal hashes is compared token by token. The same hash (its high bits) chooses the
held-out validation pairs, so a given pair is held out on every run and every machine.
"""

from __future__ import annotations

import hashlib
from array import array
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from ..moses.table_kind import checked_entries
from ..moses.table_reader import InputTable
from ..moses.words import split_words
from .vocab import Vocabulary

#: Held-out pairs are those whose hash lies below ``fraction * 2**32`` (high 32 bits).
_HASH_SPACE = 1 << 32


def pair_hash(source_tokens: list[str], target_tokens: list[str]) -> int:
    """The 64-bit hash that identifies a pair (tokens joined by single spaces, so the spacing of
    the file does not matter)."""
    text = (" ".join(source_tokens) + "\n" + " ".join(target_tokens)).encode("utf-8")
    return int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "little")


class _Lengths:
    """Phrase lengths (tokens) read off the flat arrays' offsets."""

    src_offsets: np.ndarray
    tgt_offsets: np.ndarray

    @property
    def src_lengths(self) -> np.ndarray:
        return np.diff(self.src_offsets)

    @property
    def tgt_lengths(self) -> np.ndarray:
        return np.diff(self.tgt_offsets)


@dataclass
class PairSet(_Lengths):
    """Unique phrase pairs as flat token-id arrays (ids index ``src_types`` / ``tgt_types``)."""

    src_tokens: np.ndarray  # (total source tokens,) int32
    src_offsets: np.ndarray  # (n + 1,) int64
    tgt_tokens: np.ndarray  # (total target tokens,) int32
    tgt_offsets: np.ndarray  # (n + 1,) int64
    hashes: np.ndarray  # (n,) uint64, pair_hash of each pair
    src_types: list[str]
    tgt_types: list[str]
    lines_read: int = 0
    duplicates: int = 0

    def __len__(self) -> int:
        return len(self.hashes)

    @property
    def nbytes(self) -> int:
        """Bytes held by the per-pair arrays (the type inventories are extra and small)."""
        arrays = (self.src_tokens, self.src_offsets, self.tgt_tokens, self.tgt_offsets, self.hashes)
        return sum(a.nbytes for a in arrays)

    def pair(self, i: int) -> tuple[list[str], list[str]]:
        s = self.src_tokens[self.src_offsets[i] : self.src_offsets[i + 1]]
        t = self.tgt_tokens[self.tgt_offsets[i] : self.tgt_offsets[i + 1]]
        return [self.src_types[j] for j in s], [self.tgt_types[j] for j in t]

    def token_counts(self) -> tuple[np.ndarray, np.ndarray]:
        """How often each source and target type occurs over the unique pairs."""
        return (
            np.bincount(self.src_tokens, minlength=len(self.src_types)),
            np.bincount(self.tgt_tokens, minlength=len(self.tgt_types)),
        )

    def build_vocabularies(self, src_size: int, tgt_size: int) -> tuple[Vocabulary, Vocabulary]:
        src_counts, tgt_counts = self.token_counts()
        return (
            Vocabulary.from_counts(self.src_types, src_counts, src_size),
            Vocabulary.from_counts(self.tgt_types, tgt_counts, tgt_size),
        )

    def heldout_mask(self, fraction: float) -> np.ndarray:
        """Boolean mask of the held-out pairs: the pair's hash decides, nothing else."""
        threshold = np.uint64(int(fraction * _HASH_SPACE))
        return (self.hashes >> np.uint64(32)) < threshold

    def swapped(self) -> PairSet:
        """The same pairs read the other way: each target becomes the source and each source
        the target (``train --direction inverse``: a network of p(source | target)). The hashes
        stay each pair's own, so the inverse network holds out the same pairs as the forward one."""
        return PairSet(
            src_tokens=self.tgt_tokens,
            src_offsets=self.tgt_offsets,
            tgt_tokens=self.src_tokens,
            tgt_offsets=self.src_offsets,
            hashes=self.hashes,
            src_types=self.tgt_types,
            tgt_types=self.src_types,
            lines_read=self.lines_read,
            duplicates=self.duplicates,
        )

    def targets_reversed(self) -> PairSet:
        """The same pairs with each target's tokens in reverse order (``train-nmt
        --right-to-left``: a network that writes its target from the last word to the first).
        The hashes stay each pair's own, so the same pairs are held out."""
        lengths = np.diff(self.tgt_offsets)
        starts = np.repeat(self.tgt_offsets[:-1], lengths)
        ends = np.repeat(self.tgt_offsets[1:], lengths)
        order = starts + ends - 1 - np.arange(len(self.tgt_tokens), dtype=np.int64)
        return replace(self, tgt_tokens=self.tgt_tokens[order])

    def encode(self, src_vocab: Vocabulary, tgt_vocab: Vocabulary) -> EncodedPairs:
        """The same pairs with shortlist ids (out-of-shortlist tokens become UNK)."""
        src_lut = src_vocab.lookup_table(self.src_types)
        tgt_lut = tgt_vocab.lookup_table(self.tgt_types)
        return EncodedPairs(
            src_tokens=src_lut[self.src_tokens],
            src_offsets=self.src_offsets,
            tgt_tokens=tgt_lut[self.tgt_tokens],
            tgt_offsets=self.tgt_offsets,
        )


@dataclass
class EncodedPairs(_Lengths):
    """Pairs as shortlist ids, ready for batching (see ``batching``)."""

    src_tokens: np.ndarray
    src_offsets: np.ndarray
    tgt_tokens: np.ndarray
    tgt_offsets: np.ndarray

    def __len__(self) -> int:
        return len(self.src_offsets) - 1


class _Interner:
    """Token -> type id, growing the inventory as new tokens arrive."""

    def __init__(self) -> None:
        self.ids: dict[str, int] = {}
        self.types: list[str] = []

    def __call__(self, token: str) -> int:
        i = self.ids.get(token)
        if i is None:
            i = self.ids[token] = len(self.types)
            self.types.append(token)
        return i


class PairBuilder:
    """Collects pairs of token lists, then gives them as a deduplicated :class:`PairSet` (the
    one builder of phrase tables' and parallel corpora's pairs)."""

    def __init__(self) -> None:
        self._src_in, self._tgt_in = _Interner(), _Interner()
        self._src_tokens, self._tgt_tokens = array("i"), array("i")
        self._src_lens, self._tgt_lens = array("q"), array("q")
        self._hashes = array("Q")

    def add(self, s_toks: list[str], t_toks: list[str]) -> None:
        self._src_tokens.extend(map(self._src_in, s_toks))
        self._tgt_tokens.extend(map(self._tgt_in, t_toks))
        self._src_lens.append(len(s_toks))
        self._tgt_lens.append(len(t_toks))
        self._hashes.append(pair_hash(s_toks, t_toks))

    def build(self, lines_read: int) -> PairSet:
        """The unique pairs added so far, first occurrences in the order added."""
        pairs = PairSet(
            src_tokens=np.frombuffer(self._src_tokens, dtype=np.int32).copy(),
            src_offsets=_offsets(self._src_lens),
            tgt_tokens=np.frombuffer(self._tgt_tokens, dtype=np.int32).copy(),
            tgt_offsets=_offsets(self._tgt_lens),
            hashes=np.frombuffer(self._hashes, dtype=np.uint64).copy(),
            src_types=self._src_in.types,
            tgt_types=self._tgt_in.types,
            lines_read=lines_read,
        )
        return deduplicate(pairs)


def load_pairs(
    path: str, *, extract: bool = False, on_progress: Callable[[int, int | None], None] | None = None
) -> PairSet:
    """Read the unique pairs of a phrase table (or of a Moses extract file with ``extract``).

    ``on_progress(position, size)`` is called every 65,536 lines with the input's byte position.
    Bad lines raise ``PhraseTableError`` naming the file and line.
    """
    builder = PairBuilder()
    lines = 0
    with InputTable(path, check_scores=not extract) as table:
        for entry in checked_entries(table, path):
            builder.add(split_words(entry.source), split_words(entry.target))
            lines += 1
            if on_progress is not None and lines % 65536 == 0:
                on_progress(table.position(), table.size())
        if on_progress is not None:
            on_progress(table.position(), table.size())
    return builder.build(lines)


def _offsets(lengths: array) -> np.ndarray:
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(np.frombuffer(lengths, dtype=np.int64), out=offsets[1:])
    return offsets


def _same_pair(p: PairSet, i: int, j: int) -> bool:
    so, to = p.src_offsets, p.tgt_offsets
    return np.array_equal(p.src_tokens[so[i] : so[i + 1]], p.src_tokens[so[j] : so[j + 1]]) and np.array_equal(
        p.tgt_tokens[to[i] : to[i + 1]], p.tgt_tokens[to[j] : to[j + 1]]
    )


def deduplicate(p: PairSet) -> PairSet:
    """Keep the first occurrence of every distinct pair, in input order (exact comparison)."""
    n = len(p)
    if n == 0:
        return p
    order = np.argsort(p.hashes, kind="stable")
    sorted_h = p.hashes[order]
    same_as_prev = np.zeros(n, dtype=bool)
    same_as_prev[1:] = sorted_h[1:] == sorted_h[:-1]
    if not same_as_prev.any():
        return p
    keep = np.ones(n, dtype=bool)
    # Walk each run of equal hashes; within a run compare against the kept members exactly.
    starts = np.flatnonzero(~same_as_prev)
    ends = np.append(starts[1:], n)
    for a, b in zip(starts[(ends - starts) > 1], ends[(ends - starts) > 1], strict=True):
        kept: list[int] = []
        for k in range(a, b):
            i = int(order[k])
            if any(_same_pair(p, i, j) for j in kept):
                keep[i] = False
            else:
                kept.append(i)
    idx = np.flatnonzero(keep)
    src_tokens, src_offsets = _gather(p.src_tokens, p.src_offsets, idx)
    tgt_tokens, tgt_offsets = _gather(p.tgt_tokens, p.tgt_offsets, idx)
    return PairSet(
        src_tokens=src_tokens,
        src_offsets=src_offsets,
        tgt_tokens=tgt_tokens,
        tgt_offsets=tgt_offsets,
        hashes=p.hashes[idx],
        src_types=p.src_types,
        tgt_types=p.tgt_types,
        lines_read=p.lines_read,
        duplicates=n - len(idx),
    )


def _gather(tokens: np.ndarray, offsets: np.ndarray, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The sequences ``idx`` of a flat (tokens, offsets) store, as a new flat store."""
    lengths = offsets[idx + 1] - offsets[idx]
    new_offsets = np.zeros(len(idx) + 1, dtype=np.int64)
    np.cumsum(lengths, out=new_offsets[1:])
    # Position of every kept token in the old array: its sequence start + its rank inside it.
    starts = np.repeat(offsets[idx], lengths)
    within = np.arange(new_offsets[-1], dtype=np.int64) - np.repeat(new_offsets[:-1], lengths)
    return tokens[starts + within], new_offsets
