"""MBR over n-best lists (``rerank --mbr``): sentences/s of ``reranking.mbr.mbr_choice`` against
a plain transcription of Moses' ``moses/mbr.cpp`` (``calculate_score`` with n-gram maps, the
``doMBR`` double loop), which the unit tests also check it against; the choices must agree.

The lists are the synthetic 200-best lists of ``synthetic_nbest`` (variants of the tuned
system's 1-best sentences), with random weighted sums: the cost does not depend on them.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from typing import Any

import click
import numpy as np

from benchmarks import parts
from benchmarks.synthetic_nbest import VARIANTS, base_sentences, variants
from phrase_rescorer.errors import EXIT_INTERNAL
from phrase_rescorer.reranking.mbr import Mbr, mbr_choice


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
    words = [[w for w in hyps[i].split(" ") if w] for i in order]  # Moses' words: split at spaces
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


def mbr_part(sentences: int, plain: int, repeats: int) -> dict[str, Any]:
    """Time ``mbr_choice`` on ``sentences`` synthetic 200-best lists (``repeats`` runs, the
    median) and the plain transcription on the first ``plain``; print and return the figures."""
    say = click.echo
    text, source = base_sentences()
    rng = np.random.default_rng(1)
    lists = [[" ".join(v) for v in variants(tokens, VARIANTS, rng)] for tokens in source[:sentences]]
    totals = [rng.normal(-1.0, 0.3, len(hyps)) for hyps in lists]
    rule = Mbr(1.0, VARIANTS)
    hypotheses = sum(len(h) for h in lists)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        chosen = [mbr_choice(h, t, rule) for h, t in zip(lists, totals, strict=True)]
        times.append(time.perf_counter() - t0)
    fast = float(np.median(times))
    t0 = time.perf_counter()
    want = [moses_mbr(h, list(t), rule.scale, rule.size) for h, t in zip(lists[:plain], totals[:plain], strict=True)]
    slow = (time.perf_counter() - t0) / max(len(want), 1)
    agree = chosen[: len(want)] == want
    figures = {
        "sentences": len(lists),
        "hypotheses": hypotheses,
        "sentences_per_s": len(lists) / fast,
        "plain_sentences": len(want),
        "plain_seconds_per_sentence": slow,
        "speedup": slow / (fast / len(lists)) if want else None,
        "choices_equal": agree,  # nothing compared when the plain transcription was not run
    }
    say(
        f"\nMBR over n-best lists (rerank --mbr, size {rule.size}, one process; synthetic: {len(lists):,} sentences, "
        f"{hypotheses:,} hypotheses, from {text or 'the bundled tiny system'})"
    )
    against = (
        f"the plain transcription of moses/mbr.cpp: {slow:.2f} s a sentence ({len(want)} sentences), "
        f"{figures['speedup']:,.0f}x slower; choices {'equal' if agree else 'DIFFER'}"
        if want
        else "the plain transcription not run"
    )
    say(f"  mbr_choice: {figures['sentences_per_s']:,.1f} sentences/s (median of {repeats}); {against}")
    return figures


@parts.command
@click.option("--sentences", type=click.IntRange(min=1), default=100, show_default=True, help="Sentences timed.")
@click.option(
    "--plain", type=click.IntRange(min=0), default=3, show_default=True, help="Sentences of the plain transcription."
)
@click.option("--repeats", type=click.IntRange(min=1), default=3, show_default=True, help="Timed runs.")
def main(sentences: int, plain: int, repeats: int) -> None:
    """Time MBR over synthetic 200-best lists and print the figures."""
    if not mbr_part(sentences, plain, repeats)["choices_equal"]:
        raise SystemExit(EXIT_INTERNAL)  # the choices differ from Moses' computation: a bug


if __name__ == "__main__":
    main()
