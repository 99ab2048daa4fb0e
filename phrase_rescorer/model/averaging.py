"""Checkpoint averaging: one network whose every weight is the mean of that weight over several
model files of one run (``phrase-rescorer average``).

Averaging the parameters of the last checkpoints of a run (Vaswani et al. 2017, section 6.1:
the last 5 or 20 checkpoints, written at 10-minute intervals) gives a network near the centre
of the region the optimizer wanders in late in training, often better than any one of them;
the published Transformer systems on Multi30k average their last 10. It is only meaningful for
networks of one training run: identical architecture, sizes and vocabularies (the same weight
means the same thing in each); files that differ in any of these, in their direction or in the
order they write their target (``Checkpoint.right_to_left``), are
refused (``AveragingError``, exit 2) before anything is
computed. Each weight is summed in float64 and divided by the number of files, so that N copies
of one file average to exactly that file's weights.

The averaged network is written as a normal model file (``save_checkpoint``, through
``output.AtomicOutput``): it scores, translates and rescores as any other. Its ``info`` is the
last file's (the latest network of the run), with ``averaged`` naming the files and their steps;
``best_valid`` stays that of the run, not a held-out figure of the averaged network.
"""

from __future__ import annotations

from collections.abc import Sequence

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


def average_checkpoints(paths: Sequence[str]) -> Checkpoint:
    """The network whose weights are the mean of those of the model files ``paths`` (all of
    the same settings and vocabularies: else ``AveragingError``)."""
    if not paths:
        raise AveragingError("no model file to average")
    checkpoints = [load_checkpoint(path) for path in paths]
    first = checkpoints[0]
    for other in checkpoints[1:]:
        why = _difference(first, other)
        if why is not None:
            raise AveragingError(
                f"{other.path}: another network than {first.path} ({why}); only model files of "
                "one training run (the same architecture, sizes and vocabularies) can be averaged"
            )
    weights = {}
    for name, tensor in first.state_dict.items():
        total = torch.zeros(tensor.shape, dtype=torch.float64)
        for checkpoint in checkpoints:
            total += checkpoint.state_dict[name].to(torch.float64)
        weights[name] = (total / len(checkpoints)).to(tensor.dtype)
    last = checkpoints[-1]
    info = {**last.info, "averaged": {"files": list(paths), "steps": [c.info.get("steps") for c in checkpoints]}}
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
