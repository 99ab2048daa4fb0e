"""Recurrent cells of the encoder-decoder family: the GRU (both reset placements) and the LSTM.

Every cell works one step at a time over pre-projected inputs: the input projection ``W x + b``
does not depend on the state, so encoders compute it for all steps in one matrix product. A
cell's state is one tensor ``(B, state_size)`` (the LSTM packs ``[h; c]``), so that padding
masks, gathers by source and beam reordering treat every cell alike; ``output(state)`` is h.

GRU (Cho et al. 2014), ``reset_before`` as the paper writes it::

    r   = sigma(W_r x + U_r h_{t-1})
    z   = sigma(W_z x + U_z h_{t-1})
    h~  = tanh (W x + U (r * h_{t-1}))        # reset_after (cuDNN): tanh(W x + r * (U h_{t-1}))
    h_t = z * h_{t-1} + (1 - z) * h~

The GRU arithmetic is the one of ``cho2014.GRU`` (this class only adds the common cell
interface), so a GRU here computes exactly what the paper's model computes.

LSTM (Hochreiter and Schmidhuber 1997, with the forget gate of Gers et al. 2000; GNMT's cell)::

    i = sigma(W_i x + U_i h_{t-1})      f = sigma(W_f x + U_f h_{t-1})
    o = sigma(W_o x + U_o h_{t-1})      g = tanh (W_g x + U_g h_{t-1})
    c_t = f * c_{t-1} + i * g
    h_t = o * tanh(c_t)

The forget-gate bias starts at 1 (Jozefowicz et al. 2015), the other biases at 0.
"""

from __future__ import annotations

import torch
from torch import nn

from .cho2014 import GRU, Project, _orthogonal

CELL_TYPES = ("gru", "lstm")


class GRUCell(GRU):
    """The paper's GRU with the common cell interface; ``reset`` is ``reset_before``/``reset_after``."""

    def __init__(self, input_dim: int, hidden_dim: int, reset: str = "reset_before"):
        super().__init__(input_dim, hidden_dim, reset)
        self.state_size = hidden_dim

    def output(self, state: torch.Tensor) -> torch.Tensor:
        return state

    def initialise(self, std: float) -> None:
        _normal(self, std)
        with torch.no_grad():
            for U in self.recurrent_matrices():
                U.copy_(_orthogonal(U.shape[0], U.shape[1]))


class LSTMCell(nn.Module):
    """The LSTM; state ``[h; c]`` (B, 2H)."""

    def __init__(self, input_dim: int, hidden_dim: int):
        super().__init__()
        self.hidden_dim = hidden_dim
        self.state_size = 2 * hidden_dim
        self.W = nn.Linear(input_dim, 4 * hidden_dim)  # [W_i; W_f; W_o; W_g] and biases
        self.U = nn.Linear(hidden_dim, 4 * hidden_dim, bias=False)  # [U_i; U_f; U_o; U_g]

    def step(self, x_proj: torch.Tensor, state: torch.Tensor, project: Project | None = None) -> torch.Tensor:
        """[h_t; c_t] from x_proj = W x_t + b (B, 4H) and [h_{t-1}; c_{t-1}] (B, 2H); ``project``:
        the product with U computed another way (``Project``)."""
        H = self.hidden_dim
        h, c = state[:, :H], state[:, H:]
        gates = x_proj + (self.U(h) if project is None else project(self.U, h))
        i, f, o = (torch.sigmoid(gates[:, k * H : (k + 1) * H]) for k in range(3))
        g = torch.tanh(gates[:, 3 * H :])
        c = f * c + i * g
        return torch.cat([o * torch.tanh(c), c], dim=1)

    def output(self, state: torch.Tensor) -> torch.Tensor:
        return state[:, : self.hidden_dim]

    def initialise(self, std: float) -> None:
        _normal(self, std)
        H = self.hidden_dim
        with torch.no_grad():
            self.W.bias[H : 2 * H].fill_(1.0)
            for k in range(4):
                self.U.weight[k * H : (k + 1) * H].copy_(_orthogonal(H, H))


Cell = GRUCell | LSTMCell


def make_cell(kind: str, input_dim: int, hidden_dim: int, reset: str = "reset_before") -> Cell:
    if kind == "gru":
        return GRUCell(input_dim, hidden_dim, reset)
    if kind == "lstm":
        return LSTMCell(input_dim, hidden_dim)
    raise ValueError(f"cell type must be one of {CELL_TYPES}, not {kind!r}")


def _normal(module: nn.Module, std: float) -> None:
    with torch.no_grad():
        for name, p in module.named_parameters():
            if name.endswith("bias"):
                p.zero_()
            else:
                p.normal_(0.0, std)
