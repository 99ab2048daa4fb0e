"""The Moses n-best format: reading lines as the decoder writes them, appending one feature."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from phrase_rescorer.moses.nbest import (
    NbestError,
    check_feature_name,
    dense_features,
    format_value,
    parse_features,
    read_nbest,
    with_feature,
    with_features,
    without_features,
)

# Lines as bin/moses writes them (-n-best-list FILE N distinct): the hypothesis' words each
# followed by a space, then " ||| ".
DECODER = (
    b"0 ||| un homme .  ||| LM0= -10.5 WordPenalty0= -3 TranslationModel0= -1 -2.5 ||| -3.71621\n"
    b"0 ||| un chien .  ||| LM0= -12 WordPenalty0= -3 TranslationModel0= -1.5 -2 ||| -3.9\n"
    b"1 |||  ||| LM0= -2.3 WordPenalty0= 0 TranslationModel0= 0 0 ||| -0.5\n"
)


def _lines(tmp_path: Path, data: bytes, name: str = "n.nbest") -> list:
    path = tmp_path / name
    path.write_bytes(data)
    return list(read_nbest(str(path)))


def test_fields_and_empty_hypothesis(tmp_path: Path) -> None:
    lines = _lines(tmp_path, DECODER)
    assert [line.sentence for line in lines] == [0, 0, 1]
    assert lines[0].tokens == ["un", "homme", "."]
    assert lines[2].tokens == []
    assert lines[0].features == "LM0= -10.5 WordPenalty0= -3 TranslationModel0= -1 -2.5"


def test_appending_keeps_every_other_byte(tmp_path: Path) -> None:
    data = DECODER.replace(b"-3.9\n", b"-3.9 ||| 0-0 1-1 ||| more\r\n")  # fields after the total, CRLF
    out = b"".join(with_feature(line, "CSLM0", -1.25) for line in _lines(tmp_path, data))
    assert out.replace(b" CSLM0= -1.25", b"") == data
    assert out.count(b" CSLM0= -1.25 ||| ") == 3
    assert b"-3.9 ||| 0-0 1-1 ||| more\r\n" in out


def test_several_features_appended_in_order_and_removed_again(tmp_path: Path) -> None:
    data = DECODER.replace(b"WordPenalty0= -3 TranslationModel0", b"sparse_x= 1 WordPenalty0= -3 TranslationModel0")
    lines = _lines(tmp_path, data)
    both = [with_features(line, [("CSLM0", -1.5), ("NMT0", -2.0)]) for line in lines]
    assert all(
        b" TranslationModel0= " in out and out.split(b" ||| ")[2].endswith(b" CSLM0= -1.5 NMT0= -2") for out in both
    )
    again = _lines(tmp_path, b"".join(both), "both.nbest")
    assert b"".join(without_features(line, ["CSLM0", "NMT0"]) for line in again) == data
    only_nmt = [without_features(line, ["CSLM0"]) for line in again]
    assert only_nmt == [with_feature(line, "NMT0", -2.0) for line in lines]


def test_last_line_without_newline_and_gzip(tmp_path: Path) -> None:
    path = tmp_path / "n.gz"
    path.write_bytes(gzip.compress(DECODER.rstrip(b"\n")))
    lines = list(read_nbest(str(path)))
    assert lines[-1].terminator == b"" and lines[0].terminator == b"\n"


def test_sparse_features_are_read_as_written() -> None:
    features = dense_features("LM0= -2 sparse_a= 1.5 TM0= 1 2")
    assert features == [("LM0", [-2.0]), ("TM0", [1.0, 2.0])]
    parsed = parse_features("LM0= -2 sparse_a= 1.5 TM0= 1 2")
    assert parsed.layout == (("LM0", 1), ("TM0", 2)) and parsed.sparse == [("sparse_a", 1.5)]


@pytest.mark.parametrize(
    ("line", "why"),
    [
        (b"0 ||| un homme ||| LM0= -1\n", "expected 'ID ||| hypothesis ||| features ||| total'"),  # truncated
        (b"x ||| un ||| LM0= -1 ||| -1\n", "sentence ID 'x' is not a number"),
        (b"0 ||| un ||| LM0= -1 ||| nan\n", "not a finite number"),
        (b"0 ||| un \xff ||| LM0= -1 ||| -1\n", "invalid UTF-8"),
    ],
)
def test_bad_lines_name_file_and_line(tmp_path: Path, line: bytes, why: str) -> None:
    with pytest.raises(NbestError) as e:
        _lines(tmp_path, DECODER + line)
    assert str(e.value).startswith(f"{tmp_path / 'n.nbest'}:4: ")
    assert why in str(e.value)


def test_a_sentence_split_in_two_is_refused(tmp_path: Path) -> None:
    with pytest.raises(NbestError, match=r":4: sentence 0 again"):
        _lines(tmp_path, DECODER + DECODER.splitlines(keepends=True)[0])


def test_feature_names_and_values() -> None:
    assert check_feature_name("CSLM0") == "CSLM0"
    for bad in ("", "a b", "x=", "a|b", "_x", "a_b"):
        with pytest.raises(ValueError):
            check_feature_name(bad)
    assert format_value(-57.5568494) == b"-57.556849"
    assert format_value(-0.0000001) == b"0"
    with pytest.raises(ValueError):
        format_value(float("-inf"))


@pytest.mark.parametrize(
    ("features", "why"),
    [
        ("LM0= nan TM0= 1 2", "'nan' is not a finite number"),
        ("LM0= -inf TM0= 1 2", "'-inf' is not a finite number"),
        ("LM0= 1e999 TM0= 1 2", "'1e999' is not a finite number"),
        ("LM0= 1_0 TM0= 1 2", "'1_0' is not a number"),
        ("LM0= \u0661 TM0= 1 2", "'\u0661' is not a number"),  # an Arabic-Indic 1: float reads it, atof not
        ("LM0= x TM0= 1 2", "'x' is not a number"),
        ("LM0= -1 TM0= 1 2 LM0= -2", "feature LM0 twice"),
        ("LM0= -1 sp_x=1 TM0= 1 2", "Moses writes a feature as 'name= value'"),
        ("LM0= -1 sp_x= TM0= 1 2", "sparse feature sp_x has no value"),
        ("LM0= -1 sp_x= 1 2 TM0= 1 2", "feature value '2' after the sparse feature sp_x's value"),
        ("-1 LM0= -1 TM0= 1 2", "before any feature name"),
        ("LM0= TM0= 1 2", "feature LM0 has no value"),
        ("LM0= -1 TM0=", "feature TM0 has no value"),
        ("LM0= -1 TM0= 1\u00a02", "U+00A0 in the features field"),  # extractor: one value, '1\xa02'
        ("LM0= -1\tTM0= 1 2", "U+0009 in the features field"),
    ],
)
def test_the_features_field_is_checked_on_every_line(tmp_path: Path, features: str, why: str) -> None:
    """Line 3 of 4 carries the fault: every line is parsed, not only the first."""
    good = "LM0= -1 TM0= 1 2"
    data = "".join(f"{i} ||| w  ||| {good if i != 2 else features} ||| 0\n" for i in range(4)).encode()
    with pytest.raises(NbestError) as e:
        _lines(tmp_path, data)
    assert str(e.value).startswith(f"{tmp_path / 'n.nbest'}:3: ") and why in str(e.value), str(e.value)


def test_every_line_has_the_first_lines_features(tmp_path: Path) -> None:
    data = DECODER + b"2 ||| x  ||| LM0= -1 WordPenalty0= -1 TranslationModel0= 0 0 CSLM0= -3 ||| 0\n"
    with pytest.raises(NbestError, match=r":4: features .*CSLM0\(1\) differ from line 1's"):
        _lines(tmp_path, data)


@pytest.mark.parametrize(
    ("ids", "line", "why"),
    [
        ([1], 1, "sentence ID 1 on the first line"),
        ([0, 2], 2, "sentence ID 2 after 0"),
        ([0, 20000000], 2, "sentence ID 20000000 after 0"),
        ([0, 1, 0], 3, "sentence 0 again after other sentences"),
    ],
)
def test_sentences_are_numbered_as_the_decoder_numbers_them(
    tmp_path: Path, ids: list[int], line: int, why: str
) -> None:
    data = "".join(f"{i} ||| w  ||| LM0= -1 ||| 0\n" for i in ids).encode()
    with pytest.raises(NbestError) as e:
        _lines(tmp_path, data)
    assert str(e.value).startswith(f"{tmp_path / 'n.nbest'}:{line}: ") and why in str(e.value)


def test_parse_features_reads_what_extractor_reads() -> None:
    """Tokens separated by spaces, a run of them as one (mert/Util.cpp, getNextPound: "skip all
    occurrences of delimiter")."""
    parsed = parse_features("Distortion0= 0 LM0= -48.172  sp_x= 1.5 TranslationModel0= -6.1 -7 .5 3e-2 +1 ")
    assert parsed.layout == (("Distortion0", 1), ("LM0", 1), ("TranslationModel0", 5))
    assert parsed.values == [0.0, -48.172, -6.1, -7.0, 0.5, 0.03, 1.0]
    assert parsed.sparse == [("sp_x", 1.5)]
