"""What every command shares: error reporting (with the exit codes of ``errors``), progress,
options, devices."""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import stat
import sys
from collections.abc import Callable
from typing import Any, NoReturn

import click
import torch

from .. import __version__, devices
from ..data.line_limit import DEFAULT_MAX_TOKENS
from ..errors import (
    EXIT_OS,
    EXIT_SIGINT,
    EXIT_SIGPIPE,
    EXIT_USAGE,
    ProgramError,
    Terminated,
    exit_code,
    out_of_memory,
    signal_words,
)
from ..output import OutputError, ReaderGone
from ..output_targets import drop_stdout, reader_gone
from ..threads import default_threads, limit_threads, usable_cores
from .progress import Progress


class UserError(click.ClickException):
    """A refused request, reported as ``error: message`` with the given exit code."""

    exit_code = EXIT_USAGE

    def __init__(self, message: str, exit_code: int = EXIT_USAGE):
        super().__init__(message)
        self.exit_code = exit_code  # type: ignore[misc]  # click declares it as a class default


class NamedPath(click.Path):
    """A path used by its name, never a standard stream: ``-`` is a usage error (exit 2) naming
    the argument or option and ``stream`` (a model file, a log, an experiment's directory, a
    training's MODEL_OUT, beside which the run writes its other files), not a file named ``-``
    that is missing. Anything else is left to ``click.Path`` and to the command."""

    def __init__(self, *, stream: str = "standard input", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.stream = stream

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if os.fspath(value) == "-":
            name = (
                next((o for o in param.opts if o.startswith("--")), max(param.opts, key=len))
                if isinstance(param, click.Option)
                else param and param.human_readable_name
            )
            kind = "directory" if not self.file_okay else "file"
            raise UserError(f"{name or 'the path'} '-': must be a {kind}, not {self.stream}; give its path")
        return super().convert(value, param, ctx)


class InputPath(NamedPath):
    """A path that must be there (``click.Path(exists=True)``), missing or of the wrong kind
    reported as every input the library opens reports it: ``PATH: cannot read: ...``, exit 6
    (``EXIT_OS``, the table's unreadable input), not as a usage error (exit 2); ``-`` refused
    (:class:`NamedPath`)."""

    def __init__(self, *, file_okay: bool = True, dir_okay: bool = True) -> None:
        super().__init__(exists=False, file_okay=file_okay, dir_okay=dir_okay, readable=False)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        path = os.fspath(value)
        option = f"{max(param.opts, key=len)}: " if isinstance(param, click.Option) else ""
        if path == "-":  # a usage error, not a file named "-" that is missing
            return super().convert(value, param, ctx)
        try:
            is_dir = stat.S_ISDIR(os.stat(path).st_mode)
        except OSError as e:  # missing, or a directory on the way that cannot be searched
            raise UserError(f"{option}{path}: cannot read: {e.strerror}", EXIT_OS) from None
        if not self.dir_okay and is_dir:
            raise UserError(f"{option}{path}: cannot read: a directory, not a file", EXIT_OS)
        if not self.file_okay and not is_dir:
            raise UserError(f"{option}{path}: cannot read: not a directory", EXIT_OS)
        if not os.access(path, os.R_OK | (os.X_OK if is_dir else 0)):
            raise UserError(f"{option}{path}: cannot read: {os.strerror(errno.EACCES)}", EXIT_OS)
        return super().convert(value, param, ctx)


def _fail(prog: str, message: str, code: int) -> NoReturn:
    with contextlib.suppress(OSError):  # stderr may be gone too (a closed terminal)
        click.echo(f"{prog}: error: {message}", err=True)
    sys.exit(code)


def _terminate(signum: int, frame: Any) -> None:
    raise Terminated(signum)


def _reader_gone() -> NoReturn:
    """Standard output's reader went away: exit 141 (``EXIT_SIGPIPE``) as a shell's SIGPIPE would,
    quietly, with standard output pointed at /dev/null so that Python's last flush finds nothing
    to complain of."""
    drop_stdout()
    sys.exit(EXIT_SIGPIPE)


def run_guarded(command: click.Command, prog_name: str, startup_mask: set[int] | None = None) -> None:
    """Run a click command, turning the errors a user can act on into one line and an exit code.

    SIGTERM and SIGHUP are turned into an exception (:class:`Terminated`) so that ``finally``
    blocks and the atomic-output context managers run and remove their temporary files. A
    command that has more to say on an interruption (training: where its resumable checkpoint
    is) says it before re-raising. ``startup_mask``: the signal mask to restore once the
    handlers are in place (the entry point blocks the signals while the modules load, so that
    a Ctrl-C then ends the run here, with 130, like one a moment later). The exit codes are
    ``errors.exit_code``'s.
    """
    signal.signal(signal.SIGTERM, _terminate)
    signal.signal(signal.SIGHUP, _terminate)
    try:
        if startup_mask is not None:
            signal.pthread_sigmask(signal.SIG_SETMASK, startup_mask)  # a pending signal: raised now
        try:
            command.main(prog_name=prog_name, standalone_mode=False)
        except SystemExit as e:
            # click ends a command whose write to stdout met EPIPE (its help, a printed result)
            # with exit 1 and nothing said: the reader left, and the rule for that is 141
            if e.code == 1 and reader_gone(1):
                _reader_gone()
            raise
        if sys.stdout is not None:
            sys.stdout.flush()
    except (click.exceptions.Abort, KeyboardInterrupt):
        _fail(prog_name, "interrupted; no output was left behind", EXIT_SIGINT)
    except Terminated as e:
        _fail(prog_name, f"{signal_words(e.signum)}; no output was left behind", e.exit_code)
    except click.ClickException as e:
        if isinstance(e, click.UsageError) and e.ctx is not None:
            click.echo(e.ctx.get_usage(), err=True)
        _fail(prog_name, e.format_message(), e.exit_code)
    except (ReaderGone, BrokenPipeError):
        _reader_gone()  # e.g. `| head`: the reader left; nothing more to say
    except (ProgramError, OutputError) as e:
        _fail(prog_name, str(e), exit_code(e))
    except OSError as e:
        what = "disk full (no space left on device)" if e.errno == errno.ENOSPC else (e.strerror or str(e))
        where = f"{e.filename}: " if e.filename else ""
        _fail(prog_name, f"{where}{what}", exit_code(e))
    except (MemoryError, RuntimeError) as e:
        said = out_of_memory(e)  # an allocation that failed, torch's included: the machine, not a bug
        if said is None:
            raise
        _fail(prog_name, said, exit_code(e))


def progress(ctx: click.Context, desc: str, unit: str = "", **kwargs: Any) -> Progress:
    """The stage's progress on stderr (a bar on a terminal, timed lines otherwise), silent
    under --quiet."""
    return Progress(desc, unit, quiet=is_quiet(ctx), **kwargs)


def is_quiet(ctx: click.Context) -> bool:
    root = ctx.find_root()
    return bool(root.obj and root.obj.get("quiet"))


def say(ctx: click.Context, message: str) -> None:
    """A summary line on stderr (stdout may carry a table), unless --quiet."""
    if not is_quiet(ctx):
        click.echo(message, err=True)


def warn(message: str) -> None:
    """A warning on stderr, shown even under --quiet (it is about the result)."""
    click.echo(f"warning: {message}", err=True)


def resolve_device(name: str) -> torch.device:
    """The library's resolver; a device that cannot be used is a usage error."""
    try:
        return devices.resolve_device(name)
    except devices.DeviceError as e:
        raise UserError(str(e), e.exit_code) from e


device_option: Callable[..., Any] = click.option(
    "--device", default="auto", show_default=True, help="auto (CUDA when present), cpu, cuda or cuda:N."
)

max_tokens_option: Callable[..., Any] = click.option(
    "--max-tokens",
    type=click.IntRange(1),
    default=DEFAULT_MAX_TOKENS,
    show_default=True,
    help="Refuse (exit 3, naming the file and line) any line the network would read of more tokens "
    "(space-separated words) than this, before the first line is scored: a network's memory grows "
    "with a line's length (a transformer's attention: heads x tokens^2 x 4 bytes a layer).",
)


def batch_sentences_option(help: str) -> Callable[..., Any]:
    """``--batch-sentences N`` (parameter ``batch``): the sentences whose beams are stepped
    together (``analysis.translate.translate_nbest``'s ``batch``), 1 by default."""
    return click.option("--batch-sentences", "batch", type=click.IntRange(1), default=1, show_default=True, help=help)


class ThreadCount(click.ParamType):
    """A thread count: a number >= 1, or ``all`` (every core this process may use)."""

    name = "N|all"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, int) and not isinstance(value, bool):
            n = value
        elif str(value).strip().lower() == "all":
            return usable_cores()
        else:
            try:
                n = int(str(value).strip())
            except ValueError:
                self.fail(f"{value!r} is not a thread count: give a number (1 or more) or 'all'", param, ctx)
        if n < 1:
            self.fail(f"{n} is not a thread count: give a number (1 or more) or 'all'", param, ctx)
        return n


