"""What ``phrase-rescorer inspect`` reports about a phrase table, in one streaming pass.

Malformed lines are collected (file:line and the reason) instead of stopping the pass. Unique
pairs and sources are counted by 64-bit hashes (a collision among 10^8 pairs has a probability
below 10^-3; these are diagnostics, training deduplicates exactly). Vocabulary coverage is counted
over the unique pairs, the way the training shortlist is built.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ..moses.columns import describe
from ..moses.phrase_table import PhraseTableError, PhraseTableOSError, PhraseTableStreamError
from ..moses.score_fields import scores
from ..moses.table_reader import iter_lines_lenient
from ..moses.words import split_words
from .vocab import SPECIALS

LENGTH_BINS = 10  # histogram bins 1..9 and "10+"


@dataclass
class TableStats:
    path: str
    lines: int = 0
    unique_pairs: int = 0
    unique_sources: int = 0
    sorted_by_source: bool = True
    first_unsorted_line: int | None = None
    targets_per_source: dict[str, float] = field(default_factory=dict)
    src_length_hist: list[int] = field(default_factory=lambda: [0] * LENGTH_BINS)
    tgt_length_hist: list[int] = field(default_factory=lambda: [0] * LENGTH_BINS)
    src_types: int = 0
    tgt_types: int = 0
    shortlist_size: int = 15000
    src_coverage: float = 0.0
    tgt_coverage: float = 0.0
    malformed: list[str] = field(default_factory=list)
    malformed_count: int = 0
    scores_per_line: dict[int, int] = field(default_factory=dict)  # score count -> lines

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def _h(data: bytes) -> int:
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "little")


def coverage(counts: Counter, shortlist_size: int) -> float:
    """Share of token occurrences covered by the shortlist (specials excluded from its size)."""
    total = sum(counts.values())
    if total == 0:
        return 0.0
    top = sorted(counts.values(), reverse=True)[: shortlist_size - len(SPECIALS)]
    return sum(top) / total


def inspect_table(
    path: str,
    shortlist_size: int = 15000,
    max_reported: int = 100,
    on_progress: Callable[[int, int | None], None] | None = None,
) -> TableStats:
    stats = TableStats(path=path, shortlist_size=shortlist_size)
    seen_pairs: set[int] = set()
    targets_per_source: Counter = Counter()
    src_counts: Counter = Counter()
    tgt_counts: Counter = Counter()
    score_counts: Counter = Counter()
    previous_source: bytes | None = None
    for item in iter_lines_lenient(path):
        if isinstance(item, (PhraseTableOSError, PhraseTableStreamError)):
            raise item  # the file, not one of its lines: every figure would be short
        if isinstance(item, PhraseTableError):
            stats.malformed_count += 1
            if len(stats.malformed) < max_reported:
                stats.malformed.append(str(item))
            continue
        stats.lines += 1
        score_counts[len(scores(item))] += 1
        src_tokens = split_words(item.source)
        tgt_tokens = split_words(item.target)
        source_key = " ".join(src_tokens).encode("utf-8")
        # Moses sorts whole lines (LC_ALL=C), so the separator after the source takes part.
        order_key = source_key + b" |||"
        if previous_source is not None and order_key < previous_source and stats.sorted_by_source:
            stats.sorted_by_source = False
            stats.first_unsorted_line = item.line_no
        previous_source = order_key
        pair = _h(source_key + b"\n" + " ".join(tgt_tokens).encode("utf-8"))
        if pair in seen_pairs:
            continue
        seen_pairs.add(pair)
        targets_per_source[_h(source_key)] += 1
        src_counts.update(src_tokens)
        tgt_counts.update(tgt_tokens)
        stats.src_length_hist[min(len(src_tokens), LENGTH_BINS) - 1] += 1
        stats.tgt_length_hist[min(len(tgt_tokens), LENGTH_BINS) - 1] += 1
        if on_progress is not None and stats.lines % 65536 == 0:
            on_progress(stats.lines, None)
    stats.unique_pairs = len(seen_pairs)
    stats.scores_per_line = dict(sorted(score_counts.items()))
    stats.unique_sources = len(targets_per_source)
    if targets_per_source:
        per = np.fromiter(targets_per_source.values(), dtype=np.int64)
        stats.targets_per_source = {
            "mean": round(float(per.mean()), 3),
            "median": int(np.median(per)),
            "p90": int(np.percentile(per, 90)),
            "p99": int(np.percentile(per, 99)),
            "max": int(per.max()),
        }
    stats.src_types, stats.tgt_types = len(src_counts), len(tgt_counts)
    stats.src_coverage = coverage(src_counts, shortlist_size)
    stats.tgt_coverage = coverage(tgt_counts, shortlist_size)
    return stats


def format_report(s: TableStats, added: tuple[str, ...] | None = None) -> str:
    """The report for people; ``added`` names the appended columns (``moses.columns.describe``)."""

    def hist(h: list[int]) -> str:
        labels = [str(i + 1) for i in range(LENGTH_BINS - 1)] + [f"{LENGTH_BINS}+"]
        return "  ".join(f"{lab}:{n}" for lab, n in zip(labels, h, strict=True))

    sortedness = "yes" if s.sorted_by_source else f"no (first out of order: line {s.first_unsorted_line})"
    per_source = "  ".join(f"{k} {v}" for k, v in s.targets_per_source.items())
    malformed = f" (+{s.malformed_count} malformed)" if s.malformed_count else ""
    out = [
        f"table              {s.path}",
        f"lines              {s.lines}{malformed}",
        f"unique pairs       {s.unique_pairs}",
        f"unique sources     {s.unique_sources}",
        f"targets per source {per_source}",
        f"sorted by source   {sortedness}",
        f"source lengths     {hist(s.src_length_hist)}",
        f"target lengths     {hist(s.tgt_length_hist)}",
        f"source types       {s.src_types}  (shortlist {s.shortlist_size}: {100 * s.src_coverage:.2f}% of tokens)",
        f"target types       {s.tgt_types}  (shortlist {s.shortlist_size}: {100 * s.tgt_coverage:.2f}% of tokens)",
        *_score_lines(s.scores_per_line, added),
    ]
    if s.malformed_count:
        more = " (first ones:)" if s.malformed_count > len(s.malformed) else ":"
        out.append(f"malformed lines    {s.malformed_count}{more}")
        out.extend(f"  {m}" for m in s.malformed)
    return "\n".join(out)


def _score_lines(per_line: dict[int, int], added: tuple[str, ...] | None = None) -> list[str]:
    """The score count(s) and, for the usual one, what each column is."""
    if not per_line:
        return []
    counts = "  ".join(f"{n} ({lines} lines)" for n, lines in per_line.items())
    out = [f"scores per line    {counts if len(per_line) > 1 else next(iter(per_line))}"]
    n = max(per_line, key=lambda k: per_line[k])
    out += [f"{'  score ' + str(c):<19}{describe(c, n, added)}" for c in range(1, n + 1)]
    return out
