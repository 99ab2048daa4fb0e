"""The step-by-step decoder of ``search`` (``Stepper``), over the ``network.Network`` interface of
any architecture, and what it offers the search: the tokens never proposed (``banned_tokens``)
and which tokens may be proposed at a step (``Choosing``).

``Stepper.log_probs`` advances every live hypothesis by one ``Network.step`` and returns
log p(y_t | y_<t, x) over the vocabulary; ``advance`` keeps some hypotheses and extends them,
exactly as ``decode_outputs`` runs under teacher forcing, so a candidate's log p is the score
``sequence_log_probs`` gives the pair.

For attention models it also keeps each hypothesis's **coverage**: the attention weights summed
over its steps so far, one value per source position (GNMT's coverage penalty reads it); None
for a network without attention.

``Ensemble`` steps several networks of one vocabulary together, as fairseq's and Marian's
ensembles do: at every step the log of their probabilities averaged,
log (1/K) sum_k p_k(y_t | y_<t, x); its coverage is the members' coverages averaged (those with
attention). A candidate's log p is then the sum of those per-step ensemble scores.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from ..data.vocab import EOS_ID, PAD_ID, UNK_ID
from ..model.network import Network


def banned_tokens(vocab_size: int, allow_unk: bool, device: torch.device) -> torch.Tensor:
    """The target tokens never proposed: padding, and <unk> unless ``allow_unk``."""
    banned = torch.zeros(vocab_size, dtype=torch.bool, device=device)
    banned[PAD_ID] = True
    if not allow_unk:
        banned[UNK_ID] = True
    return banned


class Choosing:
    """What every stepper shares: which tokens may be proposed at a step (``banned``: padding,
    and <unk> unless allowed)."""

    banned: torch.Tensor

    def choosable(self, logp: torch.Tensor, t: int, max_length: int) -> torch.Tensor:
        """``logp`` at step ``t`` with the tokens that may not be proposed at -inf: </s> first,
        everything but </s> at the length limit."""
        if t == max_length:
            keep = torch.full_like(logp, float("-inf"))
            keep[:, EOS_ID] = logp[:, EOS_ID]
            return keep
        banned = self.banned
        if t == 0:
            banned = banned.clone()
            banned[EOS_ID] = True
        return logp.masked_fill(banned, float("-inf"))


class Stepper(Choosing):
    """The decoder of one source phrase, replicated over the live hypotheses (rows)."""

    def __init__(self, model: Network, src_ids: list[int], allow_unk: bool):
        self.model = model
        device = next(model.parameters()).device
        src = torch.tensor([list(src_ids) + [EOS_ID]], dtype=torch.long, device=device)
        src_len = torch.tensor([len(src_ids) + 1], dtype=torch.long, device=device)
        self.device = device
        self.enc = model.encode(src, src_len)
        self.h = model.start(self.enc)  # the decoder state (rows, N)
        self.y_prev = self.h.new_zeros(1, model.config.embed_dim)  # e(y_0) = 0: no begin symbol
        self.coverage: torch.Tensor | None = None
        self.banned = banned_tokens(model.config.tgt_vocab_size, allow_unk, device)

    def expand(self, rows: int) -> None:
        self.h = self.h.expand(rows, -1)
        self.y_prev = self.y_prev.expand(rows, -1)

    def log_probs(self) -> torch.Tensor:
        """Advance every row by one step: log p(y_t | y_<t, x) over the shortlist (rows, V)."""
        rows = self.h.shape[0]
        enc = self.enc.select(torch.zeros(rows, dtype=torch.long, device=self.h.device))
        self.h, top, ctx, weights = self.model.step(self.y_prev, self.h, enc)
        if weights is not None:
            self.coverage = weights if self.coverage is None else self.coverage + weights
        logits = self.model.readout(top, self.y_prev, ctx)
        return torch.log_softmax(logits.float(), dim=-1)

    def advance(self, rows: torch.Tensor, tokens: torch.Tensor) -> None:
        """Keep the hypotheses ``rows`` (in that order), each extended by its token."""
        self.h = self.h[rows]
        if self.coverage is not None:
            self.coverage = self.coverage[rows]
        self.y_prev = self.model.tgt_embed(tokens)


class Ensemble(Choosing):
    """The decoders of several networks (one target vocabulary) for one source phrase, stepped
    together over the same live hypotheses: log p of their averaged probabilities."""

    def __init__(self, models: Sequence[Network], src_ids: list[int], allow_unk: bool):
        if not models:
            raise ValueError("an ensemble needs at least one network")
        self.members = [Stepper(model, src_ids, allow_unk) for model in models]
        self.device = self.members[0].device
        self.banned = self.members[0].banned
        self.coverage: torch.Tensor | None = None

    def expand(self, rows: int) -> None:
        for member in self.members:
            member.expand(rows)

    def log_probs(self) -> torch.Tensor:
        """Advance every member by one step: log (1/K) sum_k p_k(y_t | y_<t, x) (rows, V)."""
        each = torch.stack([member.log_probs() for member in self.members])
        coverages = [member.coverage for member in self.members if member.coverage is not None]
        self.coverage = torch.stack(coverages).mean(0) if coverages else None
        return torch.logsumexp(each, dim=0) - math.log(len(self.members))

    def advance(self, rows: torch.Tensor, tokens: torch.Tensor) -> None:
        """Keep the hypotheses ``rows`` (in that order) in every member, each extended by its token."""
        for member in self.members:
            member.advance(rows, tokens)