THREADS_HELP = (
    "Compute threads, a number or 'all' (every core); -threads N as in Moses  [default: 1, as "
    "Moses' decoder, or OMP_NUM_THREADS when set: a pipeline (EMS, train-model.perl) runs "
    "steps side by side]."
)


def _set_threads(ctx: click.Context, param: click.Parameter, value: int | None) -> int:
    n = default_threads() if value is None else value
    if not ctx.resilient_parsing:
        limit_threads(n)
    return n


def _threads_option(expose_value: bool, help: str) -> Callable[..., Any]:
    return click.option(
        "--threads",
        "-threads",
        type=ThreadCount(),
        metavar="N|all",
        default=None,
        expose_value=expose_value,
        callback=_set_threads,
        help=help,
    )


threads_option: Callable[..., Any] = _threads_option(False, THREADS_HELP)
"""``--threads N`` (also Moses' spelling ``-threads N``) for every command that computes;
applied while the options are parsed."""


def threads_value_option(help: str) -> Callable[..., Any]:
    """``--threads``, applied as :data:`threads_option` is, for a command that also hands the
    count on (to the decoder, to mert): its value (a number) is the command's ``threads``
    argument. ``help`` says where the threads go."""
    return _threads_option(True, help)


def _set_quiet(ctx: click.Context, param: click.Parameter, value: bool) -> bool:
    if value:  # given before or after the subcommand: one flag, kept on the outermost context
        ctx.find_root().ensure_object(dict)["quiet"] = True
    return value


