"""The training computation of the stacked sentence networks (rnnsearch, gnmt: ``model.stacked``).

The model's function, log p(target|source) per pair or its label-smoothed form
(``label_smoothing``), computed in another order for speed:

* the encoder as ``packed_encoder`` (each GRU direction and layer one ``gru_sequence`` over the
  real positions, its backward pass written out), its output in the model's padded layout;
* the decoder's teacher-forced steps and the readout as the model runs them (``decode_outputs``,
  ``Decoder.readout_features``), over the padded batch, so that dropout draws the same masks,
  but the cells' input projections' weight gradients taken once over all steps
  (``deferred_weights``; a decoder GRU step as a one-step ``gru_sequence`` measured no faster);
* the output layer, the log-softmax and the (smoothed) pick over the real target positions only,
  in one (N, V) buffer that becomes the logits' gradient in place (``smoothed_output``).

The parameters and the random numbers drawn are the model's; only the order of the arithmetic
differs: ``tests/unit/test_stacked_log_probs.py`` checks values and gradients against
``label_smoothing.smoothed_log_probs`` over the model's teacher-forced logits.

``bf16_steps`` (``train-nmt --bf16-steps``): the products each decoder step applies, the cells'
input projections and recurrent matrices and the attention's query projection, with bfloat16
operands (``DeferredWeights(torch.bfloat16)``: their weights' gradients stay float32); all else,
the encoder, the readout, the output layer and every element-wise operation, float32 as above.
An approximation, opt-in: the same function to bfloat16's rounding of those products' operands
and results (``tests/unit/test_stacked_log_probs.py`` states the tolerance). ``bf16_output``
(``train-nmt --bf16-output``, with or without it): the output layer's products likewise
(``target_log_probs``).
"""

from __future__ import annotations

from typing import Any, TypeGuard

import torch
from torch import nn

from ..model.encoders import Encoder
from .deferred_weights import DeferredWeights
from .packed_encoder import packed_encoder
from .smoothed_output import PairObjective, pair_log_probs


def is_stacked_network(model: object) -> TypeGuard[Any]:
    """Whether ``model`` is a stacked encoder-decoder this computation runs: its encoder an
    ``encoders.Encoder`` reached through ``source_embeddings`` and ``encoded``, its decoder with a
    ``readout_features`` and an output layer ``G_l`` with a bias."""
    decoder = getattr(model, "decoder", None)
    return (
        isinstance(getattr(model, "encoder", None), Encoder)
        and all(hasattr(model, name) for name in ("source_embeddings", "encoded", "decode_outputs"))
        and hasattr(decoder, "readout_features")
        and isinstance(getattr(decoder, "G_l", None), nn.Linear)
    )


#: A run's record of ``bf16_steps`` (its ``precision``): a run resumes only with the same.
BF16_STEPS_PRECISION = "bfloat16 decoder steps"
#: Why ``bf16_steps`` is refused for another network.
BF16_STEPS_NETWORKS = "--bf16-steps: only the recurrent attention networks (rnnsearch, gnmt) have decoder steps"


class StackedLogProbs(PairObjective):
    """The stacked networks' objective (``PairObjective``), computed as the module text says."""

    def __init__(self, model: Any, eps: float = 0.0, bf16_steps: bool = False, bf16_output: bool = False):
        super().__init__(model, eps)
        self.bf16_steps, self.output_operands = bf16_steps, torch.bfloat16 if bf16_output else None

    def forward(
        self, src: torch.Tensor, src_len: torch.Tensor, tgt: torch.Tensor, tgt_len: torch.Tensor
    ) -> torch.Tensor:
        m = self.model
        enc = m.encoded(*packed_encoder(m.encoder, m.source_embeddings(src), src_len), src_len)
        if self.bf16_steps:
            steps = DeferredWeights(torch.bfloat16)
            tops, y_prev, ctxs, _ = m.decode_outputs(enc, tgt, steps.linear, steps.linear)
        else:
            tops, y_prev, ctxs, _ = m.decode_outputs(enc, tgt, DeferredWeights().linear)
        u = m.decoder.readout_features(tops, y_prev, ctxs)  # (B, T, R)
        return pair_log_probs(u, m.decoder.G_l, tgt, tgt_len, self.eps, self.output_operands)
