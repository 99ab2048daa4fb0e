"""Adadelta's update as one loop in C: every parameter read and written once per step, split over
threads, torch's operations in torch's order, equal to torch's update within float32 rounding.

torch's update is eleven passes over each parameter-sized tensor (``optim._update``); this is one.
It fuses the multiply-adds that torch's own vectorized kernels fuse and nothing else
(``-ffp-contract=off``); its square roots are correctly rounded, where torch's vectorized ones
(Sleef's, on AVX2 and AVX-512 CPUs) may be one unit in the last place off, so the two agree to
float32 rounding rather than bit for bit (``tests/unit/test_optim.py`` states the tolerance).
The C source below is compiled on first use with the machine's C compiler (``$CC``, else ``cc``)
for this CPU (``-march=native``, or ``-mcpu=native``, or the compiler's default target: the first
it accepts; vectorized) and loaded with ``ctypes``, which releases the GIL while it runs. The
library is kept in ``$PHRASE_RESCORER_CACHE`` (default ``$XDG_CACHE_HOME/phrase_rescorer``, else
``~/.cache/phrase_rescorer``) under a name that hashes the source, the flags and the macros the
compiler predefines for that target (its version and every instruction-set extension it will
use), so a cache shared by machines of different CPUs never hands one the other's instructions.
Building takes under a second, in an exclusive temporary directory; the file is synced, then
linked into place, and one already there (built by another process, perhaps loaded) is kept; a
cached file that does not load is built again.

Where no compiler works, ``load()`` returns None and ``problem()`` says why: the caller keeps the
pure-torch update.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shlex
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

import torch

SOURCE = r"""
#include <math.h>
#include <pthread.h>

typedef struct {
    float **p, **g, **sq, **acc;
    const long *n;
    int k;
    long start, end; /* this thread's elements, counted over all parameters */
    float rho, one_minus_rho, eps, neg_lr;
} job_t;

/* torch/optim/adadelta.py, _single_tensor_adadelta, one element at a time:
   square_avg.mul_(rho).addcmul_(grad, grad, value=1 - rho)
   std = square_avg.add(eps).sqrt_()
   delta = acc_delta.add(eps).sqrt_().div_(std).mul_(grad)
   acc_delta.mul_(rho).addcmul_(delta, delta, value=1 - rho)
   param.add_(delta, alpha=-lr)
   with the multiply-adds that torch's vectorized kernels fuse, fused here too (addcmul:
   fmadd(value * t1, t2, self); add with alpha: fmadd(other, alpha, self)). The square roots
   are IEEE's, correctly rounded; torch's vectorized ones (Sleef's) may differ in the last bit. */
static void update(float *restrict p, const float *restrict g, float *restrict sq, float *restrict acc,
                   long n, float rho, float one_minus_rho, float eps, float neg_lr) {
    for (long i = 0; i < n; i++) {
        float gi = g[i];
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
                   j->acc[t] + (lo - offset), hi - lo, j->rho, j->one_minus_rho, j->eps, j->neg_lr);
        offset += j->n[t];
    }
    return 0;
}

/* One step over k parameters of n[t] elements each, on `threads` threads (the caller's among
   them). Returns 0, or -1 where a thread could not be started (that part then runs here). */
