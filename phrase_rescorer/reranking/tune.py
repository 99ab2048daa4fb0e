"""The reranking weights tuned on the dev set's n-best list: the one sequence of ``rerank-tune`` and
of ``experiment``'s reranked systems. The list is read (copied plain for Moses' extractor), checked
against the reference, the start weights tuned (``mert``) and written; with a held-out file, each
dev sentence is chosen by the weights tuned on the other half (``heldout``) with the same settings.
Given sets of features to try leaving out, the held-out BLEU of each chooses which are tuned."""

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
from .nbest_features import read_matrix, write_without_features
from .origins import Origins, origins
from .weights import Weights, read_weights_file, vector, write_weights_file


class HeldOutError(mert.RerankError):
    """A held-out tuning failed (the tuned weights are written)."""


#: The directory (in the work directory) of the list without the ``k``-th set of features tried
#: (from 1; the 0-th, the features left out in any case, uses the work directory itself).
CHOICE_DIR = "choice{k}"


def work_paths(heldout_lines: bool, choices: int = 0) -> list[str]:
    """What ``tune_on_dev`` may write in its work directory, relative to it: the list's copy and
    the tuning's files; with held-out lines (or ``choices`` sets of features tried), the held-out
    tunings' (``heldout.WORK_PATHS`` under ``heldout.SUBDIR``), for each set tried also under its
    ``CHOICE_DIR``, with that list's copy."""
    held = [os.path.join(heldout.SUBDIR, p) for p in heldout.WORK_PATHS] if heldout_lines or choices else []
    paths = [mert.NBEST_COPY, *mert.WORK_FILES, *held]
    for k in range(1, choices + 1):
        paths += [os.path.join(CHOICE_DIR.format(k=k), p) for p in (mert.NBEST_COPY, *held)]
    return paths


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
    left_out: list[str] | None = None  # the features tuned without (the chosen set, given ``choices``)


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


def feature_sets(
    leave_out: Sequence[str], choices: Sequence[Sequence[str]], option: str = "choices"
) -> list[list[str]]:
    """The sets of features to try leaving out: ``leave_out`` alone, then with each of
    ``choices`` too, each set once (in the order given, a name once in each); a choice that
    leaves out nothing more than ``leave_out`` refused (:class:`UsageError`, naming ``option``)."""
    sets: list[list[str]] = [list(leave_out)]
    for choice in choices:
        if set(choice) <= set(leave_out):
            raise UsageError(f"{option} {' '.join(choice)}: left out in any case; give features to try leaving out")
        names = list(dict.fromkeys([*leave_out, *choice]))
        if not any(set(names) == set(known) for known in sets):
            sets.append(names)
    return sets


