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
from typing import Any

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
    """The decoder of one source phrase, replicated over the live hypotheses (rows); of several
    sources (``also``) at once, each row reading its own source (``owner``)."""

    def __init__(self, model: Network, src_ids: list[int], allow_unk: bool, also: Sequence[list[int]] = ()):
        self.model = model
        device = next(model.parameters()).device
        self.device = device
        sources = [src_ids, *also]
        self.enc = _encode_each(model, sources, device)
        self.h = model.start(self.enc)  # the decoder state (rows, N)
        self.owner = torch.arange(self.enc.sources, device=device)  # each row's source
        self._widths = [len(ids) + 1 for ids in sources]  # each source's positions, </s> included
        self.y_prev = self.h.new_zeros(self.enc.sources, model.config.embed_dim)  # e(y_0) = 0: no begin symbol
        self.coverage: torch.Tensor | None = None
        self.banned = banned_tokens(model.config.tgt_vocab_size, allow_unk, device)

    def expand(self, rows: int) -> None:
        self.h = self.h.expand(rows, -1)
        self.y_prev = self.y_prev.expand(rows, -1)
        self.owner = self.owner.expand(rows)

    def log_probs(self) -> torch.Tensor:
        """Advance every row by one step: log p(y_t | y_<t, x) over the shortlist (rows, V)."""
        enc = self.enc
        if len(self._widths) > 1:  # the rows' sources, cut to the longest of them still searched
            enc = enc.select(self.owner, max(self._widths[i] for i in self.owner.unique().tolist()))
        else:
            enc = enc.select(self.owner)
        self.h, top, ctx, weights = self.model.step(self.y_prev, self.h, enc)
        if weights is not None:
            if weights.shape[1] < self.enc.width:  # positions cut off: no weight there
                weights = torch.nn.functional.pad(weights, (0, self.enc.width - weights.shape[1]))
            self.coverage = weights if self.coverage is None else self.coverage + weights
        logits = self.model.readout(top, self.y_prev, ctx)
        return torch.log_softmax(logits.float(), dim=-1)

    def advance(self, rows: torch.Tensor, tokens: torch.Tensor) -> None:
        """Keep the hypotheses ``rows`` (in that order), each extended by its token."""
        self.h = self.h[rows]
        self.owner = self.owner[rows]
        if self.coverage is not None:
            self.coverage = self.coverage[rows]
        self.y_prev = self.model.tgt_embed(tokens)


def _encode_each(model: Network, sources: Sequence[list[int]], device: torch.device) -> Any:
    """The </s>-terminated ``sources``, each encoded on its own (as a lone source is, so a batch of
    sources reads exactly the encodings each would alone), padded to the longest and joined."""
    encoded = []
    for src_ids in sources:
        src = torch.tensor([list(src_ids) + [EOS_ID]], dtype=torch.long, device=device)
        encoded.append(model.encode(src, torch.tensor([len(src_ids) + 1], dtype=torch.long, device=device)))
    if len(encoded) == 1:
        return encoded[0]
    width = max(enc.width for enc in encoded)
    first, *rest = (enc.padded(width) for enc in encoded)
    return first.cat(rest)


class Ensemble(Choosing):
    """The decoders of several networks (one target vocabulary) for one source phrase, stepped
    together over the same live hypotheses: log p of their averaged probabilities."""

    def __init__(self, models: Sequence[Network], src_ids: list[int], allow_unk: bool, also: Sequence[list[int]] = ()):
        if not models:
            raise ValueError("an ensemble needs at least one network")
        self.members = [Stepper(model, src_ids, allow_unk, also) for model in models]
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
