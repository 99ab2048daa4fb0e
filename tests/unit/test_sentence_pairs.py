"""Sentence pairs for ``train-nmt``: two line-aligned files read into unique pairs, and batches
cut by tokens."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest

from phrase_rescorer.data.batching import epoch_plan
from phrase_rescorer.data.corpus import load_sentence_pairs
from phrase_rescorer.moses.phrase_table import PhraseTableError


def _write(path: Path, lines: list[str], compress: bool = False) -> str:
    data = "".join(line + "\n" for line in lines).encode()
    path.write_bytes(gzip.compress(data) if compress else data)
    return str(path)


def test_pairs_in_order_duplicates_once_empty_sides_skipped(tmp_path: Path) -> None:
    src = _write(tmp_path / "c.en", ["a man .", "a dog", "", "a man .", "the cat"])
    tgt = _write(tmp_path / "c.fr.gz", ["un homme .", "un chien", "vide", "un homme .", ""], compress=True)
    corpus = load_sentence_pairs(src, tgt)
    assert (corpus.lines, corpus.empty) == (5, 2)
    assert [corpus.pairs.pair(i) for i in range(len(corpus.pairs))] == [
        (["a", "man", "."], ["un", "homme", "."]),
        (["a", "dog"], ["un", "chien"]),
    ]
    assert corpus.pairs.duplicates == 1


@pytest.mark.parametrize("longer", ["source", "target"])
def test_files_of_different_lengths_are_refused_at_the_line_where_one_ends(tmp_path: Path, longer: str) -> None:
    three, two = ["a", "b", "c"], ["x", "y"]
    src = _write(tmp_path / "s", three if longer == "source" else two)
    tgt = _write(tmp_path / "t", two if longer == "source" else three)
    with pytest.raises(PhraseTableError) as e:
        load_sentence_pairs(src, tgt)
    shorter = tgt if longer == "source" else src
    assert str(e.value).startswith(f"{shorter}:3: ends here")
    assert "same number of lines" in str(e.value)


def test_token_batches_hold_every_pair_once_within_the_budget(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    lines_src = [" ".join("w" for _ in range(rng.integers(1, 30))) for _ in range(500)]
    lines_tgt = [" ".join(f"t{i}" for _ in range(rng.integers(1, 40))) for i in range(500)]
    corpus = load_sentence_pairs(_write(tmp_path / "s", lines_src), _write(tmp_path / "t", lines_tgt))
    encoded = corpus.pairs.encode(*corpus.pairs.build_vocabularies(100, 100))
    indices = np.arange(len(encoded))
    plan = epoch_plan(encoded, indices, 64, seed=1, epoch=0, max_tokens=200)
    assert sorted(np.concatenate(plan).tolist()) == indices.tolist()
    widths = encoded.tgt_lengths + 1
    for batch in plan:
        assert len(batch) == 1 or len(batch) * widths[batch].max() <= 200
    assert np.mean([len(b) * widths[b].max() for b in plan]) > 100  # batches are filled, not cut short
    assert [b.tolist() for b in plan] == [
        b.tolist() for b in epoch_plan(encoded, indices, 64, seed=1, epoch=0, max_tokens=200)
    ]
