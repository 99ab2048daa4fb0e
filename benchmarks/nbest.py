"""N-best scoring with the CSLM: part of ``make bench``, or alone with ``python -m benchmarks.nbest``.

``append_features`` (what ``phrase-rescorer nbest`` runs) appends the CSLM's log p to every line of
an n-best list. It is timed, ``--repeats`` times per network, with a random-weight CSLM (speed
does not depend on the weights) of the ``small`` and ``paper`` presets over the French
shortlist: the words of ``../shared/data/moses-en-fr/corpus/train.tok.lc.fr``, the text the
system's n-gram LM was built from (11,208 words + 4 symbols: what ``train-lm``'s default
``--vocab-size 15000`` keeps). It prints hypotheses/s, distinct contexts per hypothesis, the
useful GFLOP/s (2 x the multiply-adds of one forward pass per distinct context: the
rectified layers' and the output layer's ``in x out``; ``append_features`` computes each distinct
context of a window once, ``scoring.sentence_log_probs``) and their share of the machine's
matrix-product rate (``parts.matmul_gflops``, as ``bench`` measures it). Time is wall time of the
whole ``append_features`` call (building the network, reading, scoring, writing a temporary file);
loading the model file is left out.

The list (``--nbest`` to time a real one instead): ``synthetic_nbest``'s, made without running
Moses from the first sentences of the tuned system's 1-best output of the test set (that module
says how, and how it compares with a real list); without ../shared the French shortlist is filled
up with unused placeholder words to the same size.

The batched scores (read back from the written list) must equal the plain computation, one
n-gram at a time (``scoring.plain_sentence_log_probs``), on the first ``--check`` hypotheses within
1e-4; the exit status is 1 otherwise.
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
from unittest import mock

import click
import numpy as np
import torch

from benchmarks import parts
from benchmarks.synthetic_nbest import SHARED_FR, TINY, VARIANTS, base_sentences, synthetic_nbest
from phrase_rescorer.data.corpus import read_sentences
from phrase_rescorer.data.vocab import Vocabulary
from phrase_rescorer.errors import EXIT_INTERNAL
from phrase_rescorer.lm.lm_file import load_lm, save_lm
from phrase_rescorer.lm.network import CSLM, PRESETS, LMConfig
from phrase_rescorer.lm.scoring import plain_sentence_log_probs
from phrase_rescorer.lm.text import build_vocabulary, text_ngrams
from phrase_rescorer.moses.nbest import dense_features, read_nbest
from phrase_rescorer.scoring import features as nbest_features
from phrase_rescorer.scoring.nbest import append_features

LM_TEXT = SHARED_FR / "corpus" / "train.tok.lc.fr"
#: The French shortlist: the 11,208 words of LM_TEXT and <pad> <unk> </s> <s>.
FRENCH_SHORTLIST = 11_212
#: ``--quick``'s network: seconds on two cores.
QUICK = LMConfig(order=5, embed_dim=16, hidden=(32, 16), vocab_size=500)
TOLERANCE = 1e-4
NAME = "CSLM0"


def config_of(size: str) -> LMConfig:
    return QUICK if size == "quick" else PRESETS[size]


def context_flops(config: LMConfig) -> int:
    """FLOPs of one forward pass of one context: 2 x the multiply-adds of every layer (the
    embedding lookup has none)."""
    width, macs = config.context * config.embed_dim, 0
    for h in (*config.hidden, config.vocab_size):
        macs += width * h
        width = h
    return 2 * macs


def shortlist(size: str) -> Vocabulary:
    """The French shortlist (``QUICK``'s 500 words with ``--quick``), filled up with unused
    placeholders when the text has fewer words."""
    target = QUICK.vocab_size if size == "quick" else FRENCH_SHORTLIST
    texts = [LM_TEXT] if LM_TEXT.exists() else [TINY / "dev.fr", TINY / "test.fr"]
    vocab = build_vocabulary((s for t in texts for s in read_sentences(str(t))), target)
    fill = [f"<unused-{i}>" for i in range(target - len(vocab))]
    return Vocabulary([*vocab.tokens, *fill]) if fill else vocab


def context_counts(nbest: Path, config: LMConfig, vocab: Vocabulary) -> tuple[int, int, int, int]:
    """(hypotheses, words, n-grams, distinct contexts) as ``append_features`` meets them: its own
    windows, fed to a counter instead of the network."""
    counts = [0, 0, 0, 0]

    def count(
        model: CSLM, vocab: Vocabulary, sentences: Sequence[Sequence[str]], device: object = "cpu"
    ) -> tuple[np.ndarray, np.ndarray]:
        contexts, _ = text_ngrams(config.order, vocab, sentences)
        for i, c in enumerate(
            (len(sentences), sum(len(s) for s in sentences), len(contexts), len(np.unique(contexts, axis=0)))
        ):
            counts[i] += c
        return np.zeros(len(sentences)), np.zeros(len(sentences), dtype=np.int64)

    with tempfile.TemporaryDirectory() as tmp, mock.patch.object(nbest_features, "sentence_log_probs", count):
        path = Path(tmp) / "lm.pt"
        torch.manual_seed(1)
        save_lm(str(path), CSLM(config), vocab)
        append_features(str(nbest), str(Path(tmp) / "out"), [nbest_features.CSLMFeature(load_lm(str(path)), NAME)])
    return counts[0], counts[1], counts[2], counts[3]


def appended_scores(path: Path, limit: int | None = None) -> tuple[list[list[str]], np.ndarray]:
    """(hypotheses, the value of the ``NAME`` feature) of the first ``limit`` lines of a scored list."""
    tokens: list[list[str]] = []
    values: list[float] = []
    for line in read_nbest(str(path)):
        if limit is not None and len(tokens) >= limit:
            break
        tokens.append(line.tokens)
        values.append([v for n, v in dense_features(line.features) if n == NAME][-1][0])  # the one appended
    return tokens, np.array(values)


def nbest_figures(
    nbest: Path, sizes: Sequence[str], repeats: int, check: int, cpu_rate: float, work: Path
) -> dict[str, Any]:
    """Time ``append_features`` on ``nbest`` per network size; print and return the figures (with
    ``scores_equal``: batched and plain agree for every size)."""
    say = click.echo
    threads = torch.get_num_threads()
    out: dict[str, Any] = {"scores_equal": True}
    say(
        f"  {'network':<8} {'order':>5} {'shortlist':>9} {'contexts/hyp':>12} {'distinct':>8} "
        f"{'hypotheses/s: median [min-max]':<31} {'useful GFLOP/s':>14} {'% of matmul':>11} {'max |diff|':>10}"
    )
    for size in sizes:
        vocab = shortlist(size)
        config = replace(config_of(size), vocab_size=len(vocab))
        hyps, words, grams, distinct = context_counts(nbest, config, vocab)
        lm_path = work / f"{size}.pt"
        torch.manual_seed(1)
        save_lm(str(lm_path), CSLM(config), vocab, info={"purpose": "benchmark (random weights)"})
        lm = load_lm(str(lm_path))
        seconds = []
        for _ in range(repeats):
            start = time.perf_counter()
            append_features(str(nbest), str(work / "scored"), [nbest_features.CSLMFeature(lm, NAME)])
            seconds.append(time.perf_counter() - start)
        tokens, got = appended_scores(work / "scored", check)
        model = lm.build()
        want = np.array([plain_sentence_log_probs(model, vocab, t) for t in tokens])
        diff = float(np.abs(got - want).max()) if len(want) else 0.0
        equal = diff <= TOLERANCE
        rates = [hyps / s for s in seconds]
        useful = distinct * context_flops(config) * statistics.median(rates) / hyps / 1e9
        out[size] = {
            "order": config.order,
            "shortlist": len(vocab),
            "hypotheses": hyps,
            "words": words,
            "ngrams": grams,
            "distinct_contexts": distinct,
            "contexts_per_hypothesis": distinct / hyps,
            "hypotheses_per_s": statistics.median(rates),
            "runs": rates,
            "useful_gflops": useful,
            "matmul_fraction": useful / cpu_rate,
            "checked": len(want),
            "max_abs_diff": diff,
            "scores_equal": equal,
            "threads": threads,
        }
        out["scores_equal"] = out["scores_equal"] and equal
        say(
            f"  {size:<8} {config.order:>5} {len(vocab):>9,} {distinct / hyps:>12.2f} {100 * distinct / grams:>7.1f}% "
            f"{f'{statistics.median(rates):,.0f} [{min(rates):,.0f}-{max(rates):,.0f}]':<31} {useful:>14.1f} "
            f"{100 * useful / cpu_rate:>10.0f}% {diff:>10.1e}"
        )
    say(
        f"  batched scores against the plain computation (scoring.plain_sentence_log_probs, first {check:,} "
        f"hypotheses, allowed {TOLERANCE:g}): {'equal' if out['scores_equal'] else 'DIFFERENT'}"
    )
    return out


def nbest_part(
    nbest: str | None, lines: int, sizes: Sequence[str], repeats: int, check: int, cpu_rate: float, work: Path
) -> dict[str, Any]:
    """The whole part: the list (``nbest``, else a synthetic one of ``lines`` lines), its
    description, the figures."""
    say = click.echo
    if nbest is None:
        text, sentences = base_sentences()
        path = work / "synthetic.nbest"
        n, used = synthetic_nbest(sentences, lines or len(sentences) * VARIANTS, path)
        what = (
            f"synthetic: up to {VARIANTS} variants of each of the first {used:,} sentences of "
            f"{text or 'the bundled tiny system'} (benchmarks/synthetic_nbest.py says how), {n:,} hypotheses"
        )
    else:
        path, what = Path(nbest), f"{nbest}"
        if lines:
            path = work / "head.nbest"
            with path.open("wb") as w:
                for i, line in enumerate(read_nbest(nbest)):
                    if i >= lines:
                        break
                    w.write(line.raw + b"\n")
            what += f", first {lines:,} lines"
    say(
        f"\nn-best scoring with the CSLM (append_features: read, score, write; random weights, float32; "
        f"{_threads()}; {repeats} run{'s' if repeats > 1 else ''} each)\n  list: {what}"
    )
    return {"list": what, **nbest_figures(path, sizes, repeats, check, cpu_rate, work)}


def _threads() -> str:
    n = torch.get_num_threads()
    return f"{n} thread{'s' if n > 1 else ''}"


nbest_option = click.option(
    "--nbest",
    "nbest_path",
    type=click.Path(exists=True, dir_okay=False),
    default=None,
    help="A Moses n-best list to time  [default: a synthetic 200-best list].",
)


@parts.command
@nbest_option
@click.option(
    "--lines",
    type=click.IntRange(min=0),
    default=10000,
    show_default=True,
    help="Hypotheses timed (synthetic list: whole sentences, at least this many; --nbest: its first lines; 0 for all).",
)
@click.option("--sizes", default="small,paper", show_default=True, help="CSLM presets timed (small, paper, quick).")
@click.option("--repeats", type=click.IntRange(min=1), default=3, show_default=True, help="Timed runs per network.")
@click.option(
    "--check",
    type=click.IntRange(min=1),
    default=200,
    show_default=True,
    help="Hypotheses also scored the plain way, one n-gram at a time.",
)
@parts.threads_option
@parts.json_option
def main(
    nbest_path: str | None, lines: int, sizes: str, repeats: int, check: int, threads: int | None, json_path: str | None
) -> None:
    """Time n-best scoring with the CSLM and print the figures."""
    names = [s.strip() for s in sizes.split(",") if s.strip()]
    for s in names:
        if s not in (*PRESETS, "quick"):
            raise click.BadParameter(f"{s!r} is not one of {', '.join((*PRESETS, 'quick'))}", param_hint="--sizes")
    if threads:
        torch.set_num_threads(threads)
    cpu_rate = parts.matmul_gflops(torch.device("cpu"))
    click.echo(f"machine fp32 matrix product (2048^3, {_threads()}): {cpu_rate:.1f} GFLOP/s")
    with tempfile.TemporaryDirectory(prefix="phrase-rescorer-bench-") as tmp:
        figures = nbest_part(nbest_path, lines, names, repeats, check, cpu_rate, Path(tmp))
    figures.update(cpu_matmul_gflops=cpu_rate, machine=parts.machine())
    if json_path:
        Path(json_path).write_text(json.dumps(figures, indent=2, default=str) + "\n")
    if not figures["scores_equal"]:
        raise SystemExit(EXIT_INTERNAL)  # the scores differ from the reference: a bug


if __name__ == "__main__":
    main()
