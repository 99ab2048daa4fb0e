"""Held-out dev BLEU of reranking weights: two-fold cross-validation on the dev lists.

Reranking weights are tuned on the dev set's own lists, so a reranked system's dev BLEU is the
tuning set's: optimistic, and the more so the more room its features give the optimiser to fit
those sentences. To compare reranked systems on dev, each dev sentence's hypothesis is chosen
here by weights tuned without it: the sentences split into the even-numbered and the
odd-numbered ones, the weights tuned on each half (the same optimiser, start weights, seed,
restarts and threads as the full tuning) choose the other half's hypotheses. The chosen lines
are the whole dev set's, in order; their BLEU is the held-out dev BLEU. It costs two more
tunings on half the lines. ``experiment`` reports it for every reranked run, ``rerank-tune
--held-out`` for its list.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence

import numpy as np

from ..moses.nbest import SEPARATOR, read_nbest
from ..moses.toolkit import MosesToolkit
from ..output import AtomicOutput
from .choose import best_per_sentence
from .mbr import Mbr
from .mert import RESTARTS, WORK_FILES, tune
from .nbest_features import NbestMatrix

#: The folds: sentence ``i`` is in fold ``i % FOLDS`` and gets the number ``i // FOLDS`` there.
FOLDS = 2
#: The name of the held-out tunings' directory beside a full tuning's files.
SUBDIR = "heldout"
#: What ``heldout_lines`` writes in its ``work_dir``: each fold's list and its tuning's files.
WORK_PATHS = tuple(f"fold{k}.nbest" for k in range(FOLDS)) + tuple(
    os.path.join(f"tune{k}", name) for k in range(FOLDS) for name in WORK_FILES
)


def fold_matrix(matrix: NbestMatrix, fold: int) -> NbestMatrix:
    """The lines of ``matrix``'s sentences in ``fold``, the sentences numbered 0, 1, 2, ... again."""
    keep = matrix.sentences % FOLDS == fold
    return NbestMatrix(
        f"{matrix.path} (fold {fold})",
        matrix.layout,
        matrix.features[keep],
        matrix.sentences[keep] // FOLDS,
        [h for h, k in zip(matrix.hypotheses, keep, strict=True) if k],
    )


def write_folds(nbest: str, work_dir: str) -> list[str]:
    """The list ``nbest`` split into its folds' lists (plain text, for Moses' extractor) in
    ``work_dir``, each line as read but for its renumbered sentence ID."""
    paths = [os.path.join(work_dir, f"fold{k}.nbest") for k in range(FOLDS)]
    os.makedirs(work_dir, exist_ok=True)
    with contextlib.ExitStack() as stack:
        outs = [stack.enter_context(AtomicOutput(path, compress=False)) for path in paths]
        for line in read_nbest(nbest):
            rest = line.raw[line.raw.find(SEPARATOR) :]  # from the first "|||" on, as read
            outs[line.sentence % FOLDS].write(b"%d" % (line.sentence // FOLDS) + rest + b"\n")
    return paths


def heldout_lines(
    toolkit: MosesToolkit,
    nbest: str,
    matrix: NbestMatrix,
    references: Sequence[str],
    start: np.ndarray,
    work_dir: str,
    *,
    seed: int,
    restarts: int = RESTARTS,
    threads: int = 1,
    optimizer: str = "mert",
    leave_out: Sequence[str] = (),
    mbr: Mbr | None = None,
) -> list[str] | None:
    """Each dev sentence's hypothesis chosen by the weights tuned on the other fold (module
    docstring), in order; None for a list of fewer sentences than folds. ``matrix`` is
    ``nbest`` read (``read_matrix``), ``references`` the dev reference's lines; ``restarts``,
    ``threads``, ``optimizer`` and ``leave_out`` as ``mert.tune`` takes them; ``mbr``: chosen by
    that rule under those weights."""
    count = matrix.sentence_count
    if count < FOLDS:
        return None
    if len(references) != count:
        raise ValueError(f"{nbest}: {count:,} sentences, the reference has {len(references):,} lines")
    paths = write_folds(nbest, work_dir)
    chosen: list[str] = [""] * count
    for k, path in enumerate(paths):
        result = tune(
            toolkit,
            path,
            [list(references[k::FOLDS])],
            start,
            os.path.join(work_dir, f"tune{k}"),
            layout=matrix.layout,
            seed=seed,
            restarts=restarts,
            threads=threads,
            optimizer=optimizer,
            leave_out=leave_out,
        )
        other = (k + 1) % FOLDS
        held = fold_matrix(matrix, other)
        ids, picked = best_per_sentence(held, result.weights, mbr)
        for sentence, index in zip(ids, picked, strict=True):
            chosen[sentence * FOLDS + other] = held.hypotheses[index]
    return chosen
