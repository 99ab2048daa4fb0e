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

Threads that wait sleep (:func:`wait_passively`, which every program calls before torch loads).
torch's pip wheel computes its operators, its BLAS (MKL) and oneDNN on GNU OpenMP (libgomp), whose
threads, when a parallel region ends, spin up to 300,000 times (``GOMP_SPINCOUNT``'s default)
before they sleep, waiting for the next region. On a machine of its own that spinning is cheap;
on one whose cores are busy (the steps of a pipeline side by side) a spinning thread takes the
core from the thread it waits for, and every region costs a scheduler time slice: ``--threads 2``
then ran 15-30x slower than ``--threads 1``. libgomp reads ``OMP_WAIT_POLICY`` once, when it is
loaded (with torch), so the programs set ``OMP_WAIT_POLICY=PASSIVE`` (wait in the kernel, spin
count 0) before that, unless the user's environment sets the wait itself (``OMP_WAIT_POLICY`` or
``GOMP_SPINCOUNT``). ``make bench-load`` (benchmarks/threads_under_load.py) measures both
machines.
"""

from __future__ import annotations

import os
import sys

#: libgomp's variables that set how its threads wait; a user who sets one keeps their choice.
WAIT_VARIABLES = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")
#: The wait the programs ask for: sleep at once (libgomp: spin count 0 under PASSIVE).
PASSIVE_WAIT = ("OMP_WAIT_POLICY", "PASSIVE")

_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def wait_passively() -> bool:
    """Make the OpenMP threads torch starts sleep while they wait (``OMP_WAIT_POLICY=PASSIVE``), unless
    the environment already says how they wait. Effective only before torch is first imported
    (libgomp reads the variable when it loads); True when it was set now. Child processes
    inherit it."""
    if any(name in os.environ for name in WAIT_VARIABLES):
        return False
    os.environ[PASSIVE_WAIT[0]] = PASSIVE_WAIT[1]
    return "torch" not in sys.modules


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
    import torch

    torch.set_num_threads(n)
    for name in _VARIABLES:
        os.environ[name] = str(n)
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=n)


def current_threads() -> int:
    """The thread count this process computes on (after :func:`limit_threads`)."""
    import torch

    return torch.get_num_threads()
