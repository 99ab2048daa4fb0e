"""Rescoring a table with the stacked architectures through the engine: every line kept byte for
byte plus one column, equal to the plain per-pair computation, the same score for a line
wherever it stands in the table. Tolerance as in test_scoring (1e-5 relative, log space)."""

from __future__ import annotations

import gzip
import random
from pathlib import Path

import numpy as np
import pytest

from phrase_rescorer.model.checkpoint import load_checkpoint
from phrase_rescorer.rescoring.engine import rescore_table
from tests.helpers.paths import SAMPLE
from tests.helpers.rescore_data import (
    appended_columns,
    log_column,
    read_lines,
    reference_log_probs,
    tiny_arch_checkpoint,
)

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """300 lines of the bundled sample, CRLF on one line and no final newline on the last."""
    lines = read_lines(SAMPLE)[:300]
    lines[7] = lines[7].replace(b"\n", b"\r\n")
    lines[-1] = lines[-1].rstrip(b"\n")
    path = tmp_path_factory.mktemp("t") / "pt.gz"
    path.write_bytes(gzip.compress(b"".join(lines)))
    return path


@pytest.mark.parametrize("arch", ["rnnsearch", "gnmt"])
def test_lines_kept_scores_plain_and_order_free(arch: str, table: Path, tmp_path: Path) -> None:
    model = tiny_arch_checkpoint(tmp_path / "m.pt", arch, **({"layers": 3} if arch == "gnmt" else {}))
    out = tmp_path / "out.gz"
    summary = rescore_table(str(table), str(out), str(model), device="cpu", window=40, window_cap=80)
    values = appended_columns(table, out)  # byte identity of everything else, line count
    assert summary.lines == len(values) == 300
    assert "|scorer:StackedPrefixScorer|" in summary.signature  # the default, decoder prefixes shared
    got = log_column(values)
    ref = reference_log_probs(load_checkpoint(str(model)), table)  # pair by pair
    want = np.array([ref[i + 1] for i in range(len(values))])
    assert np.all(np.abs(got - want) <= 1e-5 * np.maximum(1.0, np.abs(want))) and np.ptp(want) > 1.0

    lines = read_lines(table)
    lines[-1] += b"\n"
    order = list(range(len(lines)))
    random.Random(5).shuffle(order)
    shuffled = tmp_path / "shuffled.gz"
    shuffled.write_bytes(gzip.compress(b"".join(lines[i] for i in order)))
    out_b = tmp_path / "b.gz"
    batched = rescore_table(
        str(shuffled), str(out_b), str(model), device="cpu", window=25, window_cap=50, scorer="batched"
    )
    assert "|scorer:StackedScorer|" in batched.signature  # each target decoded on its own
    again = log_column(appended_columns(shuffled, out_b))
    assert np.all(np.abs(again - got[order]) <= 1e-5)


def test_bfloat16_is_refused_for_other_architectures_with_exit_2(table: Path, tmp_path: Path) -> None:
    """bfloat16 scoring exists for the cho2014 prefix scorer only: another architecture is
    refused before any scoring, as a usage error naming the network, and nothing is written."""
    import subprocess

    from tests.helpers.paths import PYTHON, cli_env

    model = tiny_arch_checkpoint(tmp_path / "rnnsearch.pt", "rnnsearch")
    out = tmp_path / "out.txt"
    r = subprocess.run(
        [
            PYTHON,
            "-m",
            "phrase_rescorer",
            "rescore",
            str(table),
            str(out),
            "--model",
            str(model),
            "--dtype",
            "bfloat16",
        ],
        capture_output=True,
        text=True,
        env=cli_env(),
        timeout=300,
    )
    assert r.returncode == 2, r.stderr
    assert "--dtype bfloat16 is for the cho2014 network's prefix scorer only; this is a rnnsearch network" in r.stderr
    assert "Traceback" not in r.stderr
    assert list(tmp_path.iterdir()) == [model]
