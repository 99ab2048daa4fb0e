"""The MBR decision rule (reranking/mbr.py) against a plain transcription of Moses'
``moses/mbr.cpp`` (benchmarks/mbr.py, which times the two): its ``calculate_score`` with n-gram
maps, its ``doMBR`` double loop."""

from __future__ import annotations

import random
import tracemalloc
import warnings

import numpy as np
import pytest

from benchmarks.mbr import moses_mbr, moses_risks, moses_score
from phrase_rescorer.moses.words import split_words
from phrase_rescorer.reranking.choose import best_per_sentence, output_lines
from phrase_rescorer.reranking.mbr import Mbr, mbr_choice, pair_bleu
from phrase_rescorer.reranking.nbest_features import NbestMatrix


def random_hyps(rng: random.Random, count: int) -> list[str]:
    vocab = ["le", "la", "un", "chat", "chien", "noir", "blanc", "court", "dans", "parc", "rue", ",", "."]
    base = [rng.choice(vocab) for _ in range(rng.randint(3, 9))]
    hyps = []
    for _ in range(count):
        words = list(base)
        for _ in range(rng.randint(0, 4)):  # edits of a shared sentence: many n-grams in common
            at = rng.randrange(len(words) + 1)
            if rng.random() < 0.5 and words:
                del words[min(at, len(words) - 1)]
            else:
                words.insert(at, rng.choice(vocab))
        hyps.append(" ".join(words))
    return list(dict.fromkeys(hyps))  # distinct, as Moses' MBR list (CalcNBest(..., true))


def test_pair_bleu_is_moses_calculate_score() -> None:
    rng = random.Random(5)
    for _ in range(20):
        hyps = random_hyps(rng, rng.randint(1, 12)) + ["", "le le le le", "chat"]  # empty, repeats, short
        tokens = [h.split() for h in hyps]
        got = pair_bleu(tokens)
        want = np.array([[moses_score(tokens[i], tokens[j]) for j in range(len(hyps))] for i in range(len(hyps))])
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-15)


def test_self_bleu_is_one_and_disjoint_is_zero() -> None:
    bleu = pair_bleu([["a", "b", "c"], ["d", "e"], ["a", "b", "c"]])
    assert bleu[0, 0] == pytest.approx(1.0) and bleu[0, 2] == pytest.approx(1.0)
    assert bleu[0, 1] == 0.0 and bleu[1, 0] == 0.0


@pytest.mark.parametrize("scale", [0.0, 0.3, 1.0, 5.0])
@pytest.mark.parametrize("size", [1, 3, 200])
def test_mbr_choice_is_moses_do_mbr(scale: float, size: int) -> None:
    rng = random.Random(int(scale * 10) + size)
    for _ in range(12):
        hyps = random_hyps(rng, rng.randint(1, 15))
        totals = [round(rng.uniform(-3, 0), 1) for _ in hyps]  # rounded: equal totals happen
        got = mbr_choice(hyps, np.array(totals), Mbr(scale, size))
        risks = moses_risks(hyps, totals, scale, size)
        want = moses_mbr(hyps, totals, scale, size)
        # the same hypothesis, or (equal risks summed in another order) one of the same risk
        assert got == want or abs(risks[got] - risks[want]) < 1e-12
        assert got == want or scale == 0.0


def test_mbr_of_one_is_the_highest_total() -> None:
    assert mbr_choice(["a b", "c d", "e f"], np.array([-2.0, -1.0, -1.0]), Mbr(1.0, 1)) == 1


def test_mbr_prefers_the_consensus() -> None:
    # the top hypothesis stands alone; three near-equal ones agree with each other
    hyps = ["x y z w", "a b c d e", "a b c d f", "a b c d g"]
    totals = np.array([-1.0, -1.1, -1.1, -1.1])
    assert mbr_choice(hyps, totals, Mbr(1.0, 200)) in (1, 2, 3)
    assert mbr_choice(hyps, totals, Mbr(100.0, 200)) == 0  # nearly all the mass on the top one


def test_best_per_sentence_with_mbr() -> None:
    hyps = ["x y z w", "a b c d e", "a b c d f", "a b c d g", "solo", "p q"]
    m = NbestMatrix(
        "list",
        (("F", 1),),
        np.array([[-1.0], [-1.1], [-1.1], [-1.1], [0.0], [-5.0]]),
        np.array([0, 0, 0, 0, 1, 1]),
        hyps,
    )
    weights = np.array([1.0])
    assert best_per_sentence(m, weights) == ([0, 1], [0, 4])
    ids, chosen = best_per_sentence(m, weights, Mbr(1.0, 200))
    assert ids == [0, 1] and chosen[0] in (1, 2, 3) and chosen[1] == 4  # one more likely, nothing shared
    assert output_lines(m, weights, Mbr(1.0, 1)) == ["x y z w", "solo"]


