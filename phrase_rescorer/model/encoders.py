"""Encoders: a (bidirectional) bottom layer, then stacked unidirectional layers with residual
connections, read over ``x_1 .. x_N </s>``.

Bottom layer (Bahdanau et al. 2015, section 3.2), with ``bidirectional``::

    ->h_j = f(e(x_j), ->h_{j-1})            forward, j = 1 .. N+1
    <-h_j = f(e(x_j), <-h_{j+1})            backward, j = N+1 .. 1
    x^1_j = [->h_j ; <-h_j]                 the annotation of word j (2H units)

and ``x^1_j = ->h_j`` (H units) without. Layers l = 2 .. L (Wu et al. 2016, GNMT, section 3),
unidirectional, with residual connections from layer ``residual_from`` (GNMT: 3) up::

    x^l_j = f_l(x^{l-1}_j, x^l_{j-1})                      below residual_from
    x^l_j = f_l(x^{l-1}_j, x^l_{j-1}) + x^{l-1}_j          from residual_from up

f is a cell of ``cells`` (GRU or LSTM; ``f(...)`` stands for the cell's output h). The memory
attended to is the top layer ``x^L_1 .. x^L_{N+1}`` (``memory_dim`` units: 2H for a single
bidirectional layer, else H). ``final`` summarises the phrase for decoders without attention
and for the decoder's initial state: the top layer's last real position, with a bidirectional
single layer ``[->h_{N+1} ; <-h_1]`` (each direction's end after reading the whole phrase).

With ``dropout_rate`` p > 0, in training mode, each layer's outputs f_l(...) are dropped out
before the residual sum, the next layer and the attention read them; ``final`` is not.

Padding (right, after </s>) never changes a state: the forward recurrence keeps its state at
padded steps, the backward one starts at zeros and begins with the last real token.
"""

from __future__ import annotations

from typing import cast

import torch
from torch import nn

from .cells import Cell, make_cell


class Encoder(nn.Module):
    def __init__(
        self,
        cell: str,
        embed_dim: int,
        hidden_dim: int,
        layers: int = 1,
        bidirectional: bool = False,
        residual_from: int = 0,
        reset: str = "reset_before",
        dropout_rate: float = 0.0,
    ):
        super().__init__()
        if layers < 1:
            raise ValueError("an encoder needs at least one layer")
        self.dropout = dropout(dropout_rate)
        H = hidden_dim
        self.hidden_dim, self.bidirectional, self.residual_from = H, bidirectional, residual_from
        bottom_dim = 2 * H if bidirectional else H
        self.forward_cells = nn.ModuleList([make_cell(cell, embed_dim, H, reset)])
        self.backward_cell = make_cell(cell, embed_dim, H, reset) if bidirectional else None
        for layer in range(2, layers + 1):
            self.forward_cells.append(make_cell(cell, bottom_dim if layer == 2 else H, H, reset))
        self.memory_dim = bottom_dim if layers == 1 else H

    def cells(self) -> list[Cell]:
        return [cast(Cell, c) for c in self.forward_cells] + (
            [self.backward_cell] if self.backward_cell is not None else []
        )

    def forward(self, x: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(memory (B, S, D), final (B, D)) from embedded sources x (B, S, E) and lengths (B,)."""
        B, S, _ = x.shape
        real = torch.arange(S, device=x.device).unsqueeze(0) < lengths.unsqueeze(1)  # (B, S)
        cells = self.cells()
        out, last = _run(cells[0], x, real, reverse=False)
        if self.backward_cell is not None:
            back, first = _run(self.backward_cell, x, real, reverse=True)
            out, last = torch.cat([out, back], dim=2), torch.cat([last, first], dim=1)
        out = self.dropout(out)
        for layer, cell in enumerate(cells[1 : len(self.forward_cells)], start=2):
            below = out
            out, last = _run(cell, below, real, reverse=False)
            out = self.dropout(out)
            if self.residual_from and layer >= self.residual_from:
                out = out + below
                last = last + below[torch.arange(B, device=x.device), lengths - 1]
        return out, last


def dropout(rate: float) -> nn.Module:
    """Dropout at ``rate`` (active in training mode only), or the identity for 0: a network
    without dropout draws no random numbers and computes exactly what it did before."""
    return nn.Dropout(rate) if rate > 0 else nn.Identity()


def _run(cell: Cell, x: torch.Tensor, real: torch.Tensor, reverse: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """One direction of one layer: outputs (B, S, H) and the output after the whole phrase (B, H)
    (the last real position forwards, the first position backwards)."""
    B, S, _ = x.shape
    x_proj = cell.W(x)  # all steps at once
    state = x.new_zeros(B, cell.state_size)
    outputs: list[torch.Tensor] = [x.new_zeros(0)] * S
    for t in range(S - 1, -1, -1) if reverse else range(S):
        state = torch.where(real[:, t : t + 1], cell.step(x_proj[:, t], state), state)
        outputs[t] = cell.output(state)
    return torch.stack(outputs, 1), cell.output(state)
