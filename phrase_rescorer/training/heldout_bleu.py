"""BLEU of a sentence network's own translations of held-out pairs, at each validation
(``train-nmt --valid-bleu N``).

Held-out perplexity compares one network's validations with each other, but not networks of
different architectures or settings: two networks within 1 % of each other's perplexity have
differed by 2 BLEU as translators. With ``--valid-bleu N`` each validation also translates the
first N held-out pairs' sources (those the validation scores first, in table order) greedily
(``analysis.search.greedy``: the most probable unit at each step, never <unk>), writes each
translation back as words (in reading order for a right-to-left network, subword units joined)
and scores them against the pairs' targets as read (tokenized BLEU: sacrebleu on the tokens as
they are, ``tokenize='none'``). The same sentences translated by ``translate --beam-size 1``
from the saved network give the same text.

The figure is a yardstick for comparing runs, not a test score: greedy search, and a few hundred
held-out training pairs, not the dev set.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from sacrebleu.metrics import BLEU

from ..analysis.search import greedy
from ..data.pairs import EncodedPairs
from ..data.subwords import Subwords
from ..data.vocab import Vocabulary
from ..model.network import Network


class HeldOutBleu:
    """The sources of held-out pairs (shortlist ids, ``indices`` of ``encoded``), their
    ``references`` (the targets' words in reading order, joined by one space), and what writes a
    translation back: the target ``vocab``, the target's subword ``units`` (None: words) and
    whether the network writes ``right_to_left``."""

    def __init__(
        self,
        encoded: EncodedPairs,
        indices: np.ndarray,
        references: Sequence[str],
        vocab: Vocabulary,
        units: Subwords | None,
        right_to_left: bool,
    ):
        if len(indices) != len(references):
            raise ValueError(f"{len(indices)} held-out pairs but {len(references)} references")
        offsets, tokens = encoded.src_offsets, encoded.src_tokens
        self.sources = [[int(t) for t in tokens[offsets[i] : offsets[i + 1]]] for i in indices]
        self.references = list(references)
        self.vocab, self.units, self.right_to_left = vocab, units, right_to_left

    def __len__(self) -> int:
        return len(self.sources)

    def written(self, ids: Sequence[int]) -> str:
        """A translation's unit ids as words joined by one space, in reading order."""
        units = self.vocab.decode(ids)
        units = units[::-1] if self.right_to_left else units
        return " ".join(units if self.units is None else self.units.join(units))

    @torch.no_grad()
    def translations(self, network: Network) -> list[str]:
        """The network's greedy translation of each source (the network in eval mode)."""
        return [
            self.written(greedy(network, source, allow_unk=False).tokens) if source else "" for source in self.sources
        ]

    def score(self, network: Network) -> float:
        """Tokenized corpus BLEU (0-100) of :meth:`translations` against the references."""
        metric = BLEU(tokenize="none", force=True)
        return float(metric.corpus_score(self.translations(network), [self.references]).score)
