"""SIGINT and SIGTERM while a table is being rescored: the real program in a subprocess.

The signal is sent once the output's temporary file (``.OUT.tmp-PID-XXXXXXXX``) holds the first part of
the rescored table (its first 1 MiB write buffer), found by polling with a deadline. The input
is the bundled sample repeated eight times (234,080 lines, several seconds of work even on a
fast machine), so the run is still scoring when the signal arrives; the stdin variant keeps the
run waiting for input, so it is certainly still going.
Expected: exit 130 (SIGINT) or 143 (SIGTERM), a one-line message saying so, nothing at the
output path and no temporary file left. (Training: test_interrupt_training.py.)
"""

from __future__ import annotations

import glob
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.helpers.paths import PYTHON, SAMPLE, cli_env, sigint_as_at_a_terminal
from tests.helpers.rescore_data import read_lines

SIGNALS = [
    (signal.SIGINT, 130, "phrase-rescorer: error: interrupted; no output was left behind"),
    (signal.SIGTERM, 143, "phrase-rescorer: error: terminated (SIGTERM); no output was left behind"),
]


@pytest.fixture(scope="module")
def long_table(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("table") / "long.gz"
    path.write_bytes(SAMPLE.read_bytes() * 8)  # eight gzip members: one valid gzip file
    return path


#: A deadline for what takes seconds on a quiet machine: generous enough for one at a tenth of its
#: speed (a loaded machine, beside other jobs). The ``processes`` fixture ends a failed test's programs.
DEADLINE = 1200.0


def start(args: list[str], stdin: int | None = None) -> subprocess.Popen:
    env = cli_env()
    env["OMP_NUM_THREADS"] = "1"
    return subprocess.Popen(
        [PYTHON, "-m", "phrase_rescorer", *args],
        stdin=stdin,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=env,
        preexec_fn=sigint_as_at_a_terminal,
    )


def temporary(directory: Path, out_name: str, pid: int) -> str:
    """The glob pattern of the temporary that process ``pid`` writes for ``directory/out_name``."""
    return str(directory / f".{out_name}.tmp-{pid}-*")


def wait_for(pattern: str, proc: subprocess.Popen, timeout: float = DEADLINE, nonempty: bool = False) -> Path:
    """Poll until a file matching ``pattern`` exists (and holds data, with ``nonempty``); fail
    if the process ends first or the deadline passes."""
    deadline = time.monotonic() + timeout
    while True:
        found = [Path(p) for p in glob.glob(pattern)]
        if found and (not nonempty or found[0].stat().st_size > 0):
            return found[0]
        assert proc.poll() is None, f"the run ended before {pattern} appeared: {proc.stderr.read().decode()}"
        assert time.monotonic() < deadline, f"{pattern} did not appear within {timeout} s"
        time.sleep(0.005)  # polling interval


def finish(proc: subprocess.Popen) -> tuple[int, str]:
    _, err = proc.communicate(timeout=DEADLINE)
    return proc.returncode, err.decode()


@pytest.mark.parametrize("out_name", ["out.txt", "out.gz"])
@pytest.mark.parametrize(("sig", "code", "message"), SIGNALS, ids=["SIGINT", "SIGTERM"])
def test_signal_while_scoring_leaves_nothing(
    processes: list[subprocess.Popen],
    model: Path,
    long_table: Path,
    tmp_path: Path,
    out_name: str,
    sig: int,
    code: int,
    message: str,
) -> None:
    out = tmp_path / out_name
    proc = start(["-q", "rescore", str(long_table), str(out), "--model", str(model)])
    processes.append(proc)
    wait_for(temporary(tmp_path, out_name, proc.pid), proc, nonempty=True)  # the first megabyte of output is on disk
    proc.send_signal(sig)
    returncode, err = finish(proc)
    assert returncode == code, err
    assert err.strip().splitlines()[-1] == message
    assert "Traceback" not in err
    assert list(tmp_path.iterdir()) == []  # neither the output nor its temporary


def test_sigint_while_waiting_for_stdin(processes: list[subprocess.Popen], model: Path, tmp_path: Path) -> None:
    sig, code, message = SIGNALS[0]
    out = tmp_path / "out.gz"
    proc = start(["-q", "rescore", "-", str(out), "--model", str(model), "--window", "100"], stdin=subprocess.PIPE)
    processes.append(proc)
    assert proc.stdin is not None
    proc.stdin.write(b"".join(read_lines(SAMPLE)[:1000]))  # ten windows, then the run waits for more
    proc.stdin.flush()
    wait_for(temporary(tmp_path, "out.gz", proc.pid), proc)
    proc.send_signal(sig)
    returncode, err = finish(proc)
    assert returncode == code, err
    assert err.strip().splitlines()[-1] == message
    assert list(tmp_path.iterdir()) == []
