"""The exact prefix-sharing scorer of every network, on the ``network.Network`` interface alone:
the default of the architectures built from options (rnnsearch, gnmt, ...) and of the transformer.

A decoder's state after step i depends only on the source (for the stacked networks its encoder
memory, attention keys and summary) and on y_1 .. y_i (``model.decoders``): targets of one source that start with
the same words go through the same decoder states, attention weights and output distributions
up to the end of their common prefix. For a window of phrase pairs (``scorers.WindowScorer``)
the scorer

* encodes each distinct source once (``StackedScorer.encode_sources``: memory, attention keys,
  mask and summary), the sources sorted by length so that each batch of decoder nodes attends
  over the length of its own sources, not the window's longest;
* builds the trie of the targets' prefixes with each target's source as its root
  (``trie.build_trie``, the trie of the cho2014 prefix scorer), so that prefixes are shared
  under one source only;
* runs the trie one depth at a time. The node of prefix y_1..y_t takes one decoder step
  (``Network.step``: attention over its source's memory, every layer) from its parent's state
  with e(y_t) (a root: ``Network.start`` of its source, and e(y_0) = 0), and one output layer
  (``Network.readout``): p(y_{t+1} | y_1..y_t, x). A target's log p(target|source) is the sum,
  along its path, of the log-probability of its next token at each node, plus log p(</s>) at
  its last node, in float64 (``trie.PrefixTrie.edges``);
* reads the log-softmax only at the tokens some target needs.

The nodes of a depth go ``batch_size`` at a time (256 on CPU, where oneDNN runs the linear
layers with packed weights, ``packed_linear``; 8192 on a GPU), with no padding on the target
side; memory is bounded by the window (a batch that attends to a very long source steps in
pieces of at most ``32 * batch_size`` gathered source positions). On CPU a window is cut among
worker threads, one thread per op, as ``StackedScorer`` does.

The encoder is not shared over source prefixes as the cho2014 prefix scorer does: a
bidirectional layer reads every source from its end, so two sources with a common prefix share
no backward state; encoding is once per distinct source and a small part of the work.

The arithmetic is the model's own (``encode``, ``step``, ``readout``); only
batch shapes and GEMM blocking change, so the scores equal ``sequence_log_probs`` to float32
rounding (tests: |Δ log p| <= 1e-4 + 1e-5 |log p|, as for the cho2014 prefix scorer).

A state may grow from one depth to the next (the transformer's holds every layer's keys and
values at every position so far): each depth's states are made at the width its steps give.
Memory is then bounded by the window times the target length (n nodes x t positions x L layers
x 2d at depth t), and a step's work grows with t: for the transformer ``--scorer batched``
measured faster (docs/results-archive.md, "A Transformer behind the network interface").
"""

from __future__ import annotations

import numpy as np
import torch

from ..data.batching import flat_store
from ..data.vocab import EOS_ID
from ..model.network import EncodedSource, Network
from .packed_linear import pack_linears
from .prefix import CPU_BATCH, GPU_BATCH
from .stacked_scorer import StackedScorer
from .trie import PrefixTrie, build_trie, edge_batches


