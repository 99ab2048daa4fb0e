"""A phrase table streamed as groups of equal source phrases, and seeded samples drawn from it.

Moses tables are sorted by source phrase, so all targets of a source are consecutive lines; a
group is one run of equal sources (an unsorted table simply gives several groups for a source).
Phrases are compared and reported in their normalised form: the tokens joined by single spaces
(``moses.words.split_words``), so ``"a  man"`` given on the command line finds ``"a man"``.
Memory is bounded by the largest group and the sample sizes, never by the table.

An inverse network (``train --direction inverse``) reads target phrases: ``phrase_groups``
then gives the groups of equal *target* phrases, each with its sources (``SourceGroup.source``
is the phrase the network reads, ``targets`` the phrases it predicts). A table is not sorted by
target, so these groups are gathered over the whole table in memory (first seen first).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from ..moses import score_fields
from ..moses.phrase_table import Entry, PhraseTableError
from ..moses.table_reader import read_phrase_table
from ..moses.words import split_words

T = TypeVar("T")


def normalize(phrase: str) -> str:
    return " ".join(split_words(phrase))


@dataclass
class SourceGroup:
    source: str  # normalised source phrase
    line_no: int  # line of its first target
    targets: list[str] = field(default_factory=list)  # normalised, in table order
    scores: list[float] = field(default_factory=list)  # the chosen score column, per target
    count: float | None = None  # the source's corpus count (counts field, 2nd number), if any

    @property
    def length(self) -> int:
        return len(self.source.split(" "))


def score_column(entry: Entry, column: int, path: str) -> float:
    """The ``column``-th (1-based) number of the entry's scores field."""
    field_ = score_fields.scores(entry)
    if not 1 <= column <= len(field_):
        raise PhraseTableError(path, entry.line_no, f"has {len(field_)} scores, so there is no score column {column}")
    return float(field_[column - 1])


def source_count(entry: Entry, which: int = 1) -> float | None:
    """count(source) (``which`` 0: count(target)) from the counts field ``count(target)
    count(source) count(pair)``, if any."""
    fields = entry.raw[entry.scores_end :].split(b"|||")
    if len(fields) < 3:  # ["", alignment, counts, ...]
        return None
    counts = fields[2].split()
    try:
        return float(counts[which]) if len(counts) >= 2 else None
    except ValueError:
        return None


def source_groups(path: str, column: int | None = None) -> Iterator[SourceGroup]:
    """Consecutive lines with the same source phrase, with score ``column`` of each target."""
    group: SourceGroup | None = None
    for entry in read_phrase_table(path):
        source = normalize(entry.source)
        if group is None or source != group.source:
            if group is not None:
                yield group
            group = SourceGroup(source, entry.line_no, count=source_count(entry))
        group.targets.append(normalize(entry.target))
        group.scores.append(score_column(entry, column, path) if column is not None else 0.0)
    if group is not None:
        yield group


def target_groups(path: str, column: int | None = None) -> Iterator[SourceGroup]:
    """The groups of equal target phrases, each with its sources (an inverse network's view of
    the table), in order of first appearance; the whole table is read first."""
    groups: dict[str, SourceGroup] = {}
    for entry in read_phrase_table(path):
        target = normalize(entry.target)
        group = groups.get(target)
        if group is None:
            group = groups[target] = SourceGroup(target, entry.line_no, count=source_count(entry, 0))
        group.targets.append(normalize(entry.source))
        group.scores.append(score_column(entry, column, path) if column is not None else 0.0)
    yield from groups.values()


def phrase_groups(path: str, column: int | None = None, inverse: bool = False) -> Iterator[SourceGroup]:
    """The table's groups as a network of that direction reads them: by source phrase
    (``source_groups``), or for an inverse network by target phrase (``target_groups``)."""
    return target_groups(path, column) if inverse else source_groups(path, column)


class Reservoir(Generic[T]):
    """A uniform sample of at most ``size`` items of a stream (Algorithm R), seeded."""

    def __init__(self, size: int, seed: int):
        self.size = size
        self.seen = 0
        self.items: list[tuple[int, T]] = []  # (position in the stream, item)
        self._rng = random.Random(seed)

    def offer(self, item: T) -> None:
        if self.size <= 0:
            return
        self.seen += 1
        if len(self.items) < self.size:
            self.items.append((self.seen, item))
        else:
            j = self._rng.randrange(self.seen)
            if j < self.size:
                self.items[j] = (self.seen, item)

    def in_stream_order(self) -> list[T]:
        return [item for _, item in sorted(self.items, key=lambda p: p[0])]


@dataclass
class GroupFilter:
    """Which source groups qualify: by source length, number of targets and corpus count."""

    min_length: int = 1
    max_length: int | None = None
    min_targets: int = 1
    min_count: float | None = None
    max_count: float | None = None

    def __call__(self, g: SourceGroup) -> bool:
        if g.length < self.min_length or (self.max_length is not None and g.length > self.max_length):
            return False
        if len(g.targets) < self.min_targets:
            return False
        if self.min_count is not None or self.max_count is not None:
            if g.count is None:
                return False
            if self.min_count is not None and g.count < self.min_count:
                return False
            if self.max_count is not None and g.count > self.max_count:
                return False
        return True


def pick_groups(
    groups: Iterable[SourceGroup],
    given: list[str] | None = None,
    keep: Callable[[SourceGroup], bool] | None = None,
    max_groups: int = 10,
    seed: int = 1,
    on_group: Callable[[SourceGroup], None] | None = None,
) -> tuple[list[SourceGroup], list[str]]:
    """The groups of the ``given`` sources (all of them), or a seeded uniform sample of at most
    ``max_groups`` of those that ``keep`` accepts, in table order; and the given sources that
    were not found. ``on_group`` sees every group that ``keep`` accepts (for other samples)."""
    keep = keep or GroupFilter()
    wanted = {normalize(s): s for s in given} if given else None
    found: dict[str, SourceGroup] = {}
    sample: Reservoir[SourceGroup] = Reservoir(max_groups, seed)
    for g in groups:
        if on_group is not None and keep(g):
            on_group(g)
        if wanted is not None:
            if g.source in wanted and g.source not in found:
                found[g.source] = g
                if len(found) == len(wanted) and on_group is None:
                    break
        elif keep(g):
            sample.offer(g)
    if wanted is None:
        return sample.in_stream_order(), []
    ordered = [found[s] for s in wanted if s in found]
    return ordered, [original for s, original in wanted.items() if s not in found]
