"""Prefix tries over token sequences, built level by level with numpy.

The encoder reads a phrase left to right and the decoder predicts a target left to right, so two
phrases that start with the same words go through exactly the same states up to the end of that
common prefix. Building a trie of the prefixes lets a scorer compute each distinct prefix once.
A Moses table is sorted by source phrase and its sources are sub-phrases of sentences, so
consecutive sources share long prefixes (``! stands leafing through the pages``,
``! stands leafing through the``, ...): on the 839,351-line en-fr table, windows of 8,192 lines
hold 1.36 M distinct encoder prefixes (``</s>`` steps included) where the plain encoder runs
4.35 M steps, and the targets of each source have 4.09 M distinct prefixes (the empty one
included) for 4.61 M decoder steps.

A trie is described level by level, which is how a scorer runs it: all nodes of depth ``d`` form
one batch whose parents are all in the batch of depth ``d - 1``. Nodes are numbered per level.
Depth 0 holds the roots, given by the caller (one per sequence, shared or not); the nodes of
depth ``d >= 1`` are the distinct (parent, token) pairs of the sequences with at least ``d``
tokens. Construction costs a handful of numpy calls per level, whatever the number of sequences,
so a 10,000-token phrase costs 10,000 small levels and a window of thousands of short phrases
about ten.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Level:
    """The nodes of one depth d >= 1, and where the sequences long enough to reach it are."""

    parent: np.ndarray  # (nodes,) int64: each node's parent among the nodes of depth d - 1
    token: np.ndarray  # (nodes,) int64: the token on the edge from the parent
    seqs: np.ndarray  # (active,) int64: the sequences with at least d tokens
    node: np.ndarray  # (active,) int64: the node (of depth d) of each of ``seqs``

    def __len__(self) -> int:
        return len(self.parent)


@dataclass(frozen=True)
class PrefixTrie:
    """Every distinct prefix of a set of sequences, grouped by depth."""

    roots: np.ndarray  # (sequences,) int64: each sequence's node at depth 0
    levels: list[Level]  # levels[d - 1] holds the nodes of depth d
    tokens: np.ndarray  # (total tokens,) int64: the sequences, concatenated
    offsets: np.ndarray  # (sequences + 1,) int64

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)

    def node_count(self) -> int:
        """Nodes of depth >= 1 (the steps a scorer computes beyond the roots)."""
        return sum(len(level) for level in self.levels)

    def edges(self, depth: int, end: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """What a decoder scores at the nodes of ``depth``: (seqs, nodes, next_tok), sequence
        seqs[k] being at node nodes[k] and predicting next_tok[k] there (its token at position
        ``depth``, or ``end`` after its last token). Depth 0: every sequence, at its root."""
        if depth == 0:
            seqs, nodes = np.arange(len(self.roots)), self.roots
        else:
            seqs, nodes = self.levels[depth - 1].seqs, self.levels[depth - 1].node
        more = self.lengths[seqs] > depth
        next_tok = np.full(len(seqs), end, dtype=np.int64)
        next_tok[more] = self.tokens[self.offsets[seqs[more]] + depth]
        return seqs, nodes, next_tok


def edge_batches(
    seqs: np.ndarray, nodes: np.ndarray, next_tok: np.ndarray, n: int, rows: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The edges of one depth grouped by node, for running its ``n`` nodes ``rows`` at a time:
    (seqs, nodes, next_tok) reordered, and ``bounds`` with the edges of nodes
    [i * rows, (i + 1) * rows) at ``bounds[i]:bounds[i + 1]``."""
    if n <= rows:  # one batch: every edge belongs to it
        return seqs, nodes, next_tok, np.array([0, len(nodes)])
    order = np.argsort(nodes, kind="stable")
    seqs, nodes, next_tok = seqs[order], nodes[order], next_tok[order]
    return seqs, nodes, next_tok, np.searchsorted(nodes, np.arange(0, n + rows, rows))


def build_trie(tokens: np.ndarray, offsets: np.ndarray, roots: np.ndarray | None = None) -> PrefixTrie:
    """The prefix trie of the sequences ``tokens[offsets[i]:offsets[i + 1]]``.

    ``roots[i]`` is the depth-0 node of sequence i (all 0 when not given). Two sequences share a
    node of depth d exactly when they have the same root and the same first d tokens.
    """
    tokens = np.asarray(tokens, dtype=np.int64)
    offsets = np.asarray(offsets, dtype=np.int64)
    n = len(offsets) - 1
    roots = np.zeros(n, dtype=np.int64) if roots is None else np.asarray(roots, dtype=np.int64)
    if roots.shape != (n,):
        raise ValueError(f"roots has shape {roots.shape}, expected ({n},)")
    if len(tokens) and tokens.min() < 0:
        raise ValueError("token ids must be non-negative")
    lengths = np.diff(offsets)
    order = np.argsort(-lengths, kind="stable")  # longest first: the active set is a prefix
    sorted_lengths = lengths[order]
    base = int(tokens.max()) + 1 if len(tokens) else 1
    levels: list[Level] = []
    node = roots[order]  # the depth d - 1 node of each of order[:active]
    for d in range(1, int(sorted_lengths[0]) + 1 if n else 1):
        active = int(np.searchsorted(-sorted_lengths, -d, side="right"))  # lengths >= d
        seqs = order[:active]
        keys = node[:active] * base + tokens[offsets[seqs] + (d - 1)]
        unique, node = np.unique(keys, return_inverse=True)
        node = node.reshape(-1)
        levels.append(Level(parent=unique // base, token=unique % base, seqs=seqs, node=node))
    return PrefixTrie(roots=roots, levels=levels, tokens=tokens, offsets=offsets)
