"""One wording of the score direction: the added column is p(target|source), the direction of
Moses' column 3 (p(e|f) in Moses' notation, f the source). Checked against the data itself, and
in every place a user reads it."""

from __future__ import annotations

import gzip
import re
from collections import defaultdict
from pathlib import Path

from click.testing import CliRunner

from phrase_rescorer.cli import cli
from phrase_rescorer.moses.columns import START_WEIGHT, describe
from tests.helpers.paths import REPO, SAMPLE


def test_column_3_is_p_target_given_source_in_the_real_sample() -> None:
    """Over the targets of one source, p(target|source) sums to 1 (the sample holds whole
    source groups of an unpruned table): column 3 does, column 1 does not."""
    sums: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    with gzip.open(SAMPLE, "rt", encoding="utf-8") as f:
        for line in f:
            source, _, scores = line.split(" ||| ")[:3]
            values = scores.split()
            sums[source][0] += float(values[0])
            sums[source][1] += float(values[2])
    assert max(abs(s[1] - 1) for s in sums.values()) < 1e-5
    assert max(abs(s[0] - 1) for s in sums.values()) > 1


def test_the_names_of_the_columns() -> None:
    assert describe(1, 4) == "p(source|target) (Moses' p(f|e), inverse)"
    assert describe(3, 4) == "p(target|source) (Moses' p(e|f), direct)"
    assert describe(5, 5) == "RNN p(target|source) (Moses' p(e|f), direct)"
    assert describe(6, 6).startswith("RNN out-of-shortlist")
    assert describe(5, 7) == "unknown"


def test_inspect_names_every_column(tmp_path: Path) -> None:
    table = tmp_path / "t.txt"
    table.write_text("a ||| un ||| 0.5 0.4 0.3 0.2 1e-05 ||| 0-0 ||| 1 1 1\n")
    r = CliRunner().invoke(cli, ["-q", "inspect", str(table)])
    assert r.exit_code == 0, r.output
    assert "scores per line    5\n" in r.output
    assert "  score 3          p(target|source) (Moses' p(e|f), direct)\n" in r.output
    assert "  score 5          RNN p(target|source) (Moses' p(e|f), direct)" in r.output


def _help(*args: str) -> str:
    r = CliRunner().invoke(cli, [*args, "-h"], terminal_width=200)
    assert r.exit_code == 0
    return " ".join(r.output.split())


def test_no_document_calls_the_new_column_p_f_given_e() -> None:
    """p(f|e) is Moses' inverse column 1: it may appear only as that (or as the paper's notation,
    explained). Every user-facing text says p(target|source)."""
    texts = {
        "README.md": (REPO / "README.md").read_text(),
        "moses.rnn.example.ini": (REPO / "moses_configs" / "moses.rnn.example.ini").read_text(),
        "moses_configs/README.md": (REPO / "moses_configs" / "README.md").read_text(),
        "rescore -h": _help("rescore"),
        "moses-ini -h": _help("moses-ini"),
        "moses-step -h": _help("moses-step"),
    }
    for where, text in texts.items():
        assert "log p(f|e)" not in text and "exp(log p(f|e))" not in text, where
        assert "p(target|source)" in text, where
    for where in ("README.md", "moses.rnn.example.ini", "rescore -h", "moses-ini -h"):
        assert re.search(r"p\(e\|f\)", texts[where]), where  # the Moses name of the direction
    for page in sorted((REPO / "docs").glob("*.md")):
        text = page.read_text()
        assert "log p(f|e)" not in text and "exp(log p(f|e))" not in text, page.name
    assert "exp(log p(target|source))" in (REPO / "docs" / "moses.md").read_text()


def test_moses_ini_says_the_ini_must_be_tuned_and_starts_small() -> None:
    text = _help("moses-ini")
    assert "must be tuned" in text and "mert-moses.pl" in text
    assert f"[default: {START_WEIGHT}" in text
    assert START_WEIGHT == 0.02


def test_the_added_columns_starting_weights_have_one_definition_each() -> None:
    """moses-ini and moses-step start an added column at START_WEIGHT beside the ini's own
    weights, as experiment --start-weights ini does; experiment's default start resets every
    weight to train-model.perl's, the added column's with the phrase-table scores'."""
    from phrase_rescorer.moses.ini_weights import DEFAULT_WEIGHTS

    experiment, step = (" ".join(_help(name).split()) for name in ("experiment", "moses-step"))
    assert f"or the ini's own weights with {START_WEIGHT} for each added column" in experiment
    reset = DEFAULT_WEIGHTS["PhraseDictionary"]
    assert f"({reset} for each added column, as for every phrase-table score)" in experiment
    assert f"[default: {START_WEIGHT}, as experiment --start-weights ini" in step
