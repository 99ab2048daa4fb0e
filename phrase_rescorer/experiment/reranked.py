"""The experiment's reranked systems: the rows the sentence-level features add, each built on a
decoder system's tuned runs.

The features are the CSLM's (``--lm``, the paper's "+ CSLM" rows) and those of translation
networks on sentence pairs (``--nmt``, repeatable: "+ NMT" has one feature per network, NMT0,
NMT1, ... in the order given, e.g. a forward network and an inverse one). With both, every
decoder system gets three reranked systems:
"+ CSLM", "+ NMT" and "+ CSLM + NMT" on the baseline's runs, "+ CSLM + RNN", "+ NMT + RNN" and
"+ CSLM + RNN + NMT" on the + RNN runs, and so on. For every finished MERT run of a decoder
system, the lists are decoded once with the run's tuned moses.ini (distinct n-best lists of dev
and test, written by the decoding that gives the run's 1-best output: ``decoded_list``; a run
without them, borrowed or finished without these models or by an earlier version, is decoded
again here) and every feature appended once (``nbest``); each
reranked system then tunes its reranking weights on dev with Moses' mert (or kbmira:
``--rerank-optimizer``) from the run's tuned weights (``reranking.tune``, as ``rerank-tune``;
the run's own seed) on the list with its own features only (the others removed), and takes the
best hypothesis of each dev and test sentence. Files, in the decoder run's directory::

    rerank/dev.nbest.gz, rerank/test.nbest.gz    the lists with every feature
    rerank/features.json                          each feature's model (SHA-256), written last
    rerank/KEY/{dev,test}.nbest.gz               a system's lists, when it uses fewer features
    rerank/KEY/weights                            its tuned reranking weights
    rerank/KEY/dev.best, rerank/KEY/test.best     the chosen hypotheses
    rerank/KEY/dev.heldout                        each dev sentence's hypothesis chosen by weights
                                                  tuned on the other half (``reranking.heldout``)
    rerank/KEY/result.json                        written last: the reranked run is finished (on
                                                  merged lists, where the chosen held-out and test
                                                  hypotheses come from: ``reranking.origins``)

With ``--network-candidates`` every reranked system with the NMT features also gets a twin
reranked the same way on the lists joined by the networks' own candidates (``candidates``: its
lists in ``rerank/candidates``, its files in ``rerank/KEY-candidates``).

With ``--rerank-choose-leave-out`` each reranked run also tries its list without each set of
features given (those of the set its list has; ``own_choices``) and tunes the set of the highest
held-out dev BLEU (``reranking.tune``); its ``result.json`` records the set left out.

A restarted experiment keeps a finished reranked run and redoes an unfinished one. The models
may change between two starts (``--lm`` or ``--nmt`` added, replaced by another file, or left
out): the decoder runs are kept, the lists are not decoded again, the features of models that
changed or went are removed from them and those of new or changed models appended, and a
reranked run is redone when a model of its features changed, or the optimizer, or the sets it chooses
among (as cut to its list: adding ``FromMoses`` retunes the twins only).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import torch

from ..data.corpus import read_lines
from ..errors import EXIT_OS
from ..lm.lm_file import load_lm
from ..model.checkpoint import load_checkpoint
from ..model.kinds import ModelFile, path_of
from ..moses.nbest import read_nbest
from ..moses.toolkit import MosesToolkit
from ..output import AtomicOutput
from ..reranking.choose import output_lines
from ..reranking.heldout import FOLDS
from ..reranking.mert import RerankError
from ..reranking.nbest_features import read_matrix, write_without_features
from ..reranking.origins import origins
from ..reranking.tune import tune_on_dev
from ..scoring.features import CSLMFeature, TranslationFeature, read_source_text
from ..scoring.nbest import Feature, append_features
from .moses_runs import decode_nbest
from .systems import ExperimentError, System
from .workdir import sha256_of

#: The feature each sentence-level model adds (name, word in keys, word in labels); the i-th
#: translation network's is ``nmt_feature(i)``.
CSLM = ("CSLM0", "cslm", "CSLM")
NMT = ("NMT0", "nmt", "NMT")
#: The names of the features the experiment appends (any other feature of a list is the decoder's).
OURS = re.compile(r"(?:CSLM|NMT)[0-9]+")
#: What a reranked run's models record of the sets of features it chose among (``own_choices``).
CHOICES = "choose_leave_out"


def nmt_feature(index: int) -> tuple[str, str, str]:
    return (f"NMT{index}", NMT[1], NMT[2])


@dataclass(frozen=True)
class SentenceModels:
    """The sentence-level models of an experiment (None, (): not used), each file read
    (``kinds.open_model``) when it is used unless given read."""

    lm: str | ModelFile | None = None
    nmt: tuple[str | ModelFile, ...] = ()

    def named(self) -> list[tuple[tuple[str, str, str], str | ModelFile]]:
        """Each feature with its model file: the CSLM's, then one per translation network."""
        return ([(CSLM, self.lm)] if self.lm else []) + [(nmt_feature(i), p) for i, p in enumerate(self.nmt)]

    def features(self) -> list[tuple[str, str, str]]:
        return [f for f, _ in self.named()]

    def fingerprints(self) -> dict[str, str]:
        """Each feature's name and the SHA-256 of its model file (of the bytes read, for a file read)."""
        return {
            f[0]: source.sha256 if isinstance(source, ModelFile) else sha256_of(path_of(source))
            for f, source in self.named()
        }

    def combinations(self) -> list[list[tuple[str, str, str]]]:
        """Each reranked system's features: each kind alone (the CSLM; every translation network),
        then all together."""
        kinds: dict[str, list[tuple[str, str, str]]] = {}
        for f in self.features():
            kinds.setdefault(f[1], []).append(f)
        return list(kinds.values()) + ([self.features()] if len(kinds) > 1 else [])


