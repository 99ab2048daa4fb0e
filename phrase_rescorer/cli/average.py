"""``average``: one network from the mean of several checkpoints of one run (``model.averaging``)."""

from __future__ import annotations

import click

from . import cli
from .common import NamedPath, UserError, say, warn


@cli.command("average")
@click.argument("out_path", metavar="OUT", type=click.Path())
@click.argument("inputs", metavar="IN...", nargs=-1, required=True, type=NamedPath())
@click.option(
    "--average-last",
    type=click.IntRange(1),
    help="Average the last N networks a run kept (train or train-nmt --keep-checkpoints N); "
    "IN is then the run's MODEL_OUT, alone.",
)
@click.option(
    "--allow-several-runs",
    is_flag=True,
    help="Average model files of several training runs (refused by default): the weights of independently "
    "trained networks do not line up, and their mean is usually far worse than each of them, even of one "
    "command run with another --seed. The file written records a run of its own, no input's.",
)
@click.pass_context
def average(
    ctx: click.Context, out_path: str, inputs: tuple[str, ...], average_last: int | None, allow_several_runs: bool
) -> None:
    """Write to OUT the network whose weights are the mean of those of the model files IN (of one
    training run: the same architecture, sizes and vocabularies, and the run each file records;
    others are refused, exit 2).
    OUT is a normal model file, for every command that takes -m.

    \b
    Examples:
      phrase-rescorer average nmt.avg.pt nmt.step5000.pt nmt.step5200.pt nmt.step5400.pt
      phrase-rescorer average nmt.avg.pt --average-last 10 nmt.pt
    """
    from ..model.averaging import average_checkpoints, write_checkpoint
    from ..output import check_distinct_paths, check_output_path
    from ..output_paths import check_not_running
    from ..training.kept_checkpoints import last_kept
    from ..training.loop import TrainingError
    from ..training.run_files import companion_path

    read = list(inputs)
    if average_last is None:
        paths = read
    elif len(inputs) != 1:
        raise UserError(f"--average-last takes one IN, the MODEL_OUT of the run, not {len(inputs)}")
    else:
        read.append(companion_path(inputs[0], ".last.pt"))
        try:
            paths = last_kept(inputs[0], average_last)
        except TrainingError as e:
            raise UserError(str(e), e.exit_code) from e
        read += paths
    check_output_path(out_path, by_name=False)
    check_not_running(out_path)  # a file a running training writes: its model, saved state, log, lock
    for path in read:
        check_distinct_paths(path, out_path)
    option = "phrase-rescorer average"
    checkpoint = average_checkpoints(paths, several_runs=allow_several_runs, warn=warn, option=option)
    write_checkpoint(checkpoint, out_path)
    steps = [s for s in checkpoint.info["averaged"]["steps"] if s is not None]
    at = f" (steps {', '.join(f'{s:,}' for s in steps)})" if len(steps) == len(paths) else ""
    say(ctx, f"wrote {out_path}: the mean of {len(paths)} networks{at}")
