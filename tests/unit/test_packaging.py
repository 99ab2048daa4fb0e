"""What a wheel ships: every package (pyproject lists them), moses_configs/ as package data
(found by `phrase-rescorer moses-configs`), the licence pyproject names."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from phrase_rescorer.cli import cli
from phrase_rescorer.cli.common import run_guarded
from phrase_rescorer.moses import configs
from tests.helpers.paths import REPO


def _pyproject() -> str:
    return (REPO / "pyproject.toml").read_text(encoding="utf-8")


def test_the_package_list_names_every_package_directory() -> None:
    listed = set(
        re.findall(r'^\s+"(phrase_rescorer[\w.]*)",$', _pyproject().split("packages = [", 1)[1].split("]", 1)[0], re.M)
    )
    on_disk = {".".join(p.parent.relative_to(REPO).parts) for p in (REPO / "phrase_rescorer").rglob("__init__.py")}
    assert listed == on_disk | {"phrase_rescorer.moses_configs"}
    assert '"phrase_rescorer.moses_configs" = "moses_configs"' in _pyproject()


def test_moses_configs_prints_the_directory_of_the_configs() -> None:
    r = CliRunner().invoke(cli, ["moses-configs"])
    assert r.exit_code == 0, r.output
    assert r.stdout == f"{REPO / 'moses_configs'}\n"  # from a checkout: the checkout's own
    assert (REPO / "moses_configs" / "ems-rnn-rescoring.config").is_file()


def test_moses_configs_missing_is_one_line_and_exit_6(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(configs, "_CANDIDATES", (tmp_path / "a", tmp_path / "b"))
    monkeypatch.setattr(sys, "argv", ["phrase-rescorer", "moses-configs"])
    with pytest.raises(SystemExit) as exit_:
        run_guarded(cli, prog_name="phrase-rescorer")
    assert exit_.value.code == 6
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("phrase-rescorer: error: moses_configs/ is not installed")


def test_the_licence_file_matches_pyproject() -> None:
    text = (REPO / "LICENSE").read_text(encoding="utf-8")
    assert text.startswith("MIT License\n") and "Copyright (c) 2026 phrase_rescorer authors" in text
    assert 'license = "MIT"' in _pyproject() and 'license-files = ["LICENSE"]' in _pyproject()
