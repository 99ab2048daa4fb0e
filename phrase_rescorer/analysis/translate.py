"""Translating whole sentences with a network's own beam search: the stand-alone output of a
sentence-level network (``train-nmt``), to compare with the Moses system it reranks.

Each sentence is searched on its own (``search.beam_search``: GroundHog's shrinking beam, GNMT's
length normalisation with ``alpha``); the best complete candidate is the translation. The
network never proposes <unk> (``allow_unk`` False), and a subword network's units are joined
back into tokens. Inputs and outputs are tokenized text, one sentence a line, in order.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator

import torch

from ..model.checkpoint import Checkpoint, unusable_weights
from .search import beam_search


def translate(
    checkpoint: Checkpoint,
    sentences: Iterable[str],
    *,
    beam_size: int = 5,
    alpha: float = 0.6,
    max_length: int | None = None,
    device: torch.device | str = "cpu",
    on_sentence: Callable[[int], None] | None = None,
    name: str = "input",
) -> Iterator[str]:
    """The best translation of each sentence (tokens joined by one space), in order. Weights
    that give no finite log p (NaN) raise ``CheckpointError`` naming ``name``:LINE."""
    model = checkpoint.build_model(device)
    target_units = None if checkpoint.subwords is None else checkpoint.subwords[1]
    for n, sentence in enumerate(sentences, 1):
        src_ids = checkpoint.src_vocab.encode(checkpoint.split(sentence, 0))
        if not src_ids:
            yield ""
            continue
        found = beam_search(model, src_ids, beam_size, max_length, allow_unk=False, alpha=alpha)
        if not found or not math.isfinite(found[0].logp):  # NaN scores never beat one another
            raise unusable_weights(checkpoint.path, found[0].logp if found else math.nan, f"{name}:{n}")
        best = found[0]
        units = checkpoint.written(checkpoint.tgt_vocab.decode(best.tokens))
        yield " ".join(units if target_units is None else target_units.join(units))
        if on_sentence is not None:
            on_sentence(n)
