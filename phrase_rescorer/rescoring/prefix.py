"""The fast exact scorer: prefix tries over a window's sources and targets, run level by level.

For a window of phrase pairs (see ``scorers.WindowScorer``) the scorer computes

* the encoder once per distinct source **prefix**: the sources of the window (each followed by
  ``</s>``) form a trie (``prefix_trie``); the trie is run one depth at a time, every node of a
  depth in one batch, each node one GRU step from its parent's state; a source's summary c comes
  from its ``</s>`` node. Sorted Moses tables put sources with common prefixes side by side, so
  this runs about a third of the plain encoder's steps;
* the context terms h'_0 = tanh(V' c), C.. c and O_c c once per distinct source
  (``RNNEncoderDecoder.context_terms``);
* the decoder once per distinct target **prefix of each source**: the targets of a source form a
  trie whose root is the source; the node of prefix y_1..y_t holds h'_{t+1} and the output
  distribution of y_{t+1}; a target's log p(target|source) is the sum, along its path, of the
  log-probability of the next token, plus log p(</s>) at its last node;
* the output layer once per decoder node, through a log-softmax (one fused pass on CPU) read
  only at the tokens that some target needs.

It needs a network with cho2014's single GRU summary (the capability ``network.SummaryNetwork``);
``stacked_prefix`` shares the decoder prefixes of any network (``network.Network``).

A depth holds thousands of nodes; they go through the GRU step and the output layer
``batch_size`` rows at a time (256: the matrix products run at full speed, the (rows, V) logits
stay in cache), with no padding anywhere. Memory is bounded by the window, not by the table.

On CPU, linear layers run through oneDNN with packed weights (``packed_linear``), and a window is
cut into ``workers`` parts of consecutive sources, scored by as many threads with one thread per
op: the cores never wait for each other at the end of an op, which keeps both busy even when
other processes share the machine (measured on a loaded 2-core machine: 2.5x the pairs/s of one
scorer using two OpenMP threads per op).

The arithmetic is the model's own (``GRU.step``, ``summarize``, ``context_terms``,
``readout``); only the order of float additions changes (batch shapes, GEMM blocking), so the
scores equal ``model.sequence_log_probs`` to float32 rounding (tests: 1e-4 + 1e-5 |log p|).

``dtype=torch.bfloat16`` runs the network in bfloat16 (the log-softmax in float32, the sums in
float64): an approximate fast mode for GPUs and CPUs with bfloat16 units, never the default.
"""

from __future__ import annotations

import copy

import numpy as np
import torch

from ..data.batching import flat_store
from ..data.vocab import EOS_ID
from ..model.network import SummaryNetwork
from .packed_linear import pack_linears
from .trie import PrefixTrie, build_trie, edge_batches
from .window_threads import WindowThreads

#: Trie nodes per batch: on CPU the (rows, V) logits of a batch stay in cache (256 x 15,000
#: float32 = 15 MB); a GPU needs large batches to fill its cores.
CPU_BATCH, GPU_BATCH = 256, 8192


