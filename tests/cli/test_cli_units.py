"""``train-nmt --units``: by default (auto) words where the shortlists cover the corpus and subword
units where they do not, said in one line and recorded in the model file; ``--resume`` keeps the
run's choice; ``--subwords N`` beside a ``--units`` that does not take it is refused before any work."""

from __future__ import annotations

from pathlib import Path

import pytest

from phrase_rescorer.model.checkpoint import load_checkpoint
from tests.helpers.cli_run import run_cli
from tests.helpers.nmt import SIZES, TINY_MOSES

CORPUS = [str(TINY_MOSES / "dev.en"), str(TINY_MOSES / "dev.fr")]
#: Its 8 sentence pairs hold 73 French words and 76 English ones: an 8,000-word shortlist covers
#: them all, a 40-word one leaves about 30 % of each side's tokens outside.
RUN = [*SIZES, "--valid-fraction", "0", "--threads", "1", "--max-steps", "2"]


def train(out: Path, *extra: str, mp: pytest.MonkeyPatch, cap: pytest.CaptureFixture[str]) -> tuple[int, str]:
    return run_cli(["train-nmt", *CORPUS, str(out), *RUN, *extra], mp, cap)


def test_auto_chooses_words_or_subwords_from_the_corpus_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = train(tmp_path / "w.pt", mp=monkeypatch, cap=capsys)
    assert code == 0, err
    line = "units: words (the 8,000-word shortlists leave 0.00 % of the source tokens and 0.00 % of the target tokens"
    assert line + " outside: at most 1.5 %)\n" in err, err
    words = load_checkpoint(str(tmp_path / "w.pt"))
    assert words.subwords is None and words.info["units"]["units"] == "words"
    code, err = train(tmp_path / "s.pt", "--vocab-size", "40", mp=monkeypatch, cap=capsys)
    assert code == 0, err
    assert "units: subword units, at most 300 per side (the 40-word shortlists leave " in err, err
    assert "outside: more than 1.5 %)" in err and "subword vocabularies" in err, err
    subwords = load_checkpoint(str(tmp_path / "s.pt"))
    assert subwords.subwords is not None
    assert subwords.info["units"]["units"] == "subwords" and subwords.info["units"]["subwords"] == 300
    assert subwords.info["units"]["uncovered"]["target"] > 0.015


def test_resume_keeps_the_choice_of_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Another threshold since (here: none) would choose words now; the resumed run keeps its units."""
    out = tmp_path / "s.pt"
    assert train(out, "--vocab-size", "40", mp=monkeypatch, cap=capsys)[0] == 0
    monkeypatch.setattr("phrase_rescorer.data.units.MAX_UNCOVERED", 1.0)
    code, err = train(tmp_path / "fresh.pt", "--vocab-size", "40", mp=monkeypatch, cap=capsys)
    assert code == 0 and "units: words (" in err, err  # what a new run chooses now
    code, err = train(out, "--vocab-size", "40", "--max-steps", "4", "--resume", mp=monkeypatch, cap=capsys)
    assert code == 0, err
    assert "units: subword units, at most 300 per side, as the resumed run chose them\n" in err, err
    last = load_checkpoint(str(tmp_path / "s.last.pt"))
    assert last.subwords is not None and last.info["steps"] == 4 and last.info["units"]["subwords"] == 300


def test_a_word_run_of_given_units_resumes_as_words(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A word network whose file records no choice (--units words, or a file written before the
    choice was recorded) resumes under the default as words, where auto would choose subwords."""
    out = tmp_path / "w.pt"
    code, err = train(out, "--vocab-size", "40", "--units", "words", mp=monkeypatch, cap=capsys)
    assert code == 0 and "units: words, shortlists of 40 per side (--units words)" in err, err
    assert "units" not in load_checkpoint(str(out)).info
    code, err = train(out, "--vocab-size", "40", "--max-steps", "4", "--resume", mp=monkeypatch, cap=capsys)
    assert code == 0 and "units: words, as the resumed run chose them" in err, err
    resumed = load_checkpoint(str(tmp_path / "w.last.pt"))
    assert resumed.subwords is None and "units" not in resumed.info  # nothing was measured


@pytest.mark.parametrize("units", ["words", "auto"])
def test_subwords_beside_units_that_do_not_take_them_is_refused(
    tmp_path: Path, units: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = str(tmp_path / "missing.en")  # refused before anything is read
    args = ["train-nmt", missing, missing, str(tmp_path / "m.pt"), "--units", units, "--subwords", "300"]
    code, err = run_cli(args, monkeypatch, capsys)
    assert code == 2, err
    assert err.splitlines() == [
        f"phrase-rescorer: error: --subwords 300 asks for subword units, --units {units} for "
        + ("words" if units == "words" else "the units to be chosen from the data")
        + "; give --units subwords --subwords N, or leave --subwords out"
    ]
    assert not list(tmp_path.iterdir())
