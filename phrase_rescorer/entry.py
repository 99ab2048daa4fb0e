"""The programs' entry points (``phrase-rescorer``, ``rescore-phrase-table``, ``python -m``).

Loading the command line imports torch, which takes seconds; a SIGINT, SIGTERM or SIGHUP in
that time would otherwise raise inside an import (a traceback, or an abort in torch's native
start-up code). The signals are blocked while the modules load and unblocked by
``cli.common.run_guarded`` once its handlers are in place: a Ctrl-C at any moment ends the run
with its one-line message and exit code. This module imports nothing heavy itself.
"""

from __future__ import annotations

import signal

from .signals import STOP_SIGNALS as _STOP_SIGNALS


def main() -> None:
    """``phrase-rescorer``."""
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, _STOP_SIGNALS)
    from .cli import main as cli_main

    cli_main(startup_mask=previous)


def rescore_main() -> None:
    """``rescore-phrase-table``."""
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, _STOP_SIGNALS)
    from .cli import rescore_main as cli_rescore_main

    cli_rescore_main(startup_mask=previous)


def moses_step_main() -> None:
    """``moses-rescore-step``."""
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, _STOP_SIGNALS)
    from .cli import moses_step_main as cli_moses_step_main

    cli_moses_step_main(startup_mask=previous)
