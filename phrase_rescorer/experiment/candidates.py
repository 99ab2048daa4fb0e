"""The experiment's hybrid rows (``--network-candidates K``): every reranked system with the
translation networks' features ("+ NMT", "+ CSLM + NMT", "+ RNN + NMT", ...) gets a twin,
"+ NMT, with the networks' candidates", reranked on Moses' lists joined by the networks' own
candidates, so that the reranker may choose a translation Moses never proposed.

Each ``--nmt`` network that translates forward (one of ``--direction inverse`` translates the
other way: it proposes no candidate, and scores as a feature only) translates the dev and test
sets once per experiment with its own beam search (``analysis.translate``: beam K, ``translate``'s
defaults otherwise) into an n-best list of its K best distinct candidates, as ``translate
--n-best-list FILE K`` writes it; with ``--ensemble-candidates`` those networks of each target
order translate as one ensemble (``translate -m A -m B``) into one list, named by their features
(``NMT0+NMT1``; left-to-right and right-to-left networks: a list per order). The
lists are kept in the experiment's directory while the network files (SHA-256) and K are the
same. For every decoder run, its scored Moses lists (``reranked.score_lists``) without the
experiment's features are merged with them (``reranking.merge``, as ``merge-nbest``:
``FromMoses`` and ``FromNetI`` for the I-th network that translates forward (with
``--ensemble-candidates`` the I-th order's ensemble), ``WordPenalty0`` and the ini's n-gram LM
(its first KENLM feature, through Moses' ``bin/query``) computed for new lines, Moses' other
features 0), and every feature of the experiment is appended to the merged lists (``nbest``). The
twin then tunes and chooses exactly as its reranked system (``reranked.rerank_run``, held-out dev
BLEU too) on the merged lists with its own features and the indicators. With
``--candidates-moses-nbest N`` the candidates join only the first N distinct hypotheses of each
sentence of the run's lists (``merge-nbest --moses-nbest``): the twin reranks Moses' N best and
the candidates, its reranked system Moses' ``--rerank-nbest``. New lines get Moses' own features
where the run's moses.ini can produce them (``moses.constrained``, ``MosesReached``; as ``merge-nbest --ini``);
with ``--reached-only`` those it cannot produce are left out (``merge-nbest --reached-only``), and
the twin is "+ NMT, with the networks' candidates Moses can produce".
Files::

    OUT/candidates/NMTi.{dev,test}.nbest.gz   the network's K best of every sentence (an
                                              ensemble's: NMTi+NMTj.{dev,test}.nbest.gz)
    OUT/candidates/NMTi.json                  its model(s) (SHA-256) and K, written last
    systems/KEY/runN/rerank/candidates/{dev,test}.nbest.gz
                                              the run's lists joined by the candidates, with every
                                              feature
    systems/KEY/runN/rerank/candidates/features.json
                                              the models (SHA-256), K and the candidates' other
                                              settings they were made with, written last
    systems/KEY/runN/rerank/KEY-candidates/   the twin's reranked run (``reranked``'s files)

A restart keeps a network's lists, a run's merged lists and a finished twin while the models, K
and the other settings of the candidates are those they were made with, and makes again what they
are not.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Callable, Mapping, Sequence

import torch

from ..analysis.translate import candidate_lines, order_ensembles, translate_nbest
from ..lm.kenlm import KenLMSentences
from ..model.checkpoint import Checkpoint, load_checkpoint
from ..model.kinds import ModelFile, open_model
from ..moses.constrained import ConstrainedDecoder
from ..moses.ini_paths import ngram_lm
from ..moses.toolkit import MosesToolkit
from ..output import AtomicOutput
from ..reranking.merge import merge_nbest
from ..reranking.nbest_features import write_without_features
from ..scoring.features import read_source_text
from ..scoring.nbest import append_features
from .reranked import NMT, SentenceModels, appended_features, load_features, recorded_features, rerank_dir
from .systems import System

#: The word of the twins' keys, and the directory of the candidates' lists (the experiment's, a run's).
CANDIDATES = "candidates"
#: The sentences whose beams the candidate networks search together (``translate --batch-sentences``):
#: groups of 20 lines from the first, which also divide translate-hybrid's default chunk of 500.
CANDIDATE_BATCH = 20
#: The feature of an ensemble's candidates in its list (as docs/nmt.md names it, ``translate --name
#: ENS0``; the merge drops it).
ENSEMBLE_FEATURE = "ENS0"


def takes_candidates(features: Sequence[tuple[str, str, str]]) -> bool:
    """Whether a reranked system of these features gets a twin: it has the networks' features."""
    return any(f[1] == NMT[1] for f in features)


