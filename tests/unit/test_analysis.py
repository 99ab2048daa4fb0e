"""The analysis library: generation against the scoring definition, table grouping, comparison,
embedding export."""

from __future__ import annotations

import copy
import gzip
from pathlib import Path

import numpy as np
import pytest
import torch

from phrase_rescorer.analysis import compare as cmp
from phrase_rescorer.analysis.embed import phrase_space, word_spaces, write_space
from phrase_rescorer.analysis.search import Candidate, beam_search, greedy, sample, top_unique
from phrase_rescorer.analysis.table_groups import GroupFilter, Reservoir, pick_groups, source_groups
from phrase_rescorer.data.batching import sequences_batch
from phrase_rescorer.data.vocab import EOS_ID, PAD_ID, UNK_ID
from phrase_rescorer.model.checkpoint import load_checkpoint
from phrase_rescorer.model.cho2014 import RNNEncoderDecoder, sequence_log_probs
from phrase_rescorer.moses.phrase_table import PhraseTableError
from phrase_rescorer.moses.tokenizer import unescape
from phrase_rescorer.moses.words import split_words

SOURCES = ["looking at", "in a black shirt", "the side of a", "sit at a table", "a zebra qwxyz"]
TOL = 1e-4


@pytest.fixture(scope="module")
def trained(trained_model: Path):
    ckpt = load_checkpoint(str(trained_model))
    return ckpt.build_model(), ckpt.src_vocab, ckpt.tgt_vocab


def reference(model: RNNEncoderDecoder, src_ids: list[int], cands: list[Candidate]) -> torch.Tensor:
    """sequence_log_probs, the rescoring score, of (source, candidate) for every candidate."""
    b = sequences_batch([src_ids] * len(cands), [list(c.tokens) for c in cands])
    with torch.no_grad():
        return sequence_log_probs(model, b.src, b.src_len, b.tgt, b.tgt_len)


# --- search -------------------------------------------------------------------------------------


@pytest.mark.parametrize("phrase", SOURCES)
def test_beam_of_one_is_greedy_decoding(trained, phrase: str) -> None:
    model, sv, _ = trained
    src = sv.encode(split_words(phrase))
    g = greedy(model, src)
    (b,) = beam_search(model, src, beam_size=1)
    assert b.tokens == g.tokens
    assert b.logp == pytest.approx(g.logp, abs=TOL)


@pytest.mark.parametrize("phrase", SOURCES)
def test_beam_scores_are_the_rescoring_scores(trained, phrase: str) -> None:
    model, sv, _ = trained
    src = sv.encode(split_words(phrase))
    cands = beam_search(model, src, beam_size=6)
    assert 1 <= len(cands) <= 6
    assert len({c.tokens for c in cands}) == len(cands)
    assert [c.logp for c in cands] == sorted((c.logp for c in cands), reverse=True)
    ref = reference(model, src, cands)
    # the best candidate above all, and every other one too
    assert cands[0].logp == pytest.approx(float(ref[0]), abs=TOL)
    assert torch.allclose(torch.tensor([c.logp for c in cands]), ref, atol=TOL)


def test_length_limit_forces_end_and_keeps_exact_scores(trained) -> None:
    model, sv, _ = trained
    src = sv.encode(split_words("in a black shirt"))
    for limit, cands in ((2, beam_search(model, src, 4, max_length=2)), (1, [greedy(model, src, max_length=1)])):
        assert all(1 <= len(c.tokens) <= limit for c in cands)
        # a candidate that reaches the limit ends there, with </s> forced and scored
        assert all(c.truncated == (len(c.tokens) == limit) for c in cands)
        ref = reference(model, src, cands)
        assert torch.allclose(torch.tensor([c.logp for c in cands]), ref, atol=TOL)


def test_generation_never_proposes_specials_or_empty_phrases(trained) -> None:
    model, sv, _ = trained
    src = sv.encode(split_words("a zebra qwxyz"))
    gen = torch.Generator().manual_seed(3)
    cands = beam_search(model, src, 8) + sample(model, src, 40, 1.5, gen)
    for c in cands:
        assert c.tokens, "a phrase has at least one word"
        assert not {PAD_ID, UNK_ID, EOS_ID} & set(c.tokens)


