"""Faults under torchrun (2 processes, gloo, CPU): sharded rescoring refuses what one process
refuses and leaves nothing behind (neither OUT nor the hidden directory of parts).

torchrun's own exit status is 1 whatever its workers' codes were (and on a signal it prints a
traceback of its own); each worker prints its one line (`phrase-rescorer: error: ...`), which is
what these tests check.
"""

from __future__ import annotations

import gzip
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers.paths import REPO, SAMPLE, sigint_as_at_a_terminal
from tests.helpers.rescore_data import read_lines

SORTED_2K = b"".join(read_lines(SAMPLE)[:2000])


def torchrun(*args: str) -> tuple[list[str], dict[str, str]]:
    """The command line and environment of ``phrase_rescorer -q ARGS`` in 2 torchrun processes."""
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""), OMP_NUM_THREADS="1")
    return [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc-per-node",
        "2",
        "--standalone",
        "-m",
        "phrase_rescorer",
        "-q",
        *args,
    ], env


@pytest.mark.parametrize(
    ("name", "data", "message"),
    [
        ("empty.txt", b"", "empty.txt: empty phrase table: no lines to rescore"),
        ("empty.gz", gzip.compress(b""), "empty.gz: empty phrase table: no lines to rescore"),
        # every line checked first, as in one process: the line the stream breaks at
        ("cut.gz", gzip.compress(SORTED_2K)[:-30], "cut.gz:2000: truncated or corrupt gzip stream"),
    ],
    ids=["empty.txt", "empty.gz", "cut.gz"],  # the same ids in every process (pytest -n): no bytes in them
)
@pytest.mark.slow
def test_refused_input_leaves_nothing(model: Path, tmp_path: Path, name: str, data: bytes, message: str) -> None:
    (tmp_path / name).write_bytes(data)
    cmd, env = torchrun("rescore", str(tmp_path / name), str(tmp_path / "out.gz"), "--model", str(model))
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode != 0
    errors = [line for line in r.stderr.splitlines() if line.startswith("phrase-rescorer: error:")]
    assert len(errors) == 2 and all(message in e for e in errors), r.stderr
    assert sorted(os.listdir(tmp_path)) == [name]


@pytest.mark.parametrize(
    ("sig", "message"),
    [(signal.SIGTERM, "terminated (SIGTERM)"), (signal.SIGINT, "interrupted")],
    ids=["SIGTERM", "SIGINT"],
)
@pytest.mark.slow
def test_signal_to_torchrun_leaves_nothing(model: Path, tmp_path: Path, sig: int, message: str) -> None:
    """torchrun passes the signal to its workers; each removes its part, process 0 the directory."""
    table = tmp_path / "long.gz"
    table.write_bytes(SAMPLE.read_bytes() * 8)  # 234,080 lines
    cmd, env = torchrun("rescore", str(table), str(tmp_path / "out.gz"), "--model", str(model))
    proc = subprocess.Popen(
        cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, preexec_fn=sigint_as_at_a_terminal
    )
    deadline = time.monotonic() + 180
    while not list(tmp_path.glob(".out.gz.parts-*/.part-*.tmp-*")):  # both workers are scoring
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        assert time.monotonic() < deadline, "no part appeared within 180 s"
        time.sleep(0.01)  # polling interval
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=180)
    assert proc.returncode != 0
    # one line from each worker; torchrun then reports the signal itself (with its own traceback)
    ours = [line for line in err.splitlines() if line.startswith("phrase-rescorer:")]
    assert ours == [f"phrase-rescorer: error: {message}; no output was left behind"] * 2, err
    assert sorted(os.listdir(tmp_path)) == ["long.gz"]
