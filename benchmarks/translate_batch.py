"""The networks' own translation, one sentence's beam at a time against several sentences' beams
stepped together: part of ``make bench``, or alone with ``python -m benchmarks.translate_batch``.

``translate_nbest`` (what ``translate --n-best-list``, the experiment's candidate lists and
``translate-hybrid`` run) is timed on the first ``--sentences`` sentences of the en->fr test source
(``../shared/data/moses-en-fr/corpus/test_2016_flickr.tok.lc.en``; the bundled tiny system's
``test.en`` without ../shared), beam 12 and the 12 best as the README's recipe asks for them, with
an ensemble of two networks (the recipe's per target order), for each ``--batches`` size
(``translate --batch-sentences``), ``--repeats`` times interleaved so that every size sees the same
machine load; the median. By default the two networks are the same random-weight ``medium``
rnnsearch network (``nbest_nmt.random_network``: speed does not depend on the weights, but a random
network seldom ends a beam before the length limit, 2 x source + 10, so its beams take the most
steps a sentence can); ``-m`` times trained networks instead.

Agreement with one sentence at a time, printed for each size: the share of sentences whose
candidates are the same translations in the same order, and the largest difference of log p of
a translation both found (float32 products of other shapes round differently, which may turn a
near-tie; the unit tests bound it on small networks). Nothing here asserts a time.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click
import torch

from benchmarks import nbest_nmt, parts
from benchmarks.nbest_nmt import SOURCE_TEXT
from benchmarks.synthetic_nbest import TINY
from phrase_rescorer.analysis.translate import Translation, translate_nbest
from phrase_rescorer.model.checkpoint import Checkpoint, load_checkpoint
from phrase_rescorer.scoring.features import read_source_text

BEAM = 12


def agreement(got: Sequence[list[Translation]], want: Sequence[list[Translation]]) -> tuple[float, float]:
    """The share of sentences with the same candidates in the same order, and the largest |log p
    difference| of a translation found by both."""
    same = sum([t.text for t in a] == [t.text for t in b] for a, b in zip(got, want, strict=True))
    largest = 0.0
    for a, b in zip(got, want, strict=True):
        theirs = {t.text: t.logp for t in b}
        largest = max([largest, *(abs(t.logp - theirs[t.text]) for t in a if t.text in theirs)])
    return same / max(1, len(want)), largest


def batch_part(sentences: int, batches: Sequence[int], repeats: int, networks: Sequence[Checkpoint]) -> dict[str, Any]:
    """Time ``translate_nbest`` at each of ``batches`` (1 first: the plain search); print and
    return the figures."""
    source = SOURCE_TEXT if SOURCE_TEXT.exists() else TINY / "test.en"
    texts = read_source_text(str(source))[:sentences]
    sizes = [1, *(b for b in batches if b != 1)]
    times: dict[int, list[float]] = {b: [] for b in sizes}
    found: dict[int, list[list[Translation]]] = {}
    for _ in range(repeats):
        for b in sizes:
            t0 = time.perf_counter()
            found[b] = list(translate_nbest(list(networks), texts, beam_size=BEAM, batch=b))
            times[b].append(time.perf_counter() - t0)
    threads = torch.get_num_threads()
    click.echo(
        f"\nthe networks' own translation (translate_nbest: an ensemble of {len(networks)}, beam {BEAM}, its "
        f"{BEAM} best; {threads} thread{'s' if threads > 1 else ''}; {repeats} interleaved run(s) per size, median)"
        f"\n  source: the first {len(texts):,} sentences of {source}; networks: "
        f"{', '.join(str(n.path) for n in networks)}"
    )
    figures: dict[str, Any] = {"sentences": len(texts), "source": str(source), "threads": threads, "sizes": {}}
    plain = statistics.median(times[1])
    for b in sizes:
        median = statistics.median(times[b])
        same, largest = agreement(found[b], found[1])
        figures["sizes"][b] = {"seconds": median, "sentences_per_s": len(texts) / median, "same_lists": same,
                               "largest_logp_difference": largest}  # fmt: skip
        against = "" if b == 1 else f", {plain / median:.2f}x one at a time; same lists {100 * same:.1f} %, "
        against += "" if b == 1 else f"log p within {largest:.1e}"
        click.echo(f"  --batch-sentences {b:>3}: {len(texts) / median:6.2f} sentences/s{against}")
    return figures


@parts.command
@click.option("--sentences", type=click.IntRange(min=1), default=100, show_default=True, help="Sentences timed.")
@click.option("--batches", default="1,5,20,50", show_default=True, help="Sentences searched together, comma-separated.")
@click.option("--repeats", type=click.IntRange(min=1), default=2, show_default=True, help="Timed runs per size.")
@click.option("-m", "--model", "models", multiple=True, help="Trained networks of one order (default: random ones).")
@click.option("--threads", type=click.IntRange(min=1), help="torch threads  [default: torch's]")
def main(sentences: int, batches: str, repeats: int, models: tuple[str, ...], threads: int | None) -> None:
    """Time the networks' beam search one sentence at a time and several together; print the figures."""
    if threads:
        torch.set_num_threads(threads)
    sizes = [int(b) for b in batches.split(",") if b.strip()]
    with tempfile.TemporaryDirectory(prefix="phrase-rescorer-bench-") as tmp:
        if models:
            networks = [load_checkpoint(m) for m in models]
        else:
            random = nbest_nmt.random_network(Path(tmp) / "medium.pt", "medium")
            networks = [random, random]
        batch_part(sentences, sizes, repeats, networks)


if __name__ == "__main__":
    main()
