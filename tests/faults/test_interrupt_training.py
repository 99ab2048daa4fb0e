"""SIGINT and SIGTERM while a network is being trained (a phrase network, the CSLM): the real
program in a subprocess, ended by the ``processes`` fixture whatever the outcome.

The signal is sent once the training log holds its first step (polled with a deadline). The run
finishes the step it is in, saves MODEL.last.pt, exits 130 / 143 with a message that says how to
resume, and the resumed run ends with exactly the weights of an uninterrupted one.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import torch
from click.testing import CliRunner

from phrase_rescorer.cli import cli
from tests.faults.test_interrupt import DEADLINE, start
from tests.helpers.train_options import TASKS, LoopTask

TRAIN = [
    "--batch-size",
    "16",
    "--valid-every",
    "7",
    "--patience",
    "0",
    "--log-every",
    "1",
    "--device",
    "cpu",
    "--threads",
    "1",
    "--seed",
    "3",
]


def train_in_process(task: LoopTask, *args: str) -> None:
    r = CliRunner().invoke(cli, ["-q", task.command, *args, *task.options, *TRAIN], catch_exceptions=False)
    assert r.exit_code == 0, r.output


def last_state(path: Path) -> dict[str, Any]:
    return torch.load(path, weights_only=True)


@pytest.mark.parametrize("task", TASKS, ids=[t.name for t in TASKS])
@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)], ids=["SIGINT", "SIGTERM"])
def test_signal_during_training_saves_a_resumable_state(
    tmp_path: Path, processes: list[subprocess.Popen], task: LoopTask, sig: int, code: int
) -> None:
    """The signal arrives once training has logged its first step; the run stops after the step
    it is in, saves rnn.last.pt, says how to resume, and resuming gives the uninterrupted run."""
    inputs = task.inputs(tmp_path)
    out, log = tmp_path / "rnn.pt", tmp_path / "rnn.log"
    proc = start(["-q", task.command, *inputs, str(out), *task.options, *TRAIN, "--max-steps", "1000000"])
    processes.append(proc)  # ended by the fixture if this test fails
    deadline = time.monotonic() + DEADLINE
    while not (log.exists() and '"event": "train"' in log.read_text()):
        assert proc.poll() is None, proc.stderr.read().decode()
        assert time.monotonic() < deadline, f"training did not log a step within {DEADLINE:.0f} s"
        time.sleep(0.005)  # polling interval
    lock = tmp_path / "rnn.lock"  # the run's while it lives, gone once it has stopped
    assert json.loads(lock.read_text())["pid"] == proc.pid
    proc.send_signal(sig)
    _, err_bytes = proc.communicate(timeout=DEADLINE)
    err = err_bytes.decode()
    assert proc.returncode == code, err
    assert not lock.exists()
    found = re.search(
        r"phrase-rescorer: error: interrupted at step (\d+); the state is saved in (\S+): run the "
        r"same command with --resume to continue",
        err,
    )
    assert found and found.group(2) == str(tmp_path / "rnn.last.pt"), err
    step = int(found.group(1))
    state = last_state(tmp_path / "rnn.last.pt")["training_state"]
    assert state is not None and state["progress"]["step"] == step >= 1
    assert not list(tmp_path.glob(".*tmp-*"))
    assert json.loads(log.read_text().splitlines()[-1]) | {"elapsed": 0} == {
        "event": "end",
        "step": step,
        "epoch": state["progress"]["epoch"],
        "reason": "interrupted",
        "elapsed": 0,
    }

    train_in_process(task, *inputs, str(out), "--max-steps", str(step + 3), "--resume")
    straight = tmp_path / "straight"
    straight.mkdir()
    train_in_process(task, *inputs, str(straight / "rnn.pt"), "--max-steps", str(step + 3))
    resumed, plain = last_state(tmp_path / "rnn.last.pt"), last_state(straight / "rnn.last.pt")
    assert all(torch.equal(resumed["state_dict"][k], plain["state_dict"][k]) for k in plain["state_dict"])
