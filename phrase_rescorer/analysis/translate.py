"""Translating whole sentences with a network's own beam search: the stand-alone output of a
sentence-level network (``train-nmt``), to compare with the Moses system it reranks.

Each sentence is searched on its own (``search.beam_search``: GroundHog's shrinking beam, GNMT's
length normalisation with ``alpha``); the best complete candidate is the translation. The
network never proposes <unk> (``allow_unk`` False), and a subword network's units are joined
back into tokens. Inputs and outputs are tokenized text, one sentence a line, in order.

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

from ..model.checkpoint import Checkpoint, unusable_weights
from ..moses.nbest import nbest_line
from ..moses.words import split_words
from .search import beam_search


@dataclass(frozen=True)
class Translation:
    """One finished candidate of the beam: its text (tokens joined by one space), log p(text
    </s> | source) under the network, and the score the beam ranked it by (log p, or GNMT's
    s(Y, X) with ``alpha``)."""

    text: str
    logp: float
    rank: float


def translate(checkpoint: Checkpoint, sentences: Iterable[str], **options: Any) -> Iterator[str]:
    """The best translation of each sentence (tokens joined by one space), in order: the first of
    :func:`translate_nbest`'s candidates, which takes the same ``options``."""
    return (found[0].text if found else "" for found in translate_nbest(checkpoint, sentences, **options))


def translate_nbest(
    checkpoint: Checkpoint,
    sentences: Iterable[str],
    *,
    beam_size: int = 5,
    alpha: float = 0.6,
    max_length: int | None = None,
    device: torch.device | str = "cpu",
    on_sentence: Callable[[int], None] | None = None,
    name: str = "input",
    first_line: int = 1,
) -> Iterator[list[Translation]]:
    """Each sentence's distinct finished candidates (at most ``beam_size``), best first in the
    beam's final ranking, in order; none for an empty sentence. Weights that give no finite
    log p (NaN) raise ``CheckpointError`` naming ``name``:LINE (``first_line``: the first
    sentence's line in ``name``)."""
    model = checkpoint.build_model(device)
    target_units = None if checkpoint.subwords is None else checkpoint.subwords[1]
    for n, sentence in enumerate(sentences, 1):
        src_ids = checkpoint.src_vocab.encode(checkpoint.split(sentence, 0))
        if not src_ids:
            yield []
            if on_sentence is not None:
                on_sentence(n)
            continue
        found = beam_search(model, src_ids, beam_size, max_length, allow_unk=False, alpha=alpha)
        if not found or not math.isfinite(found[0].logp):  # NaN scores never beat one another
            where = f"{name}:{first_line + n - 1}"
            raise unusable_weights(checkpoint.path, found[0].logp if found else math.nan, where)
        distinct: dict[str, Translation] = {}
        for candidate in found:
            units = checkpoint.written(checkpoint.tgt_vocab.decode(candidate.tokens))
            text = " ".join(units if target_units is None else target_units.join(units))
            rank = candidate.logp if candidate.rank_score is None else candidate.rank_score
            distinct.setdefault(text, Translation(text, candidate.logp, rank))
        yield list(distinct.values())
        if on_sentence is not None:
            on_sentence(n)


def candidate_lines(sentence: int, found: Sequence[Translation], size: int, name: str) -> list[bytes]:
    """The lines of sentence ID ``sentence`` in a Moses n-best list of the network's candidates:
    the ``size`` best of ``found`` (:func:`translate_nbest`'s), ``ID ||| hypothesis ||| NAME= log p
    ||| rank score``; for an empty source (no candidate), the empty hypothesis, its value 0, as the
    translation of an empty line is."""
    if not found:
        return [nbest_line(sentence, [], [(name, [0.0])], 0.0)]
    return [nbest_line(sentence, split_words(t.text), [(name, [t.logp])], t.rank) for t in found[:size]]
