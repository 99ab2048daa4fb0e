"""File facts below every command: a file's SHA-256 (``checksums``; an unreadable file refused
naming it, exit 6, and as the experiment's own error by the experiment), and the files a moses.ini's
features name with their size and modification time (``moses.ini_paths``)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from phrase_rescorer.checksums import content_sha256, same_content, sha256_of
from phrase_rescorer.errors import EXIT_OS, HostError
from phrase_rescorer.experiment import workdir
from phrase_rescorer.experiment.systems import ExperimentError
from phrase_rescorer.moses.ini_paths import ini_files


def test_a_file_and_a_directory(tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(b"abc")
    assert sha256_of(str(tmp_path / "f")) == hashlib.sha256(b"abc").hexdigest()
    assert content_sha256(str(tmp_path / "f")) == sha256_of(str(tmp_path / "f"))
    table = tmp_path / "table"
    table.mkdir()
    (table / "a").write_bytes(b"1")
    first = content_sha256(str(table))
    (table / "a").write_bytes(b"2")
    assert content_sha256(str(table)) != first


def test_the_rule_for_a_file_whose_time_changed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    f = tmp_path / "f"
    f.write_bytes(b"abc")
    digest = sha256_of(str(f))
    assert same_content(str(f), 3, 3, digest)
    assert not same_content(str(f), 3, 3, hashlib.sha256(b"abd").hexdigest())
    table = tmp_path / "table"
    table.mkdir()
    (table / "a").write_bytes(b"1")
    assert same_content(str(table), 4096, 12345, content_sha256(str(table)))  # a directory's own size is not content
    with pytest.raises(HostError, match="cannot read"):
        same_content(str(tmp_path / "gone"), 3, 3, digest)

    def no_hash(path: str) -> str:
        raise AssertionError(f"{path} hashed")

    monkeypatch.setattr("phrase_rescorer.checksums.content_sha256", no_hash)
    assert not same_content(str(f), 3, 4, digest)  # another size than recorded: not hashed
    assert not same_content(str(f), 4, 3, digest)  # the size its caller found is the one compared


def test_the_experiment_rehashes_only_a_retimed_file_of_its_recorded_size(tmp_path: Path) -> None:
    f = tmp_path / "pt.gz"
    f.write_bytes(b"abc")
    digest = sha256_of(str(f))
    assert workdir.retimed({str(f): [3, 1, digest]}, {str(f): [3, 2]}) == {str(f): [3, 2, digest]}
    assert workdir.retimed({str(f): [3, 1, digest]}, {str(f): [4, 2]}) == {}  # its size changed: left to changed_files
    assert workdir.retimed({str(f): [3, 1, digest]}, {str(f): [3, 1]}) == {}  # unchanged: nothing to recheck
    assert workdir.retimed({str(f): [3, 1]}, {str(f): [3, 2]}) == {}  # recorded without a hash
    f.unlink()
    assert workdir.retimed({str(f): [3, 1, digest]}, {str(f): [3, 2]}) == {}  # gone now: left to changed_files


def test_an_unreadable_file_is_named(tmp_path: Path) -> None:
    missing = tmp_path / "missing"
    with pytest.raises(HostError) as caught:
        sha256_of(str(missing))
    assert str(caught.value) == f"{missing}: cannot read (No such file or directory)"
    assert caught.value.exit_code == EXIT_OS
    for hashed in (workdir.sha256_of, workdir.content_sha256):  # the experiment's own error, the same line
        with pytest.raises(ExperimentError) as refused:
            hashed(str(missing))
        assert str(refused.value) == str(caught.value) and refused.value.exit_code == EXIT_OS


def test_the_files_an_ini_names(tmp_path: Path) -> None:
    (tmp_path / "pt.gz").write_bytes(b"12345")
    (tmp_path / "lm.arpa").write_bytes(b"1")
    ini = tmp_path / "moses.ini"
    ini.write_text(
        "[feature]\nUnknownWordPenalty\n"
        f"PhraseDictionaryMemory name=TranslationModel0 num-features=4 path={tmp_path}/pt\n"  # a stem
        f"KENLM name=LM0 factor=0 path={tmp_path}/lm.arpa order=3\nKENLM name=LM1 path={tmp_path}/gone\n"
        f"PhraseDictionaryCompact name=TranslationModel1 num-features=4 path={tmp_path}/compact\n"
    )
    (tmp_path / "compact.minphr").write_bytes(b"12")  # a Compact table: its path is the prefix
    found = ini_files(str(ini))
    assert found == {
        f"{tmp_path}/pt.gz": [5, os.stat(tmp_path / "pt.gz").st_mtime_ns],
        f"{tmp_path}/lm.arpa": [1, os.stat(tmp_path / "lm.arpa").st_mtime_ns],
        f"{tmp_path}/compact.minphr": [2, os.stat(tmp_path / "compact.minphr").st_mtime_ns],
    }
    assert workdir.ini_files is ini_files  # the experiment's fingerprints use the same
