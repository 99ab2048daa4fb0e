"""The sentence encoders' training computation: ``encoders.Encoder`` with every GRU layer run as
``gru_sequence``, over the real positions only.

``Encoder.forward`` runs each direction of each layer step by step over the padded batch, with a
``torch.where`` per step to hold the state over the padding, and autograd records every step.
Here, as the phrase network's training does (``packed_log_probs``), the sources are taken longest
first and each direction's recurrence runs as one ``gru_sequence`` (its backward pass written
out, the recurrent matrices' gradients in one product over all steps, no recurrent work on the
zero initial state) over the real positions packed step-major, its input projection computed for
those positions only. The backward direction reads each source from its last real token to its
first, so its step t holds the same rows as the forward direction's step t (row i at position
``len_i - 1 - t``): both directions share the row counts, and run as one stacked
``gru_sequence``, each step's products one batched product of the two.

The outputs are unpacked into the padded (B, S, .) layout that ``Encoder.forward`` gives, padding
included (the forward direction holds its last state there, the backward one is zero), so the
layers' dropout draws the same masks from the same random numbers and the memory, the keys and
``final`` are the model's own: only the order of the arithmetic differs (``tests/unit/
test_packed_encoder.py``: outputs and gradients within float32 rounding of ``Encoder.forward``,
to 1e-12 in float64). Encoders of other cells (the LSTM, the GRU with its reset after U) and
autocast keep ``Encoder.forward``.
"""

from __future__ import annotations

from typing import TypeGuard

import torch

from ..model.cells import Cell, GRUCell
from ..model.encoders import Encoder
from .gru_sequence import gru_sequence
from .packed_rows import active_counts, packed_index, step_offsets


def written_out(cell: Cell, x: torch.Tensor) -> TypeGuard[GRUCell]:
    """Whether ``cell`` runs as ``gru_sequence`` on inputs like ``x``: the model's default GRU
    (reset before U), outside autocast (whose casts autograd's per-step operators carry)."""
    return isinstance(cell, GRUCell) and cell.cell == "reset_before" and not torch.is_autocast_enabled(x.device.type)


def packable(encoder: Encoder, x: torch.Tensor) -> bool:
    """Whether ``packed_encoder`` runs ``encoder`` as ``gru_sequence``: every cell ``written_out``."""
    return all(written_out(c, x) for c in encoder.cells())


def packed_encoder(encoder: Encoder, x: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``encoder(x, lengths)``: (memory (B, S, D), final (B, D)) from embedded sources x (B, S, E)
    and their lengths (B,), every layer a ``gru_sequence`` where ``packable`` (module text)."""
    if not packable(encoder, x) or int(lengths.min()) < 1:  # an empty source: the model's own loop
        return encoder(x, lengths)
    B, S, _ = x.shape
    sorted_lengths, order = torch.sort(lengths, descending=True, stable=True)
    lengths_list = sorted_lengths.tolist()
    counts = [n for n in active_counts(lengths_list, S) if n]
    steps, rows = packed_index(counts, x.device)  # packed row k: sorted row rows[k], step steps[k]
    batch_rows = order[rows]
    backward_positions = sorted_lengths[rows] - 1 - steps
    # Unpacking: the packed row of each (batch row, position); N (a zero row) where there is none.
    rank = torch.argsort(order)  # each batch row's place in the sorted order
    offsets = torch.tensor(step_offsets(counts), device=x.device)
    position = torch.arange(S, device=x.device).unsqueeze(0)  # (1, S)
    last = (lengths - 1).unsqueeze(1)  # (B, 1)
    forward_at = offsets[torch.minimum(position, last)] + rank.unsqueeze(1)  # holds the last state
    n = int(offsets[-1])
    backward_at = torch.where(position <= last, offsets[(last - position).clamp(min=0)] + rank.unsqueeze(1), n)

    def unpacked(states: torch.Tensor, at: torch.Tensor) -> torch.Tensor:
        """Packed states (N, H) at ``at`` (B, S): (B, S, H), a zero row where ``at`` is N."""
        states = torch.cat([states, states.new_zeros(1, states.shape[1])])
        return states.index_select(0, at.flatten()).unflatten(0, at.shape)

    def run(cell: GRUCell, inputs: torch.Tensor, at: torch.Tensor) -> torch.Tensor:
        """One direction of one layer over the packed ``inputs`` (N, in), unpacked at ``at`` (B, S)."""
        return unpacked(gru_sequence(cell.W(inputs), None, cell.U_rz.weight, cell.U.weight, counts), at)

    cells = [c for c in encoder.cells() if isinstance(c, GRUCell)]
    if encoder.backward_cell is None:
        out = run(cells[0], x[batch_rows, steps], forward_at)
        final = out[:, -1]
    else:  # both directions as one stacked recurrence: each step one batched product of the two
        ahead, back_cell = cells[0], cells[-1]
        both = gru_sequence(
            torch.stack([ahead.W(x[batch_rows, steps]), back_cell.W(x[batch_rows, backward_positions])]),
            None,
            torch.stack([ahead.U_rz.weight, back_cell.U_rz.weight]),
            torch.stack([ahead.U.weight, back_cell.U.weight]),
            counts,
        )
        out, back = unpacked(both[0], forward_at), unpacked(both[1], backward_at)
        out, final = torch.cat([out, back], dim=2), torch.cat([out[:, -1], back[:, 0]], dim=1)
    out = encoder.dropout(out)
    for layer, cell in enumerate(cells[1 : len(encoder.forward_cells)], start=2):
        below = out
        out = run(cell, below[batch_rows, steps], forward_at)
        final = out[:, -1]
        out = encoder.dropout(out)
        if encoder.residual_from and layer >= encoder.residual_from:
            out = out + below
            final = final + below[torch.arange(B, device=x.device), lengths - 1]
    return out, final
