"""The paper's Adadelta, fast on a CPU: torch's update compiled into one loop, or in cache-sized
pieces where no compiler is at hand; and the choice of the optimizer a run uses.

torch's Adadelta makes about eleven passes over each parameter-sized tensor per step (decay,
accumulate, two square roots, divide, multiply, decay, accumulate, update) and allocates two
temporaries of the tensor's size. At the paper's size (18 M parameters, 73 MB per tensor) every
pass goes to main memory, and the optimizer took as long as the forward and backward passes of a
64-pair batch on a 2-core machine. ``ChunkedAdadelta`` runs the same operations, in the same
order and with the same rounding, on pieces of ``chunk`` elements that stay in the CPU's cache:
the results are bit-identical to ``torch.optim.Adadelta`` (tested), and its state (``step``,
``square_avg``, ``acc_delta``) and ``state_dict`` are the same, so runs resume across the two.

``CompiledAdadelta`` goes further: one loop in C (``adadelta_loop``) reads param, grad and both
accumulators once and writes three, over all parameters in one call, split over the run's threads.
It computes torch's operations in torch's order and agrees with torch's update within float32
rounding (its square roots are correctly rounded, torch's vectorized ones may be a unit in the
last place off; tested). It needs the machine's C compiler on first use; where that fails the
run keeps ``ChunkedAdadelta`` and the command says why.

Only the plain settings are handled here (no weight decay, maximize, complex parameters,
capturable or differentiable); the constructor refuses others, and GPU tensors go through
torch's own update.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import torch
from torch.profiler import record_function

from . import adadelta_loop

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
    def step(  # type: ignore[override]
        self, closure: Callable[[], float] | None = None, grad_scale: float = 1.0
    ) -> float | None:
        """One update; each gradient taken times ``grad_scale`` (``clipped_step``'s factor), the
        gradients themselves left as they are."""
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
            flat: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]] = []
            for p, g, sq, acc, step in zip(params, grads, square_avgs, acc_deltas, steps, strict=True):
                step += 1
                if (
                    p.device.type != "cpu"
                    or torch.is_complex(p)
                    or not (p.is_contiguous() and g.is_contiguous() and sq.is_contiguous() and acc.is_contiguous())
                ):
                    _update(p, _scaled(g, grad_scale), sq, acc, lr, rho, eps)
                else:
                    flat.append((p.view(-1), g.view(-1), sq.view(-1), acc.view(-1)))
            self._update_flat(flat, lr, rho, eps, grad_scale)
        return loss

    def _update_flat(
        self,
        flat: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]],
        lr: float,
        rho: float,
        eps: float,
        grad_scale: float,
    ) -> None:
        """The update of contiguous CPU parameters, each viewed as one dimension."""
        for p, g, sq, acc in flat:
            for s in range(0, p.numel(), self.chunk):
                e = s + self.chunk
                _update(p[s:e], _scaled(g[s:e], grad_scale), sq[s:e], acc[s:e], lr, rho, eps)


class CompiledAdadelta(ChunkedAdadelta):
    """torch's Adadelta as one C loop over all float32 CPU parameters per step, on
    ``torch.get_num_threads()`` threads (torch's within float32 rounding; the state and
    ``state_dict`` are torch's, so runs resume across all three). Refused where the loop cannot
    be built: ``adadelta_loop.problem()`` says why."""

    def __init__(self, params: Iterable[torch.Tensor], lr: float = 1.0, rho: float = 0.9, eps: float = 1e-6):
        lib = adadelta_loop.load()
        if lib is None:
            raise RuntimeError(f"the compiled Adadelta loop cannot be built here: {adadelta_loop.problem()}")
        super().__init__(params, lr=lr, rho=rho, eps=eps)
        self._lib = lib

    def _update_flat(
        self,
        flat: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]],
        lr: float,
        rho: float,
        eps: float,
        grad_scale: float,
    ) -> None:
        same: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]] = []
        other: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]] = []
        for t in flat:
            (same if all(x.dtype == torch.float32 for x in t) else other).append(t)
        adadelta_loop.step(self._lib, same, lr, rho, eps, torch.get_num_threads(), grad_scale)
        if other:  # other dtypes: torch's update, in pieces
            super()._update_flat(other, lr, rho, eps, grad_scale)


#: The Adadelta implementations a run may use (``--optimizer-kernel``): compiled where it can be
#: built (else chunked, with a warning), or chunked (torch's operations, in cache-sized pieces).
KERNELS = ("compiled", "chunked")


def adam_fused(params: list[torch.Tensor]) -> bool:
    """Whether a run's Adam takes torch's fused update (``fused=True``): one kernel per parameter
    for the whole update, where the default ``foreach`` form makes about ten passes over each
    tensor (a medium rnnsearch's Adam step on one CPU thread: 29 ms instead of 103; the same
    update to float rounding, ``tests/unit/test_optim.py``; the state and ``state_dict`` are the
    same, so runs resume across the two). Other dtypes and devices keep the default, and so does
    a torch before 2.4 on the CPU (its fused Adam is CUDA's only)."""
    devices = ("cpu", "cuda") if _torch_version() >= (2, 4) else ("cuda",)
    return bool(params) and all(p.device.type in devices and p.dtype in (torch.float32, torch.float64) for p in params)


def _torch_version() -> tuple[int, int]:
    """torch's (major, minor): ``2.13.0+cpu`` is (2, 13)."""
    major, minor = torch.__version__.split(".")[:2]
    return int(major), int("".join(c for c in minor if c.isdigit()) or 0)


def _fused_again(adam: torch.optim.Optimizer) -> None:
    """After ``load_state_dict``: the loaded groups' own ``fused`` (None for a state saved by the
    default update) replaced by the fused update again, each step count where it wants it."""
    for group in adam.param_groups:
        group["fused"], group["foreach"] = True, None
        for p in group["params"]:
            state = adam.state.get(p, {})
            if "step" in state:
                state["step"] = state["step"].to(device=p.device, dtype=torch.float32)


def make_optimizer(
    params: Iterable[torch.Tensor], optimizer: str, lr: float, rho: float, eps: float, kernel: str = "compiled"
) -> torch.optim.Optimizer:
    """The optimizer of a run: the paper's Adadelta (``kernel`` compiled where it can be built and
    the parameters are on the CPU, else chunked), or Adam, the optimizer of sentence-level NMT
    toolkits (torch's fused update where every parameter is a float32 or float64 CPU or CUDA
    tensor: ``adam_fused``)."""
    params = list(params)
    if optimizer == "adam":
        if not adam_fused(params):
            return torch.optim.Adam(params, lr=lr)
        adam = torch.optim.Adam(params, lr=lr, fused=True)
        adam.register_load_state_dict_post_hook(_fused_again)
        return adam
    if kernel not in KERNELS:
        raise ValueError(f"unknown Adadelta kernel {kernel!r}; expected one of {', '.join(KERNELS)}")
    on_cpu = all(p.device.type == "cpu" for p in params)
    if kernel == "compiled" and on_cpu and adadelta_loop.load() is not None:
        return CompiledAdadelta(params, lr=lr, rho=rho, eps=eps)
    return ChunkedAdadelta(params, lr=lr, rho=rho, eps=eps)


def clipped_step(opt: torch.optim.Optimizer, max_norm: float) -> None:
    """``clip_grad_norm_`` over the optimizer's parameters, then ``opt.step()``. With
    ``CompiledAdadelta`` the clipping's factor is applied inside the update's loop, where the
    gradients are read anyway, instead of in a pass over them of its own: the same factor
    (torch's formula, ``min(max_norm / (norm + 1e-6), 1)`` in the gradients' dtype, rounded to
    float32 as torch's float32 multiply rounds it) and the same products, so the same update
    (tested); the gradients are left unscaled. The two parts run in the profiler's named ranges
    ``train.clip`` and ``train.optimizer``."""
    params = [p for group in opt.param_groups for p in group["params"]]
    grads = [p.grad for p in params if p.grad is not None]
    if not isinstance(opt, CompiledAdadelta) or not grads:
        with record_function("train.clip"):
            torch.nn.utils.clip_grad_norm_(params, max_norm)
        with record_function("train.optimizer"):
            opt.step()
        return
    with record_function("train.clip"), torch.no_grad():
        factor = float(torch.clamp(max_norm / (_total_norm(grads) + 1e-6), max=1.0))
    with record_function("train.optimizer"):
        opt.step(grad_scale=factor)


def _total_norm(grads: list[torch.Tensor]) -> torch.Tensor:
    """The 2-norm of all gradients together, as ``clip_grad_norm_`` computes it."""
    get_total_norm = getattr(torch.nn.utils, "get_total_norm", None)  # torch >= 2.6
    if get_total_norm is not None:
        return get_total_norm(grads, 2.0)
    return torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g, 2.0) for g in grads]), 2.0)


def _scaled(g: torch.Tensor, grad_scale: float) -> torch.Tensor:
    return g if grad_scale == 1.0 else g * grad_scale


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
