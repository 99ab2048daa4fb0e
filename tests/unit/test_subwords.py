"""Subword units: the split (token by token = whole phrase, never unknown), the pairs it gives,
the model file that carries it, rescoring with it (lines kept, WP 0, scores = the plain
computation on the units), and training that learns through it."""

from __future__ import annotations

import gzip
import random
from pathlib import Path

import numpy as np
import pytest
import torch
from click.testing import CliRunner, Result

from phrase_rescorer.cli import cli
from phrase_rescorer.data.batching import sequences_batch
from phrase_rescorer.data.pairs import load_pairs
from phrase_rescorer.data.subwords import Subwords, learn_pair_subwords, segment_pairs
from phrase_rescorer.data.vocab import UNK_ID
from phrase_rescorer.model.checkpoint import load_checkpoint
from phrase_rescorer.model.cho2014 import sequence_log_probs
from phrase_rescorer.moses.table_reader import InputTable
from phrase_rescorer.rescoring.engine import rescore_table
from tests.helpers.paths import SAMPLE
from tests.helpers.rescore_data import appended_columns, read_lines
from tests.helpers.synthetic import mapping_table


def train(*args: str) -> Result:
    return CliRunner().invoke(cli, ["train", *args], catch_exceptions=False)


@pytest.fixture(scope="module")
def units() -> tuple:  # type: ignore[type-arg]
    pairs = load_pairs(str(SAMPLE))
    return pairs, learn_pair_subwords(pairs, 600)


def test_split_is_the_phrase_split_and_never_unknown(units: tuple) -> None:  # type: ignore[type-arg]
    _, (src, tgt) = units
    phrase = "l&apos; économie &#124; 中文 qwxz"
    assert tgt.split(phrase.split(" ")) == tgt.processor.encode(phrase, out_type=str)
    vocab = tgt.vocabulary()
    ids = vocab.encode(tgt.split(phrase.split(" ")))
    assert UNK_ID not in ids and "<0xE4>" in tgt.split(["中"])  # unseen characters: byte units
    assert "".join(tgt.split(["économie"])).replace("▁", "") == "économie"
    assert len(src.units) <= 600 and len(vocab) == len(tgt.units) + 3


def test_segmented_pairs_keep_their_hashes_and_split_each_token(units: tuple) -> None:  # type: ignore[type-arg]
    pairs, (src, tgt) = units
    seg = segment_pairs(pairs, src, tgt)
    assert np.array_equal(seg.hashes, pairs.hashes) and len(seg) == len(pairs)
    for i in (0, 17, 5000, len(pairs) - 1):
        s, t = pairs.pair(i)
        assert seg.pair(i) == (src.split(s), tgt.split(t))


@pytest.fixture(scope="module")
def subword_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("sw")
    r = train(
        str(SAMPLE),
        str(d / "m.pt"),
        "--arch",
        "rnnsearch",
        "--subwords",
        "500",
        "--embed-dim",
        "8",
        "--hidden-dim",
        "16",
        "--maxout-dim",
        "8",
        "--output-rank",
        "8",
        "--batch-size",
        "32",
        "--max-steps",
        "3",
        "--valid-max",
        "50",
        "--threads",
        "1",
        "--init-std",
        "0.3",
    )
    assert r.exit_code == 0, r.output
    assert "subword vocabularies" in r.output
    return d / "m.pt"


def test_model_file_carries_the_units_and_rescoring_uses_them(subword_model: Path, tmp_path: Path) -> None:
    ckpt = load_checkpoint(str(subword_model))
    assert ckpt.subwords is not None and torch.load(subword_model, weights_only=True)["format_version"] == 2
    assert ckpt.split("les pages", 1) == ckpt.subwords[1].split(["les", "pages"])
    table = tmp_path / "t.gz"
    table.write_bytes(gzip.compress(b"".join(read_lines(SAMPLE)[:120])))
    out = tmp_path / "o.gz"
    rescore_table(
        str(table), str(out), str(subword_model), device="cpu", unk_feature=True, score_format="logprob"
    )  # untrained: some pairs lie below the prob floor exp(-100)
    values = appended_columns(table, out, columns=2)  # every other byte unchanged
    assert all(v[1] == "1" for v in values)  # WP: exp(0), no unit is unknown
    model = ckpt.build_model()
    with InputTable(str(table)) as t, torch.inference_mode():
        want = []
        for e in t:
            b = sequences_batch(
                [ckpt.src_vocab.encode(ckpt.split(e.source, 0))], [ckpt.tgt_vocab.encode(ckpt.split(e.target, 1))]
            )
            want.append(float(sequence_log_probs(model, b.src, b.src_len, b.tgt, b.tgt_len)))
    got, ref = np.array([float(v[0]) for v in values]), np.array(want)
    assert np.all(np.abs(got - ref) <= 1e-5 * np.maximum(1.0, np.abs(ref)))


def test_it_learns_a_mapping_through_subword_units(tmp_path: Path) -> None:
    """The synthetic mapping of test_train_arch, read and predicted as units (a word aK/bK is
    one or two units): the network beats the unigram baseline over the units."""
    table = mapping_table(tmp_path / "pt.gz", 300)
    r = train(
        str(table),
        str(tmp_path / "m.pt"),
        "--arch",
        "rnnsearch",
        "--subwords",
        "300",
        "--embed-dim",
        "16",
        "--hidden-dim",
        "32",
        "--maxout-dim",
        "16",
        "--output-rank",
        "16",
        "--batch-size",
        "16",
        "--valid-fraction",
        "0.1",
        "--seed",
        "1",
        "--patience",
        "0",
        "--init-std",
        "0.1",
        "--threads",
        "1",
        "--max-steps",
        "300",
        "--valid-every",
        "50",
    )
    assert r.exit_code == 0, r.output
    ckpt = load_checkpoint(str(tmp_path / "m.pt"))
    assert ckpt.subwords is not None
    best, unigram = ckpt.info["best_valid"], ckpt.info["unigram_token_ppl"]
    assert best["token_ppl"] < 0.75 * unigram, (best, unigram)


def test_the_smallest_size_learns_on_more_characters_than_fit_and_stays_exact() -> None:
    """--subwords 300 holds 43 characters beside the 257 byte and <unk> units: a text of some
    140 distinct characters (Latin, Greek, Cyrillic; Zipf-like frequencies) keeps its most
    frequent 43 as units and spells the rest by their bytes; every token splits back to itself."""
    letters = [chr(c) for c in (*range(0x61, 0x7B), *range(0x3B1, 0x3CA), *range(0x430, 0x450), *range(0xC0, 0x100))]
    rng = random.Random(1)
    weights = [1 / (k + 1) for k in range(len(letters))]
    words = ("".join(rng.choices(letters, weights, k=rng.randint(2, 6))) for _ in range(9000))
    phrases = sorted({" ".join(w) for w in zip(words, words, words, strict=False)})
    assert len(set("".join(phrases))) > 120
    model = Subwords.learn(phrases, 300)
    assert model.processor.get_piece_size() <= 300
    characters = {u for u in model.units if len(u) == 1}
    assert 30 <= len(characters) <= 43 and "a" in characters
    vocab = model.vocabulary()
    for phrase in [*phrases[::50], " ".join(letters)]:
        tokens = phrase.split(" ")
        units = model.split(tokens)
        assert UNK_ID not in vocab.encode(units) and model.join(units) == tokens
