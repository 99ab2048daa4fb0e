"""N-best scoring with the NMT feature: part of ``make bench``, or alone with ``python -m benchmarks.nbest_nmt``.

``append_features`` (what ``phrase-rescorer nbest -m MODEL --source FILE`` runs) appends
ln p(hypothesis </s> | source sentence) under a translation network to every line of an n-best
list. It is timed, ``--repeats`` times per network and scorer (interleaved, so that both see the
same machine load), with a random-weight network of ``train-nmt``'s default shape (rnnsearch:
bidirectional GRU encoder, additive attention; speed does not depend on the weights) at the
``small`` preset's sizes (E=64, H=256, maxout 128, rank 64, 8,000-word shortlists) and ``medium``'s
(E=256, H=512, maxout 256, rank 128, 8,000 words), optionally ``paper``'s (E=100, H=1000, 15,000
words) and ``quick``'s (E=16, H=32, 500 words; ``--quick``); at each size, ``--kinds`` of network:
the default (forward), ``right-to-left``, ``inverse`` (each hypothesis read as the network's source,
so it is encoded once per hypothesis instead of once per sentence), ``subword`` (units of
the preset's vocabulary size learned on the corpus as ``train-nmt --subwords`` learns them) and
``transformer`` (``--arch transformer`` at half the size's widths: ``medium``'s is width 128,
feed-forward 256;
``make bench`` times every kind at the ``medium`` size, the recipes'). For each network the prefix scorer's
rate is also given as the minutes a 200-best list of 1,000 sentences would take, against the 5
minutes such a list may take (the budget of the reranking recipes' networks): 200,000 hypotheses,
an upper bound, since Moses' distinct 200-best lists of the bundled system hold about 150 per
sentence; the rate includes building the feature and reading and writing the list.
The shortlists are ``train-nmt``'s: the most frequent words of the unique sentence pairs of
``../shared/data/moses-en-fr/corpus/train.tok.lc.{en,fr}`` (the bundled tiny system's
``test.en``/``test.fr`` when ../shared is absent), filled up with unused placeholder words to
the preset's size. Two scorers: the default ``prefix`` (each source encoded once per window,
the hypotheses' common prefixes decoded once) and ``batched`` (each source encoded once, every
hypothesis decoded on its own). Time is wall time of the whole ``append_features`` call
(building the network and its scorer, reading, scoring, writing a temporary file); loading the
model file is left out.

The list: ``benchmarks.synthetic_nbest``'s synthetic 200-best list (local edits of each sentence,
combined; that module says how and how it compares with a real list) of the tuned system's
1-best output of the test set (``baseline/test_2016_flickr.tuned.1best.tok.lc.fr``), sentence i
translated from line i of ``corpus/test_2016_flickr.tok.lc.en`` (the tiny system's ``test.fr``
and ``test.en`` without ../shared).

Useful work: the FLOPs of the plain computation, one hypothesis at a time without padding
(``sequence_log_probs`` on a batch of one pair: the source encoded for every hypothesis, the
hypothesis and its </s> decoded, the full softmax at every position), as
``torch.utils.flop_counter.FlopCounterMode`` counts them: the matrix products (``mm``,
``addmm``, ``bmm``), not the element-wise operations. It is counted on ``--flop-sample``
hypotheses spread evenly over the list; their mean times the hypotheses per second gives the
useful GFLOP/s, printed with its share of the machine's matrix-product rate
(``parts.matmul_gflops``). Since the scorers share the source encodings and (prefix) the
decoder prefixes, they do less than this work, and the useful rate can exceed what they compute.

The values appended to the first ``--check`` hypotheses, by each scorer, must equal the plain
computation within 1e-4; the exit status is 1 otherwise.
"""

from __future__ import annotations

import json
import statistics
import tempfile
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import click
import numpy as np
import torch
from torch.utils.flop_counter import FlopCounterMode

