from __future__ import annotations

import json
import subprocess
from pathlib import Path

from click.testing import CliRunner

from phrase_rescorer.cli import cli
from tests.helpers.paths import PYTHON, cli_env


def test_inspect_reports_the_sample(sample_table: Path) -> None:
    r = CliRunner().invoke(cli, ["-q", "inspect", "--json", str(sample_table)])
    assert r.exit_code == 0, r.output
    stats = json.loads(r.output)
    assert stats["lines"] == stats["unique_pairs"] == 29260
    assert stats["unique_sources"] == 22436
    assert stats["sorted_by_source"] is True
    assert sum(stats["src_length_hist"]) == stats["unique_pairs"]
    assert stats["malformed_count"] == 0


def test_inspect_lists_every_malformed_line(tmp_path: Path) -> None:
    t = tmp_path / "bad.txt"
    t.write_bytes(b"a ||| b ||| 0.5\nbroken line\nc ||| d ||| 0.5\n ||| e ||| 0.1\nf ||| g ||| x\n")
    r = CliRunner().invoke(cli, ["-q", "inspect", str(t)])
    assert r.exit_code == 0, r.output
    assert "malformed lines    3" in r.output
    for line_no in (2, 4, 5):
        assert f"{t}:{line_no}:" in r.output
    strict = subprocess.run(
        [PYTHON, "-m", "phrase_rescorer", "-q", "inspect", "--strict", str(t)],
        capture_output=True,
        text=True,
        env=cli_env(),
    )
    assert strict.returncode == 3
    assert "3 malformed line(s)" in strict.stderr


def test_help_and_version() -> None:
    r = CliRunner().invoke(cli, ["-h"])
    assert r.exit_code == 0 and "inspect" in r.output
    r = CliRunner().invoke(cli, ["--version"])
    assert r.exit_code == 0 and "phrase-rescorer" in r.output


def test_columns_named_for_a_table_without_them_are_warned_of(sample_table: Path, trained_model: Path) -> None:
    """-m names the columns rescoring appended: on the original 4-score table they would take
    Moses' own names' place, so inspect says so; --unk-feature alone names nothing."""
    r = CliRunner().invoke(cli, ["-q", "inspect", str(sample_table), "-m", str(trained_model)])
    assert r.exit_code == 0, r.output
    assert f"warning: {sample_table}: lines of 4 scores, but Moses' 4 and the 1 column(s)" in r.stderr
    r = CliRunner().invoke(cli, ["-q", "inspect", str(sample_table)])
    assert r.exit_code == 0 and "warning" not in r.stderr
    r = CliRunner().invoke(cli, ["inspect", str(sample_table), "--unk-feature"])
    assert r.exit_code == 2 and "--unk-feature names the last column after the networks' columns" in r.output
