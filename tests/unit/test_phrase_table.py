"""Tests of phrase_rescorer.moses.phrase_table: reading, parsing, appending, atomic writing.

The expected output is computed here independently of the module (``insert_column``): output
line = input line with " <column>" inserted at the end of field 3, nothing else changed.
"""

from __future__ import annotations

import gzip
import io
import itertools
import os
import pickle
import types
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from phrase_rescorer.moses.phrase_table import Entry, PhraseTableError, _parse_general, parse_line, with_appended
from phrase_rescorer.moses.table_reader import InputTable, iter_lines_lenient, read_phrase_table
from phrase_rescorer.output import AtomicOutput
from tests.helpers.paths import NO_SHARED, REAL_TABLE

REAL_SAMPLE_LINES = 20_000
GOOD = b"the house ||| la maison ||| 0.5 0.25 1 0.125 ||| 0-0 1-1 ||| 2 2 1 ||| |||\n"


def insert_column(line: bytes, column: bytes) -> bytes:
    """Reference result: ``line`` with " column" at the end of its scores field (field 3)."""
    body = line.rstrip(b"\r\n")
    terminator = line[len(body) :]
    source, target, rest = body.split(b" ||| ", 2)
    scores, separator, tail = rest.partition(b" |||")
    return b" ||| ".join((source, target, scores + b" " + column)) + separator + tail + terminator


def phrases(line: bytes) -> tuple[str, str]:
    source, target, _ = line.split(b" ||| ", 2)
    return source.decode(), target.decode()


def rescore(input_path: str, output_path: str) -> int:
    """Copy a table appending each line's number as a new column; returns the line count."""
    count = 0
    with InputTable(input_path) as table, AtomicOutput(output_path) as out:
        for entry in table:
            out.write(with_appended(entry, str(entry.line_no).encode()))
            count += 1
        if input_path != "-":
            assert table.position() == table.size()
    return count


def expected_output(lines: list[bytes]) -> bytes:
    return b"".join(insert_column(line, str(i).encode()) for i, line in enumerate(lines, 1))


def read_back(path: Path) -> bytes:
    data = path.read_bytes()
    return gzip.decompress(data) if path.name.endswith(".gz") else data


def write_input(path: Path, data: bytes, compress: bool) -> str:
    path.write_bytes(gzip.compress(data, compresslevel=1) if compress else data)
    return str(path)


@pytest.fixture(scope="module")
def real_lines() -> list[bytes]:
    if not REAL_TABLE.exists():
        pytest.skip(NO_SHARED)
    with gzip.open(REAL_TABLE, "rb") as f:
        return list(itertools.islice(f, REAL_SAMPLE_LINES))


# --- the real table ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("input_name", "compress"), [("table.txt", False), ("table.gz", True), ("gzip-named.txt", True)]
)
@pytest.mark.parametrize("output_name", ["out.txt", "out.gz"])
def test_real_table_round_trip(
    tmp_path: Path, real_lines: list[bytes], input_name: str, compress: bool, output_name: str
) -> None:
    input_path = write_input(tmp_path / input_name, b"".join(real_lines), compress)
    with InputTable(input_path) as table:
        assert table.is_gzip == compress
        assert table.name_mismatch == (input_name == "gzip-named.txt")
    count = rescore(input_path, str(tmp_path / output_name))
    assert count == len(real_lines)
    assert read_back(tmp_path / output_name) == expected_output(real_lines)
    assert sorted(os.listdir(tmp_path)) == sorted([input_name, output_name])


def test_real_table_entries(real_lines: list[bytes]) -> None:
    for line_no, line in enumerate(real_lines, 1):
        raw = line[:-1]
        source, target, end = parse_line(raw, "t", line_no)
        assert (source, target) == phrases(line)
        entry = Entry(line_no, raw, b"\n", source, target, end)
        assert with_appended(entry, b"7") == insert_column(line, b"7")


@pytest.mark.parametrize("compress", [False, True])
def test_real_table_stdin_to_stdout(monkeypatch: pytest.MonkeyPatch, real_lines: list[bytes], compress: bool) -> None:
    data = b"".join(real_lines)
    stdin = io.BytesIO(gzip.compress(data, compresslevel=1) if compress else data)
    stdout = io.BytesIO()
    monkeypatch.setattr("sys.stdin", types.SimpleNamespace(buffer=stdin))
    monkeypatch.setattr("sys.stdout", types.SimpleNamespace(buffer=stdout))
    with InputTable("-") as table:
        assert table.size() is None and table.is_gzip == compress and not table.name_mismatch
    stdin.seek(0)
    assert rescore("-", "-") == len(real_lines)
    assert stdout.getvalue() == expected_output(real_lines)


