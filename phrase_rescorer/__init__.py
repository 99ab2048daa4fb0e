"""phrase_rescorer: the RNN Encoder-Decoder phrase-table feature of Cho et al. (2014) for Moses.

Data flows one way through the package:

    phrase_table (Moses lines) -> pairs (unique pairs) -> vocab (shortlists)
    -> batching -> model -> scoring (log p(target|source)) -> moses (number convention, moses.ini)

The command-line interface (``cli``) only parses options and calls these modules.
"""

import os as _os
import signal as _signal
import sys as _sys

#: The programs' names (pyproject's console scripts) and ``python -m phrase_rescorer``.
_PROGRAMS = ("phrase-rescorer", "rescore-phrase-table", "moses-rescore-step")


def _started_as_program() -> bool:
    # the command line the interpreter was given (sys.argv may be another's: multiprocessing's
    # spawned children get their parent's)
    argv = list(getattr(_sys, "orig_argv", []))
    if len(argv) > 1 and _os.path.basename(argv[1]) in _PROGRAMS:  # python SCRIPT [args] (a shebang)
        return True
    # python [options] -m phrase_rescorer [args]
    i = argv.index("-m") if "-m" in argv else -1  # the first -m is the interpreter's own
    return 0 < i < len(argv) - 1 and argv[i + 1] == __name__ and "-c" not in argv[:i]


# A Ctrl-C, SIGTERM or SIGHUP while a program starts: blocked from this line, the first of the
# package that runs, until ``cli.common.run_guarded`` has its handlers (``entry``). Only when
# this process is one of the programs: a library user's signals are left alone. Before this
# line, a signal is Python's own business (its start-up: site, runpy).
_STARTUP_MASK: set[int] | None = (
    _signal.pthread_sigmask(_signal.SIG_BLOCK, {_signal.SIGINT, _signal.SIGTERM, _signal.SIGHUP})
    if _started_as_program()
    else None
)

__version__ = "0.1.0"

#: Public names imported on first use, so that ``import phrase_rescorer`` stays light (no torch).
_LAZY = {
    "load": "scoring.api",
    "Model": "scoring.api",
    "rescore_table": "rescoring.engine",
    "RescoreOptions": "rescoring.options",
    "RescoreSummary": "rescoring.options",
    "TableRescorer": "rescoring.engine",
    "WindowScorer": "rescoring.scorers",
    "BatchedScorer": "rescoring.scorers",
    "ReferenceScorer": "rescoring.scorers",
    "patch_moses_ini": "moses.ini",
    "rescore_model_dir": "pipeline.moses_step",
}

__all__ = ["__version__", *_LAZY]


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
