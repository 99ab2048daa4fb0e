"""One appended column: a network's log p over the lines of a window, in the network's direction.

A forward network (``train``, the default) gives log p(target | source): it reads each line's
source phrase and predicts its target. An inverse one (``train --direction inverse``) gives
log p(source | target): it reads the target phrase and predicts the source. Either way the
distinct phrases the network reads are encoded once per window (a table sorted by source holds
each source's lines together; the distinct targets of a window are gathered wherever they are)
and handed to the scorer as its "sources", the phrases it predicts as its "targets".
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..model.checkpoint import Checkpoint
from ..moses.phrase_table import Entry
from .scorer_base import WindowScorer


@dataclass
class WindowInputs:
    """What the network reads and predicts over one window, as shortlist ids."""

    reads: list[list[int]]  # the distinct phrases the network reads
    predicts: list[list[int]]  # line i's phrase to predict
    index: np.ndarray  # line i's position in ``reads``
    unknown: list[int] | None  # line i's words outside the shortlists (when asked)


class NetworkColumn:
    """A network, its scorer and its direction: the column it adds to each line."""

    def __init__(self, checkpoint: Checkpoint, scorer: WindowScorer):
        self.checkpoint, self.scorer = checkpoint, scorer
        self.inverse = checkpoint.inverse

    @property
    def direction(self) -> str:
        return self.checkpoint.direction

    def inputs(self, window: list[Entry], count_unknown: bool = False) -> WindowInputs:
        """The window's phrases as the network takes them; with ``count_unknown``, how many words
        of each line (both sides) are outside the network's shortlists (the paper's WP)."""
        ckpt = self.checkpoint
        read_vocab, predict_vocab = ckpt.src_vocab, ckpt.tgt_vocab
        position: dict[str, int] = {}
        reads: list[list[int]] = []
        read_unknown: list[int] = []
        predicts: list[list[int]] = []
        unknown: list[int] = []
        index = np.empty(len(window), dtype=np.int64)
        for i, entry in enumerate(window):
            read, predicted = (entry.target, entry.source) if self.inverse else (entry.source, entry.target)
            j = position.get(read)
            if j is None:
                j = position[read] = len(reads)
                tokens = ckpt.split(read, 0)
                reads.append(read_vocab.encode(tokens))
                read_unknown.append(read_vocab.count_unknown(tokens) if count_unknown else 0)
            index[i] = j
            tokens = ckpt.split(predicted, 1)
            predicts.append(predict_vocab.encode(tokens))
            if count_unknown:
                unknown.append(read_unknown[j] + predict_vocab.count_unknown(tokens))
        return WindowInputs(reads, predicts, index, unknown if count_unknown else None)

    def log_probs(self, inputs: WindowInputs) -> np.ndarray:
        """log p of each line's predicted phrase (float64, line order)."""
        logps = np.asarray(self.scorer.score(inputs.reads, inputs.predicts, inputs.index), dtype=np.float64)
        if logps.shape != (len(inputs.predicts),):
            raise ValueError(f"scorer returned {logps.shape} scores for {len(inputs.predicts)} lines")
        return logps


def per_token(logps: np.ndarray, inputs: WindowInputs) -> np.ndarray:
    """``logps`` divided by the tokens + 1 (</s>) of each predicted phrase (``--normalize``)."""
    lengths = np.fromiter((len(t) + 1 for t in inputs.predicts), dtype=np.float64, count=len(inputs.predicts))
    return logps / lengths
