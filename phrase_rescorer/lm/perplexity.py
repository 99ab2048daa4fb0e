"""The CSLM's held-out figures: perplexity over the words of its shortlist, the convention of
KenLM's "Perplexity excluding OOVs", and over every word with an OOV scored as p(<unk>)."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import torch

from .network import CSLM
from .text import oov_mask


@dataclass
class Perplexity:
    """Held-out figures: perplexity over the in-shortlist tokens (KenLM's "excluding OOVs"), over
    every token with an OOV scored as p(<unk>), and the counts."""

    ppl: float
    ppl_with_unk: float
    tokens: int
    oovs: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@torch.no_grad()
def perplexity(model: CSLM, contexts: np.ndarray, targets: np.ndarray, batch: int = 4096) -> Perplexity:
    """Held-out figures of ``model`` on the device its weights are on."""
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    total = np.zeros(len(targets), dtype=np.float64)
    for start in range(0, len(targets), batch):
        c = torch.from_numpy(contexts[start : start + batch]).to(device)
        t = torch.from_numpy(targets[start : start + batch]).to(device)
        logp = model.log_probs(c).gather(1, t[:, None])[:, 0]
        total[start : start + batch] = logp.double().cpu().numpy()
    model.train(was_training)
    oov = oov_mask(targets)
    known = total[~oov]
    return Perplexity(
        ppl=math.exp(-known.mean()) if known.size else math.nan,
        ppl_with_unk=math.exp(-total.mean()) if total.size else math.nan,
        tokens=int(len(targets)),
        oovs=int(oov.sum()),
    )
