"""The MBR decision rule (reranking/mbr.py) against a plain transcription of Moses'
``moses/mbr.cpp``: its ``calculate_score`` with n-gram maps, its ``doMBR`` double loop."""

from __future__ import annotations

import math
import random
from collections import Counter

import numpy as np
import pytest

from phrase_rescorer.reranking.choose import best_per_sentence, output_lines
from phrase_rescorer.reranking.mbr import Mbr, mbr_choice, pair_bleu
from phrase_rescorer.reranking.nbest_features import NbestMatrix


def moses_score(hyp: list[str], ref: list[str]) -> float:
    """``calculate_score(sents, ref, hyp, ngram_stats)`` of moses/mbr.cpp, line by line."""
    order, smooth = 4, 1

    def ngrams(words: list[str]) -> Counter:
        return Counter(tuple(words[i : i + k + 1]) for k in range(order) for i in range(max(len(words) - k, 0)))

    comps = [0] * (2 * order + 1)
    for i in range(order):
        comps[2 * i + 1] = max(len(hyp) - i, 0)
    ref_ngrams = ngrams(ref)
    for gram, count in ngrams(hyp).items():
        if gram in ref_ngrams:
            comps[2 * (len(gram) - 1)] += min(ref_ngrams[gram], count)
    comps[-1] = len(ref)
    log_bleu = 0.0
    for i in range(order):
        if comps[0] == 0:
            return 0.0
        if i > 0:
            log_bleu += math.log(comps[2 * i] + smooth) - math.log(comps[2 * i + 1] + smooth)
        else:
            log_bleu += math.log(comps[2 * i]) - math.log(comps[2 * i + 1])
    log_bleu /= order
    brevity = 1.0 - comps[-1] / comps[1]
    if brevity < 0.0:
        log_bleu += brevity
    return math.exp(log_bleu)


def moses_risks(hyps: list[str], totals: list[float], scale: float, size: int) -> dict[int, float]:
    """``doMBR``'s expected loss of each of the ``size`` best (by total, the first of equal ones
    first), by index into hyps, in that order."""
    order = sorted(range(len(hyps)), key=lambda i: -totals[i])[:size]
    best = max(scale * totals[i] for i in order)
    joint = [math.exp(scale * totals[i] - best) for i in order]
    marginal = sum(joint)
    words = [hyps[i].split() for i in order]
    risks = {}
    for i in range(len(order)):
        cumul = 0.0
        for j in range(len(order)):
            if i != j:
                cumul += (1 - moses_score(words[i], words[j])) * joint[j] / marginal
        risks[order[i]] = cumul
    return risks


def moses_mbr(hyps: list[str], totals: list[float], scale: float, size: int) -> int:
    """``doMBR``'s choice: the first of the least risks (``weightedLossCumul < minMBRLoss``)."""
    min_loss, chosen = 1e6, -1
    for index, risk in moses_risks(hyps, totals, scale, size).items():
        if risk < min_loss:
            min_loss, chosen = risk, index
    return chosen


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
    for _ in range(30):
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
    assert ids == [0, 1] and chosen[0] in (1, 2, 3) and chosen[1] in (4, 5)
    assert output_lines(m, weights, Mbr(1.0, 1)) == ["x y z w", "solo"]


@pytest.mark.parametrize("scale,size", [(-1.0, 10), (float("nan"), 10), (float("inf"), 10), (1.0, 0)])
def test_mbr_refuses_bad_settings(scale: float, size: int) -> None:
    with pytest.raises(ValueError):
        Mbr(scale, size)
