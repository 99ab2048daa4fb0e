"""moses.ini patching: exactly the phrase dictionary's path, num-features and weights change."""

from __future__ import annotations

import gzip
import struct
from pathlib import Path

import pytest

from phrase_rescorer.moses.ini import (
    MosesIniError,
    check_moses_ini,
    patch_moses_ini,
    phrase_dictionaries,
    table_columns,
)
from phrase_rescorer.moses.ini_file import patch_moses_ini_file
from phrase_rescorer.output import OutputError
from tests.helpers.paths import REAL_INI, REPO


def changed_lines(a: str, b: str) -> list[tuple[str, str]]:
    la, lb = a.splitlines(keepends=True), b.splitlines(keepends=True)
    assert len(la) == len(lb)
    return [(x, y) for x, y in zip(la, lb, strict=True) if x != y]


def compact_header(scores: int) -> bytes:
    """The start of a .minphr file as processPhraseTableMin lays it out (an empty index), up to
    the score count (moses.binarized.compact_score_count; real files in tests/integration)."""
    index = struct.pack("<QQQ", 10, 16, 8) + struct.pack("<BBQQQQQQQ", 1, 1, 0, 0, 0, 0, 0, 0, 0)
    return index + struct.pack("<IQ", 2, scores) + b"\x00" * 64


def table(path: Path, scores: str = "0.5 0.4 0.3 0.2", lines: int = 3) -> Path:
    body = b"".join(b"s%d ||| t ||| %s ||| 0-0 ||| 1 1 1 ||| |||\n" % (i, scores.encode()) for i in range(lines))
    path.write_bytes(gzip.compress(body) if path.name.endswith(".gz") else body)
    return path


INI = """\
# a comment line, kept
[input-factors]
0

[feature]
UnknownWordPenalty
PhraseDictionaryMemory name=TranslationModel0 num-features=4 path={pt0} input-factor=0 output-factor=0
PhraseDictionaryMemory num-features=2 path={pt1} input-factor=0 output-factor=0 table-limit=20
PhraseDictionaryCompact name=TM2 num-features=4 path=/models/pt.minphr input-factor=0 output-factor=0
Distortion

[weight]
UnknownWordPenalty0= 1
TranslationModel0= 0.1 0.2 0.3 0.4   # tuned
PhraseDictionaryMemory0= 0.5 0.6
TM2= 0.7 0.8 0.9 1.0
Distortion0= 0.3
"""


@pytest.fixture
def ini(tmp_path: Path) -> str:
    pt0 = table(tmp_path / "pt0.gz")
    pt1 = table(tmp_path / "pt1.txt", scores="0.5 0.5")
    return INI.format(pt0=pt0, pt1=pt1)


@pytest.mark.shared
def test_real_tuned_ini_gets_five_features_and_five_weights(tmp_path: Path) -> None:
    new = table(tmp_path / "phrase-table.rnn.gz", scores="0.5 0.4 0.3 0.2 1.5e-07")
    out = tmp_path / "moses.rnn.ini"
    result = patch_moses_ini_file(str(REAL_INI), str(out), str(new))
    original, patched = REAL_INI.read_text(), out.read_text()
    changed = changed_lines(original, patched)
    assert len(changed) == 2  # all else identical, byte for byte
    (feature_old, feature_new), (weight_old, weight_new) = changed
    assert feature_old.startswith("PhraseDictionaryMemory name=TranslationModel0 num-features=4 ")
    assert feature_new == (
        f"PhraseDictionaryMemory name=TranslationModel0 num-features=5 path={new} input-factor=0 output-factor=0\n"
    )
    assert weight_old == "TranslationModel0= 0.0912844 0.00190324 0.0646386 0.0407692\n"
    assert weight_new == "TranslationModel0= 0.0912844 0.00190324 0.0646386 0.0407692 0.02\n"
    assert len(weight_new.split("=")[1].split()) == 5
    assert (result.old_features, result.new_features) == (4, 5)
    # The original points at @MODEL_DIR@/phrase-table.gz, unreadable: only the new table is checked.
    assert result.checked == [f"{new}: 5 scores = new num-features"]


