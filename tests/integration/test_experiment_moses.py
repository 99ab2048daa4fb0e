"""``phrase-rescorer experiment`` end to end with the real Moses, on the tiny en-fr system of
tests/data/tiny-moses: 1 run per system, 2 MERT iterations (about a minute on 2 cores).
Skipped, with the reason, when no Moses is found ($MOSES, else ../shared/tools/moses)."""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
from pathlib import Path

import pytest

from phrase_rescorer.experiment import bleu, moses_runs
from phrase_rescorer.moses.toolkit import EXPERIMENT_NEEDS, MosesToolkit
from tests.helpers.analysis_model import train_tiny
from tests.helpers.cslm import tiny_lm
from tests.helpers.moses import moses_root
from tests.helpers.nmt import tiny_nmt
from tests.helpers.paths import PYTHON, REPO, cli_env, sigint_as_at_a_terminal

TINY = REPO / "tests" / "data" / "tiny-moses"


def moses_or_skip() -> str:
    return str(moses_root(EXPERIMENT_NEEDS))


def experiment(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [PYTHON, "-m", "phrase_rescorer", "experiment", *args],
        capture_output=True,
        text=True,
        env=cli_env(),
        timeout=900,
    )


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> dict:
    moses = moses_or_skip()
    tmp = tmp_path_factory.mktemp("experiment")
    ini = tmp / "moses.ini"
    ini.write_text((TINY / "moses.ini").read_text().replace("@MODEL_DIR@", str(TINY)))
    model = tmp / "rnn.pt"
    train_tiny(TINY / "phrase-table.gz", model, steps=20)
    lm = tiny_lm(tmp / "cslm.pt")
    nmt = tmp / "nmt.pt"
    tiny_nmt(nmt)
    out = tmp / "out"
    args = [
        "--moses",
        moses,
        "--ini",
        str(ini),
        "--dev",
        str(TINY / "dev.en"),
        str(TINY / "dev.fr"),
        "--test",
        str(TINY / "test.en"),
        str(TINY / "test.fr"),
        "--model",
        str(model),
        "--unk-feature",
        "--lm",
        str(lm),
        "--nmt",
        str(nmt),
        "--rerank-nbest",
        "20",
        "--runs",
        "1",
        "--maximum-iterations",
        "2",
        "--target-lang",
        "fr",
        "--trials",
        "1000",
        "--out",
        str(out),
    ]
    first = experiment(*args)
    return {"args": args, "out": out, "first": first}


