"""``experiment.chosen.dev_choice``: the reranked row of highest mean held-out dev BLEU, the first
listed among equals, and its run of highest held-out dev BLEU; rows without finished reranked runs
are passed over."""

from __future__ import annotations

from phrase_rescorer.experiment.chosen import Choice, dev_choice


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