def test_only_the_named_dictionary_changes_and_comments_stay(ini: str, tmp_path: Path) -> None:
    new = table(tmp_path / "new.gz", scores="0.5 0.5 0.1")
    result = patch_moses_ini(ini, str(new), name="PhraseDictionaryMemory0", weights=(0.05,))
    changed = changed_lines(ini, result.text)
    assert [c[1] for c in changed] == [
        f"PhraseDictionaryMemory num-features=3 path={new} input-factor=0 output-factor=0 table-limit=20\n",
        "PhraseDictionaryMemory0= 0.5 0.6 0.05\n",
    ]
    assert result.checked[0].endswith("pt1.txt: 2 scores = num-features")


def test_added_count_is_read_off_the_table_and_weights_repeat(ini: str, tmp_path: Path) -> None:
    new = table(tmp_path / "new.gz", scores="0.5 0.4 0.3 0.2 0.01 2.71828183")  # --unk-feature
    result = patch_moses_ini(ini, str(new))
    assert result.new_features == 6
    assert "TranslationModel0= 0.1 0.2 0.3 0.4 0.02 0.02   # tuned\n" in result.text
    result = patch_moses_ini(ini, str(new), weights=(0.3, -0.1))
    assert "TranslationModel0= 0.1 0.2 0.3 0.4 0.3 -0.1   # tuned\n" in result.text
    with pytest.raises(MosesIniError, match="one weight"):
        patch_moses_ini(ini, str(new), weights=(0.3, 0.2, 0.1))


def test_wrong_feature_count_for_the_new_table_is_refused(ini: str, tmp_path: Path) -> None:
    new = table(tmp_path / "new.gz", scores="0.5 0.4 0.3 0.2 0.01")
    with pytest.raises(MosesIniError, match="5 scores per line, but TranslationModel0 would get num-features=4"):
        patch_moses_ini(ini, str(new), features=2)
    same = table(tmp_path / "same.gz")
    with pytest.raises(MosesIniError, match="is it the rescored table"):
        patch_moses_ini(ini, str(same))


def test_ini_that_does_not_match_its_table_is_refused(tmp_path: Path) -> None:
    pt = table(tmp_path / "pt.gz", scores="0.5 0.4 0.3")
    text = INI.format(pt0=pt, pt1=table(tmp_path / "pt1.txt", scores="0.5 0.5"))
    new = table(tmp_path / "new.gz", scores="0.5 0.4 0.3 0.2 0.01")
    with pytest.raises(MosesIniError, match=r"num-features=4 but its table .*pt\.gz has 3 scores"):
        patch_moses_ini(text, str(new))
    with pytest.raises(MosesIniError, match="has 3 scores"):
        check_moses_ini(text)


def test_moses_gz_fallback_is_followed_for_the_check(tmp_path: Path) -> None:
    table(tmp_path / "pt.gz", scores="0.5 0.4 0.3")
    text = INI.format(pt0=tmp_path / "pt", pt1=table(tmp_path / "pt1.txt", scores="0.5 0.5"))
    assert table_columns(str(tmp_path / "pt")) == 3
    with pytest.raises(MosesIniError, match="has 3 scores"):
        check_moses_ini(text)


def test_ini_already_pointing_at_the_rescored_table_is_patched(tmp_path: Path) -> None:
    """EMS' create-config writes num-features=4 for the rescored (5-score) table it was given."""
    rescored = table(tmp_path / "pt.rnn.gz", scores="0.5 0.4 0.3 0.2 0.01")
    text = INI.format(pt0=rescored, pt1=table(tmp_path / "pt1.txt", scores="0.5 0.5"))
    result = patch_moses_ini(text, str(rescored))
    assert result.new_features == 5 and f"num-features=5 path={rescored} " in result.text


def test_weights_that_do_not_match_num_features_are_refused(ini: str, tmp_path: Path) -> None:
    broken = ini.replace("TranslationModel0= 0.1 0.2 0.3 0.4", "TranslationModel0= 0.1 0.2 0.3")
    with pytest.raises(MosesIniError, match="3 weights but num-features=4"):
        patch_moses_ini(broken, str(table(tmp_path / "n.gz", scores="1 1 1 1 1")))


