"""Adadelta's update as one loop in C: every parameter read and written once per step, split over
threads, torch's operations in torch's order, equal to torch's update within float32 rounding.

torch's update is eleven passes over each parameter-sized tensor (``optim._update``); this is one.
It fuses the multiply-adds that torch's own vectorized kernels fuse and nothing else; its square
roots are correctly rounded, where torch's vectorized ones (Sleef's, on AVX2 and AVX-512 CPUs)
may be one unit in the last place off, so the two agree to float32 rounding rather than bit for
bit (``tests/unit/test_optim.py`` states the tolerance). The loop also multiplies each gradient
by the gradient-norm clipping's factor as it reads it, as ``clip_grad_norm_`` would have done in a
pass of its own: the same float32 product, so the update is the same.

The source is compiled on first use and cached (``c_library``); where no compiler works, ``load()``
returns None and ``problem()`` says why: the caller keeps the pure-torch update.
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence

import torch

from .c_library import RUN_PARTS, CLibrary

SOURCE = (
    RUN_PARTS
    + r"""
#include <math.h>

typedef struct {
    float **p, **g, **sq, **acc;
    const long *n;
    int k;
    long start, end; /* this thread's elements, counted over all parameters */
    float rho, one_minus_rho, eps, neg_lr, scale;
} job_t;

/* torch/optim/adadelta.py, _single_tensor_adadelta, one element at a time:
   square_avg.mul_(rho).addcmul_(grad, grad, value=1 - rho)
   std = square_avg.add(eps).sqrt_()
   delta = acc_delta.add(eps).sqrt_().div_(std).mul_(grad)
   acc_delta.mul_(rho).addcmul_(delta, delta, value=1 - rho)
   param.add_(delta, alpha=-lr)
   on grad * scale (clip_grad_norm_'s torch._foreach_mul_, one float32 product), with the
   multiply-adds that torch's vectorized kernels fuse, fused here too (addcmul:
   fmadd(value * t1, t2, self); add with alpha: fmadd(other, alpha, self)). The square roots
   are IEEE's, correctly rounded; torch's vectorized ones (Sleef's) may differ in the last bit. */
static void update(float *restrict p, const float *restrict g, float *restrict sq, float *restrict acc,
                   long n, float rho, float one_minus_rho, float eps, float neg_lr, float scale) {
    for (long i = 0; i < n; i++) {
        float gi = g[i] * scale;
        float s = fmaf(one_minus_rho * gi, gi, sq[i] * rho);
        sq[i] = s;
        float std = sqrtf(s + eps);
        float d = sqrtf(acc[i] + eps);
        d = d / std;
        d = d * gi;
        acc[i] = fmaf(one_minus_rho * d, d, acc[i] * rho);
        p[i] = fmaf(d, neg_lr, p[i]);
    }
}

static void *run(void *arg) {
    job_t *j = (job_t *)arg;
    long offset = 0;
    for (int t = 0; t < j->k; t++) {
        long lo = j->start > offset ? j->start : offset;
        long hi = j->end < offset + j->n[t] ? j->end : offset + j->n[t];
        if (lo < hi)
            update(j->p[t] + (lo - offset), j->g[t] + (lo - offset), j->sq[t] + (lo - offset),
                   j->acc[t] + (lo - offset), hi - lo, j->rho, j->one_minus_rho, j->eps, j->neg_lr, j->scale);
        offset += j->n[t];
    }
    return 0;
}

/* One step over k parameters of n[t] elements each, in `threads` parts (run_parts: c_library).
   Returns 0, or -1 where a thread could not be started (that part then runs here). */
int adadelta_step(float **p, float **g, float **sq, float **acc, const long *n, int k, int threads,
                  float rho, float one_minus_rho, float eps, float neg_lr, float scale) {
    long total = 0;
    for (int t = 0; t < k; t++) total += n[t];
    threads = parts(threads);
    job_t jobs[MAX_PARTS];
    for (int t = 0; t < threads; t++) {
        job_t j = {p, g, sq, acc, n, k, total * t / threads, total * (t + 1) / threads,
                   rho, one_minus_rho, eps, neg_lr, scale};
        jobs[t] = j;
    }
    return run_parts(run, (char *)jobs, sizeof(job_t), threads);
}
"""
)

#: Fewer elements than this per thread are not worth a thread (one paper-size step has 18 M).
MIN_PER_THREAD = 1 << 18


def _declare(lib: ctypes.CDLL) -> None:
    lib.adadelta_step.restype = ctypes.c_int
    lib.adadelta_step.argtypes = [ctypes.POINTER(ctypes.c_void_p)] * 4 + [
        ctypes.POINTER(ctypes.c_long),
        ctypes.c_int,
        ctypes.c_int,
        *[ctypes.c_float] * 5,
    ]


LIBRARY = CLibrary("adadelta", SOURCE, _declare, openmp=True)


def load() -> ctypes.CDLL | None:
    """The loop's library, or None where it cannot be built or loaded here (``problem()``)."""
    return LIBRARY.load()


def problem() -> str | None:
    """Why the loop cannot be used here (after trying to build it), None where it can."""
    return LIBRARY.problem()


def step(
    lib: ctypes.CDLL,
    tensors: Sequence[tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]],
    lr: float,
    rho: float,
    eps: float,
    threads: int,
    grad_scale: float = 1.0,
) -> None:
    """One Adadelta update of every (param, grad, square_avg, acc_delta) in ``tensors``: contiguous
    float32 CPU tensors of equal sizes (the caller checks), in place, each gradient taken times
    ``grad_scale`` (a float32 value: the clipping's factor; the gradients themselves are left as
    they are). torch's scalars: rho, 1 - rho (computed in double), eps and -lr, each rounded to
    float32 as torch's float kernels do."""
    k = len(tensors)
    if k == 0:
        return
    columns = [(ctypes.c_void_p * k)(*(t[i].data_ptr() for t in tensors)) for i in range(4)]
    sizes = (ctypes.c_long * k)(*(t[0].numel() for t in tensors))
    total = sum(sizes)
    threads = max(1, min(threads, total // MIN_PER_THREAD))
    lib.adadelta_step(*columns, sizes, k, threads, rho, 1 - rho, eps, -lr, grad_scale)
