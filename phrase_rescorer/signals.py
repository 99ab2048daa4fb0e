"""The signals that stop a run (SIGINT, SIGTERM, SIGHUP), and holding them for a moment.

A stop signal raises in the main thread between two Python operations. Where a resource is
created and its owner must learn of it before anything can interrupt (a temporary file and
the name that lets it be deleted), the signals are held: blocked, so that one arriving then
is delivered, and raises, right after the block ends.
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator

STOP_SIGNALS = frozenset({signal.SIGINT, signal.SIGTERM, signal.SIGHUP})


@contextlib.contextmanager
def stop_signals_held() -> Iterator[None]:
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)