def with_candidates(
    system: System, reached_only: bool = False, ensemble: bool = False, moses_nbest: int | None = None, orders: int = 1
) -> System:
    """The twin of the reranked ``system``: its features, on the lists joined by the networks'
    candidates (``reached_only``: those Moses can produce; ``ensemble``: their ensemble's, one
    per target order, of ``orders`` orders; ``moses_nbest``: beside Moses' first N of each
    sentence only)."""
    whose = "the networks'"
    if ensemble:
        whose = "the networks' ensemble's" if orders == 1 else "each target order's ensemble's"
    label = f"{system.label}, with {whose} candidates" + (" Moses can produce" if reached_only else "")
    label += f", beside Moses' {moses_nbest} best" if moses_nbest is not None else ""
    return System(f"{system.key}-{CANDIDATES}", label, system.columns, reranks=system.reranks)


def proposes_candidates(kind: str, source: str | ModelFile) -> ModelFile | None:
    """The model file read, when the feature of word ``kind`` is a translation network that
    translates forward (it proposes candidates); None for the CSLM or an inverse network."""
    if kind != NMT[1]:
        return None
    opened = open_model(source)
    return opened if opened.kind[1] == "forward" else None


def proposing(models: SentenceModels, ensemble: bool = False) -> list[list[tuple[str, Checkpoint]]]:
    """The forward translation networks of ``models`` (feature name, network read), grouped as
    their candidates come: a list each, in the order of their features, or with ``ensemble`` a list
    per target order, that order's networks translating as one ensemble (``order_ensembles``)."""
    found = [
        (name, load_checkpoint(opened))
        for (name, kind, _), source in models.named()
        if (opened := proposes_candidates(kind, source)) is not None
    ]
    if not ensemble:
        return [[one] for one in found]
    return [[found[i] for i in group] for group in order_ensembles([checkpoint for _, checkpoint in found])]


def made_with(
    size: int,
    constrained: bool = True,
    reached_only: bool = False,
    ensemble: bool = False,
    moses_nbest: int | None = None,
) -> dict[str, str]:
    """What, beside the models, the merged lists and the twins' runs are recorded as made with:
    K, the sentences the networks searched together (:data:`CANDIDATE_BATCH`: lists made one
    sentence at a time are made again), whether new lines got Moses' features by constrained
    decoding, and (each named only when
    chosen, so that records of lists made without them stay as they were) whether those Moses
    cannot produce were left out, whether the candidates are the networks' ensemble's, and how many
    of Moses' hypotheses of a sentence they join."""
    made = {
        "network_candidates": str(size),
        "candidate_batch": str(CANDIDATE_BATCH),
        "constrained_decoding": "yes" if constrained else "no",
    }
    made |= {"reached_only": "yes"} if reached_only else {}
    made |= {"ensemble": "yes"} if ensemble else {}
    return made | ({"moses_nbest": str(moses_nbest)} if moses_nbest is not None else {})


def network_lists(
    out_dir: str,
    models: SentenceModels,
    parts: Mapping[str, str],
    *,
    size: int,
    fingerprints: Mapping[str, str],
    say: Callable[[str], None],
    ensemble: bool = False,
) -> list[dict[str, str]]:
    """The n-best lists of each forward translation network of ``models`` (its ``size`` best of a
    beam of ``size``), or of their ensembles (``ensemble``: one per target order, :func:`proposing`),
    of every part's source (``parts``: name -> source file), in the order of the networks: decoded
    into ``out_dir/candidates``, :data:`CANDIDATE_BATCH` sentences at a time, or kept from an earlier
    start while the networks' files (their SHA-256 in ``fingerprints``), ``size`` and the sentences
    searched together are the same."""
    work = os.path.join(out_dir, CANDIDATES)
    os.makedirs(work, exist_ok=True)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    found: list[dict[str, str]] = []
    for group in proposing(models, ensemble):
        name = "+".join(member for member, _ in group)
        feature = group[0][0] if len(group) == 1 else ENSEMBLE_FEATURE  # dropped by the merge
        lists = {part: os.path.join(work, f"{name}.{part}.nbest.gz") for part in parts}
        found.append(lists)
        record = os.path.join(work, f"{name}.json")
        wanted = {
            "model": " ".join(fingerprints[member] for member, _ in group),
            "candidates": size,
            "batch": CANDIDATE_BATCH,
        }
        if recorded_features(record) == {k: str(v) for k, v in wanted.items()} and all(
            map(os.path.exists, lists.values())
        ):
            say(f"{name}: its candidates of an earlier start kept ({', '.join(lists.values())})")
            continue
        with contextlib.suppress(FileNotFoundError):  # interrupted from here on: decoded again
            os.remove(record)
        checkpoints = [checkpoint for _, checkpoint in group]
        files = ", ".join(str(checkpoint.path) for checkpoint in checkpoints)
        for part, path in parts.items():
            sources = read_source_text(path)
            say(
                f"{name}: translating the {part} set, its {size} best of a beam of {size}, {CANDIDATE_BATCH} "
                f"sentences at a time ({files})"
            )
            with AtomicOutput(lists[part]) as out:
                for i, candidates in enumerate(
                    translate_nbest(
                        checkpoints, sources, beam_size=size, device=device, name=path, batch=CANDIDATE_BATCH
                    )
                ):
                    out.write(b"".join(candidate_lines(i, candidates, size, feature)))
        with AtomicOutput(record, compress=False) as out:
            out.write((json.dumps(wanted, indent=2) + "\n").encode("utf-8"))
    return found