def _show_version(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    if value and not ctx.resilient_parsing:
        click.echo(f"{ctx.find_root().info_name}, version {__version__}")
        ctx.exit()


#: click's settings of every program and subcommand: -h as well as --help (also when a command
#: runs as a program of its own, such as rescore-phrase-table), help text 100 columns wide.
CONTEXT_SETTINGS: dict[str, Any] = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


def add_common_options(command: click.Command) -> click.Command:
    """``-q/--quiet``, ``--version`` and :data:`CONTEXT_SETTINGS`, the one definition given to
    every program and subcommand, so that ``phrase-rescorer -q train ...``, ``phrase-rescorer
    train -q ...`` and ``rescore-phrase-table -q ...`` all work. Idempotent."""
    command.context_settings = {**CONTEXT_SETTINGS, **command.context_settings}
    if any("--quiet" in p.opts for p in command.params):
        return command
    command.params.append(
        click.Option(
            ["-q", "--quiet"],
            is_flag=True,
            expose_value=False,
            callback=_set_quiet,
            help="No progress bars or summaries on stderr (errors and warnings still).",
        )
    )
    command.params.append(
        click.Option(
            ["--version"],
            is_flag=True,
            expose_value=False,
            is_eager=True,
            callback=_show_version,
            help="Show the version and exit.",
        )
    )
    return command


def model_option(
    dest: str = "model",
    required: bool = True,
    multiple: bool = False,
    help: str = "The trained network (written by phrase-rescorer train).",
) -> Callable[..., Any]:
    """``-m/--model``: the trained network, the same option in every command (``multiple``: the
    networks, one per -m, in the order given)."""
    return click.option("-m", "--model", dest, required=required, multiple=multiple, type=NamedPath(), help=help)


def feature_names(given: tuple[str, ...], option: str = "--leave-out") -> list[str]:
    """The features ``option`` names, each once, in order: the option repeated, or names
    separated by commas or blanks (as mert-moses.pl's --activate-features takes them)."""
    names: list[str] = []
    for value in given:
        words = value.replace(",", " ").split()
        if not words:
            raise UserError(f"{option} {value!r}: give a feature's name, e.g. {option} TranslationModel0")
        names.extend(word for word in words if word not in names)
    return names