class StackedPrefixScorer(StackedScorer):
    """Sources encoded once per window, decoder steps shared by the targets' common prefixes."""

    def __init__(
        self,
        model: Network,
        device: torch.device | str = "cpu",
        batch_size: int | None = None,
        workers: int | None = None,
        onednn: bool = True,
    ):
        if batch_size is None:
            batch_size = CPU_BATCH if torch.device(device).type == "cpu" else GPU_BATCH
        super().__init__(model, device, batch_size, workers)
        if onednn and self.device.type == "cpu":
            self.model = pack_linears(self.model, self.batch_size)

    def _tensor(self, a: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(a).to(self.device)

    @torch.inference_mode()
    def _score(self, sources: list[list[int]], targets: list[list[int]], source_index: np.ndarray) -> np.ndarray:
        if not len(targets):
            return np.empty(0, dtype=np.float64)
        # Sources by length: the nodes of a depth keep their sources' order, so a batch of nodes
        # reads sources of about one length, and attention runs over that length, not the
        # window's longest.
        lengths = np.fromiter((len(s) for s in sources), dtype=np.int64, count=len(sources))
        order = np.argsort(lengths, kind="stable")
        rank = np.empty_like(order)
        rank[order] = np.arange(len(order))
        enc = self.encode_sources([sources[i] for i in order])
        tokens, offsets = flat_store(targets)
        trie = build_trie(tokens, offsets, roots=rank[np.asarray(source_index, dtype=np.int64)])
        return self.decode(trie, enc, lengths[order] + 1).cpu().numpy()

    def decode(self, trie: PrefixTrie, enc: EncodedSource, widths: np.ndarray | None = None) -> torch.Tensor:
        """log p(target|source) (float64) of every sequence of ``trie``, whose roots index the
        sources of ``enc``; ``widths``: each source's positions with </s> (None: all of them)."""
        totals = torch.zeros(len(trie.roots), dtype=torch.float64, device=self.device)
        # Depth 0: one node per source (the empty prefix), from the source's initial state.
        node_src = np.arange(enc.sources)
        if widths is None:
            widths = np.full(len(node_src), enc.width, dtype=np.int64)
        parent, token = self._tensor(node_src), None
        state = self.model.start(enc)
        for depth in range(len(trie.levels) + 1):
            if depth > 0:
                level = trie.levels[depth - 1]
                parent, token = self._tensor(level.parent), self._tensor(level.token)
                node_src = node_src[level.parent]
            state = self._level(totals, state, parent, token, node_src, enc, widths, *trie.edges(depth, EOS_ID))
        return totals

    def _level(
        self,
        totals: torch.Tensor,
        state_prev: torch.Tensor,
        parent: torch.Tensor,
        token: torch.Tensor | None,
        node_src: np.ndarray,
        enc: EncodedSource,
        widths: np.ndarray,
        seqs: np.ndarray,
        nodes: np.ndarray,
        next_tok: np.ndarray,
    ) -> torch.Tensor:
        """The decoder states of one depth's nodes (one step from ``state_prev[parent]`` with
        e(token), or e(y_0) = 0 where ``token`` is None, attending to source ``node_src``), and
        totals[seqs[k]] += log p(next_tok[k]) at node nodes[k] for every k."""
        model, rows, n = self.model, self.batch_size, len(node_src)
        seqs, nodes, next_tok, bounds = edge_batches(seqs, nodes, next_tok, n, rows)
        state: torch.Tensor | None = None  # made at the width of the new states (a transformer's grows)
        for i, start in enumerate(range(0, n, rows)):
            stop = min(start + rows, n)
            if token is None:
                y_prev = state_prev.new_zeros(stop - start, model.config.embed_dim)
            else:
                y_prev = model.tgt_embed(token[start:stop])
            s, top, ctx = self._step(y_prev, state_prev[parent[start:stop]], node_src[start:stop], enc, widths)
            if state is None:
                state = s.new_empty(n, s.shape[1])
            state[start:stop] = s
            a, b = int(bounds[i]), int(bounds[i + 1])
            logp = torch.log_softmax(model.readout(top, y_prev, ctx).float(), dim=-1)
            picked = logp[self._tensor(nodes[a:b] - start), self._tensor(next_tok[a:b])]
            totals.index_add_(0, self._tensor(seqs[a:b]), picked.double())
        return state_prev[:0] if state is None else state

    def _step(
        self, y_prev: torch.Tensor, state: torch.Tensor, src: np.ndarray, enc: EncodedSource, widths: np.ndarray
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """One decoder step of a batch of nodes attending to sources ``src``: (new state, top
        output, context). Each piece of the batch attends over its own longest source, and the
        gathered memory is bounded as ``scorers.length_batches`` bounds a batch (``32 *
        batch_size`` source positions, at least one node): the nodes of a very long source step
        in small pieces, the others in one."""
        budget, outs, a = 32 * self.batch_size, [], 0
        while a < len(src):
            longest = np.maximum.accumulate(widths[src[a:]])  # the width of each possible piece
            rows = max(1, int(np.count_nonzero(longest * np.arange(1, len(longest) + 1) <= budget)))
            which = self._tensor(src[a : a + rows])
            outs.append(
                self.model.step(y_prev[a : a + rows], state[a : a + rows], enc.select(which, int(longest[rows - 1])))[
                    :3
                ]
            )
            a += rows
        if len(outs) == 1:
            return outs[0]
        s, top, ctx = (torch.cat([o[k] for o in outs]) for k in range(3))
        return s, top, ctx
