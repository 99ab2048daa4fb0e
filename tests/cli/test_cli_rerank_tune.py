"""``rerank-tune`` with every option that reaches the tuning (``reranking.tune``): what it prints,
the weights file and the held-out file, as before the tuning moved into the library, with a
stand-in for Moses' optimiser (``helpers.rerank_data``; tests/integration runs the real one)."""

from __future__ import annotations

import io
import os
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest

from phrase_rescorer.reranking import heldout, mert
from tests.helpers.cli_run import run_cli
from tests.helpers.rerank_data import REFS, START, stand_in_optimizer, write_dev


def test_rerank_tune_prints_and_writes_as_before(tmp_path: Path, monkeypatch, capsys) -> None:
    paths = write_dev(tmp_path)
    calls = stand_in_optimizer(monkeypatch)
    for name in ("extractor", "kbmira"):  # found, never run
        program = tmp_path / "moses" / "bin" / name
        program.parent.mkdir(parents=True, exist_ok=True)
        program.write_text("#!/bin/sh\nexit 1\n")
        program.chmod(0o755)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    weights, held = tmp_path / "w.txt", tmp_path / "held.fr"
    args = ["rerank-tune", str(paths["dev.nbest"]), str(paths["dev.fr"]), str(weights)]
    args += ["--init", str(paths["moses.ini"]), "--moses", str(tmp_path / "moses"), "--optimizer", "kbmira"]
    args += ["--restarts", "3", "--seed", "7"]
    args += ["--threads", "2", "--mbr", "--mbr-size", "3", "--mbr-scale", "0.2", "--held-out", str(held)]
    code, err = run_cli(args, monkeypatch, capsys)
    assert code == 0, err
    mbr = ", MBR of 3 at scale 0.2"
    assert err.splitlines()[-4:] == [
        f"{paths['dev.nbest']}: 18 hypotheses, features LM0 WordPenalty0 TranslationModel0 CSLM0",
        f"dev BLEU (tokenized, as MERT scores it{mbr}): 96.91 with the start weights, 100.00 reranked; wrote {weights}",
        "held-out dev BLEU: the weights tuned on each half of the dev sentences choose the other's (kbmira)",
        f"dev BLEU held out{mbr}: 96.91; wrote {held}",
    ]
    assert weights.read_text() == (
        f"# phrase-rescorer rerank-tune dev.nbest: dev BLEU 96.91 -> 100.00{mbr}\n"
        "[weight]\nLM0= 0.5\nWordPenalty0= -0.1\nTranslationModel0= 0.2 0.3\nCSLM0= 3\n"
    )
    chosen = [*REFS[:3], "il x", *REFS[4:]]  # the MBR choice of the odd sentences under the even ones' weights
    assert held.read_text() == "".join(line + "\n" for line in chosen)
    assert [c.pop("references") for c in calls] == [REFS, REFS[0::2], REFS[1::2]]
    assert calls == [{"start": START, "seed": 7, "restarts": 3, "threads": 2, "optimizer": "kbmira"}] * 3
    assert not os.listdir(tmp_path / "tmp")  # the temporary directory removed


def fake_moses(directory: Path) -> Path:
    """A Moses directory whose extractor and mert are found (never run: the optimiser is a stand-in)."""
    for name in ("extractor", "mert"):
        program = directory / "bin" / name
        program.parent.mkdir(parents=True, exist_ok=True)
        program.write_text("#!/bin/sh\nexit 1\n")
        program.chmod(0o755)
    return directory


def tuning_args(tmp_path: Path, paths: dict[str, Path], weights: Path) -> list[str]:
    """rerank-tune of ``write_dev``'s list into ``weights`` from its moses.ini, with ``fake_moses``."""
    args = ["rerank-tune", str(paths["dev.nbest"]), str(paths["dev.fr"]), str(weights)]
    return [*args, "--init", str(paths["moses.ini"]), "--moses", str(fake_moses(tmp_path / "moses"))]


