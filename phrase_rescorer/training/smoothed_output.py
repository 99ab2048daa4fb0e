"""The label-smoothed log-likelihood of the targets from the output layer, in one (N, V) buffer.

``label_smoothing.smoothed_log_probs`` computes, per target position (module text there)::

    (1 - eps) log p(y_t | ..) + eps mean_{v != <pad>} log p(v | ..)

from the padded (B, T, V) logits: the log-softmax twice (once for the pick, once for the mean),
each with its backward pass, over the padding too. Since log p(v) = z_v - lse (z the logits,
lse = log sum exp z), the mean is ``(sum_v z_v - z_pad) / K - lse`` (K = V - 1) and the
gradient of a position's term with respect to its logits is::

    (1 - eps) onehot(y_t) + (eps / K) [v != <pad>] - softmax(z)

``smoothed_target_log_probs`` computes both for the N real positions only: the output layer's
product (its bias added in it), one log-sum-exp and one row sum forward; backward, the kept
logits become the gradient in place (one exponential pass and two additions), then the layer's
three gradients. On the CPU in float32 both run in ``target_log_probs``' C loops (the row sum
taken in the forward loop, the smoothing's terms added as the backward loop writes the gradient:
one pass over the buffer each way); for eps 0 it is ``target_log_probs`` itself.
``tests/unit/test_smoothed_output.py`` checks values and gradients against
``smoothed_log_probs`` (within float32 rounding; to 1e-12 in float64). Each graph can be
backpropagated once (no double backward), as training does.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.autograd.function import once_differentiable

from ..data.vocab import PAD_ID
from .target_log_probs import OutputLayer, compiled, compiled_smoothed, layer_logits, target_log_probs

#: A run's record of ``--bf16-output`` (its ``precision``, after the decoder steps' where both).
BF16_OUTPUT_PRECISION = "bfloat16 output layer"
#: Why ``--bf16-output`` is refused for another network.
BF16_OUTPUT_NETWORKS = (
    "--bf16-output: only the sentence networks (rnnsearch, gnmt, transformer) compute their output layer this way"
)


def check_smoothing(eps: float) -> None:
    """Refuse a label smoothing outside [0, 1)."""
    if not 0.0 <= eps < 1.0:
        raise ValueError(f"label smoothing must be at least 0 and below 1, not {eps}")


class PairObjective(nn.Module):
    """A training objective: ``forward(src, src_len, tgt, tgt_len)`` -> the (smoothed, eps > 0)
    log-likelihood per pair (B,), in batch order. A module holding the network as its only
    child, so that torchrun's DDP wrapper sees it as the forward pass."""

    def __init__(self, model: Any, eps: float = 0.0):
        super().__init__()
        check_smoothing(eps)
        self.model, self.eps = model, eps


def pair_log_probs(
    u: torch.Tensor,
    layer: OutputLayer,
    tgt: torch.Tensor,
    tgt_len: torch.Tensor,
    eps: float,
    operands: torch.dtype | None = None,
) -> torch.Tensor:
    """The (smoothed) log-likelihood of each pair (B,) from the output layer's padded input u
    (B, T, R) of targets (B, T) of ``tgt_len`` positions: :func:`smoothed_target_log_probs` over
    the real positions only, summed per pair."""
    real = torch.arange(tgt.shape[1], device=tgt.device).unsqueeze(0) < tgt_len.unsqueeze(1)
    rows = real.nonzero()[:, 0]  # the batch row of each real position
    terms = smoothed_target_log_probs(u[real], layer, tgt[real], eps, operands)
    return terms.new_zeros(tgt.shape[0]).index_add(0, rows, terms)


def smoothed_target_log_probs(
    u: torch.Tensor, layer: OutputLayer, targets: torch.Tensor, eps: float, operands: torch.dtype | None = None
) -> torch.Tensor:
    """The smoothed log-likelihood term (N,) of each position from the output layer's input
    u (N, R) and the targets (N,) (module text); for eps 0, log p(target) itself. ``operands``:
    the layer's products' (``target_log_probs``, ``--bf16-output``); None: the tensors' own."""
    check_smoothing(eps)
    if eps == 0.0 and u.dtype == torch.float32:
        return target_log_probs(u, layer, targets, operands)
    lib = compiled(u, layer)
    if lib is not None:
        return compiled_smoothed(u, layer, targets, lib, eps, PAD_ID, operands)
    if layer.bias is None or operands is not None or torch.is_autocast_enabled(u.device.type):  # torch's operators
        logp = torch.log_softmax(layer_logits(u, layer, operands).float(), dim=1)
        uniform = (logp.sum(1) - logp[:, PAD_ID]) / (logp.shape[1] - 1)
        return (1.0 - eps) * logp.gather(1, targets.unsqueeze(1)).squeeze(1) + eps * uniform
    return _SmoothedOutput.apply(u, layer.weight, layer.bias, targets, eps)


class _SmoothedOutput(torch.autograd.Function):
    @staticmethod
    def forward(
        ctx: Any, u: torch.Tensor, w: torch.Tensor, b: torch.Tensor, targets: torch.Tensor, eps: float
    ) -> torch.Tensor:
        logits = torch.addmm(b, u, w.t())  # (N, V)
        K = logits.shape[1] - 1
        lse = torch.logsumexp(logits, dim=1)
        picked = logits.gather(1, targets.unsqueeze(1)).squeeze(1) - lse
        uniform = (logits.sum(1) - logits[:, PAD_ID]) / K - lse
        ctx.eps = eps
        ctx.save_for_backward(u, w, targets, logits, lse)
        return (1.0 - eps) * picked + eps * uniform

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        u, w, targets, logits, lse = ctx.saved_tensors
        eps, K = ctx.eps, logits.shape[1] - 1
        g = grad.unsqueeze(1)
        # The kept logits are nobody else's (the forward pass made them): they become the gradient.
        d = logits.sub_(lse.unsqueeze(1)).exp_().mul_(-g).add_(g * (eps / K))
        d[:, PAD_ID : PAD_ID + 1] -= g * (eps / K)
        d.scatter_add_(1, targets.unsqueeze(1), g * (1.0 - eps))
        du = d.mm(w) if ctx.needs_input_grad[0] else None
        dw = d.t().mm(u) if ctx.needs_input_grad[1] else None
        db = d.sum(0) if ctx.needs_input_grad[2] else None
        return du, dw, db, None, None
