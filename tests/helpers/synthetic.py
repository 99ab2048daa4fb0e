"""Synthetic phrase tables with a known, learnable mapping (for training tests)."""

from __future__ import annotations

import gzip
import random
from pathlib import Path


def mapping_table(
    path: Path,
    n_pairs: int,
    n_words: int = 12,
    max_len: int = 4,
    seed: int = 0,
    long_pairs: int = 0,
    long_len: int = 40,
) -> Path:
    """A Moses phrase table whose target is a word-by-word deterministic function of its source:
    source word ``aK`` always becomes ``bP(K)`` for a fixed permutation P, in order.

    ``long_pairs`` extra pairs of ``long_len`` tokens are added (for the --max-length filter).
    Lines are unique and sorted like a Moses table; scores are dummies.
    """
    rng = random.Random(seed)
    perm = list(range(n_words))
    rng.shuffle(perm)
    pairs: set[tuple[str, str]] = set()
    while len(pairs) < n_pairs:
        src = [rng.randrange(n_words) for _ in range(rng.randint(1, max_len))]
        pairs.add((" ".join(f"a{k}" for k in src), " ".join(f"b{perm[k]}" for k in src)))
    for i in range(long_pairs):
        src = [(i + j) % n_words for j in range(long_len)]
        pairs.add((" ".join(f"a{k}" for k in src), " ".join(f"b{perm[k]}" for k in src)))
    lines = [f"{s} ||| {t} ||| 0.5 0.5 0.5 0.5 ||| ||| 1 1 1 |||\n" for s, t in sorted(pairs)]
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "wt", encoding="utf-8", newline="\n") as f:
        f.writelines(lines)
    return path