def test_leave_out_takes_the_features_out_of_the_optimisers_list(tmp_path: Path, monkeypatch, capsys) -> None:
    """--leave-out, repeated and comma-separated, each name once: the optimiser is given the list
    without those features (their start weights 0, the names passed on), every tuning alike (the
    held-out halves too), and the weights file gives them 0; the line that names the features
    says which were left out."""
    paths = write_dev(tmp_path)
    calls = stand_in_optimizer(monkeypatch)
    stand_in, headers = mert.tune, []

    def tune(toolkit, nbest, references, start, work_dir, **options):  # type: ignore[no-untyped-def]
        headers.append(Path(nbest).read_text().splitlines()[0].split(" ||| ")[2])
        return stand_in(toolkit, nbest, references, start, work_dir, **options)

    monkeypatch.setattr(mert, "tune", tune)
    monkeypatch.setattr(heldout, "tune", tune)
    weights = tmp_path / "w.txt"
    args = [*tuning_args(tmp_path, paths, weights), "--held-out", str(tmp_path / "held.fr")]
    args += ["--leave-out", "TranslationModel0", "--leave-out", " TranslationModel0, WordPenalty0"]
    code, err = run_cli(args, monkeypatch, capsys)
    assert code == 0, err
    assert (
        f"{paths['dev.nbest']}: 18 hypotheses, features LM0 WordPenalty0 TranslationModel0 CSLM0 "
        "(TranslationModel0 WordPenalty0 left out: weight 0)"
    ) in err.splitlines()
    # the first line's features as each list given to the optimiser has them: the whole, each half's
    assert headers == ["LM0= -2 CSLM0= -5", "LM0= -2 CSLM0= -5", "LM0= -2.1 CSLM0= -5"]
    assert [call["start"] for call in calls] == [[0.5, 0.0, 0.0, 0.0, 0.0]] * 3
    assert [call["leave_out"] for call in calls] == [["TranslationModel0", "WordPenalty0"]] * 3
    text = weights.read_text()
    assert "\nWordPenalty0= 0\nTranslationModel0= 0 0\n" in text and "\nCSLM0= 3\n" in text


def test_weights_and_held_out_lines_to_one_place_are_refused(tmp_path: Path, monkeypatch, capsys) -> None:
    """WEIGHTS and --held-out both on standard output (``-``, ``/dev/stdout``), or one file by two
    spellings: exit 6 before any tuning, nothing written."""
    paths = write_dev(tmp_path)
    calls = stand_in_optimizer(monkeypatch)
    args = ["rerank-tune", str(paths["dev.nbest"]), str(paths["dev.fr"])]
    for weights, held in (("-", "/dev/stdout"), (str(tmp_path / "w.txt"), f"{tmp_path}/./w.txt")):
        code, err = run_cli([*args, weights, "--held-out", held], monkeypatch, capsys)
        assert code == 6 and f"{held}: output goes to the same place as the weights" in err, err
    assert not calls and not (tmp_path / "w.txt").exists()


@pytest.mark.parametrize(
    ("given", "message"),
    [
        (
            ["X0"],
            "--leave-out X0: {nbest} has no such feature (its features: LM0 WordPenalty0 TranslationModel0 CSLM0)",
        ),
        (["CSLM0,X0,Y0"], "--leave-out X0, Y0: {nbest} has no such feature"),
        (["LM0,WordPenalty0", "TranslationModel0 CSLM0"], "--leave-out names every feature of {nbest}"),
        ([" , "], "--leave-out ' , ': give a feature's name"),
    ],
)
def test_leave_out_refusals(tmp_path: Path, monkeypatch, capsys, given: list[str], message: str) -> None:
    """A name the list lacks, every feature, or no name: exit 2, one line, at the list's first
    line (before the reference's length is held against the list: a short one here), before any
    tuning; no weights written, no copy of the list left in --work-dir."""
    paths = write_dev(tmp_path)
    paths["dev.fr"].write_text("one line\n")
    calls = stand_in_optimizer(monkeypatch)
    weights, work = tmp_path / "w.txt", tmp_path / "work"
    args = ["rerank-tune", str(paths["dev.nbest"]), str(paths["dev.fr"]), str(weights), "--work-dir", str(work)]
    args += ["--moses", str(fake_moses(tmp_path / "moses"))]
    for value in given:
        args += ["--leave-out", value]
    code, err = run_cli(args, monkeypatch, capsys)
    assert code == 2 and not calls and not weights.exists()
    assert not work.exists() or not os.listdir(work)
    assert err.count("\n") == 1 and message.format(nbest=paths["dev.nbest"]) in err


