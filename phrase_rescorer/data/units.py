"""Words or subword units, chosen from the data (``--units auto``).

A network reads and predicts either the words of a shortlist per side (the most frequent; every
other word is ``<unk>``: read as one, scored as p(``<unk>``)) or subword units
(``data.subwords``: every word spelled by units, none unknown). Which one a corpus needs depends
on its languages: the shortlist that holds nearly every French word of a corpus leaves several
times as many German word tokens outside, German's compounds and inflections being more types.

``auto`` measures what the words would lose: the share of each side's tokens, over the unique
pairs the shortlists are built from, that the shortlists leave outside (:func:`uncovered_shares`),
and chooses subword units where either side's share exceeds :data:`MAX_UNCOVERED`, words
elsewhere. Either side, so that a forward and an inverse network of one system (the same pairs
read the other way) get the same units. Nothing but the pairs and the shortlist size decides, so
the choice is the same on every run of the same command.

The subword vocabulary's size, where none is given (``--subwords N``), is the shortlist's: the
output layer keeps its size and a step its cost, and the units spell every word instead of a
shortlist's words. At least :data:`MIN_SUBWORDS`, the least a subword model holds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import UsageError
from .pairs import PairSet
from .subwords import META_UNITS
from .vocab import UNK_ID

#: What ``--units`` takes.
UNITS = ("auto", "words", "subwords")
#: The share of a side's tokens left outside its word shortlist above which ``auto`` chooses subword
#: units. Measured on the bundled systems' training pairs with 8,000-word shortlists: English 0.59 %,
#: French 0.78 % (where a word network is measured right: a subword one of the same budget was
#: 0.87 held-out dev BLEU below it, docs/results.md), German 2.96 % (4.43 % of the dev references'
#: tokens out of reach, in 40 % of their sentences). 1.5 % lies midway between French and German on
#: a log scale, about a factor of two from either.
MAX_UNCOVERED = 0.015
#: The fewest subword units a model may have: byte fallback's 256 units and ``<unk>``, and room
#: for the most frequent characters (``data.subwords``).
MIN_SUBWORDS = 300
assert MIN_SUBWORDS > META_UNITS


@dataclass(frozen=True)
class UnitChoice:
    """What a network reads and predicts: ``units`` "words" or "subwords" (``subwords`` units per
    side, None for words), and how it was chosen: ``record`` is what the model file keeps of a
    choice ``auto`` made (None for one the options made), ``says`` the line that reports it."""

    units: str
    subwords: int | None
    says: str
    record: dict[str, Any] | None = None


def uncovered_shares(pairs: PairSet, shortlist: int) -> tuple[float, float]:
    """The share of the (source, target) tokens of the unique ``pairs`` outside the sides'
    shortlists of ``shortlist`` entries (special symbols included), as ``prepare_data`` builds
    them; 0 for a side without tokens."""
    src_vocab, tgt_vocab = pairs.build_vocabularies(shortlist, shortlist)
    sides = ((src_vocab, pairs.src_types, pairs.src_tokens), (tgt_vocab, pairs.tgt_types, pairs.tgt_tokens))
    shares = [
        np.count_nonzero(vocab.lookup_table(types)[tokens] == UNK_ID) / max(len(tokens), 1)
        for vocab, types, tokens in sides
    ]
    return float(shares[0]), float(shares[1])


def subword_size(shortlist: int) -> int:
    """The subword units per side where none are given: the shortlist's size, at least the minimum."""
    return max(shortlist, MIN_SUBWORDS)


def choose_units(
    pairs: PairSet, units: str, shortlist: int, subwords: int | None, kept: dict[str, Any] | None = None
) -> UnitChoice:
    """The units of a run given ``--units`` ``units``, ``--subwords`` ``subwords`` (None: not given;
    where given, subword units of that number: beside a ``--units`` on the command line that does
    not take it, ``check_units`` refuses it first) and the shortlist size. With
    "auto", ``kept`` is the record of the choice of the run that ``--resume`` continues (None: a
    new run, or a subword run whose choice was not recorded): that choice, not a new one, recorded
    again where it was measured."""
    if units == "subwords" or subwords is not None:
        size = subwords if subwords is not None else subword_size(shortlist)
        why = (
            f"--subwords {subwords}" if subwords is not None else f"--units subwords: the shortlist size, {shortlist:,}"
        )
        return UnitChoice("subwords", size, f"units: subword units, at most {size:,} per side ({why})")
    if units == "words":
        return UnitChoice("words", None, f"units: words, shortlists of {shortlist:,} per side (--units words)")
    if kept is not None and kept.get("units") in ("words", "subwords"):
        recorded, record = kept.get("subwords"), dict(kept) if "chosen_by" in kept else None
        if kept["units"] == "words":
            return UnitChoice("words", None, "units: words, as the resumed run chose them", record)
        if isinstance(recorded, int):
            says = f"units: subword units, at most {recorded:,} per side, as the resumed run chose them"
            return UnitChoice("subwords", recorded, says, record)
    source, target = uncovered_shares(pairs, shortlist)
    measured = (
        f"the {shortlist:,}-word shortlists leave {100 * source:.2f} % of the source tokens and "
        f"{100 * target:.2f} % of the target tokens outside"
    )
    measurement: dict[str, Any] = {
        "chosen_by": "auto",
        "shortlist": shortlist,
        "uncovered": {"source": round(source, 6), "target": round(target, 6)},
        "max_uncovered": MAX_UNCOVERED,
    }
    if max(source, target) > MAX_UNCOVERED:
        size = subword_size(shortlist)
        return UnitChoice(
            "subwords",
            size,
            f"units: subword units, at most {size:,} per side ({measured}: more than {100 * MAX_UNCOVERED:g} %)",
            {"units": "subwords", "subwords": size, **measurement},
        )
    return UnitChoice(
        "words",
        None,
        f"units: words ({measured}: at most {100 * MAX_UNCOVERED:g} %)",
        {"units": "words", "subwords": None, **measurement},
    )


def check_units(units: str, units_given: bool, subwords: int | None) -> None:
    """Refuse ``--subwords N`` beside a ``--units`` (given on the command line) that does not take
    it: words, or auto, which chooses the units and their number itself."""
    if subwords is not None and units_given and units != "subwords":
        what = "words" if units == "words" else "the units to be chosen from the data"
        raise UsageError(
            f"--subwords {subwords} asks for subword units, --units {units} for {what}; "
            "give --units subwords --subwords N, or leave --subwords out"
        )
