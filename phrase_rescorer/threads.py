"""The one thread limit: what ``--threads N`` means (Moses' ``-threads``, Marian's ``--cpu-threads``).

Without it torch uses every core (or ``OMP_NUM_THREADS``). With it:

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


def limit_threads(n: int) -> None:
    """Compute on at most ``n`` threads from now on, in this process."""
    if n < 1:
        raise ValueError(f"thread count must be at least 1, not {n}")
    torch.set_num_threads(n)
    for name in _VARIABLES:
        os.environ[name] = str(n)
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=n)