@pytest.mark.slow
def test_end_to_end(setup: dict) -> None:
    first, out = setup["first"], setup["out"]
    assert first.returncode == 0, first.stderr
    lines = first.stdout.splitlines()
    rows = {line.split("  ")[0].strip(): line for line in lines[2:14]}
    assert list(rows) == [
        "baseline",
        "+ RNN",
        "+ RNN + WP",
        "+ CSLM",
        "+ CSLM + RNN",
        "+ CSLM + RNN + WP",
        "+ NMT",
        "+ RNN + NMT",
        "+ RNN + WP + NMT",
        "+ CSLM + NMT",
        "+ CSLM + RNN + NMT",
        "+ CSLM + RNN + WP + NMT",
    ]
    assert "baseline run 1: MERT iteration 1 done, dev BLEU" in first.stderr
    # each run's lists written by the decoding that gives its 1-best output, not decoded again
    assert first.stderr.count("with the tuned weights, 1-best and 20-best lists") == 3
    assert "decoding 20-best lists" not in first.stderr
    assert "rnn-wp run 1: MERT iteration 2 done, dev BLEU" in first.stderr
    tables = out / "tables"  # rescored once: + RNN's table is + RNN + WP's without the WP column
    assert f"{tables / 'phrase-table.rnn.gz'}: {tables / 'phrase-table.rnn-wp.gz'} without its last 1" in first.stderr

    report = json.loads((out / "experiment.json").read_text())
    refs = bleu.read_lines(str(TINY / "test.fr"))
    for key, added in (("baseline", 0), ("rnn", 1), ("rnn-wp", 2)):
        run_dir = out / "systems" / key / "run1"
        (run,) = report["systems"][key]["runs"]
        assert run["iterations"] == 2 and len(run["mert_dev_bleu"]) == 2
        # the reported test BLEU is sacrebleu's on the kept 1-best output
        hyps = bleu.read_lines(str(run_dir / "test.1best"))
        assert len(hyps) == len(refs)
        with gzip.open(run_dir / "rerank" / "test.nbest.gz", "rt", encoding="utf-8") as f:
            tops = {}  # each sentence's first hypothesis: the decoder's 1-best
            for line in f:
                tops.setdefault(int(line.split(" ||| ")[0]), line.split(" ||| ")[1].strip())
        assert [tops[i] for i in range(len(hyps))] == [h.strip() for h in hyps]
        assert run["test"] == pytest.approx(bleu.tokenized_bleu(hyps, refs).score, abs=1e-4)
        assert run["test_detok"] == pytest.approx(
            bleu.detokenized_bleu(hyps, bleu.detokenize(refs, "fr"), "fr").score, abs=1e-4
        )
        assert f"--mertmertargs=-r {run['seed']} " in (run_dir / "mert.out").read_text()
        # the tuned ini: mert-moses.pl's, with the table's extra columns weighted
        tuned = (run_dir / "moses.ini").read_text()
        tm = next(line for line in tuned.splitlines() if line.startswith("TranslationModel0="))
        assert len(tm.split("=", 1)[1].split()) == 4 + added
        if added:
            table = out / "tables" / f"phrase-table.{key}.gz"
            assert f"path={table} " in tuned
            with (
                gzip.open(table, "rt", encoding="utf-8") as new,
                gzip.open(TINY / "phrase-table.gz", "rt", encoding="utf-8") as old,
            ):
                pairs = list(zip(old, new, strict=True))
            assert all(len(n.split(" ||| ")[2].split()) == 4 + added for _, n in pairs)
    # the reranked rows: each run's n-best lists with both features, reranked by weights tuned
    # on the system's own features
    reranked = {"cslm": ["CSLM0"], "nmt": ["NMT0"], "cslm-nmt": ["CSLM0", "NMT0"]}
    dev_refs = bleu.read_lines(str(TINY / "dev.fr"))
    for decoder, suffix in (("baseline", ""), ("rnn", "-rnn"), ("rnn-wp", "-rnn-wp")):
        rerank = out / "systems" / decoder / "run1" / "rerank"
        with gzip.open(rerank / "test.nbest.gz", "rt", encoding="utf-8") as f:
            nbest = f.read().splitlines()
        assert nbest and all(" CSLM0= " in line and " NMT0= " in line for line in nbest)
        with gzip.open(rerank / "dev.nbest.gz", "rt", encoding="utf-8") as f:
            dev_nbest = f.read().splitlines()
        for key, features in reranked.items():
            (run,) = report["systems"][key + suffix]["runs"]
            hyps = bleu.read_lines(str(rerank / (key + suffix) / "test.best"))
            assert len(hyps) == len(refs)
            assert run["test"] == pytest.approx(bleu.tokenized_bleu(hyps, refs).score, abs=1e-4)
            assert all(
                hyp in {line.split(" ||| ")[1].strip() for line in nbest if line.startswith(f"{i} ")}
                for i, hyp in enumerate(hyps)
            )
            weights = (rerank / (key + suffix) / "weights").read_text()
            assert [name for name in ("CSLM0", "NMT0") if f"\n{name}= " in weights] == features
            # held-out dev BLEU: a hypothesis of each dev sentence, chosen by the other half's weights
            held = bleu.read_lines(str(rerank / (key + suffix) / "dev.heldout"))
            assert run["dev_heldout"] == pytest.approx(bleu.tokenized_bleu(held, dev_refs).score, abs=1e-4)
            assert len(held) == len(dev_refs) and all(
                hyp in {line.split(" ||| ")[1].strip() for line in dev_nbest if line.startswith(f"{i} ")}
                for i, hyp in enumerate(held)
            )
        assert "dev_heldout" not in report["systems"][decoder]["runs"][0]
    assert set(report["comparisons"]) == {"rnn", "rnn-wp"} | {k + s for k in reranked for s in ("", "-rnn", "-rnn-wp")}
    for comparison in report["comparisons"].values():
        assert 0 < comparison["test"]["approximate_randomization"]["p_value"] <= 1
    assert report["signatures"]["tokenized"].startswith("nrefs:1|case:mixed|eff:no|tok:none")


