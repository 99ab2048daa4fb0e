"""The one tuning sequence on the dev list (``reranking.tune.tune_on_dev``) with the options that
``rerank-tune`` and ``experiment`` give it, and the experiment's reranked run through it: the same
weights, BLEU, held-out lines and progress lines as each command wrote before they shared it.
Moses' optimiser is a stand-in (``helpers.rerank_data``); tests/integration runs the real one."""

from __future__ import annotations

import gzip
import json
import os
import tempfile
from pathlib import Path
from typing import Any

import pytest

from phrase_rescorer.errors import InputError
from phrase_rescorer.experiment.bleu import tokenized_bleu
from phrase_rescorer.experiment.reranked import CSLM, rerank_run
from phrase_rescorer.experiment.systems import System
from phrase_rescorer.reranking.mbr import Mbr
from phrase_rescorer.reranking.tune import tune_on_dev
from tests.helpers.rerank_data import REFS, START, stand_in_optimizer, write_dev

WEIGHTS = "[weight]\nLM0= 0.5\nWordPenalty0= -0.1\nTranslationModel0= 0.2 0.3\nCSLM0= 3\n"
#: Each dev sentence chosen by the other half's weights (CSLM0 at 0 for the odd ones, 3 for the
#: even ones), by the highest sum and by rerank-tune's MBR rule below.
HELD = ["le chat est noir", "un homme x", "la maison est grande", "il x", "nous mangeons du pain", "le ciel x"]
HELD_MBR = [*REFS[:3], "il x", *REFS[4:]]
ANNOUNCED = "held-out dev BLEU: the weights tuned on each half of the dev sentences choose the other's (kbmira)"
#: What each command gives the sequence besides the list, the reference, the start weights and
#: the optimiser: rerank-tune --restarts 3 --seed 7 --threads 2 --mbr --mbr-size 3 --mbr-scale 0.2
#: --held-out; experiment its run's seed, its threads and its run's directory.
OPTIONS: dict[str, dict[str, Any]] = {
    "rerank-tune": {
        "restarts": 3,
        "seed": 7,
        "threads": 2,
        "mbr": Mbr(0.2, 3),
        "heldout_name": "--held-out",
        "bleu": lambda lines, refs: tokenized_bleu(lines, refs).score,
        "title": "phrase-rescorer rerank-tune dev.nbest",
    },
    "experiment": {"seed": 11, "threads": 2, "remove_work": True},
}


@pytest.mark.parametrize("command", ["rerank-tune", "experiment"])
def test_the_sequence_with_each_commands_options(command: str, tmp_path: Path, monkeypatch) -> None:
    paths = write_dev(tmp_path)
    calls = stand_in_optimizer(monkeypatch)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    weights, held = tmp_path / "w", tmp_path / "held"
    said: list[str] = []
    work = None if command == "rerank-tune" else str(tmp_path / "mert")
    tuned = tune_on_dev(
        None,  # type: ignore[arg-type]  # the optimiser is a stand-in
        str(paths["dev.nbest"]),
        str(paths["dev.fr"]),
        str(weights),
        init=str(paths["moses.ini"]),
        work_dir=work,
        optimizer="kbmira",
        heldout_out=str(held),
        say=said.append,
        **OPTIONS[command],
    )
    seed, restarts = (7, 3) if command == "rerank-tune" else (11, 20)
    assert [c.pop("references") for c in calls] == [REFS, REFS[0::2], REFS[1::2]]  # the whole list, each half
    settings = {"start": START, "seed": seed, "restarts": restarts, "threads": 2, "optimizer": "kbmira"}
    assert calls == [settings] * 3
    assert tuned.lines == REFS and tuned.weights.tolist() == [*START[:-1], 3.0] and tuned.optimizer_bleu == 18.5
    assert held.read_text() == "".join(line + "\n" for line in tuned.heldout or [])
    assert not os.listdir(tmp_path / "tmp") and not (tmp_path / "mert").exists()  # the optimiser's files removed
    if command == "experiment":
        assert weights.read_text() == WEIGHTS and tuned.heldout == HELD
        assert tuned.start_bleu is None and tuned.tuned_bleu is None and said == [ANNOUNCED]
        return
    mbr = ", MBR of 3 at scale 0.2"
    assert weights.read_text() == f"# phrase-rescorer rerank-tune dev.nbest: dev BLEU 96.91 -> 100.00{mbr}\n" + WEIGHTS
    assert tuned.heldout == HELD_MBR
    assert tuned.start_bleu == pytest.approx(96.9136, abs=1e-4) and tuned.tuned_bleu == pytest.approx(100.0)
    assert said == [
        f"{paths['dev.nbest']}: 18 hypotheses, features LM0 WordPenalty0 TranslationModel0 CSLM0",
        f"dev BLEU (tokenized, as MERT scores it{mbr}): 96.91 with the start weights, 100.00 reranked; wrote {weights}",
        ANNOUNCED,
        f"dev BLEU held out{mbr}: 96.91; wrote {held}",
    ]


