"""The synthetic n-best list that ``nbest`` (the CSLM) and ``nbest_nmt`` (the NMT feature) time.

Made without running Moses, from the first sentences of the tuned system's 1-best output of the
test set (``baseline/test_2016_flickr.tuned.1best.tok.lc.fr``; the bundled tiny system's
``test.fr`` and ``dev.fr`` when ../shared is absent). Each sentence gets up to 200 distinct
hypotheses: the sentence itself, then variants that combine 1 or 2 of a pool of 10 local edits
of the sentence and, half of the time, one edit of their own (an edit swaps two neighbouring
words, deletes a word, or replaces it by another word of the same sentence): a decoder's n-best
list is a few local alternatives around one translation, combined. What matters for the speed is
how many n-grams share a context. Of a real 200-best list of the en-fr system
(``moses -n-best-list FILE 200 distinct`` on the first 50 test sentences: 7,621 hypotheses, 13.7
words each), 12.0% of the 5-gram contexts (small; 1.76 per hypothesis) and 19.6% of the 7-gram
contexts (paper; 2.88) are distinct within ``append_features``'s windows; of the synthetic list
of the same 50 sentences (10,000 hypotheses, 13.3 words each), 12.5% (1.78) and 20.4% (2.91).
Independent random edits instead of a shared pool gave 15-20% and 23-29%.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from benchmarks import parts
from phrase_rescorer.data.corpus import read_sentences

SHARED_FR = parts.REPO.parent / "shared" / "data" / "moses-en-fr"
ONE_BEST = SHARED_FR / "baseline" / "test_2016_flickr.tuned.1best.tok.lc.fr"
TINY = parts.REPO / "tests" / "data" / "tiny-moses"
#: Hypotheses per sentence.
VARIANTS = 200
#: Local edits per sentence that its hypotheses combine.
POOL = 10


def base_sentences() -> tuple[Path | None, list[list[str]]]:
    """The sentences the synthetic lists vary: the tuned system's test 1-best (its path), else
    the bundled tiny system's test and dev references (None)."""
    if ONE_BEST.exists():
        return ONE_BEST, list(read_sentences(str(ONE_BEST)))
    return None, [s for t in (TINY / "test.fr", TINY / "dev.fr") for s in read_sentences(str(t))]


def variants(tokens: Sequence[str], k: int, rng: np.random.Generator, pool: int = POOL) -> list[list[str]]:
    """Up to ``k`` distinct hypotheses: ``tokens`` first, then each with 1 or 2 edits of a pool
    of ``pool`` local edits of this sentence and, half of the time, one edit of its own. An edit
    swaps a word with the next one, deletes it, or replaces it by a word of the sentence."""
    n = len(tokens)
    out, seen = [list(tokens)], {tuple(tokens)}
    if n < 2:
        return out

    def edit() -> tuple[int, int, str]:
        return int(rng.integers(n)), int(rng.integers(3)), tokens[int(rng.integers(n))]

    edits = [edit() for _ in range(pool)]
    for _ in range(50 * k):
        if len(out) >= k:
            break
        chosen = [edits[j] for j in rng.choice(pool, size=int(rng.integers(1, 3)), replace=False)]
        if rng.random() < 0.5:
            chosen.append(edit())
        v = list(tokens)
        for i, op, word in sorted(chosen, key=lambda e: -e[0]):  # right to left: positions stay valid
            if i >= len(v):  # deleted by an edit on its right
                continue
            if op == 0 and i + 1 < len(v):
                v[i], v[i + 1] = v[i + 1], v[i]
            elif op == 1 and len(v) > 1:
                del v[i]
            else:
                v[i] = word
        if tuple(v) not in seen:
            seen.add(tuple(v))
            out.append(v)
    return out


def synthetic_nbest(
    sentences: Sequence[Sequence[str]], lines: int, out: Path, seed: int = 1, per_sentence: int = VARIANTS
) -> tuple[int, int]:
    """An n-best list of at least ``lines`` lines (or of every sentence's variants, when there
    are too few) in Moses' format; (lines, sentences)."""
    rng = np.random.default_rng(seed)
    rows: list[str] = []
    used = 0
    for used, tokens in enumerate(sentences, 1):
        for rank, hyp in enumerate(variants(tokens, per_sentence, rng)):
            rows.append(
                f"{used - 1} ||| {' '.join(hyp)}  ||| LM0= {-2.5 * len(hyp):.1f} "
                f"WordPenalty0= -{len(hyp)} ||| {-0.01 * rank:.2f}\n"
            )
        if len(rows) >= lines:
            break
    out.write_text("".join(rows), encoding="utf-8")
    return len(rows), used
