"""Attention: where the decoder looks in the source at each step.

With query q (the decoder state, Q units) and the encoder memory h_1 .. h_S (D units)::

    a_j  = softmax_j(e_j)         over the real positions j only (padding gets weight 0)
    ctx  = sum_j a_j h_j          the context vector (D units)

and the score e_j by kind:

    additive   e_j = v_a^T tanh(W_a q + U_a h_j)      Bahdanau et al. (2015), appendix A.1.2
    dot        e_j = q^T h_j                          Luong et al. (2015), needs Q = D
    general    e_j = q^T W_a h_j                      Luong et al. (2015)

``none`` is the encoder-decoder of Cho et al. (2014): one fixed context, the phrase summary.

``U_a h_j`` (additive) and ``W_a h_j`` (general) do not depend on the query: ``keys`` computes
them once per source, and every decoder step of every target of that source reuses them.
"""

from __future__ import annotations

import torch
from torch import nn

from .cho2014 import Project

ATTENTIONS = ("none", "additive", "dot", "general")


class Attention(nn.Module):
    def __init__(self, kind: str, query_dim: int, memory_dim: int, attention_dim: int):
        super().__init__()
        if kind not in ATTENTIONS or kind == "none":
            raise ValueError(f"attention must be one of {ATTENTIONS[1:]}, not {kind!r}")
        if kind == "dot" and query_dim != memory_dim:
            raise ValueError(
                f"dot attention needs decoder state and encoder memory of one size "
                f"({query_dim} != {memory_dim}); use general attention"
            )
        self.kind = kind
        if kind == "additive":
            self.W_a = nn.Linear(query_dim, attention_dim)  # carries the bias of the sum
            self.U_a = nn.Linear(memory_dim, attention_dim, bias=False)
            self.v_a = nn.Linear(attention_dim, 1, bias=False)
        elif kind == "general":
            self.W_a = nn.Linear(memory_dim, query_dim, bias=False)

    def keys(self, memory: torch.Tensor) -> torch.Tensor:
        """The query-independent part of the scores, once per source: (B, S, A) or (B, S, Q)."""
        if self.kind == "additive":
            return self.U_a(memory)
        if self.kind == "general":
            return self.W_a(memory)
        return memory

    def forward(
        self,
        query: torch.Tensor,
        keys: torch.Tensor,
        memory: torch.Tensor,
        real: torch.Tensor,
        project: Project | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(ctx (B, D), a (B, S)) for query (B, Q), keys, memory (B, S, D), real (B, S) bool;
        ``project``: the additive score's W_a q computed another way (``Project``)."""
        if self.kind == "additive":
            wq = self.W_a(query) if project is None else project(self.W_a, query)
            e = self.v_a(torch.tanh(wq.unsqueeze(1) + keys)).squeeze(2)
        else:
            e = torch.bmm(keys, query.unsqueeze(2)).squeeze(2)
        a = torch.softmax(e.masked_fill(~real, float("-inf")), dim=1)
        return torch.bmm(a.unsqueeze(1), memory).squeeze(1), a
