"""``experiment --nmt NET --network-candidates K`` with the real Moses on the tiny en-fr system of
tests/data/tiny-moses: the baseline (1 run, 2 MERT iterations), "+ NMT" and its twin reranked on
Moses' lists joined by the network's own candidates (``experiment.candidates``); OUT/hybrid, the
bundle of the row held-out dev chose (``experiment.chosen``), and the other row's, each translating
with translate-hybrid as its run did; then a restart that keeps everything, and one with
--reached-only that keeps the networks' lists and leaves out of the joined lists the candidates
Moses cannot produce; then two networks with --ensemble-candidates, their ensemble's one list,
and --candidates-moses-nbest 2, the candidates beside Moses' first 2 hypotheses of a sentence;
then a right-to-left network beside them: an ensemble per target order, a list each.
Skipped, with the reason, when no Moses is found."""

from __future__ import annotations

import dataclasses
import gzip
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from phrase_rescorer.experiment import bleu
from phrase_rescorer.experiment.candidates import with_candidates
from phrase_rescorer.experiment.chosen import write_chosen
from phrase_rescorer.experiment.reranked import SentenceModels, reranked
from phrase_rescorer.experiment.systems import BASELINE
from phrase_rescorer.model.kinds import open_model
from phrase_rescorer.moses.toolkit import EXPERIMENT_NEEDS, MosesToolkit
from tests.helpers.moses import moses_root
from tests.helpers.moses import phrase_rescorer as run
from tests.helpers.nmt import tiny_nmt
from tests.helpers.paths import PYTHON, REPO, cli_env

TINY = REPO / "tests" / "data" / "tiny-moses"
TWIN = "+ NMT, with the networks' candidates"


def experiment(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [PYTHON, "-m", "phrase_rescorer", "experiment", *args],
        capture_output=True,
        text=True,
        env=cli_env(),
        timeout=900,
    )


