"""The reranked system the dev set chose, written as a bundle for ``translate-hybrid``.

When its runs are done, an experiment with sentence-level features (``--lm``, ``--nmt``) writes
``OUT/hybrid/``, the bundle (``hybrid.bundle``) of one tuned system: of the reranked systems, the
one of highest mean held-out dev BLEU (each dev sentence chosen by weights tuned without it; the
first listed among equals; test BLEU chooses nothing), and of its runs the one of highest held-out
dev BLEU (the first among equals). The bundle holds that run's tuned moses.ini and reranking
weights, the system's networks in the order of their features (``CSLM0``, ``NMT0``, ...), the
decoder's ``--rerank-nbest`` distinct lists, and, for a row "with the networks' candidates", every
forward ``--nmt`` network as a candidate network with the experiment's beam and list size
(``--network-candidates K``: K best of a beam of K, ``translate``'s other defaults) merged as the
experiment merged them (constrained decoding, the ini's n-gram LM, ``--candidates-moses-nbest``).
``translate-hybrid OUT/hybrid test.en -`` writes what that run's ``rerank/KEY/test.best`` holds.

Every finished start writes it again from the runs finished by then (the old bundle replaced once
the new one is complete). Where none can be written (a moses.ini ``path=`` that is relative, a
network file replaced since the experiment read it: the bundle would record other bytes; no
reranked row) a warning says why, an earlier start's bundle is removed (no longer the choice), and
the experiment goes on: the report is its result, the bundle a convenience.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from ..errors import ProgramError
from ..hybrid.bundle import write_bundle
from ..hybrid.bundle_read import BundleError
from ..hybrid.system import RECORD, Candidates
from ..model.kinds import path_of
from ..moses.toolkit import MosesToolkit
from .candidates import CANDIDATE_BATCH, proposes_candidates
from .reranked import SentenceModels, rerank_dir
from .systems import System

#: The bundle's directory in the experiment's ``--out``.
BUNDLE_DIR = "hybrid"
#: The length normalisation of the experiment's candidate networks (``translate_nbest``'s default).
CANDIDATE_ALPHA = 0.6


@dataclass(frozen=True)
class Choice:
    """The reranked system dev chose (``key``), its mean held-out dev BLEU, and its chosen run
    (1-based) with that run's held-out dev BLEU."""

    key: str
    mean: float
    run: int
    run_heldout: float


def dev_choice(report: Mapping, keys: Sequence[str]) -> Choice | None:
    """The choice among the systems ``keys`` (in their order) of the report ``experiment.json``
    holds, by held-out dev BLEU; None when none of them has a finished run."""
    best: Choice | None = None
    for key in keys:
        runs = report["systems"].get(key, {}).get("runs", [])
        heldout = [run.get("dev_heldout") for run in runs]
        if not runs or None in heldout:
            continue
        mean = math.fsum(heldout) / len(heldout)  # exactly rounded: the same for any order of the runs
        if best is None or mean > best.mean:
            index = max(range(len(heldout)), key=lambda i: (heldout[i], -i))
            best = Choice(key, mean, index + 1, heldout[index])
    return best


def system_networks(models: SentenceModels, features: Sequence[tuple[str, str, str]]) -> list[str]:
    """The model files of ``features``, in the order of the lists' features (the bundle's ``-m``)."""
    return [path_of(source) for feature, source in models.named() if feature in features]


def forward_networks(models: SentenceModels) -> tuple[str, ...]:
    """The ``--nmt`` networks that translate forward, in order: the candidate networks."""
    return tuple(path_of(source) for (_, kind, _), source in models.named() if proposes_candidates(kind, source))


