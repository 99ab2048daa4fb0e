"""Progress as the programs print it: plain timed lines into a log file, a bar on a terminal
(a pseudo-terminal here), never a bar above the error of a refused model, nothing under -q."""

from __future__ import annotations

import fcntl
import gzip
import os
import struct
import subprocess
import termios
import threading
from pathlib import Path

import pytest

from tests.helpers.paths import PYTHON, REPO, SAMPLE, cli_env
from tests.helpers.progress_lines import STAMP
from tests.helpers.rescore_data import read_lines

LINES = b"".join(read_lines(SAMPLE)[:20000])


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("t") / "head.gz"
    path.write_bytes(gzip.compress(LINES))
    return path


def env(interval: str = "0.000001") -> dict[str, str]:
    return {**cli_env(), "OMP_NUM_THREADS": "1", "PHRASE_RESCORER_PROGRESS_SECONDS": interval}


def run_with_stderr_file(args: list[str], log: Path, interval: str = "0.000001") -> int:
    with open(log, "wb") as err:
        return subprocess.run(
            [PYTHON, *args], stdout=subprocess.DEVNULL, stderr=err, env=env(interval), timeout=300
        ).returncode


def run_on_a_terminal(args: list[str]) -> tuple[int, str]:
    """stderr on a pseudo-terminal; what the terminal received."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))  # a new pty has 0 columns
    received = bytearray()

    def drain() -> None:
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the other side closed
                return
            if not chunk:
                return
            received.extend(chunk)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        code = subprocess.run(
            [PYTHON, *args], stdout=subprocess.DEVNULL, stderr=slave, env=env("30"), timeout=300
        ).returncode
    finally:
        os.close(slave)
        reader.join(timeout=30)
        os.close(master)
    return code, received.decode(errors="replace")


@pytest.mark.slow
def test_rescore_into_a_log_file_writes_plain_lines(model: Path, table: Path, tmp_path: Path) -> None:
    log = tmp_path / "rescore.log"
    args = [
        str(REPO / "bin" / "rescore-phrase-table"),
        str(table),
        str(tmp_path / "o.gz"),
        "--model",
        str(model),
        "--window",
        "2000",
    ]
    assert run_with_stderr_file(args, log) == 0, log.read_text()
    text = log.read_text()
    lines = text.splitlines()
    assert "\r" not in text and "\x1b" not in text
    progress, closing = lines[:-1], lines[-1]
    assert 10 <= len(progress) <= 12  # one line per window (interval ~0 here), then "done"
    assert all(STAMP.match(line) for line in progress), progress  # [YYYY-MM-DD HH:MM:SS], as Marian's
    progress = [STAMP.sub("", line) for line in progress]
    assert all(line.startswith("rescore: ") for line in progress), progress
    assert progress[-1].startswith("rescore: ") and " done in " in progress[-1] and "20,000 lines" in progress[-1]
    assert closing.startswith("rescored 20,000 lines in ") and "(model loading included, " in closing
    # With the default interval (30 s) a short run logs only its end.
    assert run_with_stderr_file(args, log, interval="30") == 0
    done, closing = log.read_text().splitlines()
    done = STAMP.sub("", done)
    assert done.startswith("rescore: ") and " done in " in done and closing.startswith("rescored 20,000 lines")


def test_quiet_prints_nothing_into_the_log(model: Path, table: Path, tmp_path: Path) -> None:
    log = tmp_path / "q.log"
    args = ["-m", "phrase_rescorer", "-q", "rescore", str(table), str(tmp_path / "o.gz"), "--model", str(model)]
    assert run_with_stderr_file(args, log) == 0
    assert log.read_bytes() == b""


@pytest.mark.slow
def test_train_into_a_log_file_writes_plain_lines(table: Path, tmp_path: Path) -> None:
    log = tmp_path / "train.err"
    args = [
        "-m",
        "phrase_rescorer",
        "train",
        str(table),
        str(tmp_path / "m.pt"),
        "--preset",
        "small",
        "--vocab-size",
        "200",
        "--embed-dim",
        "8",
        "--hidden-dim",
        "8",
        "--maxout-dim",
        "8",
        "--output-rank",
        "4",
        "--max-steps",
        "30",
        "--valid-every",
        "10",
        "--log-every",
        "10",
        "--threads",
        "1",
    ]
    assert run_with_stderr_file(args, log) == 0, log.read_text()
    text = log.read_text()
    assert "\r" not in text
    unstamped = [STAMP.sub("", line) for line in text.splitlines()]
    steps = [line for line in unstamped if line.startswith("train: ")]
    assert 2 <= len(steps) <= 31 and steps[-1].startswith("train: 30 steps done in ")
    assert any(line.startswith("reading: ") for line in unstamped)


@pytest.mark.slow
def test_a_terminal_gets_a_bar_and_a_refused_model_gets_none(model: Path, table: Path, tmp_path: Path) -> None:
    program = str(REPO / "bin" / "rescore-phrase-table")
    code, seen = run_on_a_terminal([program, str(table), str(tmp_path / "o.gz"), "--model", str(model)])
    assert code == 0 and "\r" in seen and "rescore:" in seen, seen
    bad = tmp_path / "bad.pt"
    bad.write_bytes(b"not a model")
    code, seen = run_on_a_terminal([program, str(table), str(tmp_path / "o2.gz"), "--model", str(bad)])
    assert code == 4
    assert seen.strip().startswith("rescore-phrase-table: error: ") and "\r" not in seen.strip(), seen
    assert len(seen.strip().splitlines()) == 1