def choosing_optimizer(monkeypatch, fail_on: str | None = None) -> list[tuple[str, list[str], list[str]]]:
    """``mert.tune`` replaced: the start weights, and CSLM0's weight 1 where LM0 is left out (CSLM0
    then prefers the reference: held out, BLEU 100); raises ``RerankError`` where ``fail_on`` is
    left out. The list records each call's list header, features left out and references."""
    calls: list[tuple[str, list[str], list[str]]] = []

    def tune(toolkit, nbest, references, start, work_dir, *, layout=None, leave_out=(), **options):  # type: ignore[no-untyped-def]
        header = Path(nbest).read_text().splitlines()[0].split(" ||| ")[2]
        calls.append((header, list(leave_out), list(references[0])))
        if fail_on in leave_out:
            raise mert.RerankError(f"kbmira failed (exit 1); see {os.path.join(work_dir, 'kbmira.log')}:\nboom")
        weights = np.array(start, dtype=np.float64)
        if "LM0" in leave_out:
            weights[-1] = 1.0
        return mert.TuneResult(weights, 50.0)

    monkeypatch.setattr(mert, "tune", tune)
    monkeypatch.setattr(heldout, "tune", tune)
    return calls


def test_choose_leave_out_tunes_the_set_of_the_highest_held_out_bleu(tmp_path: Path, monkeypatch, capsys) -> None:
    """--choose-leave-out: each set's held-out lines computed on a list without its features (and
    --leave-out's), every set's figure printed, the highest chosen (not the first here), tuned on
    the whole list, its held-out lines written, not computed again; a set given twice tried once."""
    paths = write_dev(tmp_path)
    calls = choosing_optimizer(monkeypatch)
    weights, held, work = tmp_path / "w.txt", tmp_path / "held.fr", tmp_path / "work"
    args = [*tuning_args(tmp_path, paths, weights), "--held-out", str(held), "--work-dir", str(work)]
    args += ["--leave-out", "WordPenalty0", "--choose-leave-out", "TranslationModel0"]
    args += ["--choose-leave-out", "LM0,TranslationModel0", "--choose-leave-out", "TranslationModel0 LM0"]
    code, err = run_cli(args, monkeypatch, capsys)
    assert code == 0, err
    lines = err.splitlines()
    assert lines[0].endswith(": 3 sets")
    assert [line.split(" ", 3)[3] for line in lines[1:4]] == [
        "WordPenalty0 left out",
        "WordPenalty0 TranslationModel0 left out",
        "WordPenalty0 LM0 TranslationModel0 left out",
    ]
    figures = [float(line.split()[0]) for line in lines[1:4]]
    assert figures[2] == 100.0 and max(figures[:2]) < 100.0
    assert lines[4] == "features chosen: WordPenalty0 LM0 TranslationModel0 left out (held-out dev BLEU 100.00)"
    assert lines[-1] == f"dev BLEU held out: 100.00; wrote {held}"
    assert held.read_text() == "".join(line + "\n" for line in REFS)
    assert [(header, left) for header, left, _ in calls] == [
        ("LM0= -2 TranslationModel0= -1 -1 CSLM0= -5", ["WordPenalty0"]),
        ("LM0= -2.1 TranslationModel0= -1 -1 CSLM0= -5", ["WordPenalty0"]),
        ("LM0= -2 CSLM0= -5", ["WordPenalty0", "TranslationModel0"]),
        ("LM0= -2.1 CSLM0= -5", ["WordPenalty0", "TranslationModel0"]),
        ("CSLM0= -5", ["WordPenalty0", "LM0", "TranslationModel0"]),
        ("CSLM0= -5", ["WordPenalty0", "LM0", "TranslationModel0"]),
        ("CSLM0= -5", ["WordPenalty0", "LM0", "TranslationModel0"]),  # the whole list: the chosen set's copy
    ]
    assert [refs for _, _, refs in calls][-3:] == [REFS[0::2], REFS[1::2], REFS]
    text = weights.read_text()
    assert "\nLM0= 0\nWordPenalty0= 0\nTranslationModel0= 0 0\nCSLM0= 1\n" in text
    assert {"choice1", "choice2", "heldout", "nbest.txt"} <= set(os.listdir(work))  # each set's list and folds
    assert sorted(os.listdir(work / "choice2")) == ["heldout", "nbest.txt"]


