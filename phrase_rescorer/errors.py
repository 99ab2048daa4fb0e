"""The exit codes of every phrase_rescorer program, and which error ends a run with which.

One table, here: :data:`EXIT_CODES` (the code and what it means, the table of
docs/errors.md or the README, which a test compares with this one), the named codes, and the
kinds of error that carry them. A library error says its kind by its base class
(``class CheckpointError(ModelError)``: exit 4); :func:`exit_code` gives the code of any
exception, also of those that are no :class:`ProgramError` (``OSError``, ``KeyboardInterrupt``,
a click usage error). A signal that ends a run exits with 128 + its number, as a shell reports
a process killed by it (:func:`signal_exit`). No other module writes an exit code as a number.

This module imports nothing of the package: every layer may use it.
"""

from __future__ import annotations

import signal

EXIT_OK = 0
EXIT_INTERNAL = 1
EXIT_USAGE = 2
EXIT_INPUT = 3
EXIT_MODEL = 4
EXIT_INI = 5
EXIT_OS = 6


def signal_exit(signum: int) -> int:
    """The exit code of a run that signal ``signum`` ends: 128 + its number."""
    return 128 + int(signum)


EXIT_SIGHUP = signal_exit(signal.SIGHUP)  # 129
EXIT_SIGINT = signal_exit(signal.SIGINT)  # 130
EXIT_SIGPIPE = signal_exit(signal.SIGPIPE)  # 141
EXIT_SIGTERM = signal_exit(signal.SIGTERM)  # 143

#: Exit codes of every phrase_rescorer program, and what each means (the documented table).
EXIT_CODES = {
    EXIT_OK: "success",
    EXIT_INTERNAL: "internal error (a bug: please report it with the traceback)",
    EXIT_USAGE: "usage error: unknown option, missing argument, refused combination; a bundle whose files changed "
    "or went missing, or whose weights do not name its features (bundle, translate-hybrid)",
    EXIT_INPUT: "bad input data: malformed phrase-table line, line longer than the maximum, bad UTF-8, truncated "
    "or corrupt compressed input, a compression format not read, empty table, a line with another score "
    "count or a negative score, a table rescored already, a line of more tokens than --max-tokens (file:line "
    "given); dev/test files of different lengths",
    EXIT_MODEL: "unusable model file: missing, truncated, not a model, another format version, a configuration "
    "that does not fit its weights (checked before any network is built), weights that give NaN, a vocabulary "
    "that does not cover the table, a model of another kind or direction than its option takes",
    EXIT_INI: "moses.ini does not match its phrase table or cannot be patched: a --table that is no table in a "
    "form Moses loads (a text table compressed otherwise than gzip named .gz included), a score count other "
    "than num-features + the added columns, a weight that is not finite, "
    "a failed --binarize",
    EXIT_OS: "operating-system or path error: unreadable or closed input, unusable output path (empty, a "
    "directory, missing directory, the input or the model file itself, an input or `--log` named as a network "
    "`--keep-checkpoints` would keep (`MODEL.stepS.pt`), a compressed name not written such as .lzma, closed "
    "stdout, a picture's path that is another kind of file or not named .png, .pdf or .svg), a training's "
    "MODEL_OUT that another living training holds (its `MODEL.lock`), a file such a training writes (its "
    "model, `.last.pt`, `.log`, lock or kept networks) as another training's MODEL_OUT or `--log` or as average's "
    "OUT, permission, disk full, short write, out of memory",
    EXIT_SIGHUP: "hung up (SIGHUP: the terminal or ssh session closed): as for 143",
    EXIT_SIGINT: "interrupted by SIGINT (Ctrl-C), also during start-up: nothing at the output path; training "
    "saves MODEL.last.pt for --resume, experiment keeps its finished runs",
    EXIT_SIGPIPE: "the reader of standard output went away (`| head`): the rest of the output is dropped, silently",
    EXIT_SIGTERM: "terminated by SIGTERM: nothing at the output path; training saves MODEL.last.pt for --resume, "
    "experiment keeps its finished runs",
}


