"""ems-train-model: train-model.perl's step 9 given each text table's real score count."""

from __future__ import annotations

import gzip
import os
import subprocess
import sys
from pathlib import Path

import pytest

from phrase_rescorer.moses.ems_script import EmsScriptError, rewrite
from tests.helpers.paths import REPO

LINE = b"la maison ||| the house ||| 0.5 0.4 0.3 0.2 0.1 ||| 0-0 1-1 ||| 2 2 2\n"


@pytest.fixture
def table(tmp_path: Path) -> Path:
    """A 5-score table on disk as EMS names it: the stem, with the file at stem.gz."""
    with gzip.open(tmp_path / "phrase-table-pruned.1.gz", "wb") as f:
        f.write(LINE)
    return tmp_path / "phrase-table-pruned.1"


def test_step_9_gets_the_score_count(table: Path) -> None:
    args = ["-first-step", "9", "-f", "en", "-phrase-translation-table", str(table), "-config", "x.ini"]
    new, notes = rewrite(args)
    assert new == ["-first-step", "9", "-f", "en", "-phrase-translation-table", f"{table}:0:5", "-config", "x.ini"]
    assert notes == [f"{table}: 5 scores per line: passing -phrase-translation-table {table}:0:5"]


def test_equals_form_and_implementation_kept(table: Path) -> None:
    new, _ = rewrite(["--first-step=9", f"--phrase-translation-table={table}:6"])
    assert new == ["--first-step=9", f"-phrase-translation-table={table}:6:5"]


@pytest.mark.parametrize("value", ["{t}:0:4", "{t}:2", "{t}.missing"])
def test_given_count_binarized_or_missing_passed_on(table: Path, value: str) -> None:
    value = value.format(t=table)
    assert rewrite(["-first-step", "9", "-phrase-translation-table", value]) == (
        ["-first-step", "9", "-phrase-translation-table", value],
        [],
    )


def test_other_steps_unchanged(table: Path) -> None:
    args = ["-first-step", "6", "-last-step", "6", "-phrase-translation-table", str(table)]
    assert rewrite(args) == (args, [])


def test_mmsapt_refused_at_step_9(table: Path) -> None:
    with pytest.raises(EmsScriptError, match="mmsapt"):
        rewrite(["-first-step", "9", "-mmsapt", "-phrase-translation-table", str(table)])
    assert rewrite(["-last-step", "2", "-mmsapt"]) == (["-last-step", "2", "-mmsapt"], [])


def _program(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(REPO / "bin" / "ems-train-model"), *args], capture_output=True, text=True
    )


def test_program_runs_train_model_with_the_count(table: Path, tmp_path: Path) -> None:
    fake = tmp_path / "train-model.perl"
    fake.write_text('#!/bin/sh\necho "$@"\n')
    os.chmod(fake, 0o755)
    r = _program(str(fake), "-first-step", "9", "-phrase-translation-table", str(table))
    assert r.returncode == 0, r.stderr
    assert r.stdout == f"-first-step 9 -phrase-translation-table {table}:0:5\n"
    assert "5 scores per line" in r.stderr


def test_program_errors(table: Path, tmp_path: Path) -> None:
    fake = tmp_path / "train-model.perl"
    fake.write_text("#!/bin/sh\nexit 0\n")
    os.chmod(fake, 0o755)
    r = _program(str(fake), "-first-step", "9", "-mmsapt")
    assert r.returncode == 2 and r.stderr.startswith("ems-train-model: error: TRAINING:mmsapt") and r.stdout == ""
    r = _program(str(tmp_path / "none.perl"))
    assert r.returncode == 6 and r.stderr.count("\n") == 1 and "not an executable file" in r.stderr
    assert _program().returncode == 2


def test_version_quiet_and_unknown_option(table: Path, tmp_path: Path) -> None:
    """ems-train-model's own options, before the script: --version (exit 0), -q (no notes, the
    script still run with the count), an unknown one (exit 2)."""
    from phrase_rescorer import __version__

    r = _program("--version")
    assert (r.returncode, r.stdout, r.stderr) == (0, f"ems-train-model, version {__version__}\n", "")
    fake = tmp_path / "train-model.perl"
    fake.write_text('#!/bin/sh\necho "$@"\n')
    os.chmod(fake, 0o755)
    r = _program("-q", str(fake), "-first-step", "9", "-phrase-translation-table", str(table))
    assert (r.returncode, r.stderr) == (0, "")
    assert r.stdout == f"-first-step 9 -phrase-translation-table {table}:0:5\n"
    r = _program("--frobnicate", str(fake))
    assert r.returncode == 2 and "no such option: --frobnicate" in r.stderr and r.stdout == ""