@pytest.mark.slow
def test_the_hybrid_row_reranks_the_joined_lists(tmp_path: Path) -> None:
    moses = str(moses_root((*EXPERIMENT_NEEDS, "bin/query")))
    ini = tmp_path / "moses.ini"
    ini.write_text((TINY / "moses.ini").read_text().replace("@MODEL_DIR@", str(TINY)))
    nmt = tiny_nmt(tmp_path / "nmt.pt")
    out = tmp_path / "out"
    args = ["--moses", moses, "--ini", str(ini), "--dev", str(TINY / "dev.en"), str(TINY / "dev.fr")]
    args += ["--test", str(TINY / "test.en"), str(TINY / "test.fr"), "--nmt", str(nmt), "--network-candidates", "3"]
    args += ["--rerank-nbest", "10", "--runs", "1", "--maximum-iterations", "2", "--target-lang", "fr"]
    args += ["--trials", "1000", "--out", str(out)]
    first = experiment(*args)
    assert first.returncode == 0, first.stderr
    rows = [line.split("  ")[0].strip() for line in first.stdout.splitlines()[2:5]]
    assert rows == ["baseline", "+ NMT", TWIN]
    assert "with the networks' candidates: Moses' lists joined by each forward --nmt network's 3 best" in first.stdout

    report = json.loads((out / "experiment.json").read_text())
    assert report["systems"]["nmt-candidates"]["label"] == TWIN
    assert set(report["comparisons"]) == {"nmt", "nmt-candidates"}
    rerank = out / "systems" / "baseline" / "run1" / "rerank"
    for part in ("dev", "test"):
        joined = joined_lines(rerank, part)
        assert joined and all(" FromMoses= " in line and " FromNet0= " in line and " NMT0= " in line for line in joined)
        new = [line for line in joined if " FromMoses= 0 " in line]
        # the network proposed translations Moses did not; their LM0 is the ini's LM's (bin/query), not 0
        assert new and all(" LM0= 0 " not in line for line in new)
        # with Moses' own features where the run's ini produces them (constrained decoding), else none made up
        reached = [line for line in new if " MosesReached= 1 " in line]
        assert all(" TranslationModel0= 0 0 0 0 " not in line for line in reached)
        assert all(" TranslationModel0= 0 0 0 0 " in line for line in new if line not in reached)
        chosen = bleu.read_lines(str(rerank / "nmt-candidates" / f"{part}.best"))
        assert len(chosen) == len((TINY / f"{part}.en").read_text(encoding="utf-8").splitlines())
        assert all(
            hyp in {line.split(" ||| ")[1].strip() for line in joined if line.startswith(f"{i} ")}
            for i, hyp in enumerate(chosen)
        )
    (run,) = report["systems"]["nmt-candidates"]["runs"]
    assert run["models"] == {
        "NMT0": run["models"]["NMT0"],
        "network_candidates": "3",
        "candidate_batch": "20",
        "constrained_decoding": "yes",
    }
    assert "dev_heldout" in run
    result = json.loads((rerank / "nmt-candidates" / "result.json").read_text())
    for part, count in (("heldout", "dev"), ("test", "test")):  # where the chosen hypotheses come from
        chosen_from = result[f"{part}_chosen_from"]
        assert set(chosen_from) == {"moses", "moses_and_network", "new", "new_reached"}
        sentences = len((TINY / f"{count}.en").read_text(encoding="utf-8").splitlines())
        assert chosen_from["moses"] + chosen_from["new"] == sentences
    weights = (rerank / "nmt-candidates" / "weights").read_text()
    assert all(f"\n{name}= " in weights for name in ("FromMoses", "FromNet0", "MosesReached", "NMT0"))
    chosen_bundle_translates_as_its_run(report, out, rerank, first.stderr, moses)
    other_bundle_translates_as_its_run(report, out, rerank, moses, nmt)

    again = experiment(*args)  # a restart keeps the network's lists, the joined lists and the twin's run
    assert again.returncode == 0, again.stderr
    assert "NMT0: its candidates of an earlier start kept" in again.stderr
    assert "the lists joined by the networks' candidates kept" in again.stderr
    assert "nmt-candidates run 1: finished earlier, kept" in again.stderr
    assert again.stdout == first.stdout
    assert "chosen on held-out dev BLEU" in again.stderr  # written again, the same system
    assert sorted(p.name for p in out.iterdir() if p.name.startswith(".hybrid")) == []
    test_text = str(TINY / "test.en")
    assert translated(out / "hybrid", test_text, moses) == (rerank / chosen_key(report) / "test.best").read_bytes()

    chose_features(args, out, rerank)

    only = experiment(*args, "--reached-only")  # the joined lists made again, without the unreached candidates
    assert only.returncode == 0, only.stderr
    assert "NMT0: its candidates of an earlier start kept" in only.stderr
    assert "it cannot produce left out" in only.stderr
    assert f"{TWIN} Moses can produce" in only.stdout and ", only those Moses can produce." in only.stdout
    for part in ("dev", "test"):
        joined = joined_lines(rerank, part)
        assert joined and all(" MosesReached= 1 " in line for line in joined)
    recorded(out, rerank, moses, "reached_only")

    # two networks, their ensemble's candidates: one list, FromNet0 alone; the bundle runs it so
    nmt2 = tiny_nmt(tmp_path / "nmt2.pt", steps=30)
    both = [*args, "--nmt", str(nmt2), "--ensemble-candidates"]
    ensemble = experiment(*both)
    assert ensemble.returncode == 0, ensemble.stderr
    assert "NMT0+NMT1: translating the dev set, its 3 best of a beam of 3" in ensemble.stderr
    assert "+ NMT, with the networks' ensemble's candidates" in ensemble.stdout
    assert (
        "joined by the 3 best (beam 3) of each target order's ensemble of the forward --nmt networks" in ensemble.stdout
    )
    for part in ("dev", "test"):
        joined = joined_lines(rerank, part)
        assert joined and all(" FromNet0= " in line and " NMT1= " in line for line in joined)
        assert not [line for line in joined if " FromNet1= " in line]
    report = recorded(out, rerank, moses, "ensemble")
    # the twin's bundle whatever dev chose: the ensemble's candidates, as its run reranked them
    twin_out, _, _ = bundle_of("nmt-candidates", report, out, out.parent / "twin", (nmt, nmt2), moses, ensemble=True)
    assert json.loads((twin_out / "hybrid" / "bundle.json").read_text())["candidates"]["ensemble"] is True
    expected = (twin_out / "systems" / "baseline" / "run1" / "rerank" / "nmt-candidates" / "test.best").read_bytes()
    assert translated(twin_out / "hybrid", test_text, moses) == expected

    # the candidates beside Moses' first 2 of its 10 best: the joined lists and the twin made again, the row kept
    first2 = experiment(*both, "--candidates-moses-nbest", "2")
    assert first2.returncode == 0, first2.stderr
    assert "NMT0+NMT1: its candidates of an earlier start kept" in first2.stderr
    assert "nmt run 1: finished earlier, kept" in first2.stderr
    assert "nmt-candidates run 1: finished earlier, kept" not in first2.stderr
    assert "Moses hypotheses (the first 2 of each sentence) joined by" in first2.stderr
    assert "+ NMT, with the networks' ensemble's candidates, beside Moses' 2 best" in first2.stdout
    assert "Moses' 2 best joined by the 3 best (beam 3) of each target order's ensemble" in first2.stdout
    for part in ("dev", "test"):
        ids = [line.split(" ")[0] for line in joined_lines(rerank, part) if " FromMoses= 1 " in line]
        sentences = len((TINY / f"{part}.en").read_text().splitlines())
        assert max(map(ids.count, ids)) == 2 and len(set(ids)) == sentences  # each sentence's first 2 or fewer
    report = json.loads((out / "experiment.json").read_text())
    assert report["systems"]["nmt-candidates"]["runs"][0]["models"]["moses_nbest"] == "2"
    chosen = json.loads((out / "hybrid" / "bundle.json").read_text())["candidates"]  # the experiment's own
    assert (chosen or {}).get("moses_nbest") == (2 if chosen_key(report) == "nmt-candidates" else None)
    assert translated(out / "hybrid", test_text, moses) == (rerank / chosen_key(report) / "test.best").read_bytes()
    twin_out, _, _ = bundle_of(
        "nmt-candidates", report, out, out.parent / "first2", (nmt, nmt2), moses, ensemble=True, moses_nbest=2
    )
    record = json.loads((twin_out / "hybrid" / "bundle.json").read_text())
    assert record["candidates"]["moses_nbest"] == 2 and record["nbest"] == 10
    assert record["version"] == 6 and record["candidates"]["batch"] == 20  # 20 sentences' beams at a time
    expected = (twin_out / "systems" / "baseline" / "run1" / "rerank" / "nmt-candidates" / "test.best").read_bytes()
    assert translated(twin_out / "hybrid", test_text, moses) == expected

    # a right-to-left network beside them: an ensemble per target order, a list each (FromNet0: NMT0+NMT1's, FromNet1:
    # NMT2's own); the twin's bundle records which network is in which and translates as its run
    r2l = tiny_nmt(tmp_path / "r2l.pt", right_to_left=True)
    orders = experiment(*both, "--nmt", str(r2l))
    assert orders.returncode == 0, orders.stderr
    assert "NMT0+NMT1: its candidates of an earlier start kept" in orders.stderr
    assert "NMT2: translating the dev set, its 3 best of a beam of 3" in orders.stderr
    assert "+ NMT, with each target order's ensemble's candidates" in orders.stdout
    for part in ("dev", "test"):
        joined = joined_lines(rerank, part)
        assert joined and all(" FromNet0= " in line and " FromNet1= " in line and " NMT2= " in line for line in joined)
    report = json.loads((out / "experiment.json").read_text())
    twin_out, _, _ = bundle_of(
        "nmt-candidates", report, out, out.parent / "orders", (nmt, nmt2, r2l), moses, ensemble=True
    )
    record = json.loads((twin_out / "hybrid" / "bundle.json").read_text())
    assert record["version"] == 6 and record["candidates"]["ensembles"] == [[0, 1], [2]]
    expected = (twin_out / "systems" / "baseline" / "run1" / "rerank" / "nmt-candidates" / "test.best").read_bytes()
    assert translated(twin_out / "hybrid", test_text, moses) == expected


