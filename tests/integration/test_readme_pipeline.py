"""The README's pipeline with the real Moses: every ``sh``, ``sh moses`` and ``python`` block of the README,
run in order in one directory as a user runs them from the top of a checkout, on the tiny system
of tests/data/tiny-moses (tests/helpers/doc_blocks.py says how blocks are marked). Each
section's test first runs the earlier sections it has not yet run; the checks after each block
are the files the README says it writes. Skipped, with the reason, when no Moses is found
($MOSES, else ../shared/tools/moses)."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from tests.helpers import doc_blocks
from tests.helpers.moses import moses_root

pytestmark = [pytest.mark.moses, pytest.mark.slow]

NEEDS = ("bin/moses", "bin/mert", "bin/extractor", "scripts/training/mert-moses.pl", "scripts/generic/multi-bleu.perl")
PIPELINE = doc_blocks.sections("README.md", ("sh", "sh moses", "python"))


@pytest.fixture(scope="module")
def runner(tmp_path_factory: pytest.TempPathFactory) -> doc_blocks.Runner:
    moses = moses_root(NEEDS)
    return doc_blocks.Runner(tmp_path_factory.mktemp("readme-moses"), env={"MOSES": str(moses)})


def run_through(runner: doc_blocks.Runner, section: str) -> Path:
    for name, section_blocks in PIPELINE.items():
        for block in section_blocks:
            if block not in runner.ran:
                runner.run(block)
        if name == section:
            return runner.directory / "work"
    raise AssertionError(f"no README section {section!r} with blocks to run: {list(PIPELINE)}")


def bleu(line: str) -> float:
    assert line.startswith("BLEU = "), line
    return float(line.split()[2].rstrip(","))


def test_the_pipeline_has_the_sections_it_runs() -> None:
    assert list(PIPELINE)[:2] == ["The system and its baseline", "The phrase column"]
    assert any("experiment" in b.text for blocks in PIPELINE.values() for b in blocks)


def test_the_baseline_is_tuned_and_scored(runner: doc_blocks.Runner) -> None:
    work = run_through(runner, "The system and its baseline")
    assert (work / "mert-base" / "moses.ini").is_file()
    assert len((work / "test.base.fr").read_text().splitlines()) == 8


def test_the_phrase_column_is_tuned_and_scored(runner: doc_blocks.Runner) -> None:
    work = run_through(runner, "The phrase column")
    with gzip.open(work / "phrase-table.rnn.gz", "rt") as table:
        assert len(table.readline().split(" ||| ")[2].split()) == 5
    assert "num-features=5" in (work / "mert-rnn" / "moses.ini").read_text()
    assert len((work / "test.rnn.fr").read_text().splitlines()) == 8


def test_the_reranked_output_is_scored(runner: doc_blocks.Runner) -> None:
    section = next(name for name in PIPELINE if "reranking" in name)
    work = run_through(runner, section)
    assert len((work / "test.reranked.fr").read_text().splitlines()) == 8
    assert "CSLM0" in (work / "rerank.weights").read_text() and "NMT0" in (work / "rerank.weights").read_text()
    score = PIPELINE[section][-1].text.splitlines()[-1]  # the README's scoring command, run again
    last = runner.run(doc_blocks.Block("README.md", section, "sh moses", score, 0))
    assert 0 < bleu(last.stdout) <= 100


def test_the_experiment_reports_its_systems(runner: doc_blocks.Runner) -> None:
    section = next(name for name in PIPELINE if any("experiment" in b.text for b in PIPELINE[name]))
    work = run_through(runner, section)
    assert (work / "exp" / "experiment.json").is_file()
