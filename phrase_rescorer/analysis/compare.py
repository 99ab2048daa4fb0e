"""The phrase table's ranking of target phrases next to the network's (the paper's Table 2, Fig. 3).

For each selected source phrase, every target the table lists is ranked twice: by one of the
table's own scores (by default its direct translation probability p(target | source)) and by the
network's log p(target | source) (``model.sequence_log_probs``, the rescoring score). A second,
independent seeded sample of phrase pairs gives the scatter of table score against network score
and their rank correlation, and the network's *source gain*: how much more probable a target is
under its own source than under another source of the sample (mean of the log-ratio, in nats).
A gain near zero means the network has not (yet) learned to use the source: it scores targets as
a language model would, and its feature can add little beside Moses' own language model.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field

import numpy as np
import torch

from ..data.batching import sequences_batch
from ..data.vocab import Vocabulary
from ..model.cho2014 import sequence_log_probs
from ..model.network import Network
from ..moses.columns import MOSES_COLUMNS
from ..moses.tokenizer import Display
from ..moses.words import split_words
from .table_groups import GroupFilter, Reservoir, SourceGroup, pick_groups

#: Column 3 of a train-model.perl table, p(target|source) (Moses' direct p(e|f); moses/columns.py).
DEFAULT_TM_COLUMN = 3
_LOG_FLOOR = -100.0  # Moses floors ln(score) at -100


def table_log(score: float) -> float:
    """ln(score) as Moses takes it: floored at -100 (so 0 and underflows are -100)."""
    return max(math.log(score), _LOG_FLOOR) if score > 0 else _LOG_FLOOR


@torch.no_grad()
def network_scores(
    model: Network,
    src_vocab: Vocabulary,
    tgt_vocab: Vocabulary,
    pairs: Sequence[tuple[str, str]],
    batch_size: int = 256,
) -> np.ndarray:
    """log p(target | source) of each (source, target) pair, in input order."""
    device = next(model.parameters()).device
    src = [src_vocab.encode(split_words(s)) for s, _ in pairs]
    tgt = [tgt_vocab.encode(split_words(t)) for _, t in pairs]
    order = sorted(range(len(pairs)), key=lambda i: (len(tgt[i]), len(src[i])))  # less padding
    out = np.empty(len(pairs), dtype=np.float64)
    for start in range(0, len(order), batch_size):
        idx = order[start : start + batch_size]
        b = sequences_batch([src[i] for i in idx], [tgt[i] for i in idx]).to(device)
        # every architecture's forward gives teacher-forced logits, which is all this reads
        out[idx] = sequence_log_probs(model, b.src, b.src_len, b.tgt, b.tgt_len).cpu().numpy()
    return out


@dataclass
class Ranked:
    target: str
    table_score: float  # the chosen table column, as written in the table
    network_logp: float


@dataclass
class SourceComparison:
    source: str
    line_no: int
    targets: int
    count: float | None
    by_table: list[Ranked]
    by_network: list[Ranked]


@dataclass
class ComparisonReport:
    column: int
    comparisons: list[SourceComparison]
    missing: list[str]  # given sources that the table does not have
    scatter_table: np.ndarray = field(default_factory=lambda: np.empty(0))  # ln(table score)
    scatter_network: np.ndarray = field(default_factory=lambda: np.empty(0))  # log p
    scatter_other_source: np.ndarray = field(default_factory=lambda: np.empty(0))  # log p(t | s')

    @property
    def spearman(self) -> float | None:
        """Rank correlation of table and network scores over the scatter sample."""
        return spearman(self.scatter_table, self.scatter_network)

    @property
    def source_gain(self) -> float | None:
        """Mean of log p(target | its source) - log p(target | another sampled source)."""
        if not len(self.scatter_other_source):
            return None
        return float(np.mean(self.scatter_network - self.scatter_other_source))

    @property
    def top1_agreement(self) -> float | None:
        """Share of compared sources whose best target is the same by table and network."""
        if not self.comparisons:
            return None
        same = sum(c.by_table[0].target == c.by_network[0].target for c in self.comparisons)
        return same / len(self.comparisons)


def spearman(x: np.ndarray, y: np.ndarray) -> float | None:
    if len(x) < 3:
        return None
    rx, ry = _ranks(np.asarray(x)), _ranks(np.asarray(y))
    if rx.std() == 0 or ry.std() == 0:
        return None
    return float(np.corrcoef(rx, ry)[0, 1])


def _ranks(x: np.ndarray) -> np.ndarray:
    """1-based ranks, ties sharing their average rank."""
    _, inverse, counts = np.unique(x, return_inverse=True, return_counts=True)
    average = np.cumsum(counts) - (counts - 1) / 2.0
    return average[inverse]


def compare_group(
    model: Network, src_vocab: Vocabulary, tgt_vocab: Vocabulary, g: SourceGroup, top: int
) -> SourceComparison:
    logp = network_scores(model, src_vocab, tgt_vocab, [(g.source, t) for t in g.targets])
    ranked = [Ranked(t, s, float(lp)) for t, s, lp in zip(g.targets, g.scores, logp, strict=True)]
    by_table = sorted(ranked, key=lambda r: -r.table_score)[:top]  # stable: table order on ties
    by_network = sorted(ranked, key=lambda r: -r.network_logp)[:top]
    return SourceComparison(g.source, g.line_no, len(g.targets), g.count, by_table, by_network)


def compare(
    groups: Iterable[SourceGroup],
    model: Network,
    src_vocab: Vocabulary,
    tgt_vocab: Vocabulary,
    column: int = DEFAULT_TM_COLUMN,
    given: list[str] | None = None,
    keep: GroupFilter | None = None,
    max_sources: int = 10,
    top: int = 3,
    scatter_pairs: int = 0,
    seed: int = 1,
) -> ComparisonReport:
    """One pass over ``groups`` (``source_groups(path, column)``): the comparisons of the
    ``given`` sources or of a sample of ``max_sources`` qualifying ones, and a sample of
    ``scatter_pairs`` pairs of qualifying sources."""
    keep = keep or GroupFilter()
    pairs: Reservoir[tuple[str, str, float]] = Reservoir(scatter_pairs, seed + 1)

    def offer(g: SourceGroup) -> None:
        for t, s in zip(g.targets, g.scores, strict=True):
            pairs.offer((g.source, t, s))

    chosen, missing = pick_groups(groups, given, keep, max_sources, seed, offer if scatter_pairs else None)
    comparisons = [compare_group(model, src_vocab, tgt_vocab, g, top) for g in chosen]
    report = ComparisonReport(column, comparisons, missing)
    sample = pairs.in_stream_order()
    if sample:
        report.scatter_table = np.array([table_log(s) for _, _, s in sample])
        report.scatter_network = network_scores(model, src_vocab, tgt_vocab, [(a, b) for a, b, _ in sample])
        others = np.random.default_rng(seed).permutation(len(sample))
        swapped = [(sample[j][0], t) for (_, t, _), j in zip(sample, others, strict=True)]
        report.scatter_other_source = network_scores(model, src_vocab, tgt_vocab, swapped)
    return report


def column_name(column: int) -> str:
    return f"column {column}" + (f", {MOSES_COLUMNS[column][0]}" if column in MOSES_COLUMNS else "")


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def format_text(report: ComparisonReport, width: int = 36, display: Display | None = None) -> str:
    """The side-by-side report for people (targets cut to ``width`` characters), phrases shown
    through ``display`` (default: unescaped)."""
    display = display or Display()
    lines = [
        f"Top targets by the phrase table ({column_name(report.column)}) and by the network "
        "(log p(target|source), </s> included)."
    ]
    for i, c in enumerate(report.comparisons, 1):
        count = f", source count {c.count:g}" if c.count is not None else ""
        lines += ["", f"[{i}] {display.source(c.source)}    ({c.targets} targets{count}; line {c.line_no})"]
        lines.append(f"    {'by the phrase table':<{width + 14}}|  by the network")
        for k in range(max(len(c.by_table), len(c.by_network))):
            left = right = ""
            if k < len(c.by_table):
                r = c.by_table[k]
                left = f"{k + 1}. {_cut(display.target(r.target), width):<{width}} {r.table_score:8.4g}"
            if k < len(c.by_network):
                r = c.by_network[k]
                right = f"{k + 1}. {_cut(display.target(r.target), width):<{width}} {r.network_logp:8.3f}"
            lines.append(f"    {left:<{width + 14}}|  {right}")
    if report.missing:
        lines += ["", "Not in the table: " + "; ".join(display.source(m) for m in report.missing)]
    summary = []
    if report.top1_agreement is not None:
        summary.append(f"same best target for {report.top1_agreement:.0%} of the sources")
    rho = report.spearman
    if rho is not None:
        summary.append(f"Spearman rank correlation {rho:.3f} over {len(report.scatter_table)} sampled pairs")
    if summary:
        lines += ["", "Table vs network: " + "; ".join(summary) + "."]
    gain = report.source_gain
    if gain is not None:
        lines.append(
            f"Source gain: a target's log p under its own source exceeds its log p under another "
            f"sampled source by {gain:.3f} nats on average (near 0: the network ignores the source)."
        )
    return "\n".join(lines) + "\n"


TSV_HEADER = ("source", "ranked_by", "rank", "target", "table_score", "network_logp")


def tsv_rows(report: ComparisonReport) -> list[tuple[str, ...]]:
    rows: list[tuple[str, ...]] = []
    for c in report.comparisons:
        for by, ranked in (("table", c.by_table), ("network", c.by_network)):
            for k, r in enumerate(ranked, 1):
                rows.append((c.source, by, str(k), r.target, f"{r.table_score:.6g}", f"{r.network_logp:.6f}"))
    return rows


def to_json(report: ComparisonReport) -> str:
    return json.dumps(
        {
            "table_column": report.column,
            "sources": [asdict(c) for c in report.comparisons],
            "missing": report.missing,
            "scatter_pairs": len(report.scatter_table),
            "spearman": report.spearman,
            "top1_agreement": report.top1_agreement,
            "source_gain": report.source_gain,
        },
        ensure_ascii=False,
        indent=2,
    )
