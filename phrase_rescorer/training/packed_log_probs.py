"""The training computation of log p(target|source): the model's function, without the padding work.

``sequence_log_probs`` (the model module) is the one definition of the score, and rescoring and
validation use it unchanged. Training computes the same per-pair log p in another order, for
speed, and ``tests/unit/test_packed_training.py`` checks it against that definition (values and
gradients within float32 rounding, and the first losses of a run):

* the sources are taken longest first, so that encoder step t runs only on the rows still inside
  their source (no ``torch.where`` over padded rows, no padded matrix products);
* the decoder likewise runs its step t only on the targets at least t + 1 tokens long, and the
  readout and the output layer only on real target positions (``N`` rows, N = target tokens +
  </s>), ending in one log-softmax and pick; the context terms of each row (C c, O_c c) are
  repeated over its steps by ``packed_rows.prefix_rows``, whose backward pass adds slices where
  indexing's would scatter on one thread;
* with the model's default cell (reset before U) and outside autocast, both recurrences run
  as ``gru_sequence``, their backward pass written out (the recurrent matrices' gradients in one
  product over all steps, no recurrent work on the encoder's zero initial state), their inputs
  projected for the real positions only; otherwise step by step under autograd, the per-step
  inputs from ``unbind`` and ``split`` of the all-steps projection (indexing ``x_proj[:, t]``
  instead cost a zero-filled gradient of the whole projection per step and per gate);
* the output layer, its log-softmax and the pick of the targets in one (N, V) buffer, which
  becomes the logits' gradient in place (``target_log_probs``: C loops on the CPU in float32).

The parameters, the GRU cell (reset before or after the recurrent matrix) and the summary are the
model's own; only the order of the arithmetic differs.
"""

from __future__ import annotations

import torch
from torch import nn

from ..model.cho2014 import GRU, sequence_log_probs
from ..model.network import Network, SummaryNetwork, is_summary_network
from .gru_sequence import gru_sequence
from .packed_rows import active_counts as _active_counts
from .packed_rows import last_states, prefix_rows
from .packed_rows import packed_index as _packed_index
from .target_log_probs import target_log_probs


class PackedLogProbs(nn.Module):
    """``forward(src, src_len, tgt, tgt_len)`` -> log p(target|source) per pair (B,), in batch order.

    A module (holding the model as its only child) so that torchrun's DDP wrapper sees the
    training computation as its forward pass."""

    def __init__(self, model: SummaryNetwork):
        super().__init__()
        self.model = model

    def forward(
        self, src: torch.Tensor, src_len: torch.Tensor, tgt: torch.Tensor, tgt_len: torch.Tensor
    ) -> torch.Tensor:
        m = self.model
        c = _encode(m, src, src_len)  # (B, H) in batch order
        return _decode_log_probs(m, c, tgt, tgt_len)


class PlainLogProbs(nn.Module):
    """``sequence_log_probs`` itself, as a module: the training computation of the architectures
    other than cho2014 (attention, stacked LSTMs), which have no packed form."""

    def __init__(self, model: Network):
        super().__init__()
        self.model = model

    def forward(
        self, src: torch.Tensor, src_len: torch.Tensor, tgt: torch.Tensor, tgt_len: torch.Tensor
    ) -> torch.Tensor:
        return sequence_log_probs(self.model, src, src_len, tgt, tgt_len)


def training_log_probs(model: Network) -> nn.Module:
    """What a training step calls: the packed computation for a network with cho2014's GRU
    summary (``network.SummaryNetwork``), else the plain one."""
    return PackedLogProbs(model) if is_summary_network(model) else PlainLogProbs(model)


def _step(gru: GRU, xrz: torch.Tensor, xh: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
    """``GRU.step`` with its input projection given as the (B, 2H) gate part and the (B, H) rest."""
    r, z = torch.sigmoid(xrz + gru.U_rz(h)).chunk(2, dim=1)
    recurrent = gru.U(r * h) if gru.cell == "reset_before" else r * gru.U(h)
    h_tilde = torch.tanh(xh + recurrent)
    return z * h + (1.0 - z) * h_tilde


def _written_out(gru: GRU, device: torch.device) -> bool:
    """Whether the recurrence runs as ``gru_sequence`` (its backward written out): the model's
    default cell, outside autocast (whose casts autograd's per-step operators carry)."""
    return gru.cell == "reset_before" and not torch.is_autocast_enabled(device.type)


def _encode(m: SummaryNetwork, src: torch.Tensor, src_len: torch.Tensor) -> torch.Tensor:
    H = m.config.hidden_dim
    lengths, order = torch.sort(src_len, descending=True, stable=True)
    lengths_list = lengths.tolist()
    counts = [n for n in _active_counts(lengths_list, src.shape[1]) if n]
    src = src[order]
    if _written_out(m.encoder, src.device):
        steps, rows = _packed_index(counts, src.device)
        x = m.encoder.W(m.src_embed(src[rows, steps]))  # (N, 3H), real positions only
        states = gru_sequence(x, None, m.encoder.U_rz.weight, m.encoder.U.weight, counts)
        h = last_states(states, counts, lengths_list)
    else:
        x_proj = m.encoder.W(m.src_embed(src))  # (B, S, 3H), all steps at once
        xrz, xh = x_proj.split([2 * H, H], dim=2)
        h = x_proj.new_zeros(src.shape[0], H)
        for n, a, b in zip(counts, xrz.unbind(1), xh.unbind(1), strict=False):
            new = _step(m.encoder, a[:n], b[:n], h[:n])
            h = new if n == h.shape[0] else torch.cat([new, h[n:]])
    c = m.summarize(h)
    return c[torch.argsort(order)]  # back to batch order


def _decode_log_probs(m: SummaryNetwork, c: torch.Tensor, tgt: torch.Tensor, tgt_len: torch.Tensor) -> torch.Tensor:
    H = m.config.hidden_dim
    B, T = tgt.shape
    lengths, order = torch.sort(tgt_len, descending=True, stable=True)
    counts = [n for n in _active_counts(lengths.tolist(), T) if n]
    tgt, c = tgt[order], c[order]
    h, ctx, oc = m.context_terms(c)
    y_prev = m.previous_word_embeddings(tgt)  # (B, T, E)
    # Real positions, step-major: row i at step t for i < counts[t].
    steps, rows = _packed_index(counts, tgt.device)
    y_rows = y_prev[rows, steps]  # e(y_{t-1}) of the real positions (N, E)
    if _written_out(m.decoder, tgt.device):
        x = m.decoder.W(y_rows) + prefix_rows(ctx, counts)  # (N, 3H), real positions only
        states = gru_sequence(x, h, m.decoder.U_rz.weight, m.decoder.U.weight, counts)
    else:
        x_proj = m.decoder.W(y_prev) + ctx.unsqueeze(1)  # (B, T, 3H)
        xrz, xh = x_proj.split([2 * H, H], dim=2)
        per_step = []  # step t: the states of the counts[t] rows still inside their target
        for n, a, b in zip(counts, xrz.unbind(1), xh.unbind(1), strict=False):
            h = _step(m.decoder, a[:n], b[:n], h[:n])
            per_step.append(h)
        states = torch.cat(per_step)
    u = m.readout_features(states, y_rows, prefix_rows(oc, counts))  # (N, R)
    token_logp = target_log_probs(u, m.G_l, tgt[rows, steps])  # through the (N, V) logits
    per_pair = torch.zeros(B, dtype=token_logp.dtype, device=tgt.device).index_add(0, rows, token_logp)
    return per_pair[torch.argsort(order)]  # back to batch order
