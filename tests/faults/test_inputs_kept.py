"""No output destroys an input, however the two are spelt: ``-`` for a file the shell redirected
(``< t``, ``>> t``), moses-ini's OUT.ini over the tables and the LM its ini names; and refusals
that come before the work: a bad last line of a table, a file name the file system cannot hold."""

from __future__ import annotations

import gzip
import subprocess
from pathlib import Path

import pytest

from phrase_rescorer.errors import EXIT_INPUT, EXIT_OS
from tests.helpers.cslm import TINY_MOSES, tiny_lm
from tests.helpers.paths import PYTHON, cli_env

TABLE = gzip.decompress((TINY_MOSES / "phrase-table.gz").read_bytes())[:4000].rsplit(b"\n", 1)[0] + b"\n"
NBEST = (
    b"0 ||| un homme .  ||| LM0= -10.5 WordPenalty0= -3 ||| -3.7\n"
    b"1 ||| une femme  ||| LM0= -8 WordPenalty0= -2 ||| -2\n"
)


def run(*args: str, stdin=None, stdout=None) -> subprocess.CompletedProcess:  # type: ignore[no-untyped-def]
    return subprocess.run(
        [PYTHON, "-m", "phrase_rescorer", *args],
        stdin=stdin if stdin is not None else subprocess.DEVNULL,
        stdout=stdout if stdout is not None else subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=cli_env(),
        timeout=300,
    )


def test_standard_input_redirected_from_the_output_is_refused(model: Path, tmp_path: Path) -> None:
    table = tmp_path / "t.txt"
    table.write_bytes(TABLE)
    with open(table, "rb") as stdin:
        r = run("rescore", "-", str(table), "-m", str(model), stdin=stdin)
    assert r.returncode == EXIT_OS and b"output is the same file as the input '-'" in r.stderr, r.stderr
    assert table.read_bytes() == TABLE


def test_standard_output_appended_to_the_input_is_refused(model: Path, tmp_path: Path) -> None:
    table = tmp_path / "t.txt"
    table.write_bytes(TABLE)
    with open(table, "ab") as stdout:
        r = run("rescore", str(table), "-", "-m", str(model), stdout=stdout)
    assert r.returncode == EXIT_OS and f"output is the same file as the input '{table}'".encode() in r.stderr
    assert table.read_bytes() == TABLE


def test_an_nbest_list_on_standard_input_and_as_output_is_refused(tmp_path: Path) -> None:
    lm = tiny_lm(tmp_path / "lm.pt", steps=5)
    nbest = tmp_path / "l.nbest"
    nbest.write_bytes(NBEST)
    with open(nbest, "rb") as stdin:
        r = run("nbest", "-", str(nbest), "-m", str(lm), stdin=stdin)
    assert r.returncode == EXIT_OS and nbest.read_bytes() == NBEST, r.stderr


def test_pipes_are_never_the_same_file(model: Path, tmp_path: Path) -> None:
    r = subprocess.run(
        [PYTHON, "-m", "phrase_rescorer", "-q", "rescore", "-", "-", "-m", str(model)],
        input=TABLE,
        capture_output=True,
        env=cli_env(),
        timeout=300,
    )
    assert r.returncode == 0 and r.stdout.count(b"\n") == TABLE.count(b"\n"), r.stderr


def test_a_bad_last_line_is_refused_before_any_line_is_scored(model: Path, tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A regular file is checked whole first: the scorer is never reached (windows of one line,
    so that streaming alone would score the lines before the bad one)."""
    from phrase_rescorer.moses.phrase_table import PhraseTableError
    from phrase_rescorer.rescoring import engine

    table = tmp_path / "t.txt"
    table.write_bytes(TABLE + b"not a phrase-table line\n")

    def scored(*args: object) -> bytes:
        raise AssertionError("a window was scored before the bad line was refused")

    monkeypatch.setattr(engine.TableRescorer, "_rescore_window", scored)
    lines = TABLE.count(b"\n") + 1
    with pytest.raises(PhraseTableError, match=rf"t.txt:{lines}: expected 3 to 7 fields"):
        engine.rescore_table(str(table), str(tmp_path / "out.txt"), str(model), window=1, window_cap=1)
    assert not (tmp_path / "out.txt").exists()


def test_a_file_name_too_long_for_the_file_system_is_refused_first(model: Path, tmp_path: Path) -> None:
    table = tmp_path / "t.txt"
    table.write_bytes(TABLE)
    r = run("rescore", str(table), str(tmp_path / ("a" * 300)), "-m", str(model))
    assert r.returncode == EXIT_OS and b"file name too long (300 bytes" in r.stderr, r.stderr


@pytest.fixture()
def ini(tmp_path: Path) -> Path:
    """The tiny system's moses.ini with its table and LM copied beside it."""
    for name in ("phrase-table.gz", "lm.fr.3gram.arpa.gz"):
        (tmp_path / name).write_bytes((TINY_MOSES / name).read_bytes())
    path = tmp_path / "moses.ini"
    path.write_text((TINY_MOSES / "moses.ini").read_text().replace("@MODEL_DIR@", str(tmp_path)))
    return path


@pytest.mark.parametrize("out", ["phrase-table.gz", "lm.fr.3gram.arpa.gz", "rescored.gz", "moses.ini"])
def test_moses_ini_never_writes_over_a_file_it_reads_or_names(ini: Path, model: Path, out: str) -> None:
    """OUT.ini as the table the ini names, its LM, the --table it will name, or IN.ini."""
    directory = ini.parent
    rescored = directory / "rescored.gz"
    r = run("-q", "rescore", str(directory / "phrase-table.gz"), str(rescored), "-m", str(model))
    assert r.returncode == 0, r.stderr
    before = {p: p.read_bytes() for p in directory.iterdir() if p.is_file()}
    r = run("moses-ini", str(ini), str(directory / out), "--table", str(rescored))
    assert r.returncode == EXIT_OS and b"output is the same file as the" in r.stderr, r.stderr
    assert {p: p.read_bytes() for p in directory.iterdir() if p.is_file()} == before


def test_moses_ini_names_the_line_of_bad_utf8(ini: Path, tmp_path: Path) -> None:
    lines = ini.read_bytes().split(b"\n")
    lines[2] += b" caf\xe9"
    ini.write_bytes(b"\n".join(lines))
    r = run("moses-ini", str(ini), str(tmp_path / "o.ini"), "--table", str(tmp_path / "phrase-table.gz"))
    assert r.returncode == EXIT_INPUT and f"{ini}:3: invalid UTF-8".encode() in r.stderr, r.stderr


def test_moses_ini_never_writes_over_a_compact_table(ini: Path, tmp_path: Path) -> None:
    """A Compact table's path= is its prefix (pt names pt.minphr): OUT.ini as that file, named by
    the input ini or by --table's prefix, is refused too."""
    compact = tmp_path / "pt.minphr"
    compact.write_bytes(b"a binarized table")
    text = ini.read_text()
    named = tmp_path / "c.ini"
    named.write_text(text.replace(f"path={tmp_path / 'phrase-table.gz'}", f"path={tmp_path / 'pt'}"))
    assert named.read_text() != text
    for given, table in ((named, tmp_path / "phrase-table.gz"), (ini, tmp_path / "pt")):
        r = run("moses-ini", str(given), str(compact), "--table", str(table))
        assert r.returncode == EXIT_OS and b"output is the same file as the" in r.stderr, r.stderr
        assert compact.read_bytes() == b"a binarized table"
