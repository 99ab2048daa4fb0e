"""The training computation of the transformer (``model.transformer``): its function, log
p(target|source) per pair or its label-smoothed form (``label_smoothing``), computed in another
order for speed.

The model computes the output layer over every position of the padded batch, (B, T, V) logits,
and ``label_smoothing.smoothed_log_probs`` takes their log-softmax twice (the pick and the mean)
over the padding too. Here the encoder and the decoder's layers run as the model runs them (so
dropout draws the same masks), then the final layer norm, and over the real target positions
only the output layer (the target embedding as its matrix, ``output_bias``), the log-softmax and
the (smoothed) pick, in one (N, V) buffer that becomes the logits' gradient in place
(``smoothed_output``; on the CPU in float32 its C loops). The parameters are the model's; only the
order of the arithmetic differs: ``tests/unit/test_stacked_log_probs.py`` checks values and
gradients against the model's own objective. ``bf16_output`` (``train-nmt --bf16-output``): the
output layer's products with bfloat16 operands (``target_log_probs``), an approximation, opt-in.
"""

from __future__ import annotations

from typing import Any, TypeGuard

import torch
from torch.nn import functional as F

from ..model.transformer import TransformerEncoderDecoder
from .smoothed_output import PairObjective, pair_log_probs


def is_transformer(model: object) -> TypeGuard[TransformerEncoderDecoder]:
    """Whether ``model`` is the transformer this computation runs."""
    return isinstance(model, TransformerEncoderDecoder)


class _TiedOutput:
    """The transformer's output layer as ``smoothed_output`` takes one: the target embedding as
    its matrix, ``output_bias`` as its bias (the model's own parameters, not copies)."""

    def __init__(self, model: TransformerEncoderDecoder):
        self.weight, self.bias = model.tgt_embed.weight, model.output_bias

    def __call__(self, u: torch.Tensor) -> torch.Tensor:
        return F.linear(u, self.weight, self.bias)


class TransformerLogProbs(PairObjective):
    """The transformer's objective (``PairObjective``), computed as the module text says."""

    def __init__(self, model: TransformerEncoderDecoder, eps: float = 0.0, bf16_output: bool = False):
        super().__init__(model, eps)
        self.output_operands = torch.bfloat16 if bf16_output else None

    def forward(
        self, src: torch.Tensor, src_len: torch.Tensor, tgt: torch.Tensor, tgt_len: torch.Tensor
    ) -> torch.Tensor:
        m: Any = self.model
        tops, _, _, _ = m.decode_outputs(m.encode(src, src_len), tgt, weights=False)
        return pair_log_probs(m.decoder_norm(tops), _TiedOutput(m), tgt, tgt_len, self.eps, self.output_operands)