def test_the_experiments_reranked_run_checks_the_reference_and_writes_as_before(tmp_path: Path, monkeypatch) -> None:
    """A dev reference of another length is refused before any tuning, as by rerank-tune; with
    the right one, the files of the run are those it wrote before."""
    paths = write_dev(tmp_path)
    run = tmp_path / "run1"
    (run / "rerank").mkdir(parents=True)
    (run / "moses.ini").write_text(paths["moses.ini"].read_text())
    for part in ("dev", "test"):
        (run / "rerank" / f"{part}.nbest.gz").write_bytes(gzip.compress(paths["dev.nbest"].read_bytes()))
    calls = stand_in_optimizer(monkeypatch)
    said: list[str] = []

    def rerank(reference: Path) -> None:
        rerank_run(
            None,  # type: ignore[arg-type]  # the optimiser is a stand-in
            str(run),
            System("cslm", "+ CSLM", 0, reranks="baseline"),
            [CSLM],
            [CSLM],
            (str(paths["dev.en"]), str(reference)),
            (str(paths["dev.en"]), str(paths["dev.fr"])),
            nbest=3,
            optimizer="kbmira",
            seed=11,
            threads=2,
            score_seconds=1.0,
            fingerprints={"CSLM0": "abc"},
            say=said.append,
        )

    short = tmp_path / "short.fr"
    short.write_text("".join(ref + "\n" for ref in REFS[:5]))
    with pytest.raises(InputError, match=r"short.fr: 5 lines, but \S+dev.nbest.gz lists 6 sentences \(IDs 0 to 5\)"):
        rerank(short)
    assert calls == []
    said.clear()
    rerank(paths["dev.fr"])
    work = run / "rerank" / "cslm"
    assert sorted(os.listdir(work)) == ["dev.best", "dev.heldout", "result.json", "test.best", "weights"]
    assert (work / "weights").read_text() == WEIGHTS
    assert (work / "dev.best").read_text() == (work / "test.best").read_text() == "".join(r + "\n" for r in REFS)
    assert (work / "dev.heldout").read_text() == "".join(line + "\n" for line in HELD)
    result = json.loads((work / "result.json").read_text())
    assert result.pop("rerank_seconds") >= 0
    assert result == {
        "seed": 11,
        "nbest": 3,
        "features": ["CSLM0"],
        "models": {"CSLM0": "abc"},
        "optimizer": "kbmira",
        "heldout_folds": 2,
        "kbmira_dev_bleu": 18.5,
        "score_seconds": 1.0,
    }
    assert said == ["tuning the reranking weights on the dev set's lists (kbmira)", ANNOUNCED]
    assert len(calls) == 3 and all(c["restarts"] == 20 and c["seed"] == 11 for c in calls)