@pytest.mark.parametrize(
    ("given", "message"),
    [
        (["--choose-leave-out", "X0"], "--choose-leave-out X0: {nbest} has no such feature"),
        (["--choose-leave-out", " ,"], "--choose-leave-out ' ,': give a feature's name"),
        (
            ["--leave-out", "LM0,WordPenalty0", "--choose-leave-out", "TranslationModel0,CSLM0"],
            "--leave-out with --choose-leave-out TranslationModel0 CSLM0 names every feature of {nbest}",
        ),
        (
            ["--leave-out", "LM0,WordPenalty0", "--choose-leave-out", "WordPenalty0"],
            "--choose-leave-out WordPenalty0: left out in any case",
        ),
    ],
)
def test_choose_leave_out_refusals(tmp_path: Path, monkeypatch, capsys, given: list[str], message: str) -> None:
    """A name the list lacks, an empty set, a set that with --leave-out's is every feature, or one
    that adds nothing to them: exit 2, one line, before any tuning."""
    paths = write_dev(tmp_path)
    paths["dev.fr"].write_text("one line\n")
    calls = stand_in_optimizer(monkeypatch)
    weights = tmp_path / "w.txt"
    args = ["rerank-tune", str(paths["dev.nbest"]), str(paths["dev.fr"]), str(weights)]
    args += ["--moses", str(fake_moses(tmp_path / "moses")), *given]
    code, err = run_cli(args, monkeypatch, capsys)
    assert code == 2 and not calls and not weights.exists()
    assert err.count("\n") == 1 and message.format(nbest=paths["dev.nbest"]) in err


def test_choose_leave_out_reads_the_list_once_from_stdin(tmp_path: Path, monkeypatch, capsys) -> None:
    """The list read from stdin (it cannot be read twice): each set's list is made from the first
    copy; without --held-out and --work-dir, the chosen set tuned and the temporary directory
    removed."""
    paths = write_dev(tmp_path)
    calls = choosing_optimizer(monkeypatch)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(paths["dev.nbest"].read_bytes())))
    weights = tmp_path / "w.txt"
    args = tuning_args(tmp_path, paths, weights)
    args[1] = "-"
    code, err = run_cli([*args, "--choose-leave-out", "LM0", "--choose-leave-out", "CSLM0"], monkeypatch, capsys)
    assert code == 0, err
    assert "features chosen: LM0 left out (held-out dev BLEU 100.00)" in err.splitlines()
    names = [" ".join(word for word in header.split() if word.endswith("=")) for header, _, _ in calls]
    assert names == [
        *["LM0= WordPenalty0= TranslationModel0= CSLM0="] * 2,  # every feature, each half
        *["WordPenalty0= TranslationModel0= CSLM0="] * 2,
        *["LM0= WordPenalty0= TranslationModel0="] * 2,
        "WordPenalty0= TranslationModel0= CSLM0=",  # the whole list, the chosen set's
    ]
    assert "\nLM0= 0\n" in weights.read_text() and not os.listdir(tmp_path / "tmp")


def test_choose_leave_out_failing_writes_no_weights_and_names_the_log(tmp_path: Path, monkeypatch, capsys) -> None:
    """A tuning that fails while the sets are tried: exit 6, one line naming its log (kept), no
    WEIGHTS and no held-out file, and no word of a held-out tuning after WEIGHTS."""
    paths = write_dev(tmp_path)
    choosing_optimizer(monkeypatch, fail_on="CSLM0")
    weights, held, work = tmp_path / "w.txt", tmp_path / "held.fr", tmp_path / "work"
    args = [*tuning_args(tmp_path, paths, weights), "--held-out", str(held), "--work-dir", str(work)]
    code, err = run_cli([*args, "--choose-leave-out", "LM0", "--choose-leave-out", "CSLM0"], monkeypatch, capsys)
    assert code == 6, err
    assert f"kbmira failed (exit 1); see {work / 'choice2' / 'heldout' / 'tune0' / 'kbmira.log'}" in err
    assert "is written" not in err and not weights.exists() and not held.exists()
