"""SIGINT and SIGTERM while a network is being trained: the real program in a subprocess.

The signal is sent once the training log holds its first step (polled with a deadline). The run
finishes the step it is in, saves MODEL.last.pt, exits 130 / 143 with a message that says how to
resume, and the resumed run ends with exactly the weights of an uninterrupted one.
"""

from __future__ import annotations

import json
import re
import signal
import time
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from phrase_rescorer.cli import cli
from phrase_rescorer.model.checkpoint import load_checkpoint
from tests.faults.test_interrupt import finish, start
from tests.helpers.synthetic import mapping_table
from tests.helpers.train_options import TINY_NETWORK

TRAIN = [
    *TINY_NETWORK,
    "--batch-size",
    "16",
    "--valid-fraction",
    "0.1",
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


def train_in_process(*args: str) -> None:
    r = CliRunner().invoke(cli, ["-q", "train", *args, *TRAIN], catch_exceptions=False)
    assert r.exit_code == 0, r.output


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)], ids=["SIGINT", "SIGTERM"])
def test_signal_during_training_saves_a_resumable_state(tmp_path: Path, sig: int, code: int) -> None:
    """The signal arrives once training has logged its first step; the run stops after the step
    it is in, saves rnn.last.pt, says how to resume, and resuming gives the uninterrupted run."""
    table = mapping_table(tmp_path / "pt.gz", 300)
    out, log = tmp_path / "rnn.pt", tmp_path / "rnn.log"
    proc = start(["-q", "train", str(table), str(out), *TRAIN, "--max-steps", "1000000"])
    deadline = time.monotonic() + 120
    while not (log.exists() and '"event": "train"' in log.read_text()):
        assert proc.poll() is None, proc.stderr.read().decode()
        assert time.monotonic() < deadline, "training did not log a step within 120 s"
        time.sleep(0.005)  # polling interval
    proc.send_signal(sig)
    returncode, err = finish(proc)
    assert returncode == code, err
    found = re.search(
        r"phrase-rescorer: error: interrupted at step (\d+); the state is saved in (\S+): run the "
        r"same command with --resume to continue",
        err,
    )
    assert found and found.group(2) == str(tmp_path / "rnn.last.pt"), err
    step = int(found.group(1))
    state = load_checkpoint(str(tmp_path / "rnn.last.pt")).training_state
    assert state is not None and state["progress"]["step"] == step >= 1
    assert not list(tmp_path.glob(".*tmp-*"))
    assert json.loads(log.read_text().splitlines()[-1]) | {"elapsed": 0} == {
        "event": "end",
        "step": step,
        "epoch": state["progress"]["epoch"],
        "reason": "interrupted",
        "elapsed": 0,
    }

    train_in_process(str(table), str(out), "--max-steps", str(step + 3), "--resume")
    straight = tmp_path / "straight"
    straight.mkdir()
    train_in_process(str(table), str(straight / "rnn.pt"), "--max-steps", str(step + 3))
    resumed, plain = load_checkpoint(str(tmp_path / "rnn.last.pt")), load_checkpoint(str(straight / "rnn.last.pt"))
    assert all(torch.equal(resumed.state_dict[k], plain.state_dict[k]) for k in plain.state_dict)