MOSES_MODEL = "TranslationModel0 Distortion0 PhrasePenalty0"  # the tiny system has no reordering table


def chose_features(args: list[str], out: Path, rerank: Path) -> None:
    """--rerank-choose-leave-out added on a restart: the decoder runs and lists kept, each reranked
    run tuned again on the set (of those its list has) of the highest held-out dev BLEU, which is
    the run's held-out figure; the set recorded, its features weighed 0."""
    sets = ["--rerank-choose-leave-out", MOSES_MODEL.replace(" ", ","), "--rerank-choose-leave-out", "FromMoses"]
    chose = experiment(*args, *sets)
    assert chose.returncode == 0, chose.stderr
    assert "baseline run 1: finished earlier, kept" in chose.stderr
    assert "the lists joined by the networks' candidates kept" in chose.stderr
    assert "tried leaving out those of FromMoses its list has, and kept the set of the highest" in chose.stdout
    report = json.loads((out / "experiment.json").read_text())
    for key, tried in (("nmt", [MOSES_MODEL]), ("nmt-candidates", [MOSES_MODEL, "FromMoses"])):
        assert f"{key} run 1: finished earlier, kept" not in chose.stderr
        (run,) = report["systems"][key]["runs"]
        assert run["models"]["choose_leave_out"] == " | ".join(" ".join(sorted(t.split())) for t in tried)
        figures = re.findall(rf"{key} run 1:   (\d+\.\d+) (.*)$", chose.stderr, re.M)
        assert [name for _, name in figures] == ["no feature left out", *(f"{t} left out" for t in tried)]
        best = max(figures, key=lambda f: float(f[0]))  # the first of equal ones
        assert abs(run["dev_heldout"] - float(best[0])) <= 0.0051  # printed to the hundredth
        result = json.loads((rerank / key / "result.json").read_text())
        left_out = result["left_out"]
        assert " ".join(left_out) == ("" if best[1] == "no feature left out" else best[1].removesuffix(" left out"))
        weights = (rerank / key / "weights").read_text().splitlines()
        for name in left_out:
            (line,) = [line for line in weights if line.startswith(f"{name}= ")]
            assert all(float(v) == 0 for v in line.split()[1:]), line
    kept = experiment(*args, *sets)  # the same sets on a restart: every reranked run kept
    assert kept.returncode == 0, kept.stderr
    assert all(f"{key} run 1: finished earlier, kept" in kept.stderr for key in ("nmt", "nmt-candidates"))
    assert kept.stdout == chose.stdout


