"""Adadelta in cache-sized pieces: torch's update, element for element, with far less memory
traffic.

torch's Adadelta makes about eleven passes over each parameter-sized tensor per step (decay,
accumulate, two square roots, divide, multiply, decay, accumulate, update) and allocates two
temporaries of the tensor's size. At the paper's size (18 M parameters, 73 MB per tensor) every
pass goes to main memory, and the optimizer took as long as the forward and backward passes of a
64-pair batch on a 2-core machine. ``ChunkedAdadelta`` runs the same operations, in the same
order and with the same rounding, on pieces of ``chunk`` elements that stay in the CPU's cache:
the results are bit-identical to ``torch.optim.Adadelta`` (tested), and its state (``step``,
``square_avg``, ``acc_delta``) and ``state_dict`` are the same, so runs resume across the two.

Only the plain settings are handled here (no weight decay, maximize, complex parameters,
capturable or differentiable); the constructor refuses others, and GPU tensors go through
torch's own update.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import torch

#: Elements per piece: the six pieces (param, grad, two states, two temporaries) of 256 KiB each
#: stay in a last-level cache. Much smaller pieces cost more in per-operation dispatch than they
#: save (8,192 elements: half the speed of torch's update on a 2-core AMD EPYC; 65,536: twice it).
CHUNK = 65536


class ChunkedAdadelta(torch.optim.Adadelta):
    def __init__(
        self, params: Iterable[torch.Tensor], lr: float = 1.0, rho: float = 0.9, eps: float = 1e-6, chunk: int = CHUNK
    ):
        super().__init__(params, lr=lr, rho=rho, eps=eps, foreach=False)
        if chunk < 1:
            raise ValueError("chunk must be at least 1")
        self.chunk = chunk

    @torch.no_grad()
    def step(self, closure: Callable[[], float] | None = None) -> float | None:  # type: ignore[override]
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            if group["weight_decay"] or group["maximize"] or group["capturable"] or group["differentiable"]:
                raise ValueError("ChunkedAdadelta handles the plain settings only")
            params: list[torch.Tensor] = []
            grads: list[torch.Tensor] = []
            square_avgs: list[torch.Tensor] = []
            acc_deltas: list[torch.Tensor] = []
            steps: list[torch.Tensor] = []
            self._init_group(group, params, grads, square_avgs, acc_deltas, steps)
            lr, rho, eps = float(group["lr"]), group["rho"], group["eps"]
            for p, g, sq, acc, step in zip(params, grads, square_avgs, acc_deltas, steps, strict=True):
                step += 1
                if (
                    p.device.type != "cpu"
                    or torch.is_complex(p)
                    or not (p.is_contiguous() and g.is_contiguous() and sq.is_contiguous() and acc.is_contiguous())
                ):
                    _update(p, g, sq, acc, lr, rho, eps)
                    continue
                p1, g1, sq1, acc1 = p.view(-1), g.view(-1), sq.view(-1), acc.view(-1)
                for s in range(0, p1.numel(), self.chunk):
                    e = s + self.chunk
                    _update(p1[s:e], g1[s:e], sq1[s:e], acc1[s:e], lr, rho, eps)
        return loss


def _update(
    p: torch.Tensor, g: torch.Tensor, sq: torch.Tensor, acc: torch.Tensor, lr: float, rho: float, eps: float
) -> None:
    """torch's single-tensor Adadelta update (torch/optim/adadelta.py), operation for operation."""
    sq.mul_(rho).addcmul_(g, g, value=1 - rho)
    std = sq.add(eps).sqrt_()
    delta = acc.add(eps).sqrt_()
    delta.div_(std).mul_(g)
    acc.mul_(rho).addcmul_(delta, delta, value=1 - rho)
    p.add_(delta, alpha=-lr)
