"""The training loop's options (``training.loop``): one for each of its settings (``LoopConfig``),
with each command's defaults, the same for every training command (``train``, ``train-nmt``,
``train-lm``); and the ``LoopConfig`` they give, whose settings that cannot go together are
refused."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields
from typing import Any

import click

from ..errors import UsageError
from ..training.task_interface import LoopConfig
from .common import UserError, device_option, threads_option

#: The option of each setting of the loop (``LoopConfig``'s fields): its type, help and other
#: names; its default is the command's.
_OPTIONS: dict[str, dict[str, Any]] = {
    "max_steps": {"type": click.IntRange(1), "help": "Stop after this many steps in all (across resumes)."},
    "max_time": {
        "type": click.FloatRange(0, min_open=True),
        "help": "Stop after this many wall seconds of this invocation (a resumed run counts its own time).",
    },
    "epochs": {
        "aliases": ("--max-epochs",),
        "type": click.IntRange(1),
        "help": "Stop after this many passes in all (across resumes).",
    },
    "valid_every": {
        "type": click.IntRange(1),
        "help": "Steps between validations (the best network is kept, the latest state saved); one more ends the run.",
    },
    "patience": {
        "type": click.IntRange(0),
        "help": "Stop after this many validations (every --valid-every steps) without a better "
        "held-out likelihood (0: never).",
    },
    "seed": {"type": int, "help": "Initialisation and data order (same seed and data: same model)."},
    "lr": {"type": click.FloatRange(0, min_open=True), "help": "Learning rate."},
    "lr_decay_steps": {
        "type": click.IntRange(1),
        "help": "Lower the learning rate along a half cosine from --lr at the first step to 0 at "
        "step N, where the run ends (counted across resumes; --max-steps at most N). Without "
        "it (or --warmup-steps) the rate stays at --lr.",
    },
    "warmup_steps": {
        "type": click.IntRange(1),
        "help": "Raise the learning rate linearly from 0 to --lr over the first N steps, then lower it "
        "with the inverse square root of the step (Vaswani et al. 2017: --lr at step N, half of it "
        "at step 4N); counted across resumes. A cool-down (--lr-decay-start/--lr-decay-steps or "
        "--lr-decay-time) multiplies this rate by its half cosine.",
    },
    "lr_decay_start": {
        "type": click.IntRange(0),
        "help": "Hold the learning rate at --lr (or the warm-up's) up to step S and lower it along the "
        "half cosine from there to 0 at --lr-decay-steps (a cool-down at the end of a run). A run trained at the "
        "constant rate (or warmed up) takes one on --resume when S is at least the step it stands at.",
    },
    "lr_decay_time": {
        "type": click.FloatRange(0, min_open=True),
        "help": "A cool-down over the last T seconds of --max-time: the rate held at --lr (or the warm-up's) "
        "until then, then the half cosine to 0 over the steps T seconds give at the rate of the T seconds before "
        "(set then, logged, and kept as --lr-decay-start/--lr-decay-steps: --resume continues it).",
    },
    "log_every": {"type": click.IntRange(1), "help": "Steps between training-loss log lines."},
    "keep_checkpoints": {
        "type": click.IntRange(0),
        "help": "Keep the networks of the last N validations as MODEL_OUT's .stepS.pt (S: the step), for "
        "`phrase-rescorer average OUT --average-last N MODEL_OUT`.",
    },
}


def loop_option(name: str, defaults: LoopConfig) -> Callable[..., Any]:
    """The option of the loop's setting ``name``, with the command's default (``defaults``')."""
    spec = dict(_OPTIONS[name])
    default = getattr(defaults, name)
    flags = ("--" + name.replace("_", "-"), *spec.pop("aliases", ()))
    return click.option(*flags, default=default, show_default=default is not None, **spec)


def loop_options(defaults: LoopConfig, inputs: str) -> list[Callable[..., Any]]:
    """The loop's options in ``LoopConfig``'s order, with ``--device``, ``--threads``, ``--resume``
    and ``--log`` before ``--log-every``, without ``--keep-checkpoints`` (the phrase commands give it
    among their regularisation options; the CSLM keeps no networks); ``inputs`` names the arguments
    --resume needs unchanged."""
    last = ("log_every", "keep_checkpoints")
    return [
        *(loop_option(f.name, defaults) for f in fields(LoopConfig) if f.name not in last),
        device_option,
        threads_option,
        click.option(
            "--resume",
            is_flag=True,
            help=f"Continue the run saved in MODEL_OUT's .last.pt (same {inputs} and settings; the limits may change).",
        ),
        click.option(
            "--log",
            "log_path",
            type=click.Path(),
            help="JSON-lines training log  [default: MODEL_OUT without .pt, plus .log]",
        ),
        loop_option("log_every", defaults),
    ]


def loop_config(options: dict[str, Any]) -> LoopConfig:
    """The loop's settings, taken out of a command's ``options``; those that cannot go together
    refused, before any input is read."""
    given = {f.name: options.pop(f.name) for f in fields(LoopConfig) if f.name in options}
    try:
        return LoopConfig(**given)
    except UsageError as e:
        raise UserError(str(e), e.exit_code) from e
