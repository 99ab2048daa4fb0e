"""The programs' entry points (``phrase-rescorer``, ``rescore-phrase-table``, ``python -m``).

Loading the command line imports torch, which takes seconds; a SIGINT, SIGTERM or SIGHUP in
that time would otherwise raise inside an import (a traceback, or an abort in torch's native
start-up code). The signals are blocked from the package's first line (``__init__``, when the
process is one of the programs) while the modules load, and unblocked by
``cli.common.run_guarded`` once its handlers are in place: a Ctrl-C at any moment ends the run
with its one-line message and exit code. What comes before the package's first line is Python's
own start-up (``site``, ``runpy``: 10-50 ms), where a Ctrl-C still gets Python's traceback.
This module imports nothing heavy itself.

Before torch loads, each program also makes OpenMP's waiting threads sleep instead of spin
(``threads.wait_passively``: on a machine whose cores are busy, spinning threads made
``--threads 2`` many times slower than ``--threads 1``).
"""

from __future__ import annotations

import signal

from . import signals, threads


def _startup_mask() -> set[int]:
    """Block the stop signals (the package's first line did, when it saw it was a program) and
    return the mask from before the program blocked them. Also sets how OpenMP's threads wait,
    torch being still unloaded."""
    import phrase_rescorer

    threads.wait_passively()
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, signals.STOP_SIGNALS)
    first, phrase_rescorer._STARTUP_MASK = phrase_rescorer._STARTUP_MASK, None
    return previous if first is None else first


def main() -> None:
    """``phrase-rescorer``."""
    previous = _startup_mask()
    from .cli import main as cli_main

    cli_main(startup_mask=previous)


def rescore_main() -> None:
    """``rescore-phrase-table``."""
    previous = _startup_mask()
    from .cli import rescore_main as cli_rescore_main

    cli_rescore_main(startup_mask=previous)


def moses_step_main() -> None:
    """``moses-rescore-step``."""
    previous = _startup_mask()
    from .cli import moses_step_main as cli_moses_step_main

    cli_moses_step_main(startup_mask=previous)
