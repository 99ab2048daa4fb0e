"""What every step-by-step decoder of ``search`` shares: the tokens never proposed
(``banned_tokens``) and which tokens may be proposed at a step (``Choosing``).

The steppers are ``search._Stepper`` (the paper's network) and ``stacked_step.StackedStepper``
(the other architectures); ``search.make_stepper`` picks one.
"""

from __future__ import annotations

import torch

from ..data.vocab import EOS_ID, PAD_ID, UNK_ID


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