class ProgramError(Exception):
    """An error a user can act on: the run ends with one line, ``str(e)``, and ``exit_code``
    (the class's, or one given to the instance)."""

    exit_code: int = EXIT_INTERNAL


class UsageError(ProgramError, ValueError):
    """A refused request: an option, a combination, a missing tool (exit 2)."""

    exit_code = EXIT_USAGE


class InputError(ProgramError, ValueError):
    """Bad input data: a table, an n-best list, a text (exit 3)."""

    exit_code = EXIT_INPUT


class ModelError(ProgramError, ValueError):
    """An unusable model file (exit 4)."""

    exit_code = EXIT_MODEL


class IniError(ProgramError, ValueError):
    """A moses.ini that does not match its table or cannot be patched (exit 5)."""

    exit_code = EXIT_INI


class HostError(ProgramError, ValueError):
    """The machine, not the request: a file that cannot be read or written, a program run for
    the user (moses, mert, KenLM's query) that failed (exit 6)."""

    exit_code = EXIT_OS


class Terminated(BaseException):
    """SIGTERM or SIGHUP, raised in the main thread like KeyboardInterrupt is for SIGINT (and,
    like it, not an ``Exception``, so that no ``except Exception`` swallows it)."""

    def __init__(self, signum: int = signal.SIGTERM) -> None:
        super().__init__(signum)
        self.signum = signum

    @property
    def exit_code(self) -> int:
        return signal_exit(self.signum)


#: The exit codes of the exceptions that are no :class:`ProgramError`, first match first.
OTHER_EXIT_CODES: tuple[tuple[type[BaseException], int], ...] = (
    (KeyboardInterrupt, EXIT_SIGINT),
    (BrokenPipeError, EXIT_SIGPIPE),
    (OSError, EXIT_OS),
)


#: What torch's allocators say when they cannot give memory: the CPU's (``DefaultCPUAllocator:
#: can't allocate memory``, a plain ``RuntimeError``), CUDA's (``torch.OutOfMemoryError``, a
#: ``RuntimeError`` too), a C++ ``std::bad_alloc``.
_NO_MEMORY_WORDS = ("can't allocate memory", "out of memory", "bad_alloc")


def out_of_memory(error: BaseException) -> str | None:
    """``out of memory: WHAT`` (one line) when ``error`` is an allocation that failed (Python's
    ``MemoryError``, or one of torch's), None for any other error."""
    if isinstance(error, MemoryError):
        what = str(error)
    elif isinstance(error, RuntimeError) and any(word in str(error) for word in _NO_MEMORY_WORDS):
        what = str(error).strip().splitlines()[0]
        if what.startswith("[enforce fail at") and "] " in what:  # c10's check: where, and its condition
            what = what.split("] ", 1)[1].removeprefix("err == 0. ")
    else:
        return None
    return f"out of memory: {what}" if what else "out of memory"


def exit_code(error: BaseException) -> int:
    """The exit code of the run that ``error`` ends: its own ``exit_code`` (a
    :class:`ProgramError`, :class:`Terminated`, a click exception), else :data:`EXIT_OS` for an
    allocation that failed (:func:`out_of_memory`: the machine, not the request), else the first
    entry of :data:`OTHER_EXIT_CODES` it is an instance of, else :data:`EXIT_INTERNAL` (a bug)."""
    code = getattr(error, "exit_code", None)
    if isinstance(code, int) and not isinstance(code, bool):
        return code
    if out_of_memory(error) is not None:
        return EXIT_OS
    for kind, code in OTHER_EXIT_CODES:
        if isinstance(error, kind):
            return code
    return EXIT_INTERNAL


#: What a program says when a signal ends it.
_SIGNAL_WORDS: dict[int, str] = {signal.SIGTERM: "terminated (SIGTERM)", signal.SIGHUP: "hung up (SIGHUP)"}


def signal_words(signum: int) -> str:
    """What a program says when SIGTERM or SIGHUP ends it: ``terminated (SIGTERM)``."""
    return _SIGNAL_WORDS[signum]