class PrefixScorer:
    """Exact window scorer with shared encoder and decoder prefixes (``WindowScorer``)."""

    def __init__(
        self,
        model: SummaryNetwork,
        device: torch.device | str = "cpu",
        batch_size: int | None = None,
        dtype: torch.dtype = torch.float32,
        onednn: bool = True,
        workers: int | None = None,
    ):
        self.device = torch.device(device)
        if batch_size is None:
            batch_size = CPU_BATCH if self.device.type == "cpu" else GPU_BATCH
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        if dtype != torch.float32:
            model = copy.deepcopy(model).to(dtype)
        model = model.to(self.device).eval()
        if onednn and self.device.type == "cpu":
            model = pack_linears(model, batch_size)  # type: ignore[arg-type, assignment]
        self.model = model
        self.batch_size = batch_size
        self.dtype = dtype
        self._threads = WindowThreads(self.device, workers)
        self.workers = self._threads.workers

    def _tensor(self, a: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(a).to(self.device)

    def score(self, sources: list[list[int]], targets: list[list[int]], source_index: np.ndarray) -> np.ndarray:
        return self._threads.run(self._score, sources, targets, source_index)

    @torch.inference_mode()
    def _score(self, sources: list[list[int]], targets: list[list[int]], source_index: np.ndarray) -> np.ndarray:
        if len(targets) == 0:
            return np.empty(0, dtype=np.float64)
        h0, ctx, oc = self.context_terms(sources)
        tokens, offsets = flat_store(targets)
        trie = build_trie(tokens, offsets, roots=np.asarray(source_index, dtype=np.int64))
        return self.decode(trie, h0, ctx, oc).cpu().numpy()

    # --- encoder -------------------------------------------------------------------------------

    def context_terms(self, sources: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(h'_0, C.. c, O_c c) of every source, in ``sources`` order."""
        model = self.model
        tokens, offsets = flat_store(sources, end=EOS_ID)
        trie = build_trie(tokens, offsets)
        lengths = trie.lengths
        H = model.config.hidden_dim
        last = torch.empty(len(sources), H, dtype=self.dtype, device=self.device)  # h_{N+1}
        h = torch.zeros(1, H, dtype=self.dtype, device=self.device)  # the root: h_0 = 0
        for depth, level in enumerate(trie.levels, start=1):
            h = self._encoder_level(h, self._tensor(level.parent), self._tensor(level.token))
            ends = lengths[level.seqs] == depth  # sources whose </s> is at this depth
            if ends.any():
                last[self._tensor(level.seqs[ends])] = h[self._tensor(level.node[ends])]
        return model.context_terms(model.summarize(last))

    # --- decoder -------------------------------------------------------------------------------

    def decode(self, trie: PrefixTrie, h0: torch.Tensor, ctx: torch.Tensor, oc: torch.Tensor) -> torch.Tensor:
        """log p(target|source) (float64) of every sequence of ``trie``, whose roots index the sources."""
        lengths = trie.lengths
        totals = torch.zeros(len(lengths), dtype=torch.float64, device=self.device)
        # Depth 0: one node per source (the empty prefix), its parent state h'_0.
        node_src = torch.arange(h0.shape[0], device=self.device)
        parent: torch.Tensor | None = None
        token: torch.Tensor | None = None
        h_prev = h0
        for depth in range(len(trie.levels) + 1):
            if depth > 0:
                level = trie.levels[depth - 1]
                parent, token = self._tensor(level.parent), self._tensor(level.token)
                node_src = node_src[parent]
            # The edges leaving this depth: each active sequence's next token, or </s>.
            seqs, nodes, next_tok = trie.edges(depth, EOS_ID)
            h_prev = self._decoder_level(totals, h_prev, parent, token, node_src, ctx, oc, seqs, nodes, next_tok)
        return totals

    def _decoder_level(
        self,
        totals: torch.Tensor,
        h_prev: torch.Tensor,
        parent: torch.Tensor | None,
        token: torch.Tensor | None,
        node_src: torch.Tensor,
        ctx: torch.Tensor,
        oc: torch.Tensor,
        seqs: np.ndarray,
        nodes: np.ndarray,
        next_tok: np.ndarray,
    ) -> torch.Tensor:
        """The states of one depth's nodes, and totals[seqs[k]] += log p(next_tok[k]) at node
        nodes[k] for every k. Nodes go ``batch_size`` at a time through the GRU step and the
        output layer, so the intermediates of a batch stay in cache. ``parent`` None: depth 0,
        whose parents are the sources and whose previous word is e(y_0) = 0."""
        model = self.model
        n, rows = len(node_src), self.batch_size
        seqs, nodes, next_tok, bounds = edge_batches(seqs, nodes, next_tok, n, rows)
        h_all = None if n <= rows else h_prev.new_empty(n, h_prev.shape[1])
        for i, start in enumerate(range(0, n, rows)):
            stop = min(start + rows, n)
            src = node_src[start:stop]
            if parent is None:  # W' e(y_0) = W' 0 = the bias
                y_prev = h_prev.new_zeros(stop - start, model.config.embed_dim)
                x_proj = model.decoder.W.bias + ctx[src]  # decoder_inputs(0, ctx) without the product
                h = model.decoder_step(x_proj, h_prev[src])
            else:
                assert token is not None
                y_prev = model.tgt_embed(token[start:stop])  # (rows, E)
                x_proj = model.decoder_inputs(y_prev, ctx[src])  # (rows, 3H)
                h = model.decoder_step(x_proj, h_prev[parent[start:stop]])
            if h_all is None:
                h_all = h
            else:
                h_all[start:stop] = h
            a, b = int(bounds[i]), int(bounds[i + 1])
            logits = model.readout(h, y_prev, oc[src])  # (rows, V)
            logp = torch.log_softmax(logits.float(), dim=-1)
            picked = logp[self._tensor(nodes[a:b] - start), self._tensor(next_tok[a:b])]
            totals.index_add_(0, self._tensor(seqs[a:b]), picked.double())
        assert h_all is not None
        return h_all

    def _encoder_level(self, h_prev: torch.Tensor, parent: torch.Tensor, token: torch.Tensor) -> torch.Tensor:
        """The encoder states of one depth's nodes, ``batch_size`` nodes at a time."""
        model = self.model
        n = len(parent)
        if n <= self.batch_size:
            return model.encoder.step(model.encoder.W(model.src_embed(token)), h_prev[parent])
        h_all = h_prev.new_empty(n, h_prev.shape[1])
        for start in range(0, n, self.batch_size):
            stop = start + self.batch_size
            x_proj = model.encoder.W(model.src_embed(token[start:stop]))  # (rows, 3H)
            h_all[start:stop] = model.encoder.step(x_proj, h_prev[parent[start:stop]])
        return h_all
