"""Is system B better than system A, given test sentences *and* tuning runs?

Both tests work on per-sentence BLEU statistics (:mod:`.bleu`), shaped (runs, sentences, 10):
every system tuned R times, each run's 1-best output of the same S test sentences. The measured
difference is the one the report prints: the mean over runs of B's corpus BLEU minus the mean of
A's. Following Clark et al. (2011), *Better Hypothesis Testing for Statistical Machine
Translation: Controlling for Optimizer Instability*, the resampling acts on sentences and keeps
every run of a system together, so the p-value accounts for what the test set and what MERT's
randomness each contribute; with R = 1 both reduce to the usual single-pair tests.

* :func:`approximate_randomization`: under the null hypothesis the two systems' outputs of a
  sentence are exchangeable; each trial swaps, for a random half of the sentences, A's outputs
  of that sentence (all runs) with B's. p = (1 + trials with |shuffled diff| >= |observed|)
  / (1 + trials): two-sided, as MultEval reports it. Needs the same number of runs on both sides.
* :func:`paired_bootstrap`: Koehn (2004); each sample draws S sentences with replacement (the
  same draw for every run of both systems); p = share of samples where B does not beat A
  (one-sided), with the 95 % interval of the difference.
* :func:`bootstrap_interval`: one system's mean BLEU over its runs, resampled the same way (the
  same sentences drawn for every run): the 95 % interval the report gives beside each mean and
  ``plot-experiment`` draws.

Each is a few matrix products over a (trials, sentences) 0/1 or count matrix, so 10,000 trials on
1,000 sentences take about a second.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from .bleu import STATS, bleu_from_stats


@dataclass
class TestResult:
    method: str
    difference: float  # mean BLEU of B minus mean BLEU of A (observed)
    p_value: float
    trials: int
    interval: tuple[float, float] | None = None  # 95 % bootstrap interval of the difference

    def to_json(self) -> dict:
        out = {
            "method": self.method,
            "difference": round(self.difference, 4),
            "p_value": round(self.p_value, 6),
            "trials": self.trials,
        }
        if self.interval is not None:
            out["interval_95"] = [round(self.interval[0], 4), round(self.interval[1], 4)]
        return out


def _check(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.ndim == 2:
        a = a[None]
    if b.ndim == 2:
        b = b[None]
    if a.ndim != 3 or a.shape[2] != STATS or b.ndim != 3 or b.shape[2] != STATS:
        raise ValueError(f"statistics must be shaped (runs, sentences, {STATS})")
    if a.shape[1] != b.shape[1]:
        raise ValueError(f"the systems scored different test sets ({a.shape[1]} vs {b.shape[1]} sentences)")
    if a.shape[1] == 0:
        raise ValueError("no sentences to compare")
    return a, b


def mean_bleu(stats: np.ndarray) -> float:
    """Mean over runs of the corpus BLEU of each run; ``stats`` (runs, sentences, 10)."""
    return float(bleu_from_stats(np.asarray(stats).sum(axis=-2)).mean())


def _mean_bleu_batch(totals: np.ndarray) -> np.ndarray:
    """(trials, runs, 10) summed statistics -> (trials,) mean BLEU over runs."""
    return bleu_from_stats(totals).mean(axis=-1)


def approximate_randomization(
    a: np.ndarray, b: np.ndarray, *, trials: int = 10000, seed: int = 0, chunk: int = 1000
) -> TestResult:
    a, b = _check(a, b)
    if a.shape[0] != b.shape[0]:
        raise ValueError(f"approximate randomization pairs runs: {a.shape[0]} runs vs {b.shape[0]}")
    runs, sentences, _ = a.shape
    observed = mean_bleu(b) - mean_bleu(a)
    sum_a, sum_b = a.sum(axis=1), b.sum(axis=1)  # (runs, 10)
    delta = (b - a).transpose(1, 0, 2).reshape(sentences, runs * STATS)  # moving sentence s from A to B
    rng = np.random.default_rng(seed)
    hits, done = 0, 0
    while done < trials:
        n = min(chunk, trials - done)
        swap = rng.integers(0, 2, size=(n, sentences)).astype(np.float64)
        moved = (swap @ delta).reshape(n, runs, STATS)
        diff = _mean_bleu_batch(sum_b[None] - moved) - _mean_bleu_batch(sum_a[None] + moved)
        hits += int(np.count_nonzero(np.abs(diff) >= abs(observed) - 1e-9))
        done += n
    return TestResult("approximate randomization", observed, (hits + 1) / (trials + 1), trials)


def _resamples(sentences: int, samples: int, seed: int, chunk: int) -> Iterator[np.ndarray]:
    """The bootstrap's draws of the sentences with replacement, ``chunk`` samples at a time: how
    often each sample draws each sentence, (n, sentences)."""
    rng = np.random.default_rng(seed)
    for done in range(0, samples, chunk):
        n = min(chunk, samples - done)
        draws = rng.integers(0, sentences, size=(n, sentences))
        counts = np.zeros((n, sentences))
        np.add.at(counts, (np.repeat(np.arange(n), sentences), draws.ravel()), 1.0)
        yield counts


def paired_bootstrap(
    a: np.ndarray, b: np.ndarray, *, samples: int = 1000, seed: int = 0, chunk: int = 500
) -> TestResult:
    a, b = _check(a, b)
    sentences = a.shape[1]
    observed = mean_bleu(b) - mean_bleu(a)
    flat_a = a.transpose(1, 0, 2).reshape(sentences, -1)
    flat_b = b.transpose(1, 0, 2).reshape(sentences, -1)
    diffs = []
    for counts in _resamples(sentences, samples, seed, chunk):
        ta = (counts @ flat_a).reshape(len(counts), a.shape[0], STATS)
        tb = (counts @ flat_b).reshape(len(counts), b.shape[0], STATS)
        diffs.append(_mean_bleu_batch(tb) - _mean_bleu_batch(ta))
    d = np.concatenate(diffs)
    low, high = np.percentile(d, [2.5, 97.5])
    return TestResult("paired bootstrap", observed, float(np.mean(d <= 0.0)), samples, (float(low), float(high)))


def bootstrap_interval(
    stats: np.ndarray, *, samples: int = 1000, seed: int = 0, chunk: int = 500
) -> tuple[float, float]:
    """The 95 % bootstrap interval of the mean over runs of the corpus BLEU; ``stats`` (runs,
    sentences, 10). Each sample draws the sentences with replacement, the same draw for every run."""
    a, _ = _check(stats, stats)
    runs, sentences, _ = a.shape
    flat = a.transpose(1, 0, 2).reshape(sentences, -1)
    means = [
        _mean_bleu_batch((counts @ flat).reshape(len(counts), runs, STATS))
        for counts in _resamples(sentences, samples, seed, chunk)
    ]
    low, high = np.percentile(np.concatenate(means), [2.5, 97.5])
    return float(low), float(high)
