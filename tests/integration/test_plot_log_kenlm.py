"""``train-lm --kenlm`` records KenLM's held-out perplexity in its log (real Moses ``query``), and
``plot-log`` draws it as a line beside the CSLM's curve."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from phrase_rescorer.analysis.plots import training_panels
from phrase_rescorer.training.log import read_log, read_training_curves
from tests.helpers.cslm import TINY_MOSES
from tests.helpers.moses import moses_root
from tests.helpers.paths import PYTHON, cli_env


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([PYTHON, "-m", "phrase_rescorer", *args], capture_output=True, env=cli_env(), timeout=300)


def test_the_kenlm_perplexity_is_logged_and_drawn(tmp_path: Path) -> None:
    moses = moses_root(("bin/query",))
    arpa = TINY_MOSES / "lm.fr.3gram.arpa.gz"
    r = run(
        "train-lm", str(TINY_MOSES / "dev.fr"), str(tmp_path / "lm.pt"), "--order", "3", "--embed-dim", "8",
        "--hidden", "16", "--max-steps", "20", "--threads", "1", "--valid", str(TINY_MOSES / "test.fr"),
        "--kenlm", str(arpa), "--moses", str(moses),
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    said = re.search(rf"held-out: KenLM {re.escape(str(arpa))} perplexity ([0-9.]+) ", r.stderr.decode())
    assert said is not None, r.stderr
    logged = [e for e in read_log(str(tmp_path / "lm.log")) if e["event"] == "kenlm"]
    assert len(logged) == 1 and logged[0]["text"] == "held-out" and logged[0]["lm"] == str(arpa)
    assert logged[0]["kenlm_ppl"] == pytest.approx(float(said.group(1)), abs=0.005)
    panels = training_panels(read_training_curves(str(tmp_path / "lm.log")))
    assert panels[2].hlines == [("KenLM", logged[0]["kenlm_ppl"])] == panels[3].hlines
    png = tmp_path / "lm.png"
    r = run("plot-log", str(tmp_path / "lm.log"), "-o", str(png))
    assert r.returncode == 0, r.stderr
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
