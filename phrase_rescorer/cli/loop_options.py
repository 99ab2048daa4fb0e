"""The training loop's options (``training.loop``), the same for every training command
(``train``, ``train-nmt``, ``train-lm``), with each command's own defaults; and the check of
those that cannot go together."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from ..errors import UsageError
from ..training.schedule import check_schedule
from ..training.task_interface import LoopSettings
from .common import UserError, device_option, threads_option


def loop_options(defaults: LoopSettings, inputs: str) -> list[Callable[..., Any]]:
    """The options of the training loop, the same for every training command (``training.loop``);
    ``inputs`` names the arguments --resume needs unchanged."""
    return [
        click.option("--max-steps", type=click.IntRange(1), help="Stop after this many steps in all (across resumes)."),
        click.option(
            "--max-time",
            type=click.FloatRange(0, min_open=True),
            help="Stop after this many wall seconds of this invocation (a resumed run counts its own time).",
        ),
        click.option(
            "--epochs",
            "--max-epochs",
            type=click.IntRange(1),
            help="Stop after this many passes in all (across resumes).",
        ),
        click.option(
            "--valid-every",
            type=click.IntRange(1),
            default=defaults.valid_every,
            show_default=True,
            help="Steps between validations (the best network is kept, the latest state saved); one more ends the run.",
        ),
        click.option(
            "--patience",
            type=click.IntRange(0),
            default=defaults.patience,
            show_default=True,
            help="Stop after this many validations (every --valid-every steps) without a better "
            "held-out likelihood (0: never).",
        ),
        click.option(
            "--seed",
            type=int,
            default=defaults.seed,
            show_default=True,
            help="Initialisation and data order (same seed and data: same model).",
        ),
        click.option(
            "--lr",
            type=click.FloatRange(0, min_open=True),
            default=defaults.lr,
            show_default=True,
            help="Learning rate.",
        ),
        click.option(
            "--lr-decay-steps",
            type=click.IntRange(1),
            help="Lower the learning rate along a half cosine from --lr at the first step to 0 at "
            "step N, where the run ends (counted across resumes; --max-steps at most N). Without "
            "it (or --warmup-steps) the rate stays at --lr.",
        ),
        click.option(
            "--warmup-steps",
            type=click.IntRange(1),
            help="Raise the learning rate linearly from 0 to --lr over the first N steps, then lower it "
            "with the inverse square root of the step (Vaswani et al. 2017: --lr at step N, half of it "
            "at step 4N); counted across resumes. Not with --lr-decay-steps.",
        ),
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
        click.option(
            "--log-every",
            type=click.IntRange(1),
            default=defaults.log_every,
            show_default=True,
            help="Steps between training-loss log lines.",
        ),
    ]


def check_loop_options(options: dict[str, Any]) -> None:
    """Refuse the loop's options that cannot go together, before any input is read."""
    try:
        check_schedule(options["max_steps"], options["lr_decay_steps"], options["warmup_steps"])
    except UsageError as e:
        raise UserError(str(e), e.exit_code) from e
