"""The experiment's reranked systems: the paper's CSLM rows, built on the decoder's tuned runs.

For every finished MERT run of a decoder system (baseline, + RNN, + RNN + WP), the reranked
system ("+ CSLM", "+ CSLM + RNN", "+ CSLM + RNN + WP") decodes dev and test with the run's tuned
moses.ini into distinct n-best lists, adds the CSLM's feature (``lm.nbest_scoring``), tunes the
reranking weights on dev with Moses' mert from the run's tuned weights (``reranking.mert``, the
run's own seed), and takes the best hypothesis of each dev and test sentence. Files, in the
decoder run's directory::

    rerank/dev.nbest.gz, rerank/test.nbest.gz    the lists with the CSLM feature
    rerank/weights                                the tuned reranking weights
    rerank/dev.best, rerank/test.best             the chosen hypotheses
    rerank/result.json                            written last: the reranked run is finished

A restarted experiment keeps a finished reranked run and redoes an unfinished one.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable

import torch

from ..errors import EXIT_OS
from ..lm.lm_file import load_lm
from ..lm.nbest_scoring import score_nbest
from ..moses.ini_weights import read_weights
from ..moses.toolkit import MosesToolkit
from ..output import AtomicOutput
from ..reranking.choose import output_lines
from ..reranking.mert import RerankError, tune
from ..reranking.nbest_features import read_matrix
from ..reranking.weights import vector, write_weights_file
from .moses_runs import decode_nbest
from .systems import ExperimentError, System

FEATURE = "CSLM0"
RERANKED_PREFIX = "cslm"


def reranked(system: System) -> System:
    """The reranked system built on ``system``'s runs (its key and label)."""
    key = RERANKED_PREFIX if system.key == "baseline" else f"{RERANKED_PREFIX}-{system.key}"
    label = "+ CSLM" if system.key == "baseline" else f"+ CSLM {system.label}"
    return System(key, label, system.columns, reranks=system.key)


def rerank_dir(run_dir: str) -> str:
    return os.path.join(run_dir, "rerank")


def rerank_run(toolkit: MosesToolkit, run_dir: str, lm_path: str, dev: tuple[str, str], test: tuple[str, str], *,
               nbest: int, seed: int, threads: int, say: Callable[[str], None]) -> None:
    """The reranked run on top of the finished decoder run in ``run_dir``."""
    work = rerank_dir(run_dir)
    if os.path.exists(os.path.join(work, "result.json")):
        say("finished earlier, kept")
        return
    os.makedirs(work, exist_ok=True)
    tuned_ini = os.path.join(run_dir, "moses.ini")
    t0 = time.time()
    lm = load_lm(lm_path)
    lists = {}
    for part, (source, _reference) in (("dev", dev), ("test", test)):
        raw = os.path.join(work, f"{part}.{nbest}best")
        say(f"{part}: decoding {nbest}-best lists with the tuned weights")
        decode_nbest(toolkit, tuned_ini, source, raw, nbest, threads=threads)
        lists[part] = os.path.join(work, f"{part}.nbest.gz")
        score_nbest(raw, lists[part], lm, FEATURE, device="cuda" if torch.cuda.is_available() else "cpu")
        os.remove(raw)
    t1 = time.time()
    with open(tuned_ini, encoding="utf-8") as f:
        start_weights = read_weights(f.read(), tuned_ini)
    dev_matrix = read_matrix(lists["dev"])
    start = vector(start_weights, dev_matrix.layout, missing=0.0, source=tuned_ini)
    say("tuning the reranking weights on the dev set's lists (mert)")
    try:
        result = tune(toolkit, lists["dev"], [dev[1]], start, os.path.join(work, "mert"), seed=seed, threads=threads)
    except RerankError as e:
        raise ExperimentError(str(e), EXIT_OS) from e
    write_weights_file(os.path.join(work, "weights"), dev_matrix.layout, result.weights)
    for part, matrix in (("dev", dev_matrix), ("test", read_matrix(lists["test"]))):
        with open(dict(dev=dev, test=test)[part][0], "rb") as f:
            count = sum(1 for _ in f)
        lines = output_lines(matrix, result.weights, count)
        with AtomicOutput(os.path.join(work, f"{part}.best"), compress=False) as out:
            out.write("".join(line + "\n" for line in lines).encode("utf-8"))
    shutil.rmtree(os.path.join(work, "mert"), ignore_errors=True)
    with AtomicOutput(os.path.join(work, "result.json"), compress=False) as out:
        meta = {"seed": seed, "nbest": nbest, "feature": FEATURE, "mert_dev_bleu": round(result.dev_bleu, 2),
                "decode_and_score_seconds": round(t1 - t0, 1), "rerank_seconds": round(time.time() - t1, 1)}
        out.write((json.dumps(meta, indent=2) + "\n").encode("utf-8"))
