"""Decoders: stacked cells, one context vector per step, the maxout deep output.

Predicting ``y_1 .. y_M </s>`` with no begin symbol (e(y_0) = 0, as in ``cho2014``).
With L layers of cells f_1 .. f_L (H units each) and the encoder's ``final`` summary::

    s^l_0 = tanh(W_init^l final)                                 every layer (LSTM: c^l_0 = 0)

Context at step i, by ``attention`` and ``attention_from``::

    none                ctx_i = final                            Cho et al. (2014): fixed
    from "top"          ctx_i = Attention(s^L_{i-1}, memory)     Bahdanau et al. (2015)
    from "bottom"       ctx_i = Attention(s^1_{i-1}, memory)     Wu et al. (2016), GNMT

Layers, with residual connections from layer ``residual_from`` up (0: none)::

    s^1_i = f_1([e(y_{i-1}) ; ctx_i], s^1_{i-1})     (GNMT: f_1(e(y_{i-1}), s^1_{i-1}), the
                                                      bottom layer only produces the query)
    s^l_i = f_l([x^{l-1}_i ; ctx_i], s^l_{i-1})      l = 2 .. L, with x^l_i = s^l_i, or
    x^l_i = s^l_i + x^{l-1}_i                        from residual_from up

Deep output, as in Cho et al. (2014) and Bahdanau et al. (2015, appendix A.2.2)::

    t' = O_h x^L_i + O_y e(y_{i-1}) + O_c ctx_i      2M units
    t_k = max(t'_{2k-1}, t'_{2k})                    maxout: M units
    p(y_i | y_<i, x) = softmax(G_l (G_r t))          output matrix factorised at rank R

With ``dropout_rate`` p > 0, in training mode: ctx_i, every layer's output f_l(...) (before
the residual sum; the cell's own state s^l_i is kept) and the maxout units t are dropped out.

Bahdanau et al. write the readout with s_{i-1}; here it reads the new state x^L_i, as the
paper's model of Cho et al. does (the new state has seen ctx_i and y_{i-1} already).
A decoder's state after step i depends only on the source and y_1 .. y_i.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

import torch
import torch.nn.functional as F
from torch import nn

from .attention import Attention
from .cells import Cell, make_cell
from .cho2014 import Project
from .encoders import dropout

ATTENTION_FROM = ("top", "bottom")


@dataclass
class Encoded:
    """What the decoder needs of a batch of sources (``network.EncodedSource``): memory (B, S, D),
    attention keys, the real-position mask (B, S) and the phrase summary ``final`` (B, D)."""

    memory: torch.Tensor
    keys: torch.Tensor
    real: torch.Tensor
    final: torch.Tensor

    def select(self, which: torch.Tensor, width: int | None = None) -> Encoded:
        """The sources ``which`` (one row per target, repeats allowed), cut to their first
        ``width`` positions when given (at least the longest of them: only padding goes)."""
        if width is None:
            return Encoded(self.memory[which], self.keys[which], self.real[which], self.final[which])
        return Encoded(
            self.memory[which, :width], self.keys[which, :width], self.real[which, :width], self.final[which]
        )

    @property
    def sources(self) -> int:
        return self.final.shape[0]

    @property
    def width(self) -> int:
        return self.memory.shape[1]

    def padded(self, width: int) -> Encoded:
        """Padded to ``width`` positions (zero memory and keys, not real)."""
        pad = width - self.width
        return Encoded(
            F.pad(self.memory, (0, 0, 0, pad)), F.pad(self.keys, (0, 0, 0, pad)), F.pad(self.real, (0, pad)), self.final
        )

    def cat(self, others: Sequence[Encoded]) -> Encoded:
        parts = [self, *others]
        return Encoded(*(torch.cat([getattr(p, k) for p in parts]) for k in ("memory", "keys", "real", "final")))


class Decoder(nn.Module):
    def __init__(
        self,
        cell: str,
        embed_dim: int,
        hidden_dim: int,
        memory_dim: int,
        vocab_size: int,
        maxout_dim: int,
        output_rank: int,
        layers: int = 1,
        attention: str = "additive",
        attention_from: str = "top",
        residual_from: int = 0,
        reset: str = "reset_before",
        dropout_rate: float = 0.0,
    ):
        super().__init__()
        self.dropout = dropout(dropout_rate)
        if attention_from not in ATTENTION_FROM:
            raise ValueError(f"attention_from must be one of {ATTENTION_FROM}, not {attention_from!r}")
        H, D, M = hidden_dim, memory_dim, maxout_dim
        self.hidden_dim, self.layers, self.maxout_dim = H, layers, M
        self.residual_from, self.attention_from = residual_from, attention_from
        self.feeds_bottom = attention == "none" or attention_from == "top"
        self.init = nn.Linear(D, layers * H)
        self.cells = nn.ModuleList(
            [
                make_cell(
                    cell, (embed_dim if layer == 1 else H) + (D if layer > 1 or self.feeds_bottom else 0), H, reset
                )
                for layer in range(1, layers + 1)
            ]
        )
        self.state_size = self.layer(0).state_size
        self.attention = None if attention == "none" else Attention(attention, H, D, H)
        self.O_h = nn.Linear(H, 2 * M)  # carries the readout bias
        self.O_y = nn.Linear(embed_dim, 2 * M, bias=False)
        self.O_c = nn.Linear(D, 2 * M, bias=False)
        self.G_r = nn.Linear(M, output_rank, bias=False)
        self.G_l = nn.Linear(output_rank, vocab_size)

    def layer(self, i: int) -> Cell:
        """Cell of layer i + 1 (0: the bottom, -1: the top)."""
        return cast(Cell, self.cells[i])

    def start(self, enc: Encoded) -> torch.Tensor:
        """The initial state of every layer, packed (B, L * state_size)."""
        h0 = torch.tanh(self.init(enc.final)).split(self.hidden_dim, dim=1)
        extra = self.state_size - self.hidden_dim  # the LSTM's memory cell starts at 0
        return torch.cat([torch.cat([h, h.new_zeros(h.shape[0], extra)], 1) if extra else h for h in h0], 1)

    def layer_states(self, state: torch.Tensor) -> list[torch.Tensor]:
        return list(state.split(self.state_size, dim=1))

    def step(
        self,
        y_prev: torch.Tensor,
        state: torch.Tensor,
        enc: Encoded,
        project: Project | None = None,
        recurrent: Project | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """(new state, top output x^L_i (B, H), ctx_i (B, D), attention weights (B, S) or None)
        from e(y_{i-1}) (B, E) and the previous state. ``project(layer, x)``: ``layer(x)`` for the
        cells' input projections, computed another way (training's ``deferred_weights``);
        ``recurrent``: the same for the products with the previous state (the cells' recurrent
        matrices, the attention's query projection)."""
        states = self.layer_states(state)
        weights = None
        if self.attention is None:
            ctx = enc.final
        else:
            k = -1 if self.attention_from == "top" else 0
            q = self.layer(k).output(states[k])
            ctx, weights = self.attention(q, enc.keys, enc.memory, enc.real, recurrent)
        ctx = self.dropout(ctx)
        new_states, x = [], y_prev
        for layer in range(1, self.layers + 1):
            cell = self.layer(layer - 1)
            inp = torch.cat([x, ctx], 1) if layer > 1 or self.feeds_bottom else x
            s = cell.step(cell.W(inp) if project is None else project(cell.W, inp), states[layer - 1], recurrent)
            out = cell.output(s)
            out = self.dropout(out)
            x = out + x if self.residual_from and layer >= self.residual_from else out
            new_states.append(s)
        return torch.cat(new_states, 1), x, ctx, weights

    def readout(self, top: torch.Tensor, y_prev: torch.Tensor, ctx: torch.Tensor) -> torch.Tensor:
        """Logits (.., V) from x^L_i (.., H), e(y_{i-1}) (.., E) and ctx_i (.., D)."""
        return self.G_l(self.readout_features(top, y_prev, ctx))

    def readout_features(self, top: torch.Tensor, y_prev: torch.Tensor, ctx: torch.Tensor) -> torch.Tensor:
        """G_r t (.., R): the readout before its output layer ``G_l``."""
        t = self.O_h(top) + self.O_y(y_prev) + self.O_c(ctx)
        t = self.dropout(t.unflatten(-1, (self.maxout_dim, 2)).amax(-1))
        return self.G_r(t)