from benchmarks import parts
from benchmarks.synthetic_nbest import ONE_BEST, SHARED_FR, TINY, VARIANTS, synthetic_nbest
from phrase_rescorer.data.batching import sequences_batch
from phrase_rescorer.data.corpus import load_sentence_pairs, read_sentences
from phrase_rescorer.data.pairs import PairSet
from phrase_rescorer.data.subwords import Subwords, learn_pair_subwords
from phrase_rescorer.data.vocab import Vocabulary
from phrase_rescorer.errors import EXIT_INTERNAL
from phrase_rescorer.model.architectures import arch_config, build_model
from phrase_rescorer.model.checkpoint import RIGHT_TO_LEFT, Checkpoint, load_checkpoint, save_checkpoint
from phrase_rescorer.model.cho2014 import sequence_log_probs
from phrase_rescorer.moses.nbest import dense_features, read_nbest
from phrase_rescorer.scoring.features import TranslationFeature, read_source_text
from phrase_rescorer.scoring.nbest import append_features

SOURCE_TEXT = SHARED_FR / "corpus" / "test_2016_flickr.tok.lc.en"
CORPUS = (SHARED_FR / "corpus" / "train.tok.lc.en", SHARED_FR / "corpus" / "train.tok.lc.fr")
TINY_PAIR = (TINY / "test.en", TINY / "test.fr")
ARCH = "rnnsearch"  # train-nmt's default
SIZES = ("quick", "small", "medium", "paper")
#: The kinds of translation network an n-best feature may come from: ``train-nmt``'s default,
#: ``--right-to-left``, ``--direction inverse`` (each hypothesis read as the source),
#: ``--subwords N`` (N the size's vocabulary size, units learned on the corpus) and
#: ``--arch transformer`` (4 layers, 4 heads, the size's embedding and hidden widths halved, the
#: width down to a multiple of 4: ``medium`` gives width 128 and feed-forward 256, the Multi30k
#: literature's Transformer).
KINDS = ("forward", "right-to-left", "inverse", "subword", "transformer")
#: What the 4-hour recipe's lists ask of a network: a 200-best list of 1,000 sentences in 5 minutes.
RECIPE_HYPOTHESES, RECIPE_MINUTES = 200_000, 5.0
SCORERS = ("prefix", "batched")
TOLERANCE = 1e-4
NAME = "NMT0"
#: The networks timed: (size, kind) pairs.
Networks = Sequence[tuple[str, str]]


def corpus_pairs() -> PairSet:
    """The unique sentence pairs of the corpus (the tiny system's test set without ../shared)."""
    corpus = CORPUS if all(p.exists() for p in CORPUS) else TINY_PAIR
    return load_sentence_pairs(str(corpus[0]), str(corpus[1])).pairs


def shortlists(size: str) -> tuple[Vocabulary, Vocabulary]:
    """``train-nmt``'s shortlists of the corpus at the size's vocabulary size, filled up with
    unused placeholders when the corpus has fewer words."""
    target = parts.preset_vocab_size(size)
    src, tgt = corpus_pairs().build_vocabularies(target, target)

    def filled(v: Vocabulary) -> Vocabulary:
        return Vocabulary([*v.tokens, *(f"<unused-{i}>" for i in range(target - len(v)))])

    return filled(src), filled(tgt)


def corpus_subwords(size: str) -> tuple[Subwords, Subwords]:
    """``train-nmt --subwords N``'s units of the corpus, N the size's vocabulary size."""
    return learn_pair_subwords(corpus_pairs(), parts.preset_vocab_size(size))