def _left_out(names: Sequence[str]) -> str:
    return f"{' '.join(names)} left out" if names else "no feature left out"


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
    choices: Sequence[Sequence[str]] = (),
    choices_name: str = "choices",
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
    a temporary directory; ``work_paths`` lists them), removed with ``remove_work`` unless a
    tuning fails (its message names its log there). ``leave_out``: features (by name) the
    optimiser never sees (the list's copy for Moses lacks them, ``mert.tune``), their weights 0
    from the start; a name the list lacks, or all of them, refused at the list's first line,
    naming ``leave_out_name`` (:func:`left_out_columns`). ``choices``: sets of features to try
    leaving out as well (``feature_sets``; checked as ``leave_out`` is, naming
    ``choices_name``): the held-out lines of each set are computed, and the set of the highest
    held-out BLEU (the first of equal ones, ``leave_out`` alone first) is tuned on the whole list
    (it needs ``bleu``). ``bleu``: tokenized BLEU, to say the start, tuned (also the weights
    file's first line, after ``title``) and held-out figures."""
    sets = feature_sets(leave_out, choices, choices_name)
    if len(sets) > 1 and bleu is None:
        raise ValueError("choosing the features left out needs bleu")
    refs = read_lines(reference)
    start_weights: Weights | dict[str, list[float]] = read_weights_file(init) if init else {}
    directory = work_dir if work_dir is not None else tempfile.mkdtemp(prefix="rerank-")
    os.makedirs(directory, exist_ok=True)
    remove = remove_work or work_dir is None
    options: dict[str, Any] = {"seed": seed, "restarts": restarts, "threads": threads, "optimizer": optimizer}
    try:
        copy = first_copy = os.path.join(directory, mert.NBEST_COPY)

        def check(layout: Layout) -> None:  # a name refused at the list's first line
            left_out_columns(nbest, layout, leave_out, leave_out_name)
            for choice in choices:
                left_out_columns(nbest, layout, choice, choices_name)
                both = f"{leave_out_name} with {choices_name} {' '.join(choice)}"
                left_out_columns(nbest, layout, [*leave_out, *choice], both)

        matrix = read_matrix(nbest, copy_to=copy, leave_out=leave_out, check_layout=check if any(sets) else None)
        count = matrix.sentence_count
        if len(refs) != count:
            raise InputError(
                f"{reference}: {len(refs):,} lines, but {nbest} lists {count:,} sentences (IDs 0 to {count - 1}): "
                "give the reference of the sentences the list translates"
            )
        for name, needs in ((heldout_name, heldout_out is not None), (choices_name, len(sets) > 1)):
            if needs and count < heldout.FOLDS:
                raise InputError(f"{nbest} lists {count:,} sentence(s): {name} needs at least {heldout.FOLDS}")

        def start_for(names: Sequence[str]) -> np.ndarray:
            start = vector(start_weights, matrix.layout, missing=0.0, source=init or "start")
            left_out = left_out_columns(nbest, matrix.layout, names, leave_out_name) if names else []
            start[left_out] = 0.0
            weighted_sums(matrix, start, init or "the start weights")  # totals beyond the range: refused
            # before tuning, and values beyond Moses' floats, where Moses is given them
            mert.check_single_precision(matrix, start, init or "the start weights", skip=left_out)
            return start

        def with_names(names: Sequence[str]) -> dict[str, Any]:
            return {**options, "leave_out": list(names)} if names else options

        def held_out(names: Sequence[str], list_copy: str, held_dir: str) -> list[str]:
            lines = heldout.heldout_lines(
                toolkit, list_copy, matrix, refs, start_for(names), held_dir, mbr=mbr, **with_names(names)
            )
            assert lines is not None  # None for fewer sentences than folds, refused above
            return lines

        for names in sets:
            start_for(names)  # every set's start checked before any tuning
        held: list[str] | None = None
        if len(sets) > 1:
            assert bleu is not None
            say(
                f"choosing the features by held-out dev BLEU ({optimizer}; each half of the dev sentences "
                f"chosen by the weights tuned on the other): {len(sets)} sets"
            )
            best_score, best = -1.0, 0
            for k, names in enumerate(sets):
                set_dir = directory if k == 0 else os.path.join(directory, CHOICE_DIR.format(k=k))
                set_copy = os.path.join(set_dir, mert.NBEST_COPY)
                if k:  # from the first copy, a plain file (the list may have come through a pipe)
                    os.makedirs(set_dir, exist_ok=True)
                    write_without_features(first_copy, [name for name in names if name not in leave_out], set_copy)
                lines = held_out(names, set_copy, os.path.join(set_dir, heldout.SUBDIR))
                score = bleu(lines, refs)
                say(f"  {score:.2f} {_left_out(names)}")
                if score > best_score:  # the first of equal ones
                    best_score, best, held, copy = score, k, lines, set_copy
            leave_out = sets[best]
            say(f"features chosen: {_left_out(leave_out)} (held-out dev BLEU {best_score:.2f})")
        start = start_for(leave_out)
        result = mert.tune(toolkit, copy, [refs], start, directory, layout=matrix.layout, **with_names(leave_out))
        tuned = Tuned(
            result.weights, result.dev_bleu, output_lines(matrix, result.weights, mbr), left_out=list(leave_out)
        )
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
        if held is None:
            halves = "the weights tuned on each half of the dev sentences choose the other's"
            say(f"held-out dev BLEU: {halves} ({optimizer})")
            try:
                held = held_out(leave_out, copy, os.path.join(directory, heldout.SUBDIR))
            except mert.RerankError as e:
                raise HeldOutError(str(e)) from e
        tuned.heldout = held
        with AtomicOutput(heldout_out) as out:
            out.write("".join(line + "\n" for line in held).encode("utf-8"))
        if bleu is not None:
            say(f"dev BLEU held out{described(mbr)}: {bleu(held, refs):.2f}; wrote {heldout_out}")
        tuned.heldout_origins = origins(matrix, held)
        if tuned.heldout_origins is not None:
            say(f"chosen held out: {tuned.heldout_origins.summary()}")
        return tuned
    except mert.RerankError:
        remove = False  # the message names its log there
        raise
    finally:
        if remove:
            shutil.rmtree(directory, ignore_errors=True)