def joined_lines(rerank: Path, part: str) -> list[str]:
    """The run's lists of ``part`` joined by the networks' candidates, line by line."""
    with gzip.open(rerank / "candidates" / f"{part}.nbest.gz", "rt", encoding="utf-8") as f:
        return f.read().splitlines()


def recorded(out: Path, rerank: Path, moses: str, setting: str) -> dict:
    """The twin's run records ``setting`` (``reached_only``, ``ensemble``) as chosen, OUT/hybrid
    records it where it is the twin's bundle, and translates as the chosen row's run; the report."""
    report = json.loads((out / "experiment.json").read_text())
    (run,) = report["systems"]["nmt-candidates"]["runs"]
    assert run["models"][setting] == "yes"
    record = json.loads((out / "hybrid" / "bundle.json").read_text())
    assert (record["candidates"] or {}).get(setting, False) == (chosen_key(report) == "nmt-candidates")
    test_text = str(TINY / "test.en")
    assert translated(out / "hybrid", test_text, moses) == (rerank / chosen_key(report) / "test.best").read_bytes()
    return report


def chosen_key(report: dict) -> str:
    """The reranked row of highest mean held-out dev BLEU, the first listed among equals."""
    means = {key: sum(r["dev_heldout"] for r in report["systems"][key]["runs"]) for key in ("nmt", "nmt-candidates")}
    return max(means, key=lambda key: (means[key], key == "nmt"))


