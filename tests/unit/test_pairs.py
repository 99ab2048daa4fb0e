from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest

from phrase_rescorer.data import pairs as pairs_mod
from phrase_rescorer.data.pairs import load_pairs
from phrase_rescorer.moses.table_reader import read_phrase_table
from phrase_rescorer.moses.words import split_words


def write(path: Path, lines: list[str], gz: bool = False) -> str:
    data = "".join(line + "\n" for line in lines).encode("utf-8")
    if gz:
        with gzip.open(path, "wb") as f:
            f.write(data)
    else:
        path.write_bytes(data)
    return str(path)


def test_extract_file_repeats_count_once(tmp_path: Path) -> None:
    lines = [
        "the house ||| la maison ||| 0-0 1-1",
        "the house ||| la maison ||| 0-0 1-1",
        "house ||| maison ||| 0-0",
        "the house ||| la maison ||| 0-1 1-0",  # same pair, other alignment: still the same pair
        "the  house ||| la maison ||| 0-0 1-1",  # same tokens, other spacing
    ]
    p = load_pairs(write(tmp_path / "extract.gz", lines, gz=True), extract=True)
    assert len(p) == 2
    assert p.lines_read == 5 and p.duplicates == 3
    assert p.pair(0) == (["the", "house"], ["la", "maison"])
    assert p.pair(1) == (["house"], ["maison"])


def test_phrase_table_pairs_match_lines(sample_table: Path) -> None:
    p = load_pairs(str(sample_table))
    expected = [(split_words(e.source), split_words(e.target)) for e in read_phrase_table(str(sample_table))]
    assert len(p) == len(expected) == p.lines_read
    for i in (0, 1, len(p) // 2, len(p) - 1):
        assert p.pair(i) == expected[i]
    assert int(p.src_lengths.sum()) == sum(len(s) for s, _ in expected)


def test_deduplication_is_exact_under_hash_collisions(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Every pair gets the same hash: only the token comparison can tell them apart.
    monkeypatch.setattr(pairs_mod, "pair_hash", lambda s, t: 7)
    lines = ["a ||| x ||| 1", "a ||| y ||| 1", "a ||| x ||| 1", "b c ||| x ||| 1", "a ||| x y ||| 1"]
    p = load_pairs(write(tmp_path / "t.txt", lines))
    assert [p.pair(i) for i in range(len(p))] == [
        (["a"], ["x"]),
        (["a"], ["y"]),
        (["b", "c"], ["x"]),
        (["a"], ["x", "y"]),
    ]


def test_heldout_split_depends_only_on_the_pair(tmp_path: Path) -> None:
    lines = [f"s{i} w{i % 7} ||| t{i} ||| 0.5" for i in range(2000)]
    a = load_pairs(write(tmp_path / "a.txt", lines))
    b = load_pairs(write(tmp_path / "b.txt", list(reversed(lines))))
    held_a = {tuple(map(tuple, a.pair(i))) for i in np.flatnonzero(a.heldout_mask(0.1))}
    held_b = {tuple(map(tuple, b.pair(i))) for i in np.flatnonzero(b.heldout_mask(0.1))}
    assert held_a == held_b
    assert 120 < len(held_a) < 280  # about 10 % of 2000
    assert not a.heldout_mask(0.0).any()


def test_vocabulary_and_encoding(sample_table: Path) -> None:
    p = load_pairs(str(sample_table))
    sv, tv = p.build_vocabularies(500, 600)
    assert len(sv) == 500 and len(tv) == 600
    enc = p.encode(sv, tv)
    src, tgt = p.pair(3)
    s = enc.src_tokens[enc.src_offsets[3] : enc.src_offsets[4]]
    assert list(s) == sv.encode(src)
    assert list(enc.tgt_tokens[enc.tgt_offsets[3] : enc.tgt_offsets[4]]) == tv.encode(tgt)


def test_storage_is_compact(sample_table: Path) -> None:
    p = load_pairs(str(sample_table))
    per_pair = p.nbytes / len(p)
    # Flat int32 tokens + int64 offsets + uint64 hash: about 4*(|f|+|e|) + 24 bytes per pair.
    expected = 4 * (p.src_lengths.mean() + p.tgt_lengths.mean()) + 24
    assert per_pair == pytest.approx(expected, rel=0.01)
    assert per_pair < 64