def reranked(system: System, features: Sequence[tuple[str, str, str]]) -> System:
    """The reranked system with ``features`` built on ``system``'s runs (its key and label).
    The CSLM comes before the decoder's columns, as in the paper's "+ CSLM + RNN"; the NMT
    feature after them."""
    names = list(dict.fromkeys(f[1] for f in features))
    words = list(dict.fromkeys(f[2] for f in features))
    front = [w for w in words if w == "CSLM"]
    back = [w for w in words if w != "CSLM"]
    base = [] if system.key == "baseline" else [system.label.removeprefix("+ ")]
    label = "+ " + " + ".join(front + base + back)
    key = "-".join(names + ([] if system.key == "baseline" else [system.key]))
    return System(key, label, system.columns, reranks=system.key)


def rerank_dir(run_dir: str) -> str:
    return os.path.join(run_dir, "rerank")


def decoded_list(run_dir: str, part: str, nbest: int) -> str:
    """Where the decoder's plain distinct ``nbest``-best list of ``part`` (dev, test) lies until
    its features are appended (written complete, or not at all)."""
    return os.path.join(rerank_dir(run_dir), f"{part}.{nbest}best")


def load_features(models: SentenceModels, names: Sequence[str], sources: Sequence[str], device: str) -> list[Feature]:
    """The features ``names`` of ``models``, in the models' order."""
    out: list[Feature] = []
    for (name, _, word), source in models.named():
        if name in names:
            if word == CSLM[2]:
                out.append(CSLMFeature(load_lm(source), name, device))
            else:
                out.append(TranslationFeature(load_checkpoint(source), name, sources, device))
    return out


def list_features(path: str) -> list[str]:
    """The names of the dense features of the list ``path`` (its first line's)."""
    for line in read_nbest(path):
        return [name for name, _ in line.layout]
    return []


def appended_features(path: str) -> list[str]:
    """The names of the experiment's features in the list ``path`` (its first line's)."""
    return [name for name in list_features(path) if OURS.fullmatch(name)]


def own_choices(choices: Sequence[Sequence[str]], names: Sequence[str]) -> list[list[str]]:
    """The sets of features a reranked system tries leaving out (``--rerank-choose-leave-out``):
    each of ``choices`` cut to the features ``names`` of its list; a set left empty, naming every
    feature, or the same as an earlier one, dropped."""
    sets: list[list[str]] = []
    for choice in choices:
        kept = [name for name in choice if name in names]
        if kept and not set(names) <= set(kept) and all(set(kept) != set(earlier) for earlier in sets):
            sets.append(kept)
    return sets