def test_compact_dictionary_takes_a_binarized_table(ini: str, tmp_path: Path) -> None:
    text_table = table(tmp_path / "pt.rnn.gz", scores="0.5 0.4 0.3 0.2 0.01")
    with pytest.raises(MosesIniError, match=r"processPhraseTableMin -in .*pt\.rnn\.gz -out .*pt\.rnn -nscores 5"):
        patch_moses_ini(ini, str(text_table), name="TM2")
    binarized = tmp_path / "pt.rnn.minphr"
    binarized.write_bytes(compact_header(5))
    prefix = str(tmp_path / "pt.rnn")  # Moses appends .minphr; the .gz text table beside it is not read
    result = patch_moses_ini(ini, prefix, name="TM2")
    assert result.new_features == 5
    assert f"PhraseDictionaryCompact name=TM2 num-features=5 path={prefix} " in result.text
    assert "TM2= 0.7 0.8 0.9 1.0 0.02\n" in result.text
    with pytest.raises(MosesIniError, match=r"has 5 scores per line, but TM2 would get num-features=4\+2=6"):
        patch_moses_ini(ini, prefix, name="TM2", features=2)


def test_default_names_follow_moses(ini: str) -> None:
    names = [(d.type, d.name, d.num_features) for d in phrase_dictionaries(ini.splitlines(keepends=True))]
    assert names == [
        ("PhraseDictionaryMemory", "TranslationModel0", 4),
        ("PhraseDictionaryMemory", "PhraseDictionaryMemory0", 2),
        ("PhraseDictionaryCompact", "TM2", 4),
    ]


def test_unknown_name_lists_what_is_there(ini: str, tmp_path: Path) -> None:
    with pytest.raises(MosesIniError, match=r"no phrase dictionary named 'TranslationModel1'; found: Transl"):
        patch_moses_ini(ini, str(tmp_path / "x.gz"), name="TranslationModel1")


def test_old_format_ini_is_refused() -> None:
    with pytest.raises(MosesIniError, match=r"no \[feature\] section"):
        patch_moses_ini("[ttable-file]\n0 0 0 5 /m/pt.gz\n[weight-t]\n0.2\n", "/m/new.gz")


def test_crlf_ini_keeps_its_line_endings(ini: str, tmp_path: Path) -> None:
    crlf = ini.replace("\n", "\r\n")
    result = patch_moses_ini(crlf, str(table(tmp_path / "n.gz", scores="1 1 1 1 1")))
    assert result.text.count("\r\n") == crlf.count("\r\n") and "\n" not in result.text.replace("\r\n", "")
    assert "TranslationModel0= 0.1 0.2 0.3 0.4 0.02   # tuned\r\n" in result.text


def test_file_output_is_refused_onto_the_input(tmp_path: Path, ini: str) -> None:
    path = tmp_path / "moses.ini"
    path.write_text(ini)
    with pytest.raises(OutputError, match="output is the same file as the input ini"):  # exit 6, as everywhere
        patch_moses_ini_file(str(path), str(path), str(table(tmp_path / "n.gz", scores="1 1 1 1 1")))
    assert path.read_text() == ini


def test_the_example_ini_is_consistent() -> None:
    text = (REPO / "moses_configs" / "moses.rnn.example.ini").read_text()
    tm = check_moses_ini(text, ini="moses.rnn.example.ini")
    assert (tm.type, tm.num_features) == ("PhraseDictionaryMemory", 5)
    if REAL_INI.exists():  # the same system as the real tuned ini, with the 5th feature
        real = {ln for ln in REAL_INI.read_text().splitlines() if ln.strip()}
        example = {
            ln.replace("/path/to/model", "@MODEL_DIR@")
            for ln in text.splitlines()
            if ln.strip() and not ln.startswith("#")
        }
        differing = {ln.split("=")[0].split(" ")[0] for ln in example ^ real}
        assert differing == {"PhraseDictionaryMemory", "TranslationModel0"}