def random_network(path: Path, size: str, kind: str = "forward") -> Checkpoint:
    """A random-weight network of the size's shape and of one of ``KINDS`` (rnnsearch but for
    the transformer), saved as ``train-nmt`` saves one."""
    subwords = corpus_subwords(size) if kind == "subword" else None
    if subwords is not None:
        src, tgt = subwords[0].vocabulary(), subwords[1].vocabulary()
    else:
        src, tgt = shortlists(size)
        if kind == "inverse":  # the network reads the target language and predicts the source
            src, tgt = tgt, src
    info = {
        "purpose": "benchmark (random weights)",
        "trained_on": "sentence pairs",
        "direction": "inverse" if kind == "inverse" else "forward",
    }
    if kind == "right-to-left":
        info["target_order"] = RIGHT_TO_LEFT
    torch.manual_seed(1)
    config = parts.model_config(size, src, tgt)
    if kind == "transformer":
        width = config.embed_dim // 2 // 4 * 4  # a multiple of the 4 heads (paper's 100: 48)
        config = replace(config, embed_dim=width, hidden_dim=config.hidden_dim // 2)
    model = build_model(config, arch_config("transformer" if kind == "transformer" else ARCH))
    save_checkpoint(str(path), model, src, tgt, info=info, subwords=subwords)
    return load_checkpoint(str(path))


def plain_scores(checkpoint: Checkpoint, pairs: Sequence[tuple[str, str]]) -> tuple[np.ndarray, np.ndarray]:
    """(ln p(hypothesis </s> | source), FLOPs) of each (source, hypothesis) by the plain
    computation: ``sequence_log_probs`` on one pair at a time, without padding (an inverse
    network's ln p(source </s> | hypothesis); the network's own units and order)."""
    model = checkpoint.build_model()
    scores, flops = np.zeros(len(pairs)), np.zeros(len(pairs), dtype=np.int64)
    for i, (src, hyp) in enumerate(pairs):
        read, written = (hyp, src) if checkpoint.inverse else (src, hyp)
        batch = sequences_batch(
            [checkpoint.src_vocab.encode(checkpoint.split(read, 0))],
            [checkpoint.tgt_vocab.encode(checkpoint.split(written, 1))],
        )
        with torch.no_grad(), FlopCounterMode(display=False) as counter:
            scores[i] = float(sequence_log_probs(model, batch.src, batch.src_len, batch.tgt, batch.tgt_len)[0])
        flops[i] = counter.get_total_flops()
    return scores, flops


def scored_lines(path: Path) -> list[tuple[int, str, float]]:
    """(sentence ID, hypothesis, the appended ``NAME`` value) of every line of a scored list."""
    return [
        (line.sentence, " ".join(line.tokens), [v for n, v in dense_features(line.features) if n == NAME][-1][0])
        for line in read_nbest(str(path))
    ]


def timed_runs(
    checkpoint: Checkpoint, nbest: Path, sources: Sequence[str], source_path: str, repeats: int, work: Path
) -> tuple[dict[str, list[float]], dict[str, str]]:
    """Seconds of each scorer's ``append_features`` runs, interleaved; the scorers' classes."""
    seconds: dict[str, list[float]] = {name: [] for name in SCORERS}
    used: dict[str, str] = {}
    for r in range(repeats):
        for name in SCORERS[r % 2 :] + SCORERS[: r % 2]:
            start = time.perf_counter()
            feature = TranslationFeature(checkpoint, NAME, sources, "cpu", scorer=name)
            append_features(
                str(nbest), str(work / f"scored-{name}"), [feature], sources=sources, source_path=source_path
            )
            seconds[name].append(time.perf_counter() - start)
            used[name] = type(feature.scorer).__name__
    return seconds, used


def nmt_figures(
    nbest: Path,
    sources: Sequence[str],
    source_path: str,
    networks: Networks,
    repeats: int,
    check: int,
    flop_sample: int,
    cpu_rate: float,
    work: Path,
) -> dict[str, Any]:
    """Time ``append_features`` on ``nbest`` per network (size, kind) and scorer; print and return
    the figures, under the size's name for a forward network and ``SIZE-KIND`` for the others
    (with ``scores_equal``: every scorer agrees with the plain computation)."""
    say = click.echo
    out: dict[str, Any] = {"scores_equal": True, "threads": torch.get_num_threads()}
    say(
        f"  {'network':<20} {'scorer':<28} {'MFLOP/hyp':>9} {'hypotheses/s: median [min-max]':<31} "
        f"{'useful GFLOP/s':>14} {'% of matmul':>11} {'max |diff|':>10}"
    )
    for size, kind in networks:
        label = size if kind == "forward" else f"{size}-{kind}"
        checkpoint = random_network(work / f"nmt-{label}.pt", size, kind)
        seconds, used = timed_runs(checkpoint, nbest, sources, source_path, repeats, work)
        lines = scored_lines(work / f"scored-{SCORERS[0]}")
        hyps = len(lines)
        spread = np.unique(np.linspace(0, hyps - 1, min(flop_sample, hyps)).round().astype(int))
        _, flops = plain_scores(checkpoint, [(sources[lines[i][0]], lines[i][1]) for i in spread])
        first = lines[:check]
        want, _ = plain_scores(checkpoint, [(sources[s], h) for s, h, _ in first])
        per_hyp = float(flops.mean())
        figures: dict[str, Any] = {
            "kind": kind,
            "shortlists": [len(checkpoint.src_vocab), len(checkpoint.tgt_vocab)],
            "hypotheses": hyps,
            "flop_sample": len(spread),
            "mflop_per_hypothesis": per_hyp / 1e6,
            "checked": len(first),
            "scores_equal": True,
        }
        for name in SCORERS:
            got = np.array([v for _, _, v in scored_lines(work / f"scored-{name}")[:check]])
            diff = float(np.abs(got - want).max()) if len(want) else 0.0
            rates = [hyps / s for s in seconds[name]]
            rate = statistics.median(rates)
            useful = per_hyp * rate / 1e9
            figures[name] = {
                "scorer": used[name],
                "hypotheses_per_s": rate,
                "runs": rates,
                "useful_gflops": useful,
                "matmul_fraction": useful / cpu_rate,
                "max_abs_diff": diff,
                "scores_equal": diff <= TOLERANCE,
            }
            figures["scores_equal"] = figures["scores_equal"] and diff <= TOLERANCE
            say(
                f"  {label:<20} {f'{name} ({used[name]})':<28} {per_hyp / 1e6:>9.1f} "
                f"{f'{rate:,.0f} [{min(rates):,.0f}-{max(rates):,.0f}]':<31} {useful:>14.1f} "
                f"{100 * useful / cpu_rate:>10.0f}% {diff:>10.1e}"
            )
        minutes = RECIPE_HYPOTHESES / figures["prefix"]["hypotheses_per_s"] / 60
        figures["minutes_per_200best_of_1000"] = minutes
        say(
            f"  {label:<20} a 200-best list of 1,000 sentences at the prefix scorer's rate: {minutes:.1f} minutes "
            f"({'within' if minutes <= RECIPE_MINUTES else 'OVER'} the {RECIPE_MINUTES:g} minutes allowed)"
        )
        ratios = [b / p for p, b in zip(seconds["prefix"], seconds["batched"], strict=True)]
        figures["ratio"] = statistics.median(ratios)
        say(f"  {label:<20} prefix / batched: {figures['ratio']:.2f}x (median of the per-run ratios)")
        out[label] = figures
        out["scores_equal"] = out["scores_equal"] and figures["scores_equal"]
    say(
        f"  appended values against the plain computation (sequence_log_probs one hypothesis at a time, first "
        f"{check:,} hypotheses, allowed {TOLERANCE:g}): {'equal' if out['scores_equal'] else 'DIFFERENT'}"
    )
    return out


def nmt_part(
    lines: int, networks: Networks, repeats: int, check: int, flop_sample: int, cpu_rate: float, work: Path
) -> dict[str, Any]:
    """The whole part: the synthetic list of at least ``lines`` hypotheses, its description, the
    figures."""
    shared = ONE_BEST.exists() and SOURCE_TEXT.exists()
    source_path, text = (SOURCE_TEXT, ONE_BEST) if shared else TINY_PAIR
    base = list(read_sentences(str(text)))
    path = work / "nmt-synthetic.nbest"
    n, used = synthetic_nbest(base, lines or len(base) * VARIANTS, path)
    sources = read_source_text(str(source_path))[:used]
    what = (
        f"synthetic: up to {VARIANTS} variants of each of the first {used:,} sentences of {text} "
        f"(benchmarks/synthetic_nbest.py says how), {n:,} hypotheses; sources: {source_path} "
        f"({sum(len(s.split()) for s in sources) / max(1, used):.1f} words each)"
    )
    threads = torch.get_num_threads()
    click.echo(
        f"\nn-best scoring with the NMT feature (append_features with TranslationFeature: read, score, "
        f"write; {ARCH} but for the transformer kind, random weights, float32; "
        f"{threads} thread{'s' if threads > 1 else ''}; {repeats} "
        f"interleaved run{'s' if repeats > 1 else ''} per scorer)\n  list: {what}\n  useful work: the "
        f"matrix products of the plain computation, one hypothesis at a time (FlopCounterMode on up to "
        f"{flop_sample:,} hypotheses spread over the list)"
    )
    return {
        "list": what,
        "arch": ARCH,
        **nmt_figures(path, sources, str(source_path), networks, repeats, check, flop_sample, cpu_rate, work),
    }


def _names(given: str, allowed: Sequence[str], option: str) -> list[str]:
    names = [s.strip() for s in given.split(",") if s.strip()]
    for s in names:
        if s not in allowed:
            raise click.BadParameter(f"{s!r} is not one of {', '.join(allowed)}", param_hint=option)
    return names


@parts.command
@click.option(
    "--lines",
    type=click.IntRange(min=0),
    default=2000,
    show_default=True,
    help="Hypotheses timed (whole sentences, at least this many; 0 for every sentence's).",
)
@click.option("--sizes", default="small", show_default=True, help="Network sizes timed (quick, small, medium, paper).")
@click.option(
    "--kinds",
    default="forward",
    show_default=True,
    help="Kinds of network timed at each size (forward, right-to-left, inverse, subword, transformer).",
)
@click.option(
    "--repeats", type=click.IntRange(min=1), default=3, show_default=True, help="Timed runs per network and scorer."
)
@click.option(
    "--check",
    type=click.IntRange(min=1),
    default=100,
    show_default=True,
    help="Hypotheses also scored the plain way, one at a time.",
)
@click.option(
    "--flop-sample",
    type=click.IntRange(min=1),
    default=100,
    show_default=True,
    help="Hypotheses whose plain computation's FLOPs are counted.",
)
@parts.threads_option
@parts.json_option
def main(
    lines: int,
    sizes: str,
    kinds: str,
    repeats: int,
    check: int,
    flop_sample: int,
    threads: int | None,
    json_path: str | None,
) -> None:
    """Time n-best scoring with a translation network and print the figures."""
    names = _names(sizes, SIZES, "--sizes")
    networks = [(size, kind) for size in names for kind in _names(kinds, KINDS, "--kinds")]
    if threads:
        torch.set_num_threads(threads)
    cpu_rate = parts.matmul_gflops(torch.device("cpu"))
    click.echo(f"machine fp32 matrix product (2048^3, {torch.get_num_threads()} threads): {cpu_rate:.1f} GFLOP/s")
    with tempfile.TemporaryDirectory(prefix="phrase-rescorer-bench-") as tmp:
        figures = nmt_part(lines, networks, repeats, check, flop_sample, cpu_rate, Path(tmp))
    figures.update(cpu_matmul_gflops=cpu_rate, machine=parts.machine())
    if json_path:
        Path(json_path).write_text(json.dumps(figures, indent=2, default=str) + "\n")
    if not figures["scores_equal"]:
        raise SystemExit(EXIT_INTERNAL)  # the scores differ from the plain computation: a bug


if __name__ == "__main__":
    main()