def described_choices(sets: Sequence[Sequence[str]]) -> str:
    """How a reranked run records the sets it chose among, in order, each set's names sorted
    (their order changes nothing): ``A B | C``."""
    return " | ".join(" ".join(sorted(names)) for names in sets)


def recorded_features(path: str) -> dict[str, str]:
    """The features a run's lists were scored with ({} when unknown: every feature redone)."""
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return {}
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}


def score_lists(
    toolkit: MosesToolkit,
    run_dir: str,
    models: SentenceModels,
    dev: tuple[str, str],
    test: tuple[str, str],
    *,
    nbest: int,
    threads: int,
    fingerprints: Mapping[str, str],
    say: Callable[[str], None],
) -> float:
    """The run's dev and test n-best lists with every feature of ``models`` (their
    ``fingerprints``, taken once for the whole experiment): decoded and scored, or, when scored
    earlier, brought up to date without decoding (the features of models that changed or were
    left out removed, those of new or changed models appended). Returns the seconds it took."""
    work = rerank_dir(run_dir)
    os.makedirs(work, exist_ok=True)
    t0 = time.time()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    wanted = dict(fingerprints)
    record = os.path.join(work, "features.json")
    scored = {part: os.path.join(work, f"{part}.nbest.gz") for part in ("dev", "test")}
    # the record is written after both lists: without it, what the lists hold is unknown
    recorded = recorded_features(record) if all(map(os.path.exists, scored.values())) else {}
    redo = [name for name in wanted if recorded.get(name) != wanted[name]]
    if not redo and set(recorded) <= set(wanted) and os.path.exists(record):
        return time.time() - t0
    with contextlib.suppress(FileNotFoundError):  # interrupted from here on: every feature redone
        os.remove(record)
    for part, (source, _reference) in (("dev", dev), ("test", test)):
        sources = read_source_text(source)
        if os.path.exists(scored[part]):
            say(f"{part}: the scored lists kept; features {', '.join(redo) or 'none'} computed again")
            plain = os.path.join(work, f"{part}.plain.gz")
            drop = [name for name in appended_features(scored[part]) if name not in wanted or name in redo]
            write_without_features(scored[part], drop, plain)
            names = redo
        else:
            plain = decoded_list(run_dir, part, nbest)
            if not os.path.exists(plain):  # the run's own decoding wrote it, unless finished before
                say(f"{part}: decoding {nbest}-best lists with the tuned weights")
                decode_nbest(toolkit, os.path.join(run_dir, "moses.ini"), source, plain, nbest, threads=threads)
            names = list(wanted)
        if names:
            say(f"{part}: appending {', '.join(names)}")
            features = load_features(models, names, sources, device)
            append_features(plain, scored[part], features, sources=sources, source_path=source)
            os.remove(plain)
        else:
            os.replace(plain, scored[part])  # only features removed: the stripped list is the list
    with AtomicOutput(record, compress=False) as out:
        out.write((json.dumps(wanted, indent=2) + "\n").encode("utf-8"))
    return time.time() - t0


def _finished_with(result: str, models: Mapping[str, str], optimizer: str) -> bool:
    """Whether a reranked run's ``result`` exists and was tuned with these ``models`` by
    ``optimizer`` (one written before the models were recorded is redone; one without an
    optimizer recorded was tuned by mert; one written before held-out dev BLEU was measured is
    redone, the same seed giving the same weights)."""
    try:
        with open(result, encoding="utf-8") as f:
            meta = json.load(f)
    except (OSError, ValueError):  # absent or unreadable: (re)done
        return False
    return (
        isinstance(meta, dict)
        and meta.get("models") == dict(models)
        and meta.get("optimizer", "mert") == optimizer
        and "heldout_folds" in meta
    )