def test_one_decoding_gives_the_1best_output_and_the_list(tmp_path: Path) -> None:
    """The run's 1-best output and its n-best list from one decoder run equal those of two: the
    decoder searches once and writes both from that search (moses/TranslationTask.cpp:
    ``manager.ProcessSentence();``, then ``manager.GetBestHypothesis()`` for the 1-best and
    ``manager.CalcNBest(staticData.GetNBestSize(), nBestList, staticData.GetDistinctNBest());``)."""
    toolkit = MosesToolkit(moses_or_skip())
    ini = tmp_path / "moses.ini"
    ini.write_text((TINY / "moses.ini").read_text().replace("@MODEL_DIR@", str(TINY)))
    for part in ("dev", "test"):
        source, one, alone = str(TINY / f"{part}.en"), tmp_path / f"{part}.one", tmp_path / f"{part}.alone"
        lines = moses_runs.decode(toolkit, str(ini), source, str(one), nbest=(str(tmp_path / f"{part}.list"), 20))
        moses_runs.decode(toolkit, str(ini), source, str(alone))
        moses_runs.decode_nbest(toolkit, str(ini), source, str(tmp_path / f"{part}.apart"), 20)
        assert one.read_bytes() == alone.read_bytes() and len(lines) == len(Path(source).read_text().splitlines())
        assert (tmp_path / f"{part}.list").read_bytes() == (tmp_path / f"{part}.apart").read_bytes()


@pytest.mark.slow
def test_restart_skips_finished_runs_and_redoes_unfinished_ones(setup: dict) -> None:
    assert setup["first"].returncode == 0, setup["first"].stderr
    out = setup["out"]
    base_output = out / "systems" / "baseline" / "run1" / "test.1best"
    stamp = base_output.stat().st_mtime_ns
    rnn = out / "systems" / "rnn" / "run1"
    before = (rnn / "test.1best").read_text()
    (rnn / "result.json").unlink()  # as if interrupted after decoding
    again = experiment(*setup["args"])
    assert again.returncode == 0, again.stderr
    assert "baseline run 1: finished earlier, kept" in again.stderr
    assert "rnn-wp run 1: finished earlier, kept" in again.stderr
    assert "cslm run 1: finished earlier, kept" in again.stderr
    assert "rnn run 1: MERT iteration 1" in again.stderr
    assert base_output.stat().st_mtime_ns == stamp
    assert (rnn / "test.1best").read_text() == before  # the same seed, the same tuning
    assert again.stdout == setup["first"].stdout


@pytest.mark.slow
def test_a_restart_with_kbmira_tunes_only_the_reranked_runs_again(setup: dict) -> None:
    """--rerank-optimizer may change between two starts: the MERT runs and the scored lists are
    kept, every reranked run is tuned again with kbmira (recorded in its result), and a third
    start with kbmira keeps them."""
    assert setup["first"].returncode == 0, setup["first"].stderr
    out, args = setup["out"], list(setup["args"])
    run_dir = out / "systems" / "baseline" / "run1"
    stamps = {p: p.stat().st_mtime_ns for p in (run_dir / "moses.ini", run_dir / "rerank" / "dev.nbest.gz")}
    again = experiment(*args, "--rerank-optimizer", "kbmira")
    assert again.returncode == 0, again.stderr
    assert "baseline run 1: finished earlier, kept" in again.stderr
    assert "decoding" not in again.stderr and "appending" not in again.stderr
    assert "cslm run 1: tuning the reranking weights on the dev set's lists (kbmira)" in again.stderr
    assert {p: p.stat().st_mtime_ns for p in stamps} == stamps
    result = json.loads((run_dir / "rerank" / "cslm" / "result.json").read_text())
    assert result["optimizer"] == "kbmira" and "kbmira_dev_bleu" in result
    third = experiment(*args, "--rerank-optimizer", "kbmira")
    assert third.returncode == 0, third.stderr
    assert "cslm run 1: finished earlier, kept" in third.stderr and "tuning the reranking" not in third.stderr
    assert third.stdout == again.stdout


