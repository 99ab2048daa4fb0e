"""The experiment's report: mean ± sd over runs, the comparison with the baseline, the table."""

from __future__ import annotations

import numpy as np
import pytest

from phrase_rescorer.experiment import bleu
from phrase_rescorer.experiment.report import RunScores, build_report, format_table
from phrase_rescorer.experiment.systems import BASELINE, System, systems_for
from tests.helpers.paths import REPO

DATA = REPO / "tests" / "data" / "bleu"
REFS = bleu.read_lines(str(DATA / "ref.tok.fr"))
HYPS = bleu.read_lines(str(DATA / "hyp.tok.fr"))


def run(hyps: list[str], seed: int) -> RunScores:
    return RunScores(
        meta={"seed": seed},
        dev=bleu.tokenized_bleu(hyps, REFS),
        test=bleu.tokenized_bleu(hyps, REFS),
        test_detok=bleu.detokenized_bleu(hyps, bleu.detokenize(REFS, "fr"), "fr"),
    )


def test_report_and_table() -> None:
    short = [" ".join(h.split()[:-2]) for h in HYPS]
    base = [run(short, 1), run(HYPS[:10] + short[10:], 2)]
    rnn = [run(HYPS, 3), run(short[:5] + HYPS[5:], 4)]
    systems = systems_for(True, False)
    report = build_report(
        systems, {"baseline": base, "rnn": rnn}, settings_json={}, raw_reference=False, trials=500, seed=0
    )
    b_scores = [r.test.score for r in base]
    assert report["systems"]["baseline"]["test"]["mean"] == pytest.approx(np.mean(b_scores), abs=1e-4)
    assert report["systems"]["baseline"]["test"]["sd"] == pytest.approx(np.std(b_scores, ddof=1), abs=1e-4)
    assert [r["seed"] for r in report["systems"]["rnn"]["runs"]] == [3, 4]
    comparison = report["comparisons"]["rnn"]["test"]
    expected = np.mean([r.test.score for r in rnn]) - np.mean(b_scores)
    assert comparison["approximate_randomization"]["difference"] == pytest.approx(expected, abs=1e-4)
    assert 0 < comparison["approximate_randomization"]["p_value"] <= 1
    assert len(comparison["paired_bootstrap"]["interval_95"]) == 2

    table = format_table(report).splitlines()
    assert table[0].split() == ["system", "runs", "dev", "BLEU", "test", "BLEU", "test", "(detok)", "Δ", "test", "p"]
    base_row, rnn_row = table[2].split(), table[3].split()
    assert base_row[:2] == ["baseline", "2"] and len(base_row) == 11  # no Δ, no p
    assert rnn_row[:3] == ["+", "RNN", "2"]
    assert rnn_row[-2] == f"{expected:+.2f}"
    assert "tok:none" in table[-2] and "tok:13a" in table[-1]


def test_a_system_without_runs_yet() -> None:
    report = build_report(
        systems_for(True, False), {"baseline": [run(HYPS, 1)], "rnn": []}, settings_json={}, raw_reference=True
    )
    assert report["comparisons"] == {}
    assert report["systems"]["rnn"]["runs"] == []
    assert "+ RNN" in format_table(report)


def test_columns_stay_aligned_under_a_long_system_name() -> None:
    systems = systems_for(True, False)
    runs = {"baseline": [run(HYPS, 1)], "rnn": [run(HYPS, 2), run(HYPS, 3)]}
    report = build_report(systems, runs, settings_json={}, raw_reference=True)
    report["systems"]["rnn"]["label"] = "+ CSLM + RNN both directions + NMT"
    lines = format_table(report).splitlines()
    header, base_row, rnn_row = lines[0], lines[2], lines[3]
    runs_end = header.index("runs") + len("runs")
    assert base_row[runs_end - 1] == "1" and rnn_row[runs_end - 1] == "2"
    assert len(base_row) == len(header) and len(lines[1]) == len(header)


def test_the_table_names_the_reranking_optimizer_only_where_rows_are_reranked() -> None:
    runs = {"baseline": [run(HYPS, 1)], "rnn": [run(HYPS, 2)]}
    plain = build_report(systems_for(True, False), runs, settings_json={}, raw_reference=True)
    assert "Reranked rows" not in format_table(plain)
    for settings, optimizer in (({"nmt": ["a.pt"]}, "mert"), ({"lm": "lm.pt", "rerank_optimizer": "kbmira"}, "kbmira")):
        report = build_report(systems_for(True, False), runs, settings_json=settings, raw_reference=True)
        assert f"weights tuned on the dev lists by {optimizer} " in format_table(report)


def test_reranked_rows_add_the_held_out_dev_column() -> None:
    """A reranked run's held-out dev BLEU: summarised like the others, shown in a column of its
    own (empty for the decoder's rows); a report without one keeps the plain columns."""
    base = [run(HYPS, 1), run(HYPS, 2)]
    short = [" ".join(h.split()[:-2]) for h in HYPS]
    nmt = [run(HYPS, 1), run(HYPS, 2)]
    for r, hyps in zip(nmt, (short, HYPS), strict=True):
        r.dev_heldout = bleu.tokenized_bleu(hyps, REFS)
    systems = [BASELINE, System("nmt", "+ NMT", 0, reranks="baseline")]
    report = build_report(systems, {"baseline": base, "nmt": nmt}, settings_json={"nmt": ["a.pt"]}, raw_reference=True)
    entry = report["systems"]["nmt"]
    expected = np.mean([bleu.tokenized_bleu(short, REFS).score, bleu.tokenized_bleu(HYPS, REFS).score])
    assert entry["dev_heldout"]["mean"] == pytest.approx(expected, abs=1e-4)
    assert [r["dev_heldout"] for r in entry["runs"]] == [round(r.dev_heldout.score, 4) for r in nmt]
    assert "dev_heldout" not in report["systems"]["baseline"]
    lines = format_table(report).splitlines()
    assert lines[0].split()[:8] == ["system", "runs", "dev", "BLEU", "dev", "(held", "out)", "test"]
    assert lines[2].split()[5] == "-" and lines[3].split()[6] == f"{expected:.2f}"
    assert any(line.startswith("dev (held out):") for line in lines)


def test_a_difference_over_fewer_runs_than_the_means_is_marked() -> None:
    """Runs are compared in pairs (reranked run i on the decoder's run i), so while one system
    has fewer finished runs than the baseline, Δ and p are over the runs both have, not the
    difference of the means the row shows: the cell is marked and the footer says over which."""
    short = [" ".join(h.split()[:-2]) for h in HYPS]
    base = [run(short, 1), run(HYPS, 2), run(HYPS, 3)]
    systems = systems_for(True, False)
    report = build_report(systems, {"baseline": base, "rnn": [run(HYPS, 4)]}, settings_json={}, raw_reference=True)
    difference = report["comparisons"]["rnn"]["test"]["approximate_randomization"]["difference"]
    assert difference == pytest.approx(run(HYPS, 4).test.score - base[0].test.score, abs=1e-4)
    means = report["systems"]["rnn"]["test"]["mean"] - report["systems"]["baseline"]["test"]["mean"]
    assert abs(difference - means) > 1  # the first run alone, against the mean of three
    lines = format_table(report).splitlines()
    assert lines[3].split()[-2] == f"{difference:+.2f}*"
    assert any(line.startswith("*: over the runs both systems have") and "+ RNN (1)" in line for line in lines)
    full = build_report(systems, {"baseline": base, "rnn": [run(HYPS, 4)] * 3}, settings_json={}, raw_reference=True)
    assert "*" not in format_table(full)
