"""One training at a time per MODEL_OUT: a run holds MODEL_OUT's ``.lock`` from before it reads its
data until it ends, however it ends; a second run to the same MODEL_OUT is refused (exit 6) with
one line naming the first, and writes nothing; a lock left by a dead run blocks nothing; the lock
file is gone once the run has ended."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from phrase_rescorer.run_lock import held_lock
from tests.faults.test_interrupt import DEADLINE, start
from tests.helpers.cli_run import run_cli
from tests.helpers.nmt import SIZES, TINY_MOSES
from tests.helpers.paths import SAMPLE
from tests.helpers.train_options import TASKS, LoopTask

CORPUS = [str(TINY_MOSES / "dev.en"), str(TINY_MOSES / "dev.fr")]
SHORT = ["--max-steps", "2", "--valid-every", "1", "--keep-checkpoints", "2", "--threads", "1", "--device", "cpu"]


def refusal(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


def dead_pid() -> int:
    """The PID of a process that has ended (and been reaped)."""
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


def test_a_second_run_to_a_running_run_s_model_out_is_refused_and_writes_nothing(
    tmp_path: Path, processes: list[subprocess.Popen], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """Two train-nmt runs (other seeds) to c.pt: the second is refused while the first lives,
    and every file left is the first's."""
    out, lock = tmp_path / "c.pt", tmp_path / "c.lock"
    first = start(
        ["-q", "train-nmt", *CORPUS, str(out), *SIZES, "--threads", "1", "--device", "cpu", "--seed", "1"]
        + ["--max-steps", "100000000", "--valid-every", "100000000", "--log-every", "100000000"]
    )
    processes.append(first)  # ended by the fixture if this test fails
    assert first.stderr is not None
    deadline = time.monotonic() + DEADLINE
    while not (lock.exists() and f'"pid": {first.pid},' in lock.read_text()):
        assert first.poll() is None, first.stderr.read().decode()
        assert time.monotonic() < deadline, f"the first run took no lock within {DEADLINE:.0f} s"
        time.sleep(0.01)  # polling interval
    before = sorted(p.name for p in tmp_path.iterdir())

    code, err = run_cli(["-q", "train-nmt", *CORPUS, str(out), *SIZES, *SHORT, "--seed", "2"], monkeypatch, capsys)
    assert code == 6
    assert re.fullmatch(
        rf"phrase-rescorer: error: {re.escape(str(out))}: another training is writing this model's files "
        rf"\(PID {first.pid} on [^:]+: phrase-rescorer -q train-nmt .*; lock {re.escape(str(lock))}\); wait for it "
        "to end, or give another MODEL_OUT",
        refusal(err),
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # nothing of the second run
    assert not list(tmp_path.glob("c.step*.pt"))

    first.send_signal(signal.SIGTERM)  # the first run saves its state and ends
    _, first_err = first.communicate(timeout=DEADLINE)
    assert first.returncode == 143, first_err.decode()
    assert not lock.exists()
    # the state is the first run's (its seed), and a run to c.pt may start again
    code, err = run_cli(["-q", "train-nmt", *CORPUS, str(out), *SIZES, *SHORT, "--seed", "1"], monkeypatch, capsys)
    assert code == 0, err
    assert not lock.exists()


@pytest.mark.parametrize("task", TASKS, ids=[t.name for t in TASKS])
def test_every_training_command_is_refused_while_the_lock_is_held(
    task: LoopTask, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """The lock held by another living holder (this test): refused before the data is read."""
    out, lock = tmp_path / "m.pt", tmp_path / "m.lock"
    record = {"pid": os.getpid(), "host": "elsewhere", "command": "phrase-rescorer train ..."}
    inputs = task.inputs(tmp_path)
    with held_lock(str(lock), json.dumps(record), remove=True):
        code, err = run_cli(
            ["-q", task.command, *inputs, str(out), *task.options, *SHORT[:2], "--device", "cpu"], monkeypatch, capsys
        )
        assert code == 6
        assert refusal(err) == (
            f"phrase-rescorer: error: {out}: another training is writing this model's files (PID {os.getpid()} "
            f"on elsewhere: phrase-rescorer train ...; lock {lock}); wait for it to end, or give another MODEL_OUT"
        )
        assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("m.")) == ["m.lock"]
        assert json.loads(lock.read_text()) == record  # the holder's lock untouched
    code, err = run_cli(
        ["-q", task.command, *inputs, str(out), *task.options, *SHORT[:2], "--device", "cpu"], monkeypatch, capsys
    )
    assert code == 0, err
    assert out.exists() and not lock.exists()


def test_a_dead_run_s_lock_blocks_nothing_and_is_gone_after_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    out, lock = tmp_path / "c.pt", tmp_path / "c.lock"
    lock.write_text(json.dumps({"pid": dead_pid(), "host": "here", "command": "killed with SIGKILL"}) + "\n")
    code, err = run_cli(["-q", "train-nmt", *CORPUS, str(out), *SIZES, *SHORT], monkeypatch, capsys)
    assert code == 0, err
    assert out.exists() and not lock.exists()


def test_a_run_that_fails_after_taking_the_lock_gives_it_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """An empty corpus is found once the lock is held (reading the data): refused, and the lock
    (a dead run's, taken over) gone."""
    empty = tmp_path / "empty.en"
    empty.write_text("")
    out = tmp_path / "c.pt"
    (tmp_path / "c.lock").write_text(json.dumps({"pid": dead_pid()}))
    code, err = run_cli(["-q", "train-nmt", str(empty), str(empty), str(out), *SIZES, *SHORT], monkeypatch, capsys)
    assert code != 0 and err.strip()
    assert not (tmp_path / "c.lock").exists() and not out.exists()


def test_a_file_at_the_lock_s_name_is_not_taken_for_a_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """Not a run's lock: refused, left as it was; an input or --log of that name: refused."""
    out, lock = tmp_path / "c.pt", tmp_path / "c.lock"
    lock.write_text("the user's notes\n")
    code, err = run_cli(["-q", "train-nmt", *CORPUS, str(out), *SIZES, *SHORT], monkeypatch, capsys)
    assert code == 6
    assert refusal(err) == (
        f"phrase-rescorer: error: {lock}: not the lock of a training run (it would be overwritten); move it away, "
        "or give another MODEL_OUT"
    )
    assert lock.read_text() == "the user's notes\n" and not out.exists()

    source = tmp_path / "corpus.lock"  # an input named as the run's lock
    source.write_bytes((TINY_MOSES / "dev.en").read_bytes())
    code, err = run_cli(
        ["-q", "train-nmt", str(source), CORPUS[1], str(tmp_path / "corpus.pt"), *SIZES, *SHORT], monkeypatch, capsys
    )
    assert code == 6 and "output is the same file as the input" in refusal(err)
    assert source.read_bytes() == (TINY_MOSES / "dev.en").read_bytes()
    code, err = run_cli(
        ["-q", "train-nmt", *CORPUS, str(tmp_path / "d.pt"), *SIZES, *SHORT, "--log", str(tmp_path / "d.lock")],
        monkeypatch,
        capsys,
    )
    assert code == 6 and "output is the same file as the lock of the run" in refusal(err)


def test_the_files_of_a_running_run_are_no_other_command_s_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """m.pt's run holds m.lock (this test): its log, saved state, kept networks, model and lock are
    refused as another training's MODEL_OUT or --log and as the output of any other command
    (average, translate, rescore-phrase-table, merge-nbest: exit 6, naming the run), and keep their
    bytes; once the run has ended they are free."""
    lock = tmp_path / "m.lock"
    record = {"pid": os.getpid(), "host": "elsewhere", "command": "phrase-rescorer train t.gz m.pt"}
    owned = {name: tmp_path / name for name in ("m.pt", "m.last.pt", "m.log", "m.step4.pt")}
    for name, path in owned.items():
        path.write_bytes(f"the running run's {name}\n".encode())
    golden = str(Path(__file__).parents[1] / "data" / "golden" / "tiny-rnnsearch.pt")
    attempts = [
        (owned["m.log"], ["train-nmt", *CORPUS, str(tmp_path / "b.pt"), *SIZES, *SHORT, "--log", str(owned["m.log"])]),
        (owned["m.last.pt"], ["train-nmt", *CORPUS, str(owned["m.last.pt"]), *SIZES, *SHORT]),
        (owned["m.log"], ["train-nmt", *CORPUS, str(owned["m.log"]), *SIZES, *SHORT]),
        *((path, ["average", str(path), golden, golden]) for path in (*owned.values(), lock)),
        # any command's output: a translation, a rescored table, a merged n-best list
        (owned["m.pt"], ["translate", str(TINY_MOSES / "dev.en"), str(owned["m.pt"]), "-m", golden]),
        (owned["m.last.pt"], ["rescore", str(SAMPLE), str(owned["m.last.pt"]), "-m", golden]),
        (owned["m.log"], ["merge-nbest", str(owned["m.step4.pt"]), str(owned["m.log"]), "--add", str(lock)]),
    ]
    with held_lock(str(lock), json.dumps(record), remove=True):
        for target, argv in attempts:
            code, err = run_cli(["-q", *argv], monkeypatch, capsys)
            assert code == 6, (argv, err)
            assert refusal(err) == (
                f"phrase-rescorer: error: {target}: a file of a running training (PID {os.getpid()} on elsewhere: "
                f"phrase-rescorer train t.gz m.pt; lock {lock}): wait for it to end, or write elsewhere"
            )
            assert json.loads(lock.read_text()) == record
            for name, path in owned.items():
                assert path.read_bytes() == f"the running run's {name}\n".encode()
        assert sorted(p.name for p in tmp_path.iterdir()) == sorted([*owned, "m.lock"])  # nothing else written
    code, err = run_cli(["-q", "average", str(owned["m.step4.pt"]), golden, golden], monkeypatch, capsys)
    assert code == 0, err
