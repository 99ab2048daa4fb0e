"""Where the chosen translations of a merged list come from: for the hypotheses a reranker chose
from a list that ``merge-nbest`` wrote (``merge``'s indicators on every line), how many are Moses'
own, how many of those a network proposed too, and how many are the networks' new candidates,
split, where the list was merged with constrained decoding, into those the decoder produced and
those it cannot produce. What ``rerank``, ``rerank-tune``, ``translate-hybrid`` and ``experiment``
report of a choice."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..moses.words import split_words
from .merge import MOSES_INDICATOR, REACHED_INDICATOR, added_indicator
from .nbest_features import NbestMatrix


@dataclass(frozen=True)
class Origins:
    """The chosen hypotheses of a merged list, by where they come from."""

    moses: int  # in Moses' own list
    moses_and_network: int  # of those, also among an added list's candidates
    new: int  # the added lists' candidates Moses did not list
    reached: int | None  # of the new ones, those the decoder produced constrained (None: not merged so)

    def summary(self) -> str:
        """One line, e.g. ``870 from Moses' list (332 of them a network's too), 130 new: 120
        produced by Moses constrained, 10 it cannot produce``."""
        line = f"{self.moses:,} from Moses' list ({self.moses_and_network:,} of them a network's too), {self.new:,} new"
        if self.reached is None:
            return line + " (merged without constrained decoding)"
        return f"{line}: {self.reached:,} produced by Moses constrained, {self.new - self.reached:,} it cannot produce"

    def __add__(self, other: Origins) -> Origins:
        """The counts of two sets of sentences (e.g. the chunks of one text) together."""
        reached = None if self.reached is None or other.reached is None else self.reached + other.reached
        both = self.moses_and_network + other.moses_and_network
        return Origins(self.moses + other.moses, both, self.new + other.new, reached)

    def to_json(self) -> dict[str, int]:
        out = {"moses": self.moses, "moses_and_network": self.moses_and_network, "new": self.new}
        if self.reached is not None:
            out["new_reached"] = self.reached
        return out


def origins(matrix: NbestMatrix, lines: Sequence[str]) -> Origins | None:
    """Where ``lines`` (one chosen hypothesis per sentence of ``matrix``, in order, as
    ``choose.output_lines`` gives them) come from; each is the first line of its sentence with
    those words, split as ``merge`` splits them (``words.split_words``: a merged list holds each
    hypothesis once). None for a list without ``FromMoses`` (not a merged one)."""
    moses_column = matrix.column(MOSES_INDICATOR)
    if moses_column is None:
        return None
    reached_column = matrix.column(REACHED_INDICATOR)
    added: list[int] = []  # the columns of FromNet0, FromNet1, ...
    while (column := matrix.column(added_indicator(len(added)))) is not None:
        added.append(column)
    first: dict[tuple[int, str], int] = {}
    for index, (sentence, hypothesis) in enumerate(zip(matrix.sentences.tolist(), matrix.hypotheses, strict=True)):
        first.setdefault((sentence, " ".join(split_words(hypothesis))), index)
    if len(lines) != matrix.sentence_count:
        raise ValueError(f"{len(lines):,} chosen lines for the {matrix.sentence_count:,} sentences of {matrix.path}")
    moses = both = new = reached = 0
    for sentence, line in enumerate(lines):
        found = first.get((sentence, " ".join(split_words(line))))
        if found is None:
            raise ValueError(f"{matrix.path}: sentence {sentence} lists no hypothesis {line!r}")
        values = matrix.features[found]
        if values[moses_column] == 1.0:
            moses += 1
            if any(values[c] == 1.0 for c in added):
                both += 1
        else:
            new += 1
            if reached_column is not None and values[reached_column] == 1.0:
                reached += 1
    return Origins(moses, both, new, reached if reached_column is not None else None)
