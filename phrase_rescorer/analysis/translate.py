"""Translating whole sentences with a network's own beam search: the stand-alone output of a
sentence-level network (``train-nmt``), to compare with the Moses system it reranks.

Each sentence is searched on its own (``search.beam_search``: GroundHog's shrinking beam, GNMT's
length normalisation with ``alpha``), or with ``batch`` several sentences' beams are stepped
together (``search.beam_search_many``: each beam as alone, in fewer and larger network steps);
the best complete candidate is the translation. The
network never proposes <unk> (``allow_unk`` False), and a subword network's units are joined
back into tokens. Inputs and outputs are tokenized text, one sentence a line, in order.

:func:`translate_nbest` takes several networks as well: their ensemble (``stepping.Ensemble``: at
every step the log of their averaged probabilities), refused unless they read and write the same
units in the same order (:func:`ensemble_members`); :func:`order_ensembles` groups networks of
both orders into one ensemble per order.

:func:`translate_nbest` gives each sentence's finished candidates instead, in the beam's final
ranking (log p, or GNMT's s(Y, X) with ``alpha``), each translation once (a subword network's
different units that join into the same tokens: the first kept), for a Moses-format n-best
list of the network's own candidates (``translate --n-best-list``), whose lines
:func:`candidate_lines` writes.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from ..data.corpus import chunks
from ..errors import UsageError
from ..model.checkpoint import Checkpoint, unusable_weights
from ..moses.nbest import nbest_line
from ..moses.words import split_words
from .search import Candidate, beam_search_many


@dataclass(frozen=True)
class Translation:
    """One finished candidate of the beam: its text (tokens joined by one space), log p(text
    </s> | source) under the network, and the score the beam ranked it by (log p, or GNMT's
    s(Y, X) with ``alpha``)."""

    text: str
    logp: float
    rank: float


def ensemble_members(checkpoints: Checkpoint | Sequence[Checkpoint]) -> list[Checkpoint]:
    """``checkpoints`` as a list, after checking that they can translate as one ensemble: the same
    source and target vocabularies (and subword units), direction and target order. Raises
    UsageError (exit 2) naming the first file that differs from the first file."""
    members = [checkpoints] if isinstance(checkpoints, Checkpoint) else list(checkpoints)
    if not members:
        raise UsageError("no network to translate with")
    first = members[0]
    for other in members[1:]:
        differs = [
            what
            for what, same in (
                ("source vocabulary", other.src_vocab == first.src_vocab),
                ("target vocabulary", other.tgt_vocab == first.tgt_vocab),
                ("subword units", _units(other) == _units(first)),
                ("direction", other.direction == first.direction),
                ("target order", other.right_to_left == first.right_to_left),
            )
            if not same
        ]
        if differs:
            raise UsageError(
                f"{other.path}: cannot translate in one ensemble with {first.path}: its "
                f"{' and '.join(differs)} {'differs' if len(differs) == 1 else 'differ'}; "
                "an ensemble's networks read and write the same units in one order"
            )
    return members


def order_ensembles(checkpoints: Sequence[Checkpoint]) -> list[list[int]]:
    """The indices of ``checkpoints`` grouped by the order their networks write the target (left to
    right, right to left), the groups in the order of their first network: each group one ensemble,
    checked by :func:`ensemble_members` (else UsageError, exit 2)."""
    groups: dict[bool, list[int]] = {}
    for i, checkpoint in enumerate(checkpoints):
        groups.setdefault(checkpoint.right_to_left, []).append(i)
    for group in groups.values():
        ensemble_members([checkpoints[i] for i in group])
    return list(groups.values())


def _units(checkpoint: Checkpoint) -> tuple[bytes, bytes] | None:
    return None if checkpoint.subwords is None else (checkpoint.subwords[0].proto, checkpoint.subwords[1].proto)


def translate(checkpoint: Checkpoint | Sequence[Checkpoint], sentences: Iterable[str], **options: Any) -> Iterator[str]:
    """The best translation of each sentence (tokens joined by one space), in order: the first of
    :func:`translate_nbest`'s candidates, which takes the same ``options``."""
    return (found[0].text if found else "" for found in translate_nbest(checkpoint, sentences, **options))


def translate_nbest(
    checkpoints: Checkpoint | Sequence[Checkpoint],
    sentences: Iterable[str],
    *,
    beam_size: int = 5,
    alpha: float = 0.6,
    max_length: int | None = None,
    device: torch.device | str = "cpu",
    on_sentence: Callable[[int], None] | None = None,
    name: str = "input",
    first_line: int = 1,
    batch: int = 1,
) -> Iterator[list[Translation]]:
    """Each sentence's distinct finished candidates (at most ``beam_size``), best first in the
    beam's final ranking, in order; none for an empty sentence. Several ``checkpoints``: their
    ensemble's beam (:func:`ensemble_members`), each candidate's log p the ensemble's. ``batch``
    sentences at a time (each group of ``batch`` consecutive sentences, from the first) have their
    beams stepped together (``search.beam_search_many``): the same search, in fewer and larger
    steps, equal to one at a time within float32 rounding. Weights that give no finite log p (NaN)
    raise ``CheckpointError`` naming ``name``:LINE (``first_line``: the first sentence's line in
    ``name``) and the first network's file."""
    if batch < 1:
        raise ValueError("the sentences searched at once must be at least 1")
    members = ensemble_members(checkpoints)
    checkpoint = members[0]
    models = [member.build_model(device) for member in members]
    target_units = None if checkpoint.subwords is None else checkpoint.subwords[1]
    done = 0
    for group in chunks(sentences, batch):
        encoded = [checkpoint.src_vocab.encode(checkpoint.split(sentence, 0)) for sentence in group]
        searched = iter(
            beam_search_many(
                models, [ids for ids in encoded if ids], beam_size, max_length, allow_unk=False, alpha=alpha
            )
        )
        for src_ids in encoded:
            done += 1
            if not src_ids:
                yield []
            else:
                found = next(searched)
                if not found or not math.isfinite(found[0].logp):  # NaN scores never beat one another
                    where = f"{name}:{first_line + done - 1}"
                    raise unusable_weights(checkpoint.path, found[0].logp if found else math.nan, where)
                yield _distinct(checkpoint, target_units, found)
            if on_sentence is not None:
                on_sentence(done)


def _distinct(checkpoint: Checkpoint, target_units: Any, found: Sequence[Candidate]) -> list[Translation]:
    """The candidates as text, each translation once (a subword network's different units that
    join into the same tokens: the first kept)."""
    distinct: dict[str, Translation] = {}
    for candidate in found:
        units = checkpoint.written(checkpoint.tgt_vocab.decode(candidate.tokens))
        text = " ".join(units if target_units is None else target_units.join(units))
        rank = candidate.logp if candidate.rank_score is None else candidate.rank_score
        distinct.setdefault(text, Translation(text, candidate.logp, rank))
    return list(distinct.values())


def candidate_lines(sentence: int, found: Sequence[Translation], size: int, name: str) -> list[bytes]:
    """The lines of sentence ID ``sentence`` in a Moses n-best list of the network's candidates:
    the ``size`` best of ``found`` (:func:`translate_nbest`'s), ``ID ||| hypothesis ||| NAME= log p
    ||| rank score``; for an empty source (no candidate), the empty hypothesis, its value 0, as the
    translation of an empty line is."""
    if not found:
        return [nbest_line(sentence, [], [(name, [0.0])], 0.0)]
    return [nbest_line(sentence, split_words(t.text), [(name, [t.logp])], t.rank) for t in found[:size]]