def test_sampling_is_reproducible_and_scored_at_temperature_one(trained) -> None:
    model, sv, _ = trained
    src = sv.encode(split_words("sit at a table"))
    draws = [sample(model, src, 20, 1.3, torch.Generator().manual_seed(7)) for _ in range(2)]
    assert draws[0] == draws[1]
    other = sample(model, src, 20, 1.3, torch.Generator().manual_seed(8))
    assert [c.tokens for c in other] != [c.tokens for c in draws[0]]
    ref = reference(model, src, draws[0])
    assert torch.allclose(torch.tensor([c.logp for c in draws[0]]), ref, atol=TOL)


def test_sampling_near_zero_temperature_is_greedy(trained) -> None:
    model, sv, _ = trained
    src = sv.encode(split_words("looking at"))
    g = greedy(model, src)
    draws = sample(model, src, 5, 1e-4, torch.Generator().manual_seed(0))
    assert {c.tokens for c in draws} == {g.tokens}


def test_top_unique_keeps_the_best_distinct() -> None:
    cands = [Candidate((1,), -3.0), Candidate((2,), -1.0), Candidate((1,), -3.0), Candidate((3,), -2.0)]
    assert top_unique(cands, 2) == [Candidate((2,), -1.0), Candidate((3,), -2.0)]
    assert len(top_unique(cands, 10)) == 3


def test_search_refuses_bad_settings(trained) -> None:
    model, sv, _ = trained
    src = sv.encode(["a"])
    with pytest.raises(ValueError):
        beam_search(model, src, 0)
    with pytest.raises(ValueError):
        sample(model, src, 3, 0.0)
    with pytest.raises(ValueError):
        greedy(model, src, max_length=0)


# --- table groups -------------------------------------------------------------------------------


def test_source_groups_cover_the_table(sample_table: Path) -> None:
    groups = list(source_groups(str(sample_table), 3))
    assert len(groups) == 22436  # unique sources of the sample (sorted table)
    assert sum(len(g.targets) for g in groups) == 29260
    with gzip.open(sample_table, "rt", encoding="utf-8") as f:
        first = [line.split(" ||| ") for _, line in zip(range(5), f, strict=False)]
    g0, g1 = groups[0], groups[1]
    assert g0.source == first[0][0] and g0.targets == [first[0][1]]
    assert g0.scores == [float(first[0][2].split()[2])]
    assert g1.targets == [row[1] for row in first[1:5]] and g1.count == 4.0


def test_score_column_out_of_range_names_the_line(sample_table: Path) -> None:
    with pytest.raises(PhraseTableError, match=r":1: has 4 scores, so there is no score column 5"):
        next(source_groups(str(sample_table), 5))


def test_pick_groups_samples_qualifying_sources_reproducibly(sample_table: Path) -> None:
    keep = GroupFilter(min_length=4, min_targets=6, min_count=10)
    runs = [pick_groups(source_groups(str(sample_table), 3), None, keep, 7, seed=5)[0] for _ in range(2)]
    assert [g.source for g in runs[0]] == [g.source for g in runs[1]]
    assert len(runs[0]) == 7
    assert all(keep(g) and g.length >= 4 and len(g.targets) >= 6 and (g.count or 0) >= 10 for g in runs[0])
    assert [g.line_no for g in runs[0]] == sorted(g.line_no for g in runs[0])
    groups, missing = pick_groups(source_groups(str(sample_table)), ["looking  at", "not a source xyz"])
    assert [g.source for g in groups] == ["looking at"] and missing == ["not a source xyz"]


def test_reservoir_is_uniform_enough() -> None:
    hits = np.zeros(10)
    for seed in range(400):
        r: Reservoir[int] = Reservoir(3, seed)
        for i in range(10):
            r.offer(i)
        assert sorted(r.in_stream_order()) == r.in_stream_order()
        hits[r.in_stream_order()] += 1
    assert hits.sum() == 1200 and hits.min() > 80  # expectation 120 each


# --- compare ------------------------------------------------------------------------------------


def test_network_scores_restore_input_order(trained) -> None:
    model, sv, tv = trained
    pairs = [
        ("looking at", "regardant"),
        ("in a black shirt", "en chemise noire , un homme"),
        ("a", "un"),
        ("sit at a table", "assis"),
    ]
    got = cmp.network_scores(model, sv, tv, pairs, batch_size=2)
    for (s, t), value in zip(pairs, got, strict=True):
        b = sequences_batch([sv.encode(s.split())], [tv.encode(t.split())])
        with torch.no_grad():
            one = sequence_log_probs(model, b.src, b.src_len, b.tgt, b.tgt_len)
        assert value == pytest.approx(float(one), abs=TOL)