def write_chosen(
    toolkit: MosesToolkit,
    out_dir: str,
    report: Mapping,
    reranked: Sequence[tuple[System, Sequence[tuple[str, str, str]], bool]],
    models: SentenceModels,
    *,
    nbest: int,
    candidates: int,
    say: Callable[[str], None],
    warn: Callable[[str], None],
    reached_only: bool = False,
    ensemble: bool = False,
    moses_nbest: int | None = None,
) -> str | None:
    """Write ``out_dir/hybrid`` for the choice among the ``reranked`` systems (each with its
    features and whether it reranks the lists joined by the networks' candidates) and return its
    path. None when no system has a finished run, or (``warn``) when the chosen one cannot be
    bundled; an earlier start's bundle is then removed, as it is no longer the choice."""
    for name in os.listdir(out_dir):  # temporaries of a start interrupted while writing
        if name.startswith((f".{BUNDLE_DIR}.", f"..{BUNDLE_DIR}.")):
            shutil.rmtree(os.path.join(out_dir, name), ignore_errors=True)
    final = os.path.join(out_dir, BUNDLE_DIR)
    choice = dev_choice(report, [system.key for system, _, _ in reranked])
    if choice is None:
        _remove_stale(final, None, warn)
        return None
    system, features, with_candidates = next(r for r in reranked if r[0].key == choice.key)
    run_dir = os.path.join(out_dir, "systems", str(system.reranks), f"run{choice.run}")
    fresh = tempfile.mkdtemp(prefix=f".{BUNDLE_DIR}.", dir=out_dir)  # empty: write_bundle fills it
    old = os.path.join(out_dir, f".{BUNDLE_DIR}.old")
    try:
        write_bundle(
            fresh,
            toolkit,
            ini=os.path.join(run_dir, "moses.ini"),
            weights=os.path.join(rerank_dir(run_dir), system.key, "weights"),
            models=system_networks(models, features),
            candidates=Candidates(
                forward_networks(models),
                candidates,
                candidates,
                CANDIDATE_ALPHA,
                None,
                reached_only=reached_only,
                ensemble=ensemble,
                moses_nbest=moses_nbest,
                batch=CANDIDATE_BATCH,
            )
            if with_candidates
            else None,
            nbest=nbest,
        )
        _check_networks(fresh, models)
        if os.path.lexists(final):
            os.rename(final, old)
        os.rename(fresh, final)
    except (ProgramError, OSError) as e:
        shutil.rmtree(fresh, ignore_errors=True)
        _remove_stale(final, f"the system dev chose ({system.label}, run {choice.run}) cannot be bundled: {e}", warn)
        return None
    shutil.rmtree(old, ignore_errors=True)
    say(
        f"chosen on held-out dev BLEU: {system.label} ({choice.mean:.2f} over its runs), run {choice.run} "
        f"({choice.run_heldout:.2f}); its bundle {final}: phrase-rescorer translate-hybrid {final} IN OUT"
    )
    return final


def _check_networks(directory: str, models: SentenceModels) -> None:
    """Refuse a bundle whose networks are not the bytes the experiment read (a file replaced
    while it ran): the bundle records what is on disk when it is written."""
    fingerprints = models.fingerprints()
    read = {os.path.abspath(path_of(source)): fingerprints[feature[0]] for feature, source in models.named()}
    with open(os.path.join(directory, RECORD), encoding="utf-8") as f:
        record = json.load(f)
    for entry in [*record["models"], *(record["candidates"] or {}).get("networks", [])]:
        if read.get(entry["path"]) != entry["sha256"]:
            raise BundleError(f"{entry['path']}: changed since the experiment read it (its SHA-256 differs)")


def _remove_stale(final: str, why: str | None, warn: Callable[[str], None]) -> None:
    """Remove an earlier start's bundle, no longer the choice, saying ``why`` (said too when
    there is none to remove, unless ``why`` is None)."""
    stale = os.path.lexists(final)
    if stale:
        shutil.rmtree(final, ignore_errors=True)
    if why is not None or stale:
        removed = f"; the earlier bundle {final} removed" if stale else ""
        warn(f"no bundle of the experiment's chosen system: {why or 'no reranked system has a finished run'}{removed}")