def translated(bundle: Path, source: str, moses: str) -> bytes:
    r = run("translate-hybrid", str(bundle), source, "-", "--quiet", "--moses", moses)
    assert r.returncode == 0, r.stderr
    return r.stdout


def chosen_bundle_translates_as_its_run(report: dict, out: Path, rerank: Path, stderr: str, moses: str) -> None:
    """OUT/hybrid is the bundle of the row dev chose, and translate-hybrid with it writes that
    run's reranked test output byte for byte."""
    key = chosen_key(report)
    assert f"chosen on held-out dev BLEU: {report['systems'][key]['label']} (" in stderr
    record = json.loads((out / "hybrid" / "bundle.json").read_text())
    assert record["weights"]["from"] == str(rerank / key / "weights")
    assert record["ini"]["from"] == str(rerank.parent / "moses.ini")
    assert record["nbest"] == 10
    assert (record["candidates"] is not None) == (key == "nmt-candidates")
    assert translated(out / "hybrid", str(TINY / "test.en"), moses) == (rerank / key / "test.best").read_bytes()


def bundle_of(
    key: str,
    report: dict,
    out: Path,
    elsewhere: Path,
    networks: tuple[Path, ...],
    moses: str,
    ensemble: bool = False,
    moses_nbest: int | None = None,
) -> tuple[Path, dict, list]:
    """A copy of the experiment ``out`` at ``elsewhere`` whose OUT/hybrid is the bundle of the row
    ``key`` ("nmt" or its twin), written as the experiment writes the chosen one (the report's
    held-out figures made to choose it); returns the copy, the made-up report and the rows."""
    models = SentenceModels(nmt=tuple(map(str, networks)))
    (features,) = models.combinations()
    plain = reranked(BASELINE, features)
    twin = with_candidates(plain, ensemble=ensemble, moses_nbest=moses_nbest)
    rows = [(plain, features, False), (twin, features, True)]
    made_up = json.loads(json.dumps(report))
    for row in ("nmt", "nmt-candidates"):
        made_up["systems"][row]["runs"][0]["dev_heldout"] = 50.0 if row == key else 10.0
    shutil.copytree(out, elsewhere, ignore=shutil.ignore_patterns("hybrid", ".experiment.lock"))
    said: list[str] = []
    written = write_chosen(
        MosesToolkit(moses), str(elsewhere), made_up, rows, models, nbest=10, candidates=3, ensemble=ensemble,
        moses_nbest=moses_nbest, say=said.append, warn=said.append,
    )  # fmt: skip
    assert written == str(elsewhere / "hybrid"), said
    return elsewhere, made_up, rows


def other_bundle_translates_as_its_run(report: dict, out: Path, rerank: Path, moses: str, nmt: Path) -> None:
    """The other row's bundle, written as the experiment writes the chosen one (the report's
    held-out figures made to choose it), translates as its run too: both kinds of bundle are right."""
    other = "nmt" if chosen_key(report) == "nmt-candidates" else "nmt-candidates"
    elsewhere, made_up, rows = bundle_of(other, report, out, out.parent / "other", (nmt,), moses)
    record = json.loads((elsewhere / "hybrid" / "bundle.json").read_text())
    assert (record["candidates"] is not None) == (other == "nmt-candidates")
    run_rerank = elsewhere / "systems" / "baseline" / "run1" / "rerank"
    expected = (run_rerank / other / "test.best").read_bytes()
    assert translated(elsewhere / "hybrid", str(TINY / "test.en"), moses) == expected

    # a network file replaced since the experiment read it: no bundle, the earlier one removed
    read_then = dataclasses.replace(open_model(str(nmt)), sha256="0" * 64)
    said: list[str] = []
    warned: list[str] = []
    changed = SentenceModels(nmt=(read_then,))
    toolkit = MosesToolkit(moses)
    assert (
        write_chosen(
            toolkit, str(elsewhere), made_up, rows, changed, nbest=10, candidates=3, say=said.append, warn=warned.append
        )
        is None
    )
    (message,) = warned
    assert f"{nmt}: changed since the experiment read it" in message and message.endswith("removed")
    assert not [p.name for p in elsewhere.iterdir() if "hybrid" in p.name]