def test_real_table_stdin_to_gz_file(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, real_lines: list[bytes]) -> None:
    stdin = io.BytesIO(gzip.compress(b"".join(real_lines), compresslevel=1))
    monkeypatch.setattr("sys.stdin", types.SimpleNamespace(buffer=stdin))
    assert rescore("-", str(tmp_path / "out.gz")) == len(real_lines)
    assert read_back(tmp_path / "out.gz") == expected_output(real_lines)


def test_truncated_gzip_reports_next_line(tmp_path: Path) -> None:
    lines = [b"w%d ||| m%d ||| 0.%d 1 ||| 0-0\n" % (i, i, i) for i in range(40_000)]
    data = gzip.compress(b"".join(lines))
    path = write_input(tmp_path / "cut.gz", b"", False)
    Path(path).write_bytes(data[: len(data) // 2])
    read: list[Entry] = []
    with pytest.raises(PhraseTableError) as caught:
        read.extend(read_phrase_table(path))
    assert read, "lines before the truncation are delivered"
    assert [e.raw + e.terminator for e in read] == lines[: len(read)]
    assert caught.value.line_no == len(read) + 1
    assert f"{path}:{len(read) + 1}: truncated or corrupt gzip stream" in str(caught.value)


def test_corrupt_gzip_is_an_error(tmp_path: Path) -> None:
    data = bytearray(gzip.compress(GOOD * 5000))
    data[len(data) // 2] ^= 0xFF
    path = write_input(tmp_path / "bad.gz", bytes(data), False)
    items = list(iter_lines_lenient(path))
    # Corrupt data may first decode into bad lines; the stream check ends the reading.
    last = items[-1]
    assert isinstance(last, PhraseTableError)
    assert last.message.startswith("truncated or corrupt gzip stream")
    assert last.line_no == len(items)


# --- hand-written edge cases ------------------------------------------------------------------

EDGE_LINES = {
    "3 fields": b"a ||| b ||| 0.5\n",
    "7 fields": b"a ||| b ||| 0.5 0.25 ||| 0-0 ||| 1 1 1 ||| dlt=1 ||| {{Count 3}}\n",
    "trailing separator": b"a ||| b ||| 0.5 |||\n",
    "trailing separator and space": b"a ||| b ||| 0.5 ||| \n",
    "train-model.perl": b"! stands ||| ! est debout , ||| 1 0.108878 0.5 0.00356649"
    b" ||| 0-0 1-1 1-2 ||| 1 2 1 ||| |||\n",
    "inner spacing": b"a  b ||| c ||| 0.5  0.25 ||| 0-0\n",
    "spaces around scores": b"a ||| b |||  0.5 \t0.25  ||| 0-0  1-1 \n",
    "crlf": b"a ||| b ||| 0.5 ||| 0-0\r\n",
    "no final newline": b"a ||| b ||| 0.5 ||| 0-0",
    "crlf 3 fields": b"a ||| b ||| 0.5\r\n",
    "non-ascii and escapes": "l&apos; été ||| the &#124; summer &amp; co"
    " ||| 1e-05 2.5E+3 -0.5 .5 7. ||| 0-0\n".encode(),
    "long numbers": b"a ||| b ||| %s 1e300 1e-400 ||| 0-0\n" % (b"1" * 250),
    "lone bar in a phrase": b"a | b ||| c ||| 1\n",
}


@pytest.mark.parametrize("line", EDGE_LINES.values(), ids=EDGE_LINES.keys())
def test_edge_line_round_trip(tmp_path: Path, line: bytes) -> None:
    lines = [GOOD, line] if line.endswith(b"\n") else [GOOD, GOOD, line]
    path = write_input(tmp_path / "t.txt", b"".join(lines), False)
    entries = list(read_phrase_table(path))
    assert [e.line_no for e in entries] == list(range(1, len(lines) + 1))
    last = entries[-1]
    assert (last.source, last.target) == phrases(line)
    assert last.raw + last.terminator == line
    assert last.terminator in (b"\n", b"\r\n", b"")
    assert rescore(path, str(tmp_path / "out.txt")) == len(lines)
    assert read_back(tmp_path / "out.txt") == expected_output(lines)


BAD_LINES = {
    "2 fields": (b"a ||| b\n", "expected 3 to 7 fields separated by ' ||| ', found 2"),
    "8 fields": (b"a ||| b ||| 1 ||| x ||| x ||| x ||| x ||| x\n", "found 8"),
    "empty line": (b"\n", "found 1"),
    "empty source": (b" ||| b ||| 1\n", "empty source phrase"),
    "bars first": (b"||| b ||| 1\n", "empty source phrase"),
    "blank source": (b"    ||| b ||| 1\n", "empty source phrase"),
    "empty target": (b"a |||  ||| 1\n", "empty target phrase"),
    "non-numeric score": (b"a ||| b ||| 0.5 x ||| 0-0\n", "non-numeric score 'x'"),
    "nan": (b"a ||| b ||| nan 0.5\n", "non-numeric score 'nan'"),
    "inf": (b"a ||| b ||| 0.5 -inf\n", "non-numeric score '-inf'"),
    "overflow": (b"a ||| b ||| 1e999\n", "non-numeric score '1e999'"),
    "half a number": (b"a ||| b ||| 1e- 0.5\n", "non-numeric score '1e-'"),
    "missing scores": (b"a ||| b ||| ||| 0-0\n", "missing scores field"),
    "missing scores at end": (b"a ||| b |||\n", "missing scores field"),
    "invalid utf-8 source": (b"a\xff ||| b ||| 1\n", "invalid UTF-8 (byte offset 1)"),
    "invalid utf-8 target": (b"a ||| b\xc3 ||| 1\n", "invalid UTF-8 (byte offset 7)"),
    "glued separator": (b"a|||b ||| c ||| 1\n", "field separator is not ' ||| '"),
    "glued 3rd separator": (b"a ||| b ||| 1 |||x\n", "separator after the scores"),
}


@pytest.mark.parametrize(("line", "message"), BAD_LINES.values(), ids=BAD_LINES.keys())
def test_bad_line_raises_with_location(tmp_path: Path, line: bytes, message: str) -> None:
    path = write_input(tmp_path / "t.gz", GOOD + line + GOOD, True)
    read: list[Entry] = []
    with pytest.raises(PhraseTableError) as caught:
        read.extend(read_phrase_table(path))
    assert len(read) == 1
    assert (caught.value.path, caught.value.line_no) == (path, 2)
    assert str(caught.value).startswith(f"{path}:2: ")
    assert message in caught.value.message
    with pytest.raises(PhraseTableError, match=":5: ") as direct:
        parse_line(line.rstrip(b"\n"), "x", 5)
    assert direct.value.message == caught.value.message


def test_unchecked_scores() -> None:
    assert parse_line(b"a ||| b ||| x y ||| 0-0", "t", 1, check_scores=False) == ("a", "b", 15)
    assert parse_line(b"a ||| b |||", "t", 1, check_scores=False) == ("a", "b", 11)
    raw = b"a ||| b ||| ||| 0-0"
    source, target, end = parse_line(raw, "t", 1, check_scores=False)
    assert with_appended(Entry(1, raw, b"\n", source, target, end), b"0.5") == (b"a ||| b ||| 0.5 ||| 0-0\n")
    with pytest.raises(PhraseTableError, match="empty target"):
        parse_line(b"a |||  ||| x", "t", 1, check_scores=False)


def test_empty_and_missing_files(tmp_path: Path) -> None:
    empty = write_input(tmp_path / "empty.gz", b"", False)
    with InputTable(empty) as table:
        assert list(table) == [] and table.name_mismatch and not table.is_gzip
    missing = str(tmp_path / "missing.gz")
    with pytest.raises(PhraseTableError, match="cannot read"):
        InputTable(missing)
    assert [str(e) for e in iter_lines_lenient(missing)] == [
        str(PhraseTableError(missing, None, "cannot read: No such file or directory"))
    ]


@pytest.mark.parametrize("shift", [0, 1, 2, 3])
def test_line_ends_across_read_chunks(tmp_path: Path, shift: int) -> None:
    # A 1 MiB first line puts its "\r\n" across the reader's 1 MiB reads in several ways.
    first = b"a ||| b ||| 1 ||| " + b"x" * ((1 << 20) - 19 + shift) + b"\r\n"
    lines = [first, b"c ||| d ||| 2\n", b"e ||| f ||| 3\n", first, b"g ||| h ||| 4"]
    path = write_input(tmp_path / "t.txt", b"".join(lines), False)
    entries = list(read_phrase_table(path))
    assert [(e.raw, e.terminator) for e in entries] == [
        (line.rstrip(b"\r\n"), line[len(line.rstrip(b"\r\n")) :]) for line in lines
    ]


def test_error_pickles() -> None:
    error = PhraseTableError("t.gz", 3, "empty source phrase")
    copy = pickle.loads(pickle.dumps(error))
    assert (copy.path, copy.line_no, copy.message, str(copy)) == (
        "t.gz",
        3,
        "empty source phrase",
        "t.gz:3: empty source phrase",
    )
    assert str(PhraseTableError("t.gz", None, "x")) == "t.gz: x"


# --- lenient reading --------------------------------------------------------------------------


def test_lenient_reports_every_bad_line(tmp_path: Path) -> None:
    bad = [line for line, _ in BAD_LINES.values()]
    lines = [line for pair in zip(bad, itertools.repeat(GOOD)) for line in pair]
    path = write_input(tmp_path / "t.txt", b"".join(lines), False)
    items = list(iter_lines_lenient(path))
    assert len(items) == len(lines)
    for line_no, (line, item) in enumerate(zip(lines, items, strict=True), 1):
        assert isinstance(item, Entry if line == GOOD else PhraseTableError)
        assert item.line_no == line_no


def test_lenient_ends_with_truncation_error(tmp_path: Path) -> None:
    data = gzip.compress(GOOD * 50_000)
    path = write_input(tmp_path / "t.gz", data[: len(data) // 2], False)
    items = list(iter_lines_lenient(path))
    assert all(isinstance(item, Entry) for item in items[:-1])
    last = items[-1]
    assert isinstance(last, PhraseTableError) and "truncated" in last.message
    assert last.line_no == len(items)


# --- properties -------------------------------------------------------------------------------

TOKENS = st.one_of(
    st.text(alphabet="abcxyzéàçœßΩж中文'-.,0123456789", min_size=1, max_size=6),
    st.sampled_from(["&#124;", "&amp;", "&lt;", "&quot;", "&apos;s", "&#91;", "|", "||"]),
)
PHRASE = st.lists(TOKENS, min_size=1, max_size=5).map(" ".join)
NUMBER = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.integers(-(10**30), 10**30).map(str),
    st.sampled_from(["1e-05", "2.5E+3", ".5", "7.", "-0", "+1", "8.46215e-05"]),
)
SPACES = st.sampled_from([" ", " ", " ", "  ", " \t"])


@st.composite
def scores_field(draw: st.DrawFn) -> str:
    numbers = draw(st.lists(NUMBER, min_size=1, max_size=6))
    text = numbers[0]
    for number in numbers[1:]:
        text += draw(SPACES) + number
    if draw(st.integers(0, 4)) == 0:
        text = draw(SPACES) + text + draw(SPACES)
    return text


EXTRA_FIELD = st.lists(st.sampled_from(["0-0", "1-2", "12", "3", "dlt=1", "{{Count", "7}}", "", " "]), max_size=4).map(
    " ".join
)


@st.composite
def table_line(draw: st.DrawFn) -> bytes:
    fields = [draw(PHRASE), draw(PHRASE), draw(scores_field())]
    fields += draw(st.lists(EXTRA_FIELD, max_size=4))
    line = " ||| ".join(fields)
    if line.endswith(" ||| ") and draw(st.booleans()):
        line = line[:-1]  # the " |||" ending written by train-model.perl
    return line.encode()


@given(table_line(), st.sampled_from([b"\n", b"\r\n", b""]))
@settings(max_examples=200, deadline=None)
def test_property_parse_and_append(raw: bytes, terminator: bytes) -> None:
    source, target, end = parse_line(raw, "t", 1)
    assert (source, target) == phrases(raw)
    entry = Entry(1, raw, terminator, source, target, end)
    assert with_appended(entry, b"0.1 2.5") == insert_column(raw + terminator, b"0.1 2.5")


@given(st.lists(st.tuples(table_line(), st.sampled_from([b"\n", b"\r\n"])), min_size=1))
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_property_file_round_trip(tmp_path: Path, lines: list[tuple[bytes, bytes]]) -> None:
    data = [raw + terminator for raw, terminator in lines]
    path = write_input(tmp_path / "in.txt", b"".join(data), False)
    assert rescore(path, str(tmp_path / "out.gz")) == len(data)
    assert read_back(tmp_path / "out.gz") == expected_output(data)


PIECES = st.sampled_from(
    [b"a", b"\xc3\xa9", b"\xff", b" ", b"  ", b"|", b"|||", b" ||| ", b"0.5", b"1e-05", b"-3",
     b"nan", b"inf", b"x", b"\t", b".", b"e5", b"1" * 201, b"1e+99", b"1e999"]
)  # fmt: skip


@given(st.lists(PIECES, max_size=14).map(b"".join), st.booleans())
@settings(max_examples=700, deadline=None)
def test_property_fast_path_agrees_with_general_parser(raw: bytes, check: bool) -> None:
    try:
        expected: object = _parse_general(raw, "t", 1, check)
    except PhraseTableError as error:
        expected = str(error)
    try:
        got: object = parse_line(raw, "t", 1, check)
    except PhraseTableError as error:
        got = str(error)
    assert got == expected
