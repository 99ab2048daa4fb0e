"""Freed memory kept for reuse: glibc's malloc asked not to hand large blocks back every step.

A paper-size training step allocates and frees buffers of 10 to 35 MB each (the logits over the
15,000-word shortlist and their gradient, the weight gradients). glibc serves a block above its
mmap threshold (128 KiB at first; it rises by itself after frees, but only to the size of what
was freed) with a fresh mapping, unmaps it when it is freed, and gives the heap's top back above
its trim threshold, so the next step faults the same memory in again, zeroed by the kernel page
by page. :func:`keep_freed_memory` sets both thresholds to 1 GiB: the blocks then come from the
heap and stay there for the next step (where a glibc refuses an mmap threshold above 32 MiB, it
is set to 32 MiB, and the few larger blocks are still mapped afresh; measured:
docs/training-speed.md). The cost is resident memory: up to the largest step's freed blocks stay
mapped, which a training process holds anyway.

The training commands call it once at their start. It does nothing where the C library is not
glibc (macOS, musl) or where the user set ``MALLOC_MMAP_THRESHOLD_`` / ``MALLOC_TRIM_THRESHOLD_``
or a ``glibc.malloc`` tunable in ``GLIBC_TUNABLES`` (glibc's own ways to the same settings: the
user's stand).
"""

from __future__ import annotations

import ctypes
import os
import sys

M_TRIM_THRESHOLD = -1  # glibc's malloc.h
M_MMAP_THRESHOLD = -3
THRESHOLD = 1 << 30
MMAP_THRESHOLD_OLD_MAX = 32 * 1024 * 1024  # the most some glibc versions take (HEAP_MAX_SIZE / 2)
USER_SETTINGS = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_")


def keep_freed_memory() -> bool:
    """Set glibc's mmap and trim thresholds as above; True when glibc took both settings."""
    if not sys.platform.startswith("linux") or any(v in os.environ for v in USER_SETTINGS):
        return False
    if "glibc.malloc." in os.environ.get("GLIBC_TUNABLES", ""):
        return False
    try:
        libc = ctypes.CDLL(None)
    except OSError:
        return False
    if not hasattr(libc, "gnu_get_libc_version") or not hasattr(libc, "mallopt"):  # glibc only
        return False
    mallopt = libc.mallopt
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    # mallopt returns 1 on success, 0 on error.
    mmap = mallopt(M_MMAP_THRESHOLD, THRESHOLD) or mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_OLD_MAX)
    return bool(mallopt(M_TRIM_THRESHOLD, THRESHOLD)) and bool(mmap)
