"""IN / OUT given as stems (EMS): IN.gz is read and OUT.gz written; real names are kept."""

from __future__ import annotations

from pathlib import Path

from phrase_rescorer.moses.stems import existing_table, resolve_stems, table_candidates


def test_a_stem_reads_and_writes_gz(tmp_path: Path) -> None:
    (tmp_path / "phrase-table.1.gz").write_bytes(b"")
    paths = resolve_stems(str(tmp_path / "phrase-table.1"), str(tmp_path / "phrase-table-pruned.1"))
    assert paths.input == str(tmp_path / "phrase-table.1.gz")
    assert paths.output == str(tmp_path / "phrase-table-pruned.1.gz")
    assert paths.note and "EMS" in paths.note
    assert resolve_stems(str(tmp_path / "phrase-table.1"), "-").output == "-"
    assert resolve_stems(str(tmp_path / "phrase-table.1"), "o.gz").output == "o.gz"


def test_existing_names_are_kept(tmp_path: Path) -> None:
    (tmp_path / "pt").write_bytes(b"")
    (tmp_path / "pt.gz").write_bytes(b"")
    for given in ("pt", "pt.gz"):
        paths = resolve_stems(str(tmp_path / given), str(tmp_path / "out"))
        assert (paths.input, paths.output, paths.note) == (str(tmp_path / given), str(tmp_path / "out"), None)
    missing = resolve_stems(str(tmp_path / "none"), "out")  # reported as missing by the reader
    assert (missing.input, missing.output) == (str(tmp_path / "none"), "out")
    assert resolve_stems("-", "out").input == "-"


def test_one_rule_finds_a_table_by_its_stem(tmp_path: Path) -> None:
    """existing_table / table_candidates: the one "IN or IN.gz" rule (the moses.ini checks, the
    experiment's checks and fingerprints, EMS' tables and resolve_stems use it)."""
    stem = str(tmp_path / "pt")
    assert table_candidates(stem) == (stem, stem + ".gz")
    assert table_candidates(stem + ".gz") == (stem + ".gz",) and table_candidates("-") == ("-",)
    assert existing_table(stem) == stem  # neither: the name as given, for the reader to report
    (tmp_path / "pt.gz").write_bytes(b"")
    assert existing_table(stem) == stem + ".gz"
    (tmp_path / "pt.gz.gz").write_bytes(b"")
    assert existing_table(stem + ".gz") == stem + ".gz"
    (tmp_path / "pt").write_bytes(b"")
    assert existing_table(stem) == stem
