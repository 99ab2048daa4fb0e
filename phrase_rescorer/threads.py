"""The one thread limit: what ``--threads N`` means (Moses' ``-threads``, Marian's ``--cpu-threads``).

Without ``--threads`` a program computes on :func:`default_threads`: ``OMP_NUM_THREADS`` when it
is set, else one thread, as Moses' decoder (``moses --help``: "--threads  number of threads to
use in decoding (defaults to single-threaded)"). A Moses pipeline runs its steps side by side
(EMS runs independent steps in parallel, train-model.perl runs its two phrase-scoring
directions at once), so a step that took every core would slow the others; on a machine of its
own, ``--threads all`` (:func:`usable_cores`) takes every core. The limit applied:

* torch's intra-op pool gets N threads (``torch.set_num_threads``); the prefix scorer, which
  splits a window among worker threads, starts as many workers as torch has threads, so N = 1
  scores on one thread;
* the BLAS / OpenMP pools of libraries already loaded (numpy's BLAS; scikit-learn's OpenMP for
  t-SNE) are capped through threadpoolctl, and ``OMP_NUM_THREADS`` /
  ``OPENBLAS_NUM_THREADS`` / ``MKL_NUM_THREADS`` are set for those loaded later.
"""

from __future__ import annotations

import os

import torch

_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity; every core where that is unknown)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def default_threads() -> int:
    """The thread count without ``--threads``: ``OMP_NUM_THREADS`` when set to a count, else 1."""
    value = os.environ.get("OMP_NUM_THREADS", "").strip()
    return int(value) if value.isdigit() and int(value) >= 1 else 1


def limit_threads(n: int) -> None:
    """Compute on at most ``n`` threads from now on, in this process."""
    if n < 1:
        raise ValueError(f"thread count must be at least 1, not {n}")
    torch.set_num_threads(n)
    for name in _VARIABLES:
        os.environ[name] = str(n)
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=n)


def current_threads() -> int:
    """The thread count this process computes on (after :func:`limit_threads`)."""
    return torch.get_num_threads()
