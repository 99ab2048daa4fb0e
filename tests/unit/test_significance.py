"""Approximate randomization and paired bootstrap: against a plain re-implementation that swaps
or resamples the sentences themselves and asks sacrebleu for every corpus BLEU."""

from __future__ import annotations

import numpy as np
import pytest
from sacrebleu.metrics import BLEU

from phrase_rescorer.experiment import bleu
from phrase_rescorer.experiment.significance import (
    approximate_randomization,
    bootstrap_interval,
    mean_bleu,
    paired_bootstrap,
)
from tests.helpers.paths import REPO

DATA = REPO / "tests" / "data" / "bleu"
REFS = bleu.read_lines(str(DATA / "ref.tok.fr"))
HYPS = bleu.read_lines(str(DATA / "hyp.tok.fr"))


def corpus_bleu(hyps: list[str]) -> float:
    return BLEU(tokenize="none").corpus_score(hyps, [REFS]).score


def degrade(lines: list[str], seed: int, share: float) -> list[str]:
    """Each line, with probability ``share``, loses its second half (a worse system)."""
    rng = np.random.default_rng(seed)
    out = []
    for line in lines:
        words = line.split()
        out.append(" ".join(words[: len(words) // 2]) if rng.random() < share else line)
    return out


def stats(systems: list[list[str]]) -> np.ndarray:
    return np.stack([bleu.sentence_stats(h, REFS) for h in systems])


def test_mean_bleu_is_the_mean_of_corpus_bleu() -> None:
    runs = [HYPS, degrade(HYPS, 1, 0.3)]
    assert mean_bleu(stats(runs)) == pytest.approx(np.mean([corpus_bleu(r) for r in runs]), abs=1e-9)


@pytest.mark.parametrize("runs", [1, 2])
def test_approximate_randomization_equals_swapping_sentences(runs: int) -> None:
    a_runs = [degrade(HYPS, 10 + r, 0.5) for r in range(runs)]
    b_runs = [degrade(HYPS, 20 + r, 0.2) for r in range(runs)]
    trials, seed = 200, 7
    result = approximate_randomization(stats(a_runs), stats(b_runs), trials=trials, seed=seed)
    observed = np.mean([corpus_bleu(b) for b in b_runs]) - np.mean([corpus_bleu(a) for a in a_runs])
    assert result.difference == pytest.approx(observed, abs=1e-9)
    # the same swaps, done on the sentences: sentence s of every run of A trades places with B's
    swaps = np.random.default_rng(seed).integers(0, 2, size=(trials, len(REFS)))
    hits = 0
    for swap in swaps:
        new_a = [[b[s] if swap[s] else a[s] for s in range(len(REFS))] for a, b in zip(a_runs, b_runs, strict=True)]
        new_b = [[a[s] if swap[s] else b[s] for s in range(len(REFS))] for a, b in zip(a_runs, b_runs, strict=True)]
        diff = np.mean([corpus_bleu(h) for h in new_b]) - np.mean([corpus_bleu(h) for h in new_a])
        hits += abs(diff) >= abs(observed) - 1e-9
    assert result.p_value == pytest.approx((hits + 1) / (trials + 1), abs=1e-12)


def test_paired_bootstrap_equals_resampling_sentences() -> None:
    a_runs, b_runs = [degrade(HYPS, 1, 0.5)], [degrade(HYPS, 2, 0.1)]
    samples, seed = 100, 3
    result = paired_bootstrap(stats(a_runs), stats(b_runs), samples=samples, seed=seed)
    draws = np.random.default_rng(seed).integers(0, len(REFS), size=(samples, len(REFS)))
    diffs = []
    for draw in draws:
        refs = [REFS[i] for i in draw]
        metric = BLEU(tokenize="none")
        diffs.append(
            metric.corpus_score([b_runs[0][i] for i in draw], [refs]).score
            - metric.corpus_score([a_runs[0][i] for i in draw], [refs]).score
        )
    diffs_arr = np.array(diffs)
    assert result.p_value == pytest.approx(float(np.mean(diffs_arr <= 0)), abs=1e-12)
    assert result.interval == pytest.approx(tuple(np.percentile(diffs_arr, [2.5, 97.5])), abs=1e-9)


def test_identical_systems_are_not_different() -> None:
    s = stats([HYPS])
    assert approximate_randomization(s, s, trials=500).p_value == 1.0
    assert paired_bootstrap(s, s, samples=200).p_value == 1.0  # never better


def test_a_clearly_better_system_is_significant() -> None:
    worse, better = stats([degrade(HYPS, 5, 0.9)]), stats([REFS])  # the reference itself
    ar = approximate_randomization(worse, better, trials=2000)
    assert ar.difference > 30 and ar.p_value < 0.01
    assert paired_bootstrap(worse, better, samples=500).p_value < 0.01
    # and the other way round: the sign flips, the two-sided p does not change
    back = approximate_randomization(better, worse, trials=2000)
    assert back.difference == pytest.approx(-ar.difference) and back.p_value < 0.01


def test_refusals() -> None:
    one, two = stats([HYPS]), stats([HYPS, HYPS])
    with pytest.raises(ValueError, match="pairs runs"):
        approximate_randomization(one, two)
    with pytest.raises(ValueError, match="different test sets"):
        approximate_randomization(one, one[:, :5])


def test_bootstrap_interval_of_a_systems_mean_resamples_sentences_with_every_run() -> None:
    """Against the plain computation: the same draws of sentences (the generator seeded alike),
    each run's resampled output scored by sacrebleu, the mean over runs, its 2.5 and 97.5 %."""
    runs = [HYPS, degrade(HYPS, 1, 0.3), degrade(HYPS, 2, 0.5)]
    samples = 60
    low, high = bootstrap_interval(stats(runs), samples=samples, seed=7)
    draws = np.random.default_rng(7).integers(0, len(REFS), size=(samples, len(REFS)))
    means = [
        np.mean([BLEU(tokenize="none").corpus_score([r[i] for i in d], [[REFS[i] for i in d]]).score for r in runs])
        for d in draws
    ]
    assert (low, high) == pytest.approx(tuple(np.percentile(means, [2.5, 97.5])), abs=1e-6)
    assert low < mean_bleu(stats(runs)) < high
    # runs kept together: three copies of one run give that run's own interval
    assert bootstrap_interval(stats([HYPS] * 3), samples=samples, seed=7) == pytest.approx(
        bootstrap_interval(stats([HYPS]), samples=samples, seed=7), abs=1e-9
    )
