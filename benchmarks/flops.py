"""Floating-point work of scoring, counted in matrix-product FLOPs (2 per multiply-add).

Only the matrix products are counted: they are >95 % of the arithmetic at paper size; the
element-wise gates, the maxout and the log-softmax's exponentials are left out. The counts:

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
``sentence_flops`` the forward pass of a batch of sentence pairs through the attention networks
                as ``train-nmt`` trains them (rnnsearch, the transformer): each pair alone, or
                every row padded to the batch's longest source and target, as the batch's
                tensors compute it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from phrase_rescorer.data.batching import flat_store
from phrase_rescorer.data.vocab import EOS_ID
from phrase_rescorer.model.arch_options import ArchConfig
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
        gru = _gru_macs(E, H)
        summary = H * H if c.summary == "tanh" else 0
        return cls(
            encoder_step=2 * gru,
            source=2 * (summary + H * H + H * 3 * H + H * 2 * M),
            decoder_step=2 * (gru + H * 2 * M + E * 2 * M + M * R + R * V),
        )


def _gru_macs(inputs: int, H: int) -> int:
    """Multiply-adds of one GRU step: [W_r; W_z; W] x, [U_r; U_z] h, U (r h)."""
    return inputs * 3 * H + H * 2 * H + H * H


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


def sentence_flops(
    config: ModelConfig, arch: ArchConfig, source_tokens: np.ndarray, target_tokens: np.ndarray, padded: bool = False
) -> int:
    """FLOPs of the forward pass of a batch of sentence pairs (token counts without </s>), for
    the rnnsearch of one bidirectional GRU layer with additive attention and for the transformer:
    each pair computed alone, or with ``padded`` every row to the batch's longest source and
    target (the matrix products of the batch's tensors). Per source position j and target
    position i (</s> included; S, T positions)::

        rnnsearch   encoder 2 GRU steps from E, attention keys U_a h_j (2H x H); W_init once;
                    per i: W_a s (H x H), v_a and the context over the S positions (H + 2H
                    each), a GRU step from [e(y); ctx] (E + 2H), the readout O_h, O_y, O_c
                    (to 2M), G_r (M x R), G_l (R x V)
        transformer per layer and position: q, k, v and the output (4 d^2), the feed-forward
                    (2 d F), the scores and values over the S (encoder) or T (decoder) positions
                    (2d each); the decoder's query, cross output (2 d^2) and the keys and values
                    of the memory (2 d^2 per source position), the cross scores and values (2d
                    per source position); the output matrix (d x V) per target position

    The self-attention scores of the decoder are counted over all T positions, as the network
    computes them under its causal mask."""
    S = np.asarray(source_tokens, dtype=np.int64) + 1
    T = np.asarray(target_tokens, dtype=np.int64) + 1
    if padded:
        S, T = np.full_like(S, S.max(initial=0)), np.full_like(T, T.max(initial=0))
    c = config
    if arch.name == "transformer":
        d, F, L = c.embed_dim, c.hidden_dim, arch.layers
        layers = S * (4 * d * d + 2 * d * F) + S * S * 2 * d + S * 2 * d * d
        layers += T * (6 * d * d + 2 * d * F) + T * T * 2 * d + T * S * 2 * d
        macs = L * layers + T * d * c.tgt_vocab_size
    elif (arch.name, arch.cell_type, arch.layers, arch.bidirectional, arch.attention) == (
        "rnnsearch",
        "gru",
        1,
        True,
        "additive",
    ):
        E, H, M, R, V = c.embed_dim, c.hidden_dim, c.maxout_dim, c.output_rank, c.tgt_vocab_size
        D = 2 * H  # the memory: both directions' states
        encoder = S * (2 * _gru_macs(E, H) + D * H) + D * H
        decoder = T * (H * H + S * (H + D) + _gru_macs(E + D, H) + (H + E + D) * 2 * M + M * R + R * V)
        macs = encoder + decoder
    else:
        raise ValueError(f"FLOPs are counted for rnnsearch (as named) and the transformer, not {arch}")
    return int(2 * macs.sum())