def rerank_run(
    toolkit: MosesToolkit,
    run_dir: str,
    system: System,
    features: Sequence[tuple[str, str, str]],
    all_features: Sequence[tuple[str, str, str]],
    dev: tuple[str, str],
    test: tuple[str, str],
    *,
    nbest: int,
    optimizer: str = "mert",
    seed: int,
    threads: int,
    score_seconds: float,
    fingerprints: Mapping[str, str],
    say: Callable[[str], None],
    lists_dir: str | None = None,
    made_with: Mapping[str, str] | None = None,
    choose: Sequence[Sequence[str]] = (),
    choose_bleu: Callable[[Sequence[str], Sequence[str]], float] | None = None,
) -> None:
    """The reranked ``system`` (its ``features``) on the scored lists of the decoder run ``run_dir``
    (or those in ``lists_dir``, made with ``made_with`` besides the models: ``candidates``), its
    weights tuned by ``optimizer`` (``reranking.mert.OPTIMIZERS``); a finished one is kept while
    its features' models (``fingerprints``), ``made_with``, the optimizer and the sets it chose
    among are those it was tuned with. ``choose``: sets of features to try leaving out
    (``own_choices`` of its list; the set of the highest held-out dev BLEU by ``choose_bleu``,
    or none, is tuned: ``tune.tune_on_dev``)."""
    work = os.path.join(rerank_dir(run_dir), system.key)
    names = [f[0] for f in features]
    drop = [f[0] for f in all_features if f not in features]
    lists = {part: os.path.join(lists_dir or rerank_dir(run_dir), f"{part}.nbest.gz") for part in ("dev", "test")}
    held = len(read_lines(dev[1])) >= FOLDS  # held-out lines (and a choice by them) need two halves
    choices = own_choices(choose, [n for n in list_features(lists["dev"]) if n not in drop]) if choose and held else []
    models = {
        **{name: fingerprints[name] for name in names},
        **(made_with or {}),
        **({CHOICES: described_choices(choices)} if choices else {}),
    }
    if _finished_with(os.path.join(work, "result.json"), models, optimizer):
        say("finished earlier, kept")
        return
    shutil.rmtree(work, ignore_errors=True)  # no earlier result beside the files written now
    os.makedirs(work, exist_ok=True)
    t1 = time.time()
    for part in ("dev", "test"):
        if drop:
            own = os.path.join(work, f"{part}.nbest.gz")
            write_without_features(lists[part], drop, own)
            lists[part] = own
    test_list, count = read_matrix(lists["test"]), len(read_lines(test[0]))
    if test_list.sentence_count != count:
        raise ExperimentError(f"{test_list.path} lists {test_list.sentence_count:,} sentences, {test[0]} has {count:,}")
    say(f"tuning the reranking weights on the dev set's lists ({optimizer})")
    try:
        tuned = tune_on_dev(
            toolkit,
            lists["dev"],
            dev[1],
            os.path.join(work, "weights"),
            init=os.path.join(run_dir, "moses.ini"),
            work_dir=os.path.join(work, "mert"),
            remove_work=True,
            optimizer=optimizer,
            seed=seed,
            threads=threads,
            heldout_out=os.path.join(work, "dev.heldout") if held else None,
            choices=choices,
            choices_name="--rerank-choose-leave-out",
            bleu=choose_bleu if choices else None,
            say=say,
        )
    except RerankError as e:
        raise ExperimentError(str(e), EXIT_OS) from e
    test_lines = output_lines(test_list, tuned.weights)
    for part, lines in (("dev", tuned.lines), ("test", test_lines)):
        with AtomicOutput(os.path.join(work, f"{part}.best"), compress=False) as out:
            out.write("".join(line + "\n" for line in lines).encode("utf-8"))
    with AtomicOutput(os.path.join(work, "result.json"), compress=False) as out:
        meta: dict[str, object] = {
            "seed": seed,
            "nbest": nbest,
            "features": names,
            "models": models,
            "optimizer": optimizer,
            **({"left_out": tuned.left_out} if choices else {}),
            "heldout_folds": FOLDS if tuned.heldout is not None else 0,
            f"{optimizer}_dev_bleu": round(tuned.optimizer_bleu, 2),  # the optimiser's own figure
            "score_seconds": round(score_seconds, 1),
            "rerank_seconds": round(time.time() - t1, 1),
        }
        chosen_from = {"heldout": tuned.heldout_origins, "test": origins(test_list, test_lines)}
        meta.update({f"{part}_chosen_from": o.to_json() for part, o in chosen_from.items() if o is not None})
        out.write((json.dumps(meta, indent=2) + "\n").encode("utf-8"))
