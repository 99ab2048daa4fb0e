"""What every command shares: exit codes, error reporting, progress, devices."""

from __future__ import annotations

import errno
import signal
import sys
from collections.abc import Callable
from typing import Any, NoReturn

import click
import torch

from .. import devices
from ..model.checkpoint import CheckpointError
from ..moses.ini import MosesIniError
from ..moses.phrase_table import PhraseTableError, PhraseTableOSError
from ..threads import limit_threads
from .progress import Progress

#: Exit codes of every phrase_rescorer program (documented in the README).
EXIT_CODES = {
    0: "success",
    1: "internal error (a bug: please report it with the traceback); also, silently, when the reader of "
       "standard output went away (`| head`)",
    2: "usage error: unknown option, missing argument, refused combination",
    3: "bad input data: malformed phrase-table line, bad UTF-8, truncated or corrupt gzip, empty table "
       "(file:line given); output path naming the input file; dev/test files of different lengths",
    4: "unusable model file: missing, truncated, not a model, another format version, weights that give NaN, "
       "a vocabulary that does not cover the table",
    5: "moses.ini does not match its phrase table or cannot be patched",
    6: "operating-system error: unreadable input, missing output directory, permission, disk full",
    130: "interrupted by SIGINT (Ctrl-C): nothing at the output path; training saves MODEL.last.pt for --resume, "
         "experiment keeps its finished runs",
    143: "terminated by SIGTERM: nothing at the output path; training saves MODEL.last.pt for --resume, "
         "experiment keeps its finished runs",
}


class UserError(click.ClickException):
    """A refused request, reported as ``error: message`` with the given exit code."""

    def __init__(self, message: str, exit_code: int = 2):
        super().__init__(message)
        self.exit_code = exit_code  # type: ignore[misc]  # click declares it as a class default


def _fail(prog: str, message: str, code: int) -> NoReturn:
    click.echo(f"{prog}: error: {message}", err=True)
    sys.exit(code)


class Terminated(BaseException):
    """SIGTERM, raised in the main thread like KeyboardInterrupt is for SIGINT (and, like it, not
    an ``Exception``, so that no ``except Exception`` swallows it)."""


def _sigterm(signum: int, frame: Any) -> None:
    raise Terminated()


def run_guarded(command: click.Command, prog_name: str) -> None:
    """Run a click command, turning the errors a user can act on into one line and an exit code.

    SIGTERM is turned into an exception (:class:`Terminated`) so that ``finally`` blocks and the
    atomic-output context managers run and remove their temporary files. A command that has
    more to say on an interruption (training: where its resumable checkpoint is) says it
    before re-raising.
    """
    signal.signal(signal.SIGTERM, _sigterm)
    try:
        command.main(prog_name=prog_name, standalone_mode=False)
    except click.exceptions.Abort:
        _fail(prog_name, "interrupted; no output was left behind", 130)
    except KeyboardInterrupt:
        _fail(prog_name, "interrupted; no output was left behind", 130)
    except Terminated:
        _fail(prog_name, "terminated (SIGTERM); no output was left behind", 143)
    except click.ClickException as e:
        if isinstance(e, click.UsageError) and e.ctx is not None:
            click.echo(e.ctx.get_usage(), err=True)
        _fail(prog_name, e.format_message(), e.exit_code)
    except PhraseTableOSError as e:
        _fail(prog_name, str(e), 6)
    except PhraseTableError as e:
        _fail(prog_name, str(e), 3)
    except CheckpointError as e:
        _fail(prog_name, str(e), 4)
    except MosesIniError as e:
        _fail(prog_name, str(e), 5)
    except BrokenPipeError:
        sys.stderr.close()  # e.g. `| head`: the reader left; nothing more to say
        sys.exit(1)
    except OSError as e:
        what = "disk full (no space left on device)" if e.errno == errno.ENOSPC else (e.strerror or str(e))
        where = f"{e.filename}: " if e.filename else ""
        _fail(prog_name, f"{where}{what}", 6)


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


def resolve_device(name: str) -> torch.device:
    """The library's resolver; a device that cannot be used is a usage error."""
    try:
        return devices.resolve_device(name)
    except devices.DeviceError as e:
        raise UserError(str(e)) from e


device_option: Callable[..., Any] = click.option(
    "--device",
    default="auto",
    show_default=True,
    help="auto (CUDA when present), cpu, cuda or cuda:N.",
)


def _set_threads(ctx: click.Context, param: click.Parameter, value: int | None) -> int | None:
    if value is not None:
        limit_threads(value)
    return value


threads_option: Callable[..., Any] = click.option(
    "--threads",
    type=click.IntRange(min=1),
    default=None,
    expose_value=False,
    callback=_set_threads,
    help="Compute threads (as Moses' -threads)  [default: every core, or OMP_NUM_THREADS].",
)
"""``--threads N`` for every command that computes; applied while the options are parsed."""


def model_option(dest: str = "model", required: bool = True) -> Callable[..., Any]:
    """``-m/--model``: the trained network, the same option in every command."""
    return click.option("-m", "--model", dest, required=required, type=click.Path(dir_okay=False),
                        help="The trained network (written by phrase-rescorer train).")
