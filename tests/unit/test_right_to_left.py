"""A right-to-left network (``train-nmt --right-to-left``): trained on targets reversed, it scores
a hypothesis as the plain computation scores the hypothesis' words in reverse order (within
1e-4), translates in reading order, lists word scores in reading order, and is refused where a
left-to-right network is expected (averaging with one, resuming as one, the phrase analyses)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch

from phrase_rescorer.analysis.translate import translate
from phrase_rescorer.data.batching import Batch, sequences_batch
from phrase_rescorer.data.pairs import PairBuilder
from phrase_rescorer.model.averaging import AveragingError, average_checkpoints
from phrase_rescorer.model.checkpoint import RIGHT_TO_LEFT, Checkpoint, load_checkpoint, save_checkpoint
from phrase_rescorer.model.cho2014 import sequence_log_probs, sequence_token_log_probs
from phrase_rescorer.moses.nbest import parse_nbest_line
from phrase_rescorer.moses.words import split_words
from phrase_rescorer.scoring.features import Hypothesis, TranslationFeature, load_feature
from tests.helpers.nmt import SIZES, TINY_MOSES
from tests.helpers.paths import PYTHON, cli_env
from tests.helpers.rescore_data import tiny_arch_checkpoint, tiny_checkpoint

SOURCES = ["a man in a blue shirt .", "two dogs play"]
HYPS = [(0, "un homme en chemise bleue ."), (0, "un homme en bleu ."), (1, "deux chiens jouent"), (1, "")]
TOLERANCE = 1e-4  # float32 sums over up to 7 tokens, computed in batches of other shapes


def _network(path: Path, **info: str) -> Path:
    tiny_arch_checkpoint(path, arch="rnnsearch")
    ckpt = load_checkpoint(str(path))
    save_checkpoint(
        str(path), ckpt.build_model(), ckpt.src_vocab, ckpt.tgt_vocab, info={"trained_on": "sentence pairs", **info}
    )
    return path


def _lines() -> list[Hypothesis]:
    raw = [f"{s} ||| {h} ||| LM0= -1 ||| -1".encode() for s, h in HYPS]
    return [parse_nbest_line(r, b"\n", i + 1, "x") for i, r in enumerate(raw)]


def _batch(ckpt: Checkpoint, src_words: list[str], tgt_words: list[str]) -> Batch:
    return sequences_batch([ckpt.src_vocab.encode(src_words)], [ckpt.tgt_vocab.encode(tgt_words)])


def _plain(ckpt: Checkpoint, src_words: list[str], tgt_words: list[str]) -> float:
    b = _batch(ckpt, src_words, tgt_words)
    with torch.no_grad():
        return float(sequence_log_probs(ckpt.build_model(), b.src, b.src_len, b.tgt, b.tgt_len)[0])


def test_the_training_pairs_have_each_target_reversed_and_the_same_pairs_held_out() -> None:
    builder = PairBuilder()
    for s, t in [("a b", "x y z"), ("c", "w"), ("d e f", "u v")]:
        builder.add(s.split(), t.split())
    pairs = builder.build(3)
    reversed_ = pairs.targets_reversed()
    assert [reversed_.pair(i) for i in range(3)] == [
        (["a", "b"], ["z", "y", "x"]),
        (["c"], ["w"]),
        (["d", "e", "f"], ["v", "u"]),
    ]
    assert np.array_equal(reversed_.hashes, pairs.hashes)
    assert np.array_equal(reversed_.heldout_mask(0.5), pairs.heldout_mask(0.5))
    assert [pairs.pair(i) for i in range(3)][0] == (["a", "b"], ["x", "y", "z"])  # the original untouched


@pytest.mark.parametrize("direction", ["forward", "inverse"])
def test_the_feature_scores_the_hypothesis_words_reversed(tmp_path: Path, direction: str) -> None:
    r2l = _network(tmp_path / "r2l.pt", direction=direction, target_order=RIGHT_TO_LEFT)
    feature = load_feature(str(r2l), "NMT1", SOURCES)
    assert isinstance(feature, TranslationFeature)
    got, _ = feature.score(_lines())
    ckpt = load_checkpoint(str(r2l))
    want, left_to_right = [], []
    for s, h in HYPS:
        src, tgt = (h, SOURCES[s]) if direction == "inverse" else (SOURCES[s], h)
        want.append(_plain(ckpt, split_words(src), split_words(tgt)[::-1]))
        left_to_right.append(_plain(ckpt, split_words(src), split_words(tgt)))
    assert np.max(np.abs(got - np.array(want))) < TOLERANCE
    assert np.max(np.abs(got - np.array(left_to_right))) > 100 * TOLERANCE  # the order matters to the network


def test_a_subword_network_reverses_the_units_not_the_words(tmp_path: Path) -> None:
    """Training reverses each target after its segmentation: a hypothesis is segmented into
    units, then the units are reversed (each unit spelt as it is)."""
    model = tmp_path / "sub.pt"
    tiny_checkpoint(model, subwords=500)
    plain = load_checkpoint(str(model))
    assert plain.subwords is not None
    save_checkpoint(
        str(model),
        plain.build_model(),
        plain.src_vocab,
        plain.tgt_vocab,
        info={"trained_on": "sentence pairs", "target_order": RIGHT_TO_LEFT},
        subwords=plain.subwords,
    )
    ckpt = load_checkpoint(str(model))
    units = plain.subwords[1].split(split_words(HYPS[0][1]))
    assert len(units) > len(split_words(HYPS[0][1])) and ckpt.split(HYPS[0][1], 1) == units[::-1]
    feature = load_feature(str(model), "NMT0", SOURCES)
    got, _ = feature.score(_lines())
    want = [_plain(ckpt, plain.split(SOURCES[s], 0), plain.subwords[1].split(split_words(h))[::-1]) for s, h in HYPS]
    assert np.max(np.abs(got - np.array(want))) < TOLERANCE


def test_word_scores_are_listed_in_reading_order_and_sum_to_the_line(tmp_path: Path) -> None:
    r2l = _network(tmp_path / "r2l.pt", target_order=RIGHT_TO_LEFT)
    feature = load_feature(str(r2l), "NMT0", SOURCES)
    assert isinstance(feature, TranslationFeature)
    lines = _lines()
    terms = feature.token_scores(lines)
    totals, _ = feature.score(lines)
    ckpt = load_checkpoint(str(r2l))
    for (s, h), line_terms, total in zip(HYPS, terms, totals, strict=True):
        words = split_words(h)
        b = _batch(ckpt, split_words(SOURCES[s]), words[::-1])
        with torch.no_grad():
            row = sequence_token_log_probs(ckpt.build_model(), b.src, b.src_len, b.tgt, b.tgt_len)[0]
        network_order = row[: len(words) + 1].double().numpy()  # w_n ... w_1 </s>
        assert len(line_terms) == len(words) + 1
        assert np.allclose(line_terms[:-1], network_order[:-1][::-1], atol=1e-6)  # w_1 ... w_n
        assert abs(line_terms[-1] - network_order[-1]) < 1e-6 and abs(line_terms.sum() - total) < TOLERANCE


def test_translate_writes_in_reading_order(tmp_path: Path) -> None:
    l2r = load_checkpoint(str(_network(tmp_path / "l2r.pt")))
    r2l = load_checkpoint(str(_network(tmp_path / "r2l.pt", target_order=RIGHT_TO_LEFT)))
    plain = list(translate(l2r, SOURCES, beam_size=3, max_length=6))
    backwards = list(translate(r2l, SOURCES, beam_size=3, max_length=6))  # the same weights: the same search
    assert any(len(t.split()) > 1 for t in plain), plain
    assert backwards == [" ".join(t.split()[::-1]) for t in plain]


def test_averaging_refuses_to_mix_the_two_orders(tmp_path: Path) -> None:
    l2r = _network(tmp_path / "l2r.pt")
    r2l = _network(tmp_path / "r2l.pt", target_order=RIGHT_TO_LEFT)
    with pytest.raises(AveragingError, match="target written right to left, not left to right"):
        average_checkpoints([str(l2r), str(r2l)])
    assert average_checkpoints([str(r2l), str(r2l)]).right_to_left


def _train(out: Path, *extra: str) -> subprocess.CompletedProcess:
    argv = [PYTHON, "-m", "phrase_rescorer", "-q", "train-nmt", str(TINY_MOSES / "dev.en"), str(TINY_MOSES / "dev.fr")]
    argv += [str(out), *SIZES, "--valid-fraction", "0", "--source-lang", "en", "--target-lang", "fr", *extra]
    return subprocess.run(argv, capture_output=True, text=True, env=cli_env(), timeout=300)


def test_train_nmt_records_the_order_and_resume_keeps_it(tmp_path: Path) -> None:
    out = tmp_path / "r2l.pt"
    done = _train(out, "--right-to-left", "--max-steps", "3")
    assert done.returncode == 0, done.stderr
    assert load_checkpoint(str(out)).right_to_left and load_checkpoint(str(tmp_path / "r2l.last.pt")).right_to_left
    refused = _train(out, "--max-steps", "6", "--resume")
    assert refused.returncode != 0 and len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    assert "the order the target is written in was right-to-left, now left-to-right" in refused.stderr
    resumed = _train(out, "--right-to-left", "--max-steps", "6", "--resume")
    assert resumed.returncode == 0, resumed.stderr
    assert load_checkpoint(str(tmp_path / "r2l.last.pt")).info["steps"] == 6


def test_the_phrase_analyses_refuse_a_right_to_left_network(tmp_path: Path) -> None:
    r2l = _network(tmp_path / "r2l.pt", target_order=RIGHT_TO_LEFT)
    argv = [PYTHON, "-m", "phrase_rescorer", "suggest", "-m", str(r2l), "a man"]
    done = subprocess.run(argv, capture_output=True, text=True, env=cli_env(), timeout=120)
    assert done.returncode != 0 and f"{r2l}: a right-to-left network" in done.stderr, done.stderr