@pytest.mark.slow
def test_a_restart_with_another_cslm_keeps_the_decoder_runs(setup: dict, tmp_path: Path) -> None:
    """The sentence-level models may change between two starts: another --lm and no --nmt.
    The MERT runs and the lists are kept (no decoding), the CSLM's feature computed again, the
    NMT's removed; the CSLM rows are reranked again, the rows left out are not reported."""
    assert setup["first"].returncode == 0, setup["first"].stderr
    out, args = setup["out"], list(setup["args"])
    mert = out / "systems" / "baseline" / "run1" / "moses.ini"
    stamp = mert.stat().st_mtime_ns
    lm2 = tiny_lm(tmp_path / "cslm2.pt", seed=2)
    args[args.index("--lm") + 1] = str(lm2)
    del args[args.index("--nmt") : args.index("--nmt") + 2]
    again = experiment(*args)
    assert again.returncode == 0, again.stderr
    assert "baseline run 1: finished earlier, kept" in again.stderr
    assert "decoding" not in again.stderr
    assert "baseline run 1: dev: the scored lists kept; features CSLM0 computed again" in again.stderr
    assert "cslm run 1: tuning the reranking weights" in again.stderr
    assert mert.stat().st_mtime_ns == stamp
    rows = [line.split("  ")[0].strip() for line in again.stdout.splitlines()[2:8]]
    assert rows == ["baseline", "+ RNN", "+ RNN + WP", "+ CSLM", "+ CSLM + RNN", "+ CSLM + RNN + WP"]
    rerank = out / "systems" / "baseline" / "run1" / "rerank"
    with gzip.open(rerank / "test.nbest.gz", "rt", encoding="utf-8") as f:
        assert all(" CSLM0= " in line and " NMT0= " not in line for line in f)
    result = json.loads((rerank / "cslm" / "result.json").read_text())
    assert list(result["models"]) == ["CSLM0"]
    assert json.loads((rerank / "features.json").read_text()) == result["models"]


@pytest.mark.slow
def test_a_new_network_takes_the_baseline_runs_of_an_earlier_experiment(setup: dict, tmp_path: Path) -> None:
    """--baseline-from: a second network compared against the first experiment's baseline; the
    baseline's run is copied (not tuned again) and scored as it was, the new network's tuned."""
    assert setup["first"].returncode == 0, setup["first"].stderr
    first_out, args = setup["out"], list(setup["args"])
    model = tmp_path / "rnn2.pt"
    train_tiny(TINY / "phrase-table.gz", model, steps=10, seed=1)
    args[args.index("--model") + 1] = str(model)
    for option in ("--lm", "--nmt", "--rerank-nbest"):
        del args[args.index(option) : args.index(option) + 2]
    args.remove("--unk-feature")
    out = tmp_path / "out"
    args[args.index("--out") + 1] = str(out)
    again = experiment(*args, "--baseline-from", str(first_out))
    assert again.returncode == 0, again.stderr
    assert f"baseline run 1: taken from {first_out}" in again.stderr
    assert "baseline run 1: MERT" not in again.stderr
    assert "rnn run 1: MERT iteration 2 done" in again.stderr
    run, earlier = out / "systems" / "baseline" / "run1", first_out / "systems" / "baseline" / "run1"
    for name in ("moses.ini", "test.1best", "dev.1best"):
        assert (run / name).read_bytes() == (earlier / name).read_bytes()
    assert not (run / "rerank").exists()
    before = json.loads((first_out / "experiment.json").read_text())["systems"]["baseline"]["runs"]
    for restart in ((), ("--baseline-from", str(first_out))):  # a restart, with or without it
        report = json.loads((out / "experiment.json").read_text())
        assert report["systems"]["baseline"]["runs"] == [{**before[0], "borrowed_from": str(first_out)}]
        assert list(report["comparisons"]) == ["rnn"]
        again = experiment(*args, *restart)
        assert again.returncode == 0, again.stderr
        assert "baseline run 1: finished earlier, kept" in again.stderr and "taken from" not in again.stderr
        assert "MERT" not in again.stderr


