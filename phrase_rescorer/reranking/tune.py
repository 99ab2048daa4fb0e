"""The reranking weights tuned on the dev set's n-best list: the one sequence of ``rerank-tune`` and
of ``experiment``'s reranked systems. The list is read (copied plain for Moses' extractor), checked
against the reference, the start weights tuned (``mert``) and written; with a held-out file, each
dev sentence is chosen by the weights tuned on the other half (``heldout``) with the same settings."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..data.corpus import read_lines
from ..errors import InputError, UsageError
from ..moses.nbest import Layout
from ..moses.toolkit import MosesToolkit
from ..output import AtomicOutput
from . import heldout, mert
from .choose import output_lines, weighted_sums
from .mbr import Mbr
from .nbest_features import read_matrix
from .origins import Origins, origins
from .weights import Weights, read_weights_file, vector, write_weights_file


class HeldOutError(mert.RerankError):
    """A held-out tuning failed (the tuned weights are written)."""


@dataclass
class Tuned:
    weights: np.ndarray  # the tuned weights, in the list's layout
    optimizer_bleu: float  # the optimiser's own figure (``mert.TuneResult.dev_bleu``)
    lines: list[str]  # each dev sentence's hypothesis chosen by ``weights`` (and the MBR rule)
    start_bleu: float | None = None  # with ``bleu``: that of the start weights' choice
    tuned_bleu: float | None = None  # with ``bleu``: that of ``lines``
    heldout: list[str] | None = None  # with ``heldout_out``: the lines written there
    origins: Origins | None = None  # a merged list's: where ``lines`` come from
    heldout_origins: Origins | None = None  # ... and the held-out lines


def described(rule: Mbr | None) -> str:
    """What a report line says of the MBR rule: nothing without one."""
    return "" if rule is None else f", MBR of {rule.size} at scale {rule.scale:g}"


def left_out_columns(path: str, layout: Layout, names: Sequence[str], option: str = "leave_out") -> list[int]:
    """The value columns (from 0) of the features ``names`` in the list ``path`` of features
    ``layout``, every value of each; a name the list does not have, or all of its features,
    refused (:class:`UsageError`, naming ``option``, the list and its features)."""
    features = [name for name, _ in layout]
    missing = [name for name in names if name not in features]
    if missing:
        raise UsageError(
            f"{option} {', '.join(missing)}: {path} has no such feature (its features: {' '.join(features)})"
        )
    if set(features) <= set(names):
        raise UsageError(f"{option} names every feature of {path}: leave at least one to tune")
    columns: list[int] = []
    start = 0
    for name, count in layout:
        if name in names:
            columns.extend(range(start, start + count))
        start += count
    return columns


def tune_on_dev(
    toolkit: MosesToolkit,
    nbest: str,
    reference: str,
    weights_out: str,
    *,
    init: str | None = None,
    work_dir: str | None = None,
    remove_work: bool = False,
    optimizer: str = "mert",
    leave_out: Sequence[str] = (),
    leave_out_name: str = "leave_out",
    seed: int = 1,
    restarts: int = mert.RESTARTS,
    threads: int = 1,
    mbr: Mbr | None = None,
    heldout_out: str | None = None,
    heldout_name: str = "held-out dev BLEU",
    bleu: Callable[[Sequence[str], Sequence[str]], float] | None = None,
    title: str = "",
    say: Callable[[str], None] = lambda _: None,
) -> Tuned:
    """Tune the dev list ``nbest``'s weights for BLEU against ``reference`` from ``init`` (None: all
    0) into ``weights_out``; with ``heldout_out``, the held-out lines there (fewer sentences than
    folds refused first, naming ``heldout_name``). The optimisers' files go to ``work_dir`` (None:
    a temporary directory), removed with ``remove_work`` unless a tuning fails (its message names
    its log there). ``leave_out``: features (by name) the optimiser never sees (the list's copy
    for Moses lacks them, ``mert.tune``), their weights 0 from the start; a name the list lacks,
    or all of them, refused at the list's first line, naming ``leave_out_name``
    (:func:`left_out_columns`). ``bleu``: tokenized BLEU, to say the start, tuned (also the
    weights file's first line, after ``title``) and held-out figures."""
    refs = read_lines(reference)
    start_weights: Weights | dict[str, list[float]] = read_weights_file(init) if init else {}
    directory = work_dir if work_dir is not None else tempfile.mkdtemp(prefix="rerank-")
    os.makedirs(directory, exist_ok=True)
    remove = remove_work or work_dir is None
    options: dict[str, Any] = {"seed": seed, "restarts": restarts, "threads": threads, "optimizer": optimizer}
    try:
        copy = os.path.join(directory, mert.NBEST_COPY)

        def check(layout: Layout) -> None:  # a name refused at the list's first line
            left_out_columns(nbest, layout, leave_out, leave_out_name)

        matrix = read_matrix(nbest, copy_to=copy, leave_out=leave_out, check_layout=check if leave_out else None)
        count = matrix.sentence_count
        if len(refs) != count:
            raise InputError(
                f"{reference}: {len(refs):,} lines, but {nbest} lists {count:,} sentences (IDs 0 to {count - 1}): "
                "give the reference of the sentences the list translates"
            )
        if heldout_out is not None and count < heldout.FOLDS:
            raise InputError(f"{nbest} lists {count:,} sentence(s): {heldout_name} needs at least {heldout.FOLDS}")
        start = vector(start_weights, matrix.layout, missing=0.0, source=init or "start")
        left_out = left_out_columns(nbest, matrix.layout, leave_out, leave_out_name) if leave_out else []
        if leave_out:
            start[left_out] = 0.0
            options["leave_out"] = list(leave_out)
        weighted_sums(matrix, start, init or "the start weights")  # totals beyond the range: refused before tuning
        # and values beyond Moses' floats, where Moses is given them
        mert.check_single_precision(matrix, start, init or "the start weights", skip=left_out)
        result = mert.tune(toolkit, copy, [refs], start, directory, layout=matrix.layout, **options)
        tuned = Tuned(result.weights, result.dev_bleu, output_lines(matrix, result.weights, mbr))
        tuned.origins = origins(matrix, tuned.lines)
        comment = ""
        if bleu is not None:
            tuned.start_bleu, tuned.tuned_bleu = bleu(output_lines(matrix, start, mbr), refs), bleu(tuned.lines, refs)
            comment = f"{title}: dev BLEU {tuned.start_bleu:.2f} -> {tuned.tuned_bleu:.2f}{described(mbr)}"
        write_weights_file(weights_out, matrix.layout, result.weights, comment=comment)
        if bleu is not None:
            without = f" ({' '.join(leave_out)} left out: weight 0)" if leave_out else ""
            say(f"{nbest}: {len(matrix.sentences):,} hypotheses, features {' '.join(matrix.names)}{without}")
            say(
                f"dev BLEU (tokenized, as MERT scores it{described(mbr)}): {tuned.start_bleu:.2f} with the start "
                f"weights, {tuned.tuned_bleu:.2f} reranked; wrote {weights_out}"
            )
        if tuned.origins is not None:
            say(f"chosen on dev: {tuned.origins.summary()}")
        if heldout_out is None:
            return tuned
        say(f"held-out dev BLEU: the weights tuned on each half of the dev sentences choose the other's ({optimizer})")
        held_dir = os.path.join(directory, heldout.SUBDIR)
        try:
            tuned.heldout = heldout.heldout_lines(toolkit, copy, matrix, refs, start, held_dir, mbr=mbr, **options)
        except mert.RerankError as e:
            raise HeldOutError(str(e)) from e
        assert tuned.heldout is not None  # None for fewer sentences than folds, refused above
        with AtomicOutput(heldout_out) as out:
            out.write("".join(line + "\n" for line in tuned.heldout).encode("utf-8"))
        if bleu is not None:
            say(f"dev BLEU held out{described(mbr)}: {bleu(tuned.heldout, refs):.2f}; wrote {heldout_out}")
        tuned.heldout_origins = origins(matrix, tuned.heldout)
        if tuned.heldout_origins is not None:
            say(f"chosen held out: {tuned.heldout_origins.summary()}")
        return tuned
    except mert.RerankError:
        remove = False  # the message names its log there
        raise
    finally:
        if remove:
            shutil.rmtree(directory, ignore_errors=True)