@pytest.mark.parametrize("scale,size", [(-1.0, 10), (float("nan"), 10), (float("inf"), 10), (1.0, 0)])
def test_mbr_refuses_bad_settings(scale: float, size: int) -> None:
    with pytest.raises(ValueError):
        Mbr(scale, size)


def test_a_huge_scale_keeps_the_highest_totals() -> None:
    # two hypotheses share the highest total: a huge scale weighs them alike and the rest 0
    # (computed as scale * total - highest scaled, inf - inf would make every risk NaN)
    hyps, totals = ["a b c d", "a b c", "x"], [2.0, 2.0, 1.0]
    assert mbr_choice(hyps, np.array(totals), Mbr(1e308, 200)) == moses_mbr(hyps, totals, 1.0, 200) == 1


def test_the_first_of_equal_risks_is_chosen() -> None:
    assert mbr_choice(["a b", "c d"], np.array([-1.0, -1.0]), Mbr()) == 0  # both risks 0.5
    assert mbr_choice(["c d", "a b"], np.array([-1.0, -1.0]), Mbr()) == 0


def test_an_empty_hypothesis_is_not_compared_with_itself() -> None:
    # its BLEU against itself is 0: counted, its risk would be its own probability too
    assert mbr_choice(["", "a", "b"], np.array([0.0, -5.0, -5.0]), Mbr(1.0, 200)) == 0


def test_words_are_split_at_spaces_and_tabs_only() -> None:
    # a no-break space (French typography, before ":") is part of a word, as in Moses
    tokens = [split_words(h) for h in ["le chat\u00a0: noir", "le chat : noir", "  le \t chat "]]
    assert tokens == [["le", "chat\u00a0:", "noir"], ["le", "chat", ":", "noir"], ["le", "chat"]]
    assert pair_bleu(tokens)[0, 1] == pytest.approx(moses_score(tokens[0], tokens[1]))
    assert pair_bleu(tokens)[0, 1] < 1.0


def test_a_large_vocabulary_is_no_limit() -> None:
    # 60,000 distinct words a hypothesis: the n-grams are renumbered at each order
    first = [f"w{i}" for i in range(60000)]
    second = first[:30000] + [f"v{i}" for i in range(30000)]
    bleu = pair_bleu([first, second])
    assert bleu[0, 1] == pytest.approx(moses_score(first, second)) and 0.0 < bleu[0, 1] < 1.0


def test_blocks_give_the_same_bleu_and_choices() -> None:
    # blocks of rows and of n-grams smaller than the list: sums of the same integers
    rng = random.Random(11)
    for _ in range(8):
        hyps = random_hyps(rng, 40) + ["", "chat", "le le le le"]
        tokens = [split_words(h) for h in hyps]
        whole = pair_bleu(tokens)  # one block
        for block in (1, 7, 3 * len(hyps) + 1):
            np.testing.assert_array_equal(pair_bleu(tokens, block=block), whole)
        totals = [round(rng.uniform(-3, 0), 1) for _ in hyps]
        for scale in (0.0, 1.0, 5.0):
            chosen = {mbr_choice(hyps, np.array(totals), Mbr(scale, 200), block=b) for b in (1, 7, 3 * len(hyps) + 1)}
            assert chosen == {mbr_choice(hyps, np.array(totals), Mbr(scale, 200))}
            assert chosen == {moses_mbr(hyps, totals, scale, 200)} or scale == 0.0


def test_memory_grows_with_the_list_not_its_square() -> None:
    # 600 hypotheses of 20 words: one [hyps, hyps] matrix of float64 is 2.9 MB; in blocks of 2**14
    # entries the whole choice needs less than two (the list's n-grams, blocks of 128 KB); without
    # blocks, the matches of every pair alone are four, and the choice needed 24 MB
    rng = random.Random(3)
    vocab = [f"w{i}" for i in range(200)]
    base = [rng.choice(vocab) for _ in range(20)]
    hyps: set[str] = set()
    while len(hyps) < 600:
        words = list(base)
        for _ in range(rng.randint(1, 5)):
            words[rng.randrange(len(words))] = rng.choice(vocab)
        hyps.add(" ".join(words))
    listed = sorted(hyps)
    totals = np.array([rng.uniform(-5, 0) for _ in listed])
    want = mbr_choice(listed, totals, Mbr(1.0, 600))
    tracemalloc.start()
    try:
        got = mbr_choice(listed, totals, Mbr(1.0, 600), block=1 << 14)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert got == want
    assert peak < 2 * len(listed) ** 2 * 8


def test_a_huge_scale_warns_nothing() -> None:
    # scale * (total - the highest) below the floating-point range: -inf, a weight of 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert mbr_choice(["a b c d", "a b c", "x"], np.array([2.0, 2.0, 1.0]), Mbr(1e308, 200)) == 1
        assert mbr_choice(["a b", "x y", "a c"], np.array([1e308, -1e308, 0.0]), Mbr(0.0, 200)) == 0
