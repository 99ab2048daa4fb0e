"""The outputs of a training command (``train``, ``train-nmt``, ``train-lm``): checked before any
work (``check_outputs``: MODEL_OUT, its ``.last.pt``, ``.log`` and lock usable, none an input, none
a living run's file), owned for the run's life (``own_outputs``: MODEL_OUT's lock, ``run_lock``),
and, with ``--resume``, the saved state read once the lock is held (``resumed_state``)."""

from __future__ import annotations

import errno
import json
import os
import shlex
import socket
import sys

import click

from ..errors import EXIT_OS
from ..model.kinds import FAMILIES, ModelFile, check_kind
from ..output import OutputError, check_distinct_paths, check_not_an_input, check_output_path
from ..parallel import distributed
from ..run_lock import NO_LOCKS, LockHeld, NotALock, described_holder, held_lock, is_lock_record, lock_path
from ..training.run_files import companion_path, is_kept_path
from .common import UserError, warn


def check_outputs(
    model_out: str, inputs: tuple[str | None, ...], log_path: str | None, resume: bool, keep: int = 0
) -> None:
    """Before any work: MODEL_OUT's directory, the three outputs usable and none an input, with
    ``keep`` kept networks no input or log of their names (``MODEL.stepS.pt``: the steps are known
    only as they come), and with ``--resume`` a ``.last.pt`` to resume (read by
    :func:`resumed_state` once the run holds its lock)."""
    if not os.path.isdir(os.path.dirname(os.path.abspath(model_out))):
        raise UserError(f"{model_out}: output directory does not exist", EXIT_OS)
    last_path, lock = companion_path(model_out, ".last.pt"), lock_path(model_out)
    for output in (model_out, last_path, log_path or companion_path(model_out, ".log"), lock):
        # refused now, not at the first save; another living run's file (its MODEL_OUT, .last.pt, .log)
        check_output_path(output, by_name=False, own=lock)
        for given in inputs:  # an input, overwritten by a model after hours
            if given is not None:
                check_distinct_paths(given, output)
    check_not_an_input(  # --log m.pt
        log_path or "", (("model file", model_out), ("saved state", last_path), ("lock of the run", lock))
    )
    if keep:
        for given in (*inputs, log_path):
            if given is not None and is_kept_path(model_out, given):
                real = os.path.realpath(given)
                link = "" if os.path.abspath(given) == real else f" (a link to {real})"
                raise OutputError(given, f"--keep-checkpoints would write a network over this file{link}", errno.EINVAL)
    if resume and not os.path.exists(last_path):
        raise UserError(f"--resume: no {last_path} to resume from")


def resumed_state(model_out: str, resume: bool, family: str) -> ModelFile | None:
    """With ``--resume``, the ``.last.pt`` to resume, of the ``family`` (``model.kinds.FAMILIES``)
    the command trains, read once for ``fit`` (after :func:`own_outputs`: no other run writes it
    meanwhile); a state of another command's network is refused before the data is read."""
    if not resume:
        return None
    return check_kind(companion_path(model_out, ".last.pt"), f"{FAMILIES[family][1]} --resume", (family,))


def own_outputs(ctx: click.Context, model_out: str, group: distributed.Group) -> None:
    """MODEL_OUT's files this run's alone until the command ends, however it ends: the process that
    writes them (rank 0 under torchrun) holds MODEL_OUT's ``.lock`` (``run_lock``: its PID, host and
    command line inside; removed at the end; one a dead run left is taken over). A MODEL_OUT whose
    lock a living run holds is refused (exit 6) in every process, naming that run. On a file system
    without locks the run goes on, with a warning."""
    refusal = None
    if group.is_main:
        lock = lock_path(model_out)
        record = {"pid": os.getpid(), "host": socket.gethostname(), "command": _command_line(ctx)}
        try:
            ctx.with_resource(held_lock(lock, json.dumps(record) + "\n", remove=True, ours=is_lock_record))
        except LockHeld as e:
            refusal = (
                f"{model_out}: another training is writing this model's files "
                f"({described_holder(e.holder)}; lock {lock}); wait for it to end, or give another MODEL_OUT"
            )
        except NotALock:
            refusal = (
                f"{lock}: not the lock of a training run (it would be overwritten); move it away, or give another "
                "MODEL_OUT"
            )
        except OSError as e:
            if e.errno not in NO_LOCKS:
                refusal = f"{lock}: cannot lock it ({e.strerror})"
            else:
                warn(
                    f"{lock}: this file system cannot lock files ({e.strerror}); a second training to "
                    f"{model_out} would not be refused"
                )
    refusal = group.broadcast(refusal)
    if refusal is not None:
        raise UserError(refusal, EXIT_OS)


def _command_line(ctx: click.Context) -> str:
    return shlex.join([ctx.find_root().info_name or "phrase-rescorer", *sys.argv[1:]])
