"""Rule, factored and reordering tables are refused by name, never scored as plain words."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from phrase_rescorer.data.pairs import load_pairs
from phrase_rescorer.moses.phrase_table import PhraseTableError
from phrase_rescorer.moses.table_kind import detect_table_kind
from phrase_rescorer.moses.table_reader import InputTable
from phrase_rescorer.rescoring.engine import rescore_table
from tests.helpers.paths import SAMPLE
from tests.helpers.rescore_data import tiny_checkpoint

# Lines in the formats Moses writes. The rule table follows the hierarchical example of the
# Moses manual (source and target end with the left-hand-side label, gaps are [X][X]); the
# reordering lines are the first three of
# ../shared/data/moses-en-fr/reordering-table.wbe-msd-bidirectional-fe.gz.
RULES = (
    b"! [X][X] [X] ||| ! [X][X] [X] ||| 0.5 0.4 0.5 0.3 ||| 1-1 ||| 2 2 1 ||| |||\n"
    b"a [X][X] dog [X] ||| un [X][X] chien [X] ||| 0.3 0.2 0.1 0.2 ||| 1-1 ||| 5 4 1 ||| |||\n"
)
UNLABELLED_GAP = b"a [X][X] dog ||| un [X][X] chien ||| 0.3 0.2 0.1 0.2\n"
FACTORED = (
    b"a|DT dog|NN ||| un|DET chien|NOM ||| 0.5 0.4 0.5 0.3 ||| 0-0 1-1 ||| 2 2 1 ||| |||\n"
    b"dog|NN ||| chien|NOM ||| 0.7 0.6 0.8 0.6 ||| 0-0 ||| 9 8 7 ||| |||\n"
)
REORDERING = (
    b"! &quot; ||| ! &quot; ||| 0.846154 0.0769231 0.0769231 0.846154 0.0769231 0.0769231\n"
    b"! stands leafing through the pages ||| ! est debout , feuilletant les pages ||| 0.6 0.2 0.2 0.6 0.2 0.2\n"
    b"! stands leafing through the ||| ! est debout , feuilletant les ||| 0.6 0.2 0.2 0.6 0.2 0.2\n"
)
# Ordinary lines that resemble the above: escaped brackets and bars, 3-field tables whose
# scores happen to be probabilities.
PLAIN = (
    b"&#91; a &#93; ||| &#91; un &#93; ||| 0.5 0.4 0.5 0.3\n"
    b"a &#124; b ||| a &#124; b ||| 0.5 0.5 0.5 0.5\n"
    b"a ||| un ||| 0.5 0.5 0.2 0.8\n"
    b"a ||| une ||| 0.3 0.4 0.1 0.8\n"
    b"b ||| b ||| 0.5 0.5 0.5 0.5\n"
)
# Hand-made tables of tests and examples: 3 fields, every score 0.5.
HALVES = b"a man ||| un homme ||| 0.5 0.5 0.5 0.5\nx ||| y ||| 0.5 0.5 0.5 0.5\n"
MSLR = b"a ||| un ||| 0.7 0.1 0.1 0.1 0.6 0.2 0.1 0.1\nb ||| b ||| 0.25 0.25 0.25 0.25 0.4 0.2 0.2 0.2\n"


def _kind(tmp_path: Path, data: bytes) -> tuple[str, str] | None:
    path = tmp_path / "t.txt"
    path.write_bytes(data)
    with InputTable(str(path)) as table:
        return detect_table_kind(table)


@pytest.mark.parametrize(
    ("data", "kind"),
    [
        (RULES, "hierarchical/SCFG rule table"),
        (UNLABELLED_GAP, "hierarchical/SCFG rule table"),
        (FACTORED, "factored table (2 factors"),
        (REORDERING, "lexicalized reordering table"),
        (MSLR, "lexicalized reordering table"),
    ],
)
def test_other_kinds_are_named(tmp_path: Path, data: bytes, kind: str) -> None:
    found = _kind(tmp_path, data)
    assert found is not None and kind in found[0]


def test_phrase_tables_pass(tmp_path: Path) -> None:
    assert _kind(tmp_path, PLAIN) is None
    assert _kind(tmp_path, HALVES) is None
    with InputTable(str(SAMPLE)) as table:
        assert detect_table_kind(table) is None


def test_a_kind_seen_after_plain_lines_is_still_found(tmp_path: Path) -> None:
    assert _kind(tmp_path, PLAIN + RULES) is not None


def test_rescoring_and_training_refuse_them(tmp_path: Path) -> None:
    model = tiny_checkpoint(tmp_path / "m.pt")
    for name, data in (("rules", RULES), ("factored", FACTORED), ("reordering", REORDERING)):
        table = tmp_path / f"{name}.gz"
        table.write_bytes(gzip.compress(data))
        out = tmp_path / f"{name}.rnn.gz"
        with pytest.raises(PhraseTableError, match="not a phrase-based phrase table") as e:
            rescore_table(str(table), str(out), str(model))
        assert str(table) in str(e.value)
        assert not out.exists()
        with pytest.raises(PhraseTableError, match="not a phrase-based phrase table"):
            load_pairs(str(table))