@pytest.mark.slow
def test_the_inverse_network_added_takes_the_baseline_and_rnn_runs(setup: dict, tmp_path: Path) -> None:
    """--baseline-from with the same -m and an --inverse-model: + RNN's table, cut here from the
    both-directions table, is the first experiment's text, so + RNN's runs are copied with the
    baseline's and only + RNN both directions is tuned."""
    assert setup["first"].returncode == 0, setup["first"].stderr
    first_out, args = setup["out"], list(setup["args"])
    inverse = tmp_path / "inverse.pt"
    trained = subprocess.run(
        [PYTHON, "-m", "phrase_rescorer", "train", str(TINY / "phrase-table.gz"), str(inverse)]
        + ["--vocab-size", "300", "--hidden-dim", "16", "--embed-dim", "8", "--maxout-dim", "8"]
        + ["--output-rank", "4", "--max-steps", "2", "--direction", "inverse"],
        capture_output=True,
        text=True,
        env=cli_env(),
        timeout=300,
    )
    assert trained.returncode == 0, trained.stderr
    for option in ("--lm", "--nmt", "--rerank-nbest"):
        del args[args.index(option) : args.index(option) + 2]
    args.remove("--unk-feature")
    out = tmp_path / "out"
    args[args.index("--out") + 1] = str(out)
    again = experiment(*args, "--inverse-model", str(inverse), "--baseline-from", str(first_out))
    assert again.returncode == 0, again.stderr
    for key in ("baseline", "rnn"):
        assert f"{key} run 1: taken from {first_out}" in again.stderr
        assert f"{key} run 1: MERT" not in again.stderr
    assert "rnn-both run 1: MERT iteration 2 done" in again.stderr
    before = json.loads((first_out / "experiment.json").read_text())["systems"]
    report = json.loads((out / "experiment.json").read_text())["systems"]
    for key in ("baseline", "rnn"):
        assert report[key]["runs"] == [{**before[key]["runs"][0], "borrowed_from": str(first_out)}]
    assert list(report) == ["baseline", "rnn", "rnn-both"] and "borrowed_from" not in report["rnn-both"]["runs"][0]
    tuned = (out / "systems" / "rnn" / "run1" / "moses.ini").read_text()  # decodes with this --out's table
    assert f"path={out / 'tables' / 'phrase-table.rnn.gz'} " in tuned and str(first_out) not in tuned


def test_no_moses_is_refused(tmp_path: Path) -> None:
    result = experiment(
        "--moses",
        str(tmp_path),
        "--ini",
        str(TINY / "moses.ini"),
        "--dev",
        str(TINY / "dev.en"),
        str(TINY / "dev.fr"),
        "--test",
        str(TINY / "test.en"),
        str(TINY / "test.fr"),
        "--out",
        str(tmp_path / "o"),
    )
    assert result.returncode == 2
    assert "is not a usable Moses: bin/moses is missing" in result.stderr
    assert not (tmp_path / "o").exists()


def _processes_mentioning(text: str) -> list[str]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in cmdline:
            found.append(f"{pid}: {cmdline}")
    return found


@pytest.mark.slow
def test_interrupted_during_mert_stops_moses_and_continues(tmp_path: Path) -> None:
    moses = moses_or_skip()
    ini = tmp_path / "moses.ini"
    ini.write_text((TINY / "moses.ini").read_text().replace("@MODEL_DIR@", str(TINY)))
    out = tmp_path / "out"
    args = [
        PYTHON,
        "-m",
        "phrase_rescorer",
        "experiment",
        "--moses",
        moses,
        "--ini",
        str(ini),
        "--dev",
        str(TINY / "dev.en"),
        str(TINY / "dev.fr"),
        "--test",
        str(TINY / "test.en"),
        str(TINY / "test.fr"),
        "--runs",
        "1",
        "--maximum-iterations",
        "1",
        "--target-lang",
        "fr",
        "--trials",
        "100",
        "--out",
        str(out),
    ]
    process = subprocess.Popen(
        args,
        stderr=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=cli_env(),
        preexec_fn=sigint_as_at_a_terminal,
    )
    assert process.stderr is not None
    for line in process.stderr:
        if "MERT iteration 1 decoding the dev set" in line:
            break
    process.send_signal(signal.SIGINT)
    _, rest = process.communicate(timeout=120)
    assert process.returncode == 130, rest
    assert f"interrupted; the finished runs are kept in {out}" in rest
    assert not (out / "systems" / "baseline" / "run1" / "result.json").exists()
    assert _processes_mentioning(str(out)) == []  # mert-moses.pl and its decoder are gone
    again = experiment(*args[4:])
    assert again.returncode == 0, again.stderr
    assert (out / "systems" / "baseline" / "run1" / "result.json").exists()