def merged_dir(run_dir: str) -> str:
    """Where a decoder run's lists joined by the networks' candidates are."""
    return os.path.join(rerank_dir(run_dir), CANDIDATES)


def decoder_lm(ini: str) -> tuple[str, str] | None:
    """The n-gram LM of the moses.ini ``ini``: its first KENLM feature's name and path (None
    without one: the new lines' LM feature is then 0)."""
    feature = ngram_lm(ini)
    return None if feature is None else (feature.name, feature.args["path"])


def merge_lists(
    run_dir: str,
    models: SentenceModels,
    networks: Sequence[Mapping[str, str]],
    dev: tuple[str, str],
    test: tuple[str, str],
    *,
    toolkit: MosesToolkit | None,
    fingerprints: Mapping[str, str],
    size: int,
    say: Callable[[str], None],
    threads: int = 1,
    reached_only: bool = False,
    ensemble: bool = False,
    moses_nbest: int | None = None,
) -> float:
    """The decoder run's dev and test lists joined by the networks' candidates (``networks``,
    :func:`network_lists`), with every feature of ``models``: made from the run's scored lists
    (``reranked.score_lists``, made first), or kept while the models, ``size`` and the settings
    below are those they were made with, in ``merged_dir(run_dir)``. With the Moses ``toolkit``, new lines get Moses'
    features by constrained decoding with the run's moses.ini (``threads``), and where it cannot
    produce them, the ini's LM feature through ``bin/query`` (None: those features 0);
    ``reached_only``: those it cannot produce left out (needs the ``toolkit``); ``ensemble``:
    ``networks`` is the ensemble's one list; ``moses_nbest``: joined to the first N of Moses'
    hypotheses of each sentence only. Returns the seconds it took."""
    t0 = time.time()
    work = merged_dir(run_dir)
    os.makedirs(work, exist_ok=True)
    wanted = {**fingerprints, **made_with(size, toolkit is not None, reached_only, ensemble, moses_nbest)}
    record = os.path.join(work, "features.json")
    merged = {part: os.path.join(work, f"{part}.nbest.gz") for part in ("dev", "test")}
    if all(map(os.path.exists, merged.values())) and recorded_features(record) == wanted:
        say("the lists joined by the networks' candidates kept")
        return time.time() - t0
    with contextlib.suppress(FileNotFoundError):  # interrupted from here on: made again
        os.remove(record)
    ini = os.path.join(run_dir, "moses.ini")
    query = toolkit.path("bin/query") if toolkit is not None else None
    lm = decoder_lm(ini) if query is not None else None
    device = "cuda" if torch.cuda.is_available() else "cpu"
    names = list(fingerprints)
    for part, (source, _reference) in (("dev", dev), ("test", test)):
        scored = os.path.join(rerank_dir(run_dir), f"{part}.nbest.gz")
        moses = os.path.join(work, f"{part}.moses.gz")
        joined = os.path.join(work, f"{part}.joined.gz")
        ours = appended_features(scored)
        write_without_features(scored, ours, moses)  # Moses' own lines, byte for byte
        sources = read_source_text(source)
        with contextlib.ExitStack() as stack:
            sentences = stack.enter_context(KenLMSentences(query, lm[1])) if query is not None and lm else None
            reach = ConstrainedDecoder(toolkit, ini, sources, threads=threads) if toolkit is not None else None
            summary = merge_nbest(
                moses,
                joined,
                [lists[part] for lists in networks],
                lm=sentences,
                lm_feature=lm[0] if lm else "LM0",
                reach=reach,
                reached_only=reached_only,
                moses_nbest=moses_nbest,
                on_warning=say,
            )
        os.remove(moses)
        reached = f" ({summary.reached:,} produced by Moses constrained)" if summary.reached is not None else ""
        if reached_only:
            reached += f", {summary.unreached_left_out:,} it cannot produce left out"
        first = f" (the first {moses_nbest} of each sentence)" if moses_nbest is not None else ""
        say(
            f"{part}: {summary.moses:,} Moses hypotheses{first} joined by "
            + ", ".join(f"{n:,} new ones of FromNet{i}" for i, n in enumerate(summary.new))
            + f"{reached}; appending {', '.join(names)}"
        )
        features = load_features(models, names, sources, device)
        append_features(joined, merged[part], features, sources=sources, source_path=source)
        os.remove(joined)
    with AtomicOutput(record, compress=False) as out:
        out.write((json.dumps(wanted, indent=2) + "\n").encode("utf-8"))
    seconds = time.time() - t0
    say(f"the lists joined by the networks' candidates made in {seconds:.0f} s")
    return seconds
