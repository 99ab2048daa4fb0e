"""The training objective: log p(target|source) per pair, or its label-smoothed form.

Label smoothing (Szegedy et al. 2016, section 7; the Transformer's regulariser, Vaswani et al.
2017, 0.1) trains each target position towards a mixture of the one-hot target and the uniform
distribution over the K symbols a target can be (the target vocabulary without ``<pad>``)::

    q_t = (1 - eps) onehot(y_t) + eps / K                     over the K symbols
    smoothed log-likelihood of a pair = sum_t sum_v q_t(v) log p(v | y_<t, x)
                                      = sum_t (1 - eps) log p(y_t | ..) + eps mean_v log p(v | ..)

the sum over the target tokens and ``</s>``, as ``sequence_log_probs`` sums log p. The training
loss is its negative, per pair as before: only the loss changes. Validation (held-out
perplexity), the scorers, the features and the search read the model's log p itself
(``sequence_log_probs``), never this.

``training_objective(model, eps)`` is what a training step calls: for eps 0 the computation of
log p that training has always used (``packed_log_probs``: cho2014's packed path, the plain one
for the other networks), unchanged; for eps > 0 the smoothed form over the teacher-forced
logits, for every network (cho2014's packed computation keeps only the target's log p of each
position, so a smoothed cho2014 run takes the plain path, slower). The stacked sentence networks
(rnnsearch, gnmt) compute either form as ``stacked_log_probs`` does, the transformer as
``transformer_log_probs`` does: the same function in a faster order.
"""

from __future__ import annotations

import torch
from torch import nn

from ..data.vocab import PAD_ID
from ..model.cho2014 import token_log_probs
from ..model.network import Network
from .loop import TrainingError
from .packed_log_probs import training_log_probs
from .smoothed_output import BF16_OUTPUT_NETWORKS, PairObjective, check_smoothing
from .stacked_log_probs import BF16_STEPS_NETWORKS, StackedLogProbs, is_stacked_network
from .transformer_log_probs import TransformerLogProbs, is_transformer


def smoothed_log_probs(logits: torch.Tensor, tgt: torch.Tensor, tgt_len: torch.Tensor, eps: float) -> torch.Tensor:
    """The smoothed log-likelihood of each pair (B,) (see the module docstring) from the
    teacher-forced logits (B, T, V) of targets (B, T) of ``tgt_len`` tokens (``</s>`` included).
    For eps 0: log p(target|source) exactly as ``sequence_log_probs`` computes it."""
    check_smoothing(eps)
    mask = torch.arange(tgt.shape[1], device=tgt.device).unsqueeze(0) < tgt_len.unsqueeze(1)
    target = token_log_probs(logits, tgt)  # (B, T), in at least float32
    if eps > 0.0:
        logp = torch.log_softmax(logits.to(target.dtype), dim=-1)  # (B, T, V)
        vocabulary = logp.shape[-1]
        uniform = (logp.sum(-1) - logp[..., PAD_ID]) / (vocabulary - 1)  # mean over the K symbols
        target = (1.0 - eps) * target + eps * uniform
    return target.masked_fill(~mask, 0.0).sum(1)


class SmoothedLogProbs(PairObjective):
    """Any network's smoothed objective (``PairObjective``) from its teacher-forced logits."""

    def __init__(self, model: Network, eps: float):
        super().__init__(model, eps)

    def forward(
        self, src: torch.Tensor, src_len: torch.Tensor, tgt: torch.Tensor, tgt_len: torch.Tensor
    ) -> torch.Tensor:
        return smoothed_log_probs(self.model(src, src_len, tgt), tgt, tgt_len, self.eps)


def training_objective(
    model: Network, eps: float = 0.0, bf16_steps: bool = False, bf16_output: bool = False
) -> nn.Module:
    """What a training step maximises, per pair: log p(target|source) (eps 0: the training
    computation of ``packed_log_probs``, unchanged) or its label-smoothed form. ``bf16_steps``:
    the decoder steps' products with bfloat16 operands (``stacked_log_probs``; stacked networks
    only); ``bf16_output``: the output layer's (``target_log_probs``; stacked networks and the
    transformer); else a ``TrainingError``."""
    if is_stacked_network(model):  # the same function, computed faster (stacked_log_probs)
        return StackedLogProbs(model, eps, bf16_steps, bf16_output)
    if bf16_steps:
        raise TrainingError(BF16_STEPS_NETWORKS)
    if is_transformer(model):  # likewise, its output layer over the real positions only
        return TransformerLogProbs(model, eps, bf16_output)
    if bf16_output:
        raise TrainingError(BF16_OUTPUT_NETWORKS)
    return SmoothedLogProbs(model, eps) if eps > 0.0 else training_log_probs(model)
