"""``experiment.chosen``: ``dev_choice`` takes the reranked row of highest mean held-out dev BLEU,
the first listed among equals, and its run of highest held-out dev BLEU, passing over rows without
finished reranked runs; ``write_chosen`` warns of a system it cannot bundle and removes an earlier
start's bundle, which is no longer the choice (the bundles it writes: the integration test
tests/integration/test_experiment_candidates.py, with the real Moses)."""

from __future__ import annotations

from pathlib import Path

from phrase_rescorer.experiment.chosen import BUNDLE_DIR, Choice, dev_choice, write_chosen
from phrase_rescorer.experiment.reranked import NMT, SentenceModels
from phrase_rescorer.experiment.systems import System
from phrase_rescorer.moses.toolkit import MosesToolkit


def report(**rows: list[float | None]) -> dict:
    return {
        "systems": {
            key: {"runs": [{} if h is None else {"dev_heldout": h} for h in heldout]} for key, heldout in rows.items()
        }
    }


def test_the_row_of_highest_mean_and_its_best_run() -> None:
    got = dev_choice(report(nmt=[60.0, 61.0, 62.0], twin=[61.5, 61.4, 61.3]), ["nmt", "twin"])
    assert got == Choice("twin", (61.5 + 61.4 + 61.3) / 3, 1, 61.5)


def test_the_first_listed_among_equal_rows_and_equal_runs() -> None:
    assert dev_choice(report(a=[60.0, 61.0], b=[61.0, 60.0]), ["a", "b"]) == Choice("a", 60.5, 2, 61.0)
    assert dev_choice(report(a=[60.0, 61.0], b=[61.0, 60.0]), ["b", "a"]) == Choice("b", 60.5, 1, 61.0)
    assert dev_choice(report(a=[61.0, 61.0, 60.0]), ["a"]) == Choice("a", 182.0 / 3, 1, 61.0)


def test_rows_without_finished_reranked_runs_are_passed_over() -> None:
    rows = report(baseline=[None, None], empty=[], nmt=[59.0])
    assert dev_choice(rows, ["baseline", "empty", "missing", "nmt"]) == Choice("nmt", 59.0, 1, 59.0)
    assert dev_choice(report(baseline=[None]), ["baseline"]) is None
    assert dev_choice(rows, []) is None


def test_a_system_that_cannot_be_bundled_is_warned_of_and_the_earlier_bundle_goes(tmp_path: Path) -> None:
    out = tmp_path / "out"
    (out / BUNDLE_DIR).mkdir(parents=True)
    (out / BUNDLE_DIR / "bundle.json").write_text("{}\n")
    (out / f".{BUNDLE_DIR}.x1").mkdir()  # temporaries of a start interrupted while writing
    (out / f"..{BUNDLE_DIR}.x1.x2").mkdir()
    (out / "experiment.json").write_text("{}\n")
    system = System("nmt", "+ NMT", 0, reranks="baseline")  # its run's files do not exist
    said: list[str] = []
    warned: list[str] = []
    got = write_chosen(
        MosesToolkit(str(tmp_path / "no-moses")),
        str(out),
        report(nmt=[60.0]),
        [(system, [NMT], False)],
        SentenceModels(),
        nbest=10,
        candidates=0,
        say=said.append,
        warn=warned.append,
    )
    assert got is None and said == []
    assert sorted(p.name for p in out.iterdir()) == ["experiment.json"]
    (message,) = warned
    assert message.startswith("no bundle of the experiment's chosen system: the system dev chose (+ NMT, run 1)")
    assert "moses.ini: no such file" in message and message.endswith(f"the earlier bundle {out / BUNDLE_DIR} removed")


def test_no_choice_removes_an_earlier_bundle_and_says_so_only_then(tmp_path: Path) -> None:
    warned: list[str] = []

    def write(out: Path) -> str | None:
        toolkit = MosesToolkit(str(tmp_path / "no-moses"))
        return write_chosen(
            toolkit,
            str(out),
            report(),
            [],
            SentenceModels(),
            nbest=10,
            candidates=0,
            say=warned.append,
            warn=warned.append,
        )

    assert write(tmp_path) is None and warned == []
    (tmp_path / BUNDLE_DIR).mkdir()
    assert write(tmp_path) is None and not (tmp_path / BUNDLE_DIR).exists()
    assert warned == [
        "no bundle of the experiment's chosen system: no reranked system has a finished run; "
        f"the earlier bundle {tmp_path / BUNDLE_DIR} removed"
    ]