int adadelta_step(float **p, float **g, float **sq, float **acc, const long *n, int k, int threads,
                  float rho, float one_minus_rho, float eps, float neg_lr) {
    long total = 0;
    for (int t = 0; t < k; t++) total += n[t];
    if (threads < 1) threads = 1;
    if (threads > 64) threads = 64;
    job_t jobs[64];
    pthread_t ids[64];
    int started[64] = {0};
    int status = 0;
    for (int t = 0; t < threads; t++) {
        job_t j = {p, g, sq, acc, n, k, total * t / threads, total * (t + 1) / threads,
                   rho, one_minus_rho, eps, neg_lr};
        jobs[t] = j;
    }
    for (int t = 1; t < threads; t++) {
        if (pthread_create(&ids[t], 0, run, &jobs[t]) == 0) started[t] = 1;
        else status = -1;
    }
    run(&jobs[0]);
    for (int t = 1; t < threads; t++) {
        if (started[t]) pthread_join(ids[t], 0);
        else run(&jobs[t]);
    }
    return status;
}
"""

FLAGS = ("-std=gnu99", "-O3", "-ffp-contract=off", "-fno-math-errno", "-fPIC", "-shared", "-pthread")

#: This CPU's own instructions, as the compiler spells them (gcc and clang on x86: -march; clang on
#: Arm before version 15: -mcpu), else the compiler's default target: the first it accepts.
TARGETS: tuple[tuple[str, ...], ...] = (("-march=native",), ("-mcpu=native",), ())

#: Fewer elements than this per thread are not worth a thread (one paper-size step has 18 M).
MIN_PER_THREAD = 1 << 18

_loaded: list[ctypes.CDLL | None] = []
_problem: list[str] = []


def cache_dir() -> Path:
    """Where built libraries are kept (see the module's text)."""
    given = os.environ.get("PHRASE_RESCORER_CACHE")
    if given:
        return Path(given)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "phrase_rescorer"


def _run(command: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, capture_output=True, text=True, errors="replace", timeout=300)


def _failed(compiler: list[str], done: subprocess.CompletedProcess[str]) -> RuntimeError:
    first = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[0]
    return RuntimeError(f"{' '.join(compiler)} failed: {first}")


def _target(compiler: list[str]) -> tuple[tuple[str, ...], str]:
    """The first of ``TARGETS`` the compiler accepts, and the macros it then predefines: its
    version and every instruction-set extension it will use, which the cache key hashes."""
    done = None
    for flags in TARGETS:
        done = _run([*compiler, *flags, "-dM", "-E", "-x", "c", os.devnull])
        if done.returncode == 0:
            return flags, done.stdout
    assert done is not None
    raise _failed(compiler, done)


def _build(compiler: list[str], again: bool = False) -> Path:
    """The library for this compiler and CPU: from the cache, else built into it (``again``: the
    cached file would not load, build it anew)."""
    target_flags, macros = _target(compiler)
    flags = (*FLAGS, *target_flags)
    key = hashlib.sha256("\0".join((SOURCE, " ".join(flags), macros)).encode()).hexdigest()[:16]
    directory = cache_dir()
    target = directory / f"adadelta-{key}.so"
    if target.exists() and not again:
        return target
    try:
        directory.mkdir(parents=True, exist_ok=True)
        building = tempfile.TemporaryDirectory(dir=directory, prefix=".build-")
    except OSError as e:
        raise RuntimeError(f"{e}; set PHRASE_RESCORER_CACHE to a writable directory") from e
    with building as tmp:
        source = Path(tmp) / "adadelta.c"
        source.write_text(SOURCE, encoding="utf-8")
        built = Path(tmp) / "adadelta.so"
        done = _run([*compiler, *flags, "-o", str(built), str(source), "-lm"])
        if done.returncode != 0:
            raise _failed(compiler, done)
        with open(built, "rb") as f:
            os.fsync(f.fileno())
        if again:
            os.replace(built, target)
        else:
            # A library that another process (another node of a shared home) has built and
            # loaded already is kept, never replaced under it.
            try:
                os.link(built, target)
            except FileExistsError:
                pass
            except OSError:  # a file system without hard links
                os.replace(built, target)
    return target


def load() -> ctypes.CDLL | None:
    """The loop's library (built on first use, then from the cache), or None where it cannot be
    built or loaded here; ``problem()`` says why."""
    if not _loaded:
        try:
            compiler = shlex.split(os.environ.get("CC") or "cc")  # e.g. CC="ccache gcc"
            if not compiler:
                raise RuntimeError("CC is set to nothing")
            try:
                lib = ctypes.CDLL(str(_build(compiler)))
            except OSError:  # a cached file that does not load (cut short, another system)
                lib = ctypes.CDLL(str(_build(compiler, again=True)))
            lib.adadelta_step.restype = ctypes.c_int
            lib.adadelta_step.argtypes = [ctypes.POINTER(ctypes.c_void_p)] * 4 + [
                ctypes.POINTER(ctypes.c_long),
                ctypes.c_int,
                ctypes.c_int,
                ctypes.c_float,
                ctypes.c_float,
                ctypes.c_float,
                ctypes.c_float,
            ]
            _loaded.append(lib)
        except (OSError, RuntimeError, subprocess.SubprocessError, ValueError) as e:
            _problem.append(str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__)
            _loaded.append(None)
    return _loaded[0]


def problem() -> str | None:
    """Why the loop cannot be used here (after trying to build it), None where it can."""
    return None if load() is not None else _problem[0]


def step(
    lib: ctypes.CDLL,
    tensors: Sequence[tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]],
    lr: float,
    rho: float,
    eps: float,
    threads: int,
) -> None:
    """One Adadelta update of every (param, grad, square_avg, acc_delta) in ``tensors``: contiguous
    float32 CPU tensors of equal sizes (the caller checks), in place. torch's scalars: rho, 1 - rho
    (computed in double), eps and -lr, each rounded to float32 as torch's float kernels do."""
    k = len(tensors)
    if k == 0:
        return
    columns = [(ctypes.c_void_p * k)(*(t[i].data_ptr() for t in tensors)) for i in range(4)]
    sizes = (ctypes.c_long * k)(*(t[0].numel() for t in tensors))
    total = sum(sizes)
    threads = max(1, min(threads, total // MIN_PER_THREAD))
    lib.adadelta_step(*columns, sizes, k, threads, rho, 1 - rho, eps, -lr)
