"""Checkpoint averaging: one network whose every weight is the mean of that weight over several
model files of one run (``phrase-rescorer average``).

Averaging the parameters of the last checkpoints of a run (Vaswani et al. 2017, section 6.1:
the last 5 or 20 checkpoints, written at 10-minute intervals) gives a network near the centre
of the region the optimizer wanders in late in training, often better than any one of them;
the published Transformer systems on Multi30k average their last 10. It is only meaningful for
networks of one training run: identical architecture, sizes and vocabularies (the same weight
means the same thing in each); files that differ in any of these, in their direction or in the
order they write their target (``Checkpoint.right_to_left``), are refused (``AveragingError``,
exit 2) before anything is computed. So are files of several runs (``Checkpoint.run_id``: the
identity each run records in every model file it writes, kept through ``--resume``) unless
``several_runs`` asks for their mean: the weights of independently trained networks of one
architecture do not line up (any permutation of a layer's hidden units computes the same
function), and their mean is usually far worse than either network. A file that records no run
(written before runs had an identity) cannot be told apart: it is averaged, with a warning. Each
weight is summed in float64 and divided by the number of files, so that N copies
of one file average to exactly that file's weights.

The averaged network is written as a normal model file (``save_checkpoint``, through
``output.AtomicOutput``): it scores, translates and rescores as any other. Its ``info`` is the
last file's (the latest network of the run), with ``averaged`` naming the files and their steps,
and the run identity of the files (a mean of several runs: an identity of its own, no run's);
``best_valid`` stays that of the run, not a held-out figure of the averaged network.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence

import torch

from ..errors import UsageError
from .checkpoint import Checkpoint, load_checkpoint, save_checkpoint


class AveragingError(UsageError):
    """Model files that cannot be averaged together (exit 2); the message names the file."""


def _difference(first: Checkpoint, other: Checkpoint) -> str | None:
    """What makes ``other`` another network than ``first`` (None: the same settings)."""
    a, b = first.config.to_dict(), other.config.to_dict()
    for key in a:
        if a[key] != b[key]:
            return f"{key} {b[key]}, not {a[key]}"
    arch_a = None if first.arch is None else first.arch.to_dict()
    arch_b = None if other.arch is None else other.arch.to_dict()
    if arch_a != arch_b:
        return f"architecture {arch_b or 'cho2014'}, not {arch_a or 'cho2014'}"
    if first.src_vocab.tokens != other.src_vocab.tokens or first.tgt_vocab.tokens != other.tgt_vocab.tokens:
        return "other vocabularies"
    if [m.proto for m in first.subwords or ()] != [m.proto for m in other.subwords or ()]:
        return "other subword units"
    if first.direction != other.direction:
        return f"direction {other.direction}, not {first.direction}"
    if first.right_to_left != other.right_to_left:
        order = {True: "right to left", False: "left to right"}
        return f"target written {order[other.right_to_left]}, not {order[first.right_to_left]}"
    return None


def _run_of(checkpoints: Sequence[Checkpoint], several_runs: bool, warn: Callable[[str], None] | None) -> str | None:
    """The run identity of the mean of ``checkpoints``: their run's, one of its own for a mean of
    several runs (``several_runs``; else ``AveragingError``), None where none records one."""
    known = [c for c in checkpoints if c.run_id is not None]
    runs = list(dict.fromkeys(c.run_id for c in known if c.run_id is not None))
    if len(runs) > 1:
        if not several_runs:
            other = next(c for c in known if c.run_id != known[0].run_id)
            raise AveragingError(
                f"{other.path}: of another training run than {known[0].path} (run {other.run_id}, not "
                f"{known[0].run_id}); the mean of independently trained networks is usually far worse than each "
                "of them: average the files of one run, or give --allow-several-runs"
            )
        return "mean-" + hashlib.sha256(" ".join(sorted(runs)).encode()).hexdigest()[:16]
    unknown = [c for c in checkpoints if c.run_id is None]
    if unknown and warn is not None and len({c.path for c in checkpoints}) > 1:
        warn(
            f"{unknown[0].path}: records no training run (written before runs had an identity): not checked "
            "to be of the run of the other files"
        )
    return runs[0] if runs else None


def average_checkpoints(
    paths: Sequence[str],
    *,
    several_runs: bool = False,
    warn: Callable[[str], None] | None = None,
    option: str = "average_checkpoints",
) -> Checkpoint:
    """The network whose weights are the mean of those of the model files ``paths`` (all of
    the same settings and vocabularies, and of one run unless ``several_runs``: else
    ``AveragingError``; a file given twice counts twice, read once); ``warn`` is told of files
    whose run is unknown; ``option`` is what a CSLM's refusal says takes networks."""
    if not paths:
        raise AveragingError("no model file to average")
    read = {path: load_checkpoint(path, option) for path in dict.fromkeys(paths)}
    checkpoints = [read[path] for path in paths]
    first = checkpoints[0]
    for other in checkpoints[1:]:
        why = _difference(first, other)
        if why is not None:
            raise AveragingError(
                f"{other.path}: another network than {first.path} ({why}); only model files of "
                "one training run (the same architecture, sizes and vocabularies) can be averaged"
            )
    run = _run_of(checkpoints, several_runs, warn)
    weights = {}
    for name, tensor in first.state_dict.items():
        total = torch.zeros(tensor.shape, dtype=torch.float64)
        for checkpoint in checkpoints:
            total += checkpoint.state_dict[name].to(torch.float64)
        weights[name] = (total / len(checkpoints)).to(tensor.dtype)
    last = checkpoints[-1]
    info = {**last.info, "averaged": {"files": list(paths), "steps": [c.info.get("steps") for c in checkpoints]}}
    info.pop("run_id", None)
    if run is not None:
        info["run_id"] = run
    return Checkpoint(
        config=first.config,
        src_vocab=first.src_vocab,
        tgt_vocab=first.tgt_vocab,
        state_dict=weights,
        info=info,
        arch=first.arch,
        subwords=first.subwords,
    )


def write_checkpoint(checkpoint: Checkpoint, path: str) -> None:
    """``checkpoint`` as a model file at ``path`` (no training state), through the one writer."""
    save_checkpoint(
        path,
        checkpoint.build_model(),
        checkpoint.src_vocab,
        checkpoint.tgt_vocab,
        checkpoint.info,
        subwords=checkpoint.subwords,
    )
