"""Fuzzing the phrase-table reader: on any bytes, the only error is ``PhraseTableError``.

``parse_line`` (the one line parser) and ``InputTable`` (line splitting, CRLF, gzip by magic
bytes) get arbitrary bytes, and bytes assembled from the pieces that matter to them (separators,
bars, spaces, tabs, numbers, invalid UTF-8, gzip headers). Whatever they accept must be
self-consistent: the phrases are the text between the first two separators, and inserting a
column and reading the line again gives the same phrases.

The suite runs a short, derandomized pass. ``make fuzz`` runs a long random one:
FUZZ_EXAMPLES (default there: 200,000) examples per test.
"""

from __future__ import annotations

import gzip
import os
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from phrase_rescorer.moses.phrase_table import Entry, PhraseTableError, parse_line, with_appended
from phrase_rescorer.moses.table_reader import InputTable

LONG = "FUZZ_EXAMPLES" in os.environ
FUZZ = settings(
    max_examples=int(os.environ.get("FUZZ_EXAMPLES", "300")),
    deadline=None,
    derandomize=not LONG,
    database=None,
    suppress_health_check=[HealthCheck.too_slow] if LONG else [],
)

PIECES = st.sampled_from(
    [b"a", b"la", b"\xc3\xa9", b"\xe4\xb8\xad", b"\xff", b"\xc3", b"\x00", b" ", b"  ", b"\t", b"|", b"||",
     b"|||", b" ||| ", b" |||", b"||| ", b"0.5", b"1e-05", b"-3", b".5", b"7.", b"nan", b"inf", b"-inf", b"1e999",
     b"1" * 210, b"x", b".", b"e5", b"+", b"-", b"\r", b"\n", b"\r\n", b"&#124;", b"\xef\xbb\xbf"]
)  # fmt: skip
STRUCTURED = st.lists(PIECES, max_size=20).map(b"".join)
ANY_BYTES = st.one_of(st.binary(max_size=200), STRUCTURED)


def check_accepted(raw: bytes, source: str, target: str, end: int) -> None:
    """What parse_line accepts is consistent with the Moses format."""
    assert b"\n" not in raw[:end]
    assert raw.startswith(source.encode() + b" ||| " + target.encode() + b" |||")
    assert source.strip(" ") and target.strip(" ")
    assert 0 < end <= len(raw)
    line = with_appended(Entry(1, raw, b"\n", source, target, end), b"0.25")
    assert parse_line(line[:-1], "fuzz", 1) == (source, target, end + 5)


@given(ANY_BYTES, st.booleans())
@FUZZ
def test_parse_line_raises_only_phrase_table_error(raw: bytes, check_scores: bool) -> None:
    raw = raw.replace(b"\n", b" ")  # parse_line gets one line, without its terminator
    try:
        source, target, end = parse_line(raw, "fuzz", 7, check_scores)
    except PhraseTableError as e:
        assert e.path == "fuzz" and e.line_no == 7 and str(e).startswith("fuzz:7: ")
        return
    if check_scores:
        check_accepted(raw, source, target, end)


def _read_all(data: bytes) -> tuple[bytes, PhraseTableError | None]:
    """The lines InputTable delivers from a file holding ``data`` (joined, terminators
    included), and the error that ended the reading, if any."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "t.gz"
        path.write_bytes(data)
        lines: list[bytes] = []
        try:
            with InputTable(str(path)) as table:
                for entry in table:
                    assert entry.line_no == len(lines) + 1
                    lines.append(entry.raw + entry.terminator)
        except PhraseTableError as e:
            assert e.line_no is None or 1 <= e.line_no <= len(lines) + 1
            return b"".join(lines), e
        return b"".join(lines), None


@given(ANY_BYTES)
@FUZZ
def test_reading_any_file_raises_only_phrase_table_error(data: bytes) -> None:
    content, error = _read_all(data)
    if error is None:  # everything accepted is delivered, byte for byte
        assert content == (gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data)


@given(STRUCTURED, st.integers(0, 400), st.integers(0, 255), st.integers(0, 400), st.booleans())
@FUZZ
def test_reading_damaged_gzip_raises_only_phrase_table_error(
    body: bytes, cut: int, flip: int, where: int, append_garbage: bool
) -> None:
    """A gzip stream of fuzzed lines, cut short, with a byte changed, or with garbage after it:
    either an error, or exactly the original lines (a change in a header field that does not
    affect the content); never different lines."""
    packed = bytearray(gzip.compress(body * 3))
    if flip:
        packed[where % len(packed)] ^= flip
    data = bytes(packed[: max(2, len(packed) - cut)]) + (b"garbage" if append_garbage else b"")
    content, error = _read_all(data)
    if error is None:
        assert content == body * 3
    elif not (flip or cut or append_garbage):
        assert "gzip" not in error.message  # an intact stream: only its lines can be refused
