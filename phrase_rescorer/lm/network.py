"""The CSLM: a feed-forward neural n-gram language model (Schwenk 2007; Cho et al. 2014, Table 1).

For an n-gram model, each of the n - 1 context words is projected to an embedding, the
embeddings are concatenated, passed through rectified linear layers, and a softmax over the
target shortlist gives p(w_t | w_{t-n+1} ... w_{t-1}). The paper's sizes: a 7-gram model, 512-d
embeddings (6 x 512 = 3,072 values), rectified layers of 1,536 and 1,024 units, weights drawn
uniformly from [-0.01, 0.01]. Every size is a parameter; ``PRESETS`` names the paper's and a
smaller one that trains in minutes on a CPU. Dropout (after each rectified layer, training only)
is not in the paper; the small preset uses it because a corpus of a few hundred thousand words
is far smaller than the paper's.

Sentence boundaries are those of n-gram LMs (KenLM, SRILM): the context before the first word is
``<s>`` repeated, and every sentence ends by predicting ``</s>``. Words outside the shortlist are
``<unk>`` (an ordinary class of the softmax, as in the paper's shortlist).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace
from typing import Any

import torch
from torch import nn


@dataclass(frozen=True)
class LMConfig:
    order: int = 7  # n: n - 1 context words
    embed_dim: int = 512
    hidden: tuple[int, ...] = (1536, 1024)
    vocab_size: int = 15000  # shortlist size, special symbols included (set from the data)
    dropout: float = 0.0
    init_range: float = 0.01

    def __post_init__(self) -> None:
        if self.order < 2:
            raise ValueError(f"order must be at least 2, not {self.order}")
        if self.embed_dim < 1 or any(h < 1 for h in self.hidden) or self.vocab_size < 5:
            raise ValueError("sizes must be positive and the vocabulary hold more than its 4 symbols")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), not {self.dropout}")

    @property
    def context(self) -> int:
        return self.order - 1

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["hidden"] = list(self.hidden)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> LMConfig:
        known = {f.name for f in fields(cls)}
        unknown = set(d) - known
        if unknown:
            raise ValueError(f"unknown CSLM settings {sorted(unknown)}")
        values = dict(d)
        if "hidden" in values:
            values["hidden"] = tuple(int(h) for h in values["hidden"])
        return cls(**values)

    def weight_shapes(self) -> dict[str, tuple[int, ...]]:
        """The shape of every weight of the network this configuration builds (checked against a
        model file before anything is allocated)."""
        shapes: dict[str, tuple[int, ...]] = {"embed.weight": (self.vocab_size, self.embed_dim)}
        width = self.context * self.embed_dim
        for i, h in enumerate(self.hidden):
            shapes[f"layers.{i}.weight"] = (h, width)
            shapes[f"layers.{i}.bias"] = (h,)
            width = h
        shapes["output.weight"] = (self.vocab_size, width)
        shapes["output.bias"] = (self.vocab_size,)
        return shapes


#: The paper's CSLM, and a model that reaches its best held-out perplexity on a 400k-word corpus
#: within about 20 minutes on two CPU cores (docs/results.md, "The CSLM and n-best reranking").
PRESETS: dict[str, LMConfig] = {
    "paper": LMConfig(),
    "small": LMConfig(order=5, embed_dim=256, hidden=(1024, 512), dropout=0.2),
}


def preset(name: str, **overrides: Any) -> LMConfig:
    return replace(PRESETS[name], **{k: v for k, v in overrides.items() if v is not None})


class CSLM(nn.Module):
    """contexts [B, n - 1] (token ids, oldest first) -> logits [B, vocab_size]."""

    def __init__(self, config: LMConfig):
        super().__init__()
        self.config = config
        self.embed = nn.Embedding(config.vocab_size, config.embed_dim)
        width = config.context * config.embed_dim
        layers = []
        for h in config.hidden:
            layers.append(nn.Linear(width, h))
            width = h
        self.layers = nn.ModuleList(layers)
        self.output = nn.Linear(width, config.vocab_size)
        self.dropout = nn.Dropout(config.dropout)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """The paper's initialisation: every weight and bias uniform in [-r, r]."""
        r = self.config.init_range
        for p in self.parameters():
            nn.init.uniform_(p, -r, r)

    def hidden_state(self, contexts: torch.Tensor) -> torch.Tensor:
        x = self.embed(contexts).flatten(1)
        for layer in self.layers:
            x = self.dropout(torch.relu(layer(x)))
        return x

    def forward(self, contexts: torch.Tensor) -> torch.Tensor:
        return self.output(self.hidden_state(contexts))

    def log_probs(self, contexts: torch.Tensor) -> torch.Tensor:
        """log p(w | context) for every shortlist word: [B, vocab_size]."""
        return torch.log_softmax(self.forward(contexts), dim=-1)
