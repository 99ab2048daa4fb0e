"""Floating-point work of scoring, counted in matrix-product FLOPs (2 per multiply-add).

Only the matrix products are counted: they are >95 % of the arithmetic at paper size; the
element-wise gates, the maxout and the log-softmax's exponentials are left out. Two counts:

``pair_flops``  the unshared computation of one pair, as the plain model does it (encoder over
                ``x_1..x_N </s>``, summary, context terms, decoder and output layer over
                ``y_1..y_M </s>``), without padding. Throughput expressed with it ("useful
                GFLOP/s") rises when a scorer shares work, since shared work is counted once per
                pair that benefits from it.
``TrieCounter`` what ``PrefixScorer`` actually computes on a table: one encoder step per
                distinct source prefix, one summary and context terms per distinct source, one
                decoder step and output layer per distinct target prefix of a source. It is a
                ``WindowScorer`` that only counts, so the engine feeds it exactly the windows
                the real scorers see.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from phrase_rescorer.data.batching import flat_store
from phrase_rescorer.data.vocab import EOS_ID
from phrase_rescorer.model.cho2014 import ModelConfig
from phrase_rescorer.rescoring.trie import build_trie


@dataclass(frozen=True)
class StepFlops:
    encoder_step: int  # W e(x) + [U_r; U_z] h + U (r h)
    source: int  # summary V h_N, then V' c, [C_r; C_z; C] c, O_c c
    decoder_step: int  # GRU step, then O_h h, O_y e(y), G_r s, G_l (G_r s)

    @classmethod
    def of(cls, c: ModelConfig) -> StepFlops:
        E, H, M, R, V = c.embed_dim, c.hidden_dim, c.maxout_dim, c.output_rank, c.tgt_vocab_size
        gru = E * 3 * H + H * 2 * H + H * H
        summary = H * H if c.summary == "tanh" else 0
        return cls(
            encoder_step=2 * gru,
            source=2 * (summary + H * H + H * 3 * H + H * 2 * M),
            decoder_step=2 * (gru + H * 2 * M + E * 2 * M + M * R + R * V),
        )


def pair_flops(config: ModelConfig, source_tokens: np.ndarray, target_tokens: np.ndarray) -> np.ndarray:
    """FLOPs of the unshared computation of each pair (token counts without </s>)."""
    f = StepFlops.of(config)
    src = np.asarray(source_tokens, dtype=np.int64) + 1
    tgt = np.asarray(target_tokens, dtype=np.int64) + 1
    return src * f.encoder_step + f.source + tgt * f.decoder_step


@dataclass
class WorkCount:
    lines: int = 0
    sources: int = 0  # distinct sources, summed over windows
    source_steps: int = 0  # plain encoder steps (tokens + </s>, every line)
    target_steps: int = 0  # plain decoder steps (tokens + </s>, every line)
    encoder_nodes: int = 0  # distinct source prefixes, </s> included
    decoder_nodes: int = 0  # distinct target prefixes per source, the empty one included

    def unshared_flops(self, config: ModelConfig) -> int:
        f = StepFlops.of(config)
        return self.source_steps * f.encoder_step + self.lines * f.source + self.target_steps * f.decoder_step

    def prefix_flops(self, config: ModelConfig) -> int:
        f = StepFlops.of(config)
        return self.encoder_nodes * f.encoder_step + self.sources * f.source + self.decoder_nodes * f.decoder_step


class TrieCounter:
    """A ``WindowScorer`` that counts the work instead of scoring (every score is 0)."""

    def __init__(self) -> None:
        self.count = WorkCount()

    def score(self, sources: list[list[int]], targets: list[list[int]], source_index: np.ndarray) -> np.ndarray:
        c = self.count
        src_trie = build_trie(*flat_store(sources, end=EOS_ID))
        tgt_tokens, tgt_offsets = flat_store(targets)
        tgt_trie = build_trie(tgt_tokens, tgt_offsets, roots=np.asarray(source_index, dtype=np.int64))
        c.lines += len(targets)
        c.sources += len(sources)
        c.source_steps += int(src_trie.lengths[np.asarray(source_index, dtype=np.int64)].sum())
        c.target_steps += int(tgt_trie.lengths.sum()) + len(targets)
        c.encoder_nodes += src_trie.node_count()
        c.decoder_nodes += len(np.unique(source_index)) + tgt_trie.node_count()
        return np.zeros(len(targets), dtype=np.float64)