def test_compare_ranks_by_table_and_by_network(trained, sample_table: Path) -> None:
    model, sv, tv = trained
    report = cmp.compare(
        source_groups(str(sample_table), 3),
        model,
        sv,
        tv,
        3,
        keep=GroupFilter(4, None, 6),
        max_sources=4,
        top=3,
        scatter_pairs=300,
        seed=2,
    )
    assert len(report.comparisons) == 4
    for c in report.comparisons:
        table = [r.table_score for r in c.by_table]
        net = [r.network_logp for r in c.by_network]
        assert table == sorted(table, reverse=True) and net == sorted(net, reverse=True)
        assert len(c.by_table) == len(c.by_network) == 3 and c.targets >= 6
        scores = cmp.network_scores(model, sv, tv, [(c.source, r.target) for r in c.by_table])
        assert np.allclose(scores, [r.network_logp for r in c.by_table], atol=TOL)
    assert len(report.scatter_table) == len(report.scatter_network) == 300
    assert report.spearman is not None and -1 <= report.spearman <= 1
    text = cmp.format_text(report)  # for people: unescaped
    assert all(unescape(c.source) in text for c in report.comparisons)
    assert len(cmp.tsv_rows(report)) == 4 * 2 * 3


def test_source_gain_is_zero_for_a_network_that_ignores_the_source(trained, sample_table: Path) -> None:
    model, sv, tv = trained
    report = cmp.compare(source_groups(str(sample_table), 3), model, sv, tv, max_sources=1, scatter_pairs=200, seed=3)
    assert report.source_gain is not None and abs(report.source_gain) > 1e-6
    blind = copy.deepcopy(model)
    with torch.no_grad():  # c reaches the decoder only through V', C and O_c
        for layer in (blind.bridge, blind.C, blind.O_c):
            layer.weight.zero_()
    report = cmp.compare(source_groups(str(sample_table), 3), blind, sv, tv, max_sources=1, scatter_pairs=200, seed=3)
    assert report.source_gain == pytest.approx(0.0, abs=1e-5)
    assert "Source gain" in cmp.format_text(report)


def test_spearman_and_moses_log_floor() -> None:
    x = np.array([1.0, 2.0, 3.0, 4.0])
    assert cmp.spearman(x, x * 10) == pytest.approx(1.0)
    assert cmp.spearman(x, -x) == pytest.approx(-1.0)
    assert cmp.spearman(np.array([1.0, 1.0, 2.0]), np.array([1.0, 2.0, 3.0])) == pytest.approx(0.8660254)
    assert cmp.spearman(x[:2], x[:2]) is None
    assert cmp.table_log(0.0) == cmp.table_log(1e-60) == -100.0
    assert cmp.table_log(0.5) == pytest.approx(np.log(0.5))


# --- embed --------------------------------------------------------------------------------------


def _rows(path: str) -> list[str]:
    with open(path, encoding="utf-8") as f:
        return f.read().split("\n")[:-1]


def test_exported_spaces_have_matching_rows(trained, tmp_path: Path) -> None:
    model, sv, tv = trained
    phrases = ["looking at", "in a  black shirt", "a zebra qwxyz"]
    spaces = word_spaces(model, sv, tv) + [phrase_space(model, sv, phrases)]
    for space in spaces:
        vec_path, meta_path = write_space(str(tmp_path), space)
        vectors, meta = _rows(vec_path), _rows(meta_path)
        header = 1 if space.header else 0
        assert len(vectors) == len(meta) - header == len(space.labels)
        loaded = np.array([[float(v) for v in row.split("\t")] for row in vectors])
        assert np.allclose(loaded, space.vectors, rtol=1e-5, atol=1e-7)
    assert _rows(str(tmp_path / "source-words.metadata.tsv")) == sv.tokens
    assert _rows(str(tmp_path / "phrases.metadata.tsv")) == [
        "phrase\twords",
        "looking at\t2",
        "in a black shirt\t4",
        "a zebra qwxyz\t3",
    ]
    # phrase vectors are the summaries c of model.encode, phrase by phrase
    for i, p in enumerate(phrases):
        b = sequences_batch([sv.encode(split_words(p))], [[]])
        with torch.no_grad():
            c = model.encode(b.src, b.src_len).c[0].numpy()
        assert np.allclose(spaces[2].vectors[i], c, atol=1e-6)
