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
