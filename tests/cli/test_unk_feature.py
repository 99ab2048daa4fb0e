"""--unk-feature on pairs with more out-of-shortlist words than exp() can represent: the count
is capped at COUNT_CAP (exp(88) fits a float32, what Moses parses) and the run succeeds."""

from __future__ import annotations

import math
import subprocess
from pathlib import Path

import numpy as np
import pytest

from phrase_rescorer.moses.score_format import COUNT_CAP, count_value, feature_from_column, format_number
from tests.helpers.moses import moses_root
from tests.helpers.paths import PYTHON, REPO, cli_env
from tests.helpers.rescore_data import appended_columns, tiny_checkpoint


def test_count_value_is_capped_and_stays_a_finite_float32() -> None:
    assert count_value(3) == math.exp(3)
    for n in (COUNT_CAP, COUNT_CAP + 1, 709, 710, 10_000):
        assert count_value(n) == math.exp(COUNT_CAP)
        assert feature_from_column(format_number(count_value(n))) == pytest.approx(COUNT_CAP, abs=1e-5)
    with np.errstate(over="ignore"):  # why the cap is 88: one more overflows a float32
        assert math.isinf(feature_from_column(format_number(math.exp(COUNT_CAP + 1))))


def test_a_pair_with_800_unknown_words_exits_0_with_the_capped_count(tmp_path: Path) -> None:
    model = tiny_checkpoint(tmp_path / "tiny.pt")
    source = " ".join(f"qqsrc{i}" for i in range(400))
    target = " ".join(f"qqtgt{i}" for i in range(400))
    table = tmp_path / "t.txt"
    table.write_bytes(f"a man ||| un homme ||| 0.5 0.5 0.5 0.5\n{source} ||| {target} ||| 0.5 0.5 0.5 0.5\n".encode())
    out = tmp_path / "o.txt"
    env = {**cli_env(), "OMP_NUM_THREADS": "1"}
    r = subprocess.run(
        [
            PYTHON,
            str(REPO / "bin" / "rescore-phrase-table"),
            str(table),
            str(out),
            "--model",
            str(model),
            "--unk-feature",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr
    values = appended_columns(table, out, columns=2)
    assert float(values[0][1]) == pytest.approx(1.0)  # "a man" / "un homme": in the shortlists
    assert values[1][1] == format_number(math.exp(COUNT_CAP))


def test_moses_reads_the_capped_count_as_88_and_one_more_as_inf(tmp_path: Path) -> None:
    """The real decoder: exp(88) gives the feature 88 in the n-best list, exp(89.5) gives inf."""
    moses = moses_root()
    table = tmp_path / "pt"
    table.write_text(
        f"a ||| x ||| 0.5 0.5 0.5 0.5 {format_number(count_value(10_000))} ||| 0-0 ||| 1 1 1\n"
        f"b ||| y ||| 0.5 0.5 0.5 0.5 {format_number(math.exp(89.5))} ||| 0-0 ||| 1 1 1\n"
    )
    ini = tmp_path / "moses.ini"
    ini.write_text(
        "[input-factors]\n0\n[mapping]\n0 T 0\n[feature]\nUnknownWordPenalty\nWordPenalty\nPhrasePenalty\n"
        f"PhraseDictionaryMemory name=TranslationModel0 num-features=5 path={table} input-factor=0 output-factor=0\n"
        "Distortion\n[weight]\nDistortion0= 0.1\nWordPenalty0= -0.1\nPhrasePenalty0= 0.1\n"
        "TranslationModel0= 0.1 0.1 0.1 0.1 0.01\nUnknownWordPenalty0= 1\n"
    )
    nbest = tmp_path / "nbest"
    r = subprocess.run(
        [str(moses / "bin" / "moses"), "-f", str(ini), "-n-best-list", str(nbest), "1"],
        input="a\nb\n",
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    features = [line.split(" ||| ")[2] for line in nbest.read_text().splitlines()]
    assert features[0].endswith("-0.693147 88")
    assert features[1].endswith("-0.693147 inf")
