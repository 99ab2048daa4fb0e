"""The step-by-step decoder of the stacked architectures (rnnsearch, gnmt), for ``search``.

The same interface as ``search._Stepper`` (the paper's network): ``log_probs`` advances every
live hypothesis by one ``decoder.step`` and returns log p(y_t | y_<t, x) over the vocabulary,
``advance`` keeps some hypotheses and extends them, exactly as ``decode_outputs`` runs under
teacher forcing, so a candidate's log p is the score ``sequence_log_probs`` gives the pair.

For attention models it also keeps each hypothesis's **coverage**: the attention weights summed
over its steps so far, one value per source position (GNMT's coverage penalty reads it).
"""

from __future__ import annotations

import torch

from ..data.vocab import EOS_ID
from ..model.stacked import StackedEncoderDecoder
from .stepping import Choosing, banned_tokens


class StackedStepper(Choosing):
    def __init__(self, model: StackedEncoderDecoder, src_ids: list[int], allow_unk: bool):
        self.model = model
        device = next(model.parameters()).device
        src = torch.tensor([list(src_ids) + [EOS_ID]], dtype=torch.long, device=device)
        src_len = torch.tensor([len(src_ids) + 1], dtype=torch.long, device=device)
        self.enc = model.encode(src, src_len)
        self.h = model.decoder.start(self.enc)  # the packed state of every layer (rows, L * S)
        self.y_prev = self.h.new_zeros(1, model.config.embed_dim)  # e(y_0) = 0
        self.coverage = self.h.new_zeros(1, src.shape[1])
        self.banned = banned_tokens(model.config.tgt_vocab_size, allow_unk, device)

    def expand(self, rows: int) -> None:
        self.h = self.h.expand(rows, -1)
        self.y_prev = self.y_prev.expand(rows, -1)
        self.coverage = self.coverage.expand(rows, -1)

    def log_probs(self) -> torch.Tensor:
        rows = self.h.shape[0]
        enc = self.enc.select(torch.zeros(rows, dtype=torch.long, device=self.h.device))
        self.h, top, ctx, weights = self.model.decoder.step(self.y_prev, self.h, enc)
        if weights is not None:
            self.coverage = self.coverage + weights
        logits = self.model.decoder.readout(top, self.y_prev, ctx)
        return torch.log_softmax(logits.float(), dim=-1)

    def advance(self, rows: torch.Tensor, tokens: torch.Tensor) -> None:
        self.h = self.h[rows]
        self.coverage = self.coverage[rows]
        self.y_prev = self.model.tgt_embed(tokens)
