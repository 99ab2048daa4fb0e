"""Where the output goes, with real processes, signals, pipes, FIFOs and devices: every byte
arrives or the run fails; special targets are written, never replaced; temporaries are
exclusive, keep the replaced file's mode and never outlive a run unnoticed.

Each test runs ``python -m phrase_rescorer`` as a user would and compares what arrived with
the output of a plain run into a file.
"""

from __future__ import annotations

import glob
import os
import select
import shutil
import signal
import stat
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.helpers.paths import PYTHON, SAMPLE, cli_env
from tests.helpers.rescore_data import read_lines


def env(**extra: str) -> dict[str, str]:
    e = cli_env()
    e["OMP_NUM_THREADS"] = "1"
    e.update(extra)
    return e


def command(*args: str) -> list[str]:
    return [PYTHON, "-m", "phrase_rescorer", "-q", "rescore", *args]


@pytest.fixture(scope="module")
def model(small_model: Path) -> Path:
    return small_model  # tests/conftest.py


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("table") / "in.txt"
    path.write_bytes(b"".join(read_lines(SAMPLE)[:5001]))  # 720 KB rescored: far more than a pipe holds
    return path


@pytest.fixture(scope="module")
def expected(model: Path, table: Path, tmp_path_factory: pytest.TempPathFactory) -> bytes:
    out = tmp_path_factory.mktemp("expected") / "out.txt"
    subprocess.run(command(str(table), str(out), "--model", str(model)), check=True, env=env(), timeout=300)
    return out.read_bytes()


def read_all(fd: int, proc: subprocess.Popen, between_reads: Callable[[], None] | None = None) -> bytes:
    """Everything that arrives on ``fd`` until ``proc`` has ended and nothing is left;
    ``between_reads`` is called after every read while ``proc`` runs."""
    os.set_blocking(fd, False)
    chunks = []
    while True:
        ended = proc.poll() is not None
        select.select([fd], [], [], 0.05)
        try:
            chunk = os.read(fd, 4096)
        except BlockingIOError:
            chunk = None
        if not chunk:  # nothing now, the end of the pipe, or a FIFO whose writer is not there yet
            if ended:
                return b"".join(chunks)
            select.select([], [], [], 0.01)
            continue
        chunks.append(chunk)
        if between_reads is not None and proc.poll() is None:
            between_reads()


# --- 1. a short write is continued, never ignored ---------------------------------------------


def test_stop_and_continue_on_an_unbuffered_stdout_loses_nothing(model: Path, table: Path, expected: bytes) -> None:
    """PYTHONUNBUFFERED=1 makes stdout a raw file whose write may take part of its bytes; a
    SIGSTOP/SIGCONT while the run is blocked on the pipe makes it do so."""
    proc = subprocess.Popen(
        command(str(table), "-", "--model", str(model)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env(PYTHONUNBUFFERED="1"),
    )
    assert proc.stdout is not None

    def stop_and_continue() -> None:
        proc.send_signal(signal.SIGSTOP)
        proc.send_signal(signal.SIGCONT)

    arrived = read_all(proc.stdout.fileno(), proc, stop_and_continue)
    assert proc.wait(timeout=300) == 0, proc.stderr.read().decode() if proc.stderr else ""
    assert arrived == expected


def test_non_blocking_stdout_is_waited_on(model: Path, table: Path, expected: bytes) -> None:
    """A pipe in O_NONBLOCK mode (left so by another program of a pipeline): EAGAIN is waited
    out, not an error (it was exit 120)."""
    proc = subprocess.Popen(
        command(str(table), "-", "--model", str(model)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env(PYTHONUNBUFFERED="1"),
        preexec_fn=lambda: os.set_blocking(1, False),
    )
    assert proc.stdout is not None
    arrived = read_all(proc.stdout.fileno(), proc)
    assert proc.wait(timeout=300) == 0, proc.stderr.read().decode() if proc.stderr else ""
    assert arrived == expected


@pytest.mark.parametrize("unbuffered", ["", "1"])
def test_reader_of_stdout_going_away_is_always_141(model: Path, table: Path, expected: bytes, unbuffered: str) -> None:
    """``| head -1``: exit 141 (as a shell's SIGPIPE would give), quietly, whatever the buffering."""
    proc = subprocess.Popen(
        command(str(table), "-", "--model", str(model)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env(PYTHONUNBUFFERED=unbuffered),
    )
    assert proc.stdout is not None and proc.stderr is not None
    head = subprocess.run(["head", "-1"], stdin=proc.stdout, capture_output=True, timeout=300)
    proc.stdout.close()
    assert proc.wait(timeout=300) == 141
    assert proc.stderr.read() == b"" and head.stdout == expected[: expected.index(b"\n") + 1]


# --- 2. special targets are written straight through -------------------------------------------


def test_fifo_is_written_not_replaced(model: Path, table: Path, expected: bytes, tmp_path: Path) -> None:
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # a reader is there before the writer
    proc = subprocess.Popen(command(str(table), str(fifo), "--model", str(model)), stderr=subprocess.PIPE, env=env())
    try:
        arrived = read_all(reader, proc)
    finally:
        os.close(reader)
    assert proc.wait(timeout=300) == 0, proc.stderr.read().decode() if proc.stderr else ""
    assert arrived == expected
    assert stat.S_ISFIFO(fifo.stat().st_mode) and os.listdir(tmp_path) == ["out.fifo"]


def test_character_device_is_written_not_replaced(model: Path, table: Path, tmp_path: Path) -> None:
    null = tmp_path / "null"
    try:
        os.mknod(null, stat.S_IFCHR | 0o666, os.makedev(1, 3))  # a /dev/null of our own
    except PermissionError:
        pytest.skip("mknod needs root")
    r = subprocess.run(
        command(str(table), str(null), "--model", str(model)), capture_output=True, env=env(), timeout=300
    )
    assert r.returncode == 0, r.stderr.decode()
    assert stat.S_ISCHR(null.stat().st_mode) and os.listdir(tmp_path) == ["null"]


@pytest.mark.parametrize("out", ["/dev/stdout", "/proc/self/fd/1"])
def test_link_to_stdout_is_stdout(model: Path, table: Path, expected: bytes, out: str) -> None:
    r = subprocess.run(command(str(table), out, "--model", str(model)), capture_output=True, env=env(), timeout=300)
    assert r.returncode == 0, r.stderr.decode()
    assert r.stdout == expected


def test_private_link_to_stdout_is_stdout(model: Path, table: Path, expected: bytes, tmp_path: Path) -> None:
    """``out -> /proc/self/fd/1`` with stdout a regular file: written through the descriptor,
    the link kept."""
    (tmp_path / "out").symlink_to("/proc/self/fd/1")
    with open(tmp_path / "captured", "wb") as stdout:
        r = subprocess.run(
            command(str(table), str(tmp_path / "out"), "--model", str(model)),
            stdout=stdout,
            stderr=subprocess.PIPE,
            env=env(),
            timeout=300,
        )
    assert r.returncode == 0, r.stderr.decode()
    assert (tmp_path / "captured").read_bytes() == expected
    assert os.readlink(tmp_path / "out") == "/proc/self/fd/1"


# --- 3. exclusive temporaries --------------------------------------------------------------------


def test_two_runs_with_one_pid_in_two_pid_namespaces(model: Path, tmp_path: Path) -> None:
    """Two runs that both have PID 1 (each in a PID namespace of its own, as in two
    containers) write one OUT at the same time: OUT is one run's table, whole."""
    unshare = shutil.which("unshare")
    if unshare is None or subprocess.run([unshare, "--pid", "--fork", "true"], capture_output=True).returncode:
        pytest.skip("cannot create PID namespaces here (unshare --pid needs root)")
    lines = read_lines(SAMPLE)
    inputs = [b"".join(lines[:1000]), b"".join(lines[1000:2000])]
    out = tmp_path / "out.txt"
    procs = [
        subprocess.Popen(
            [unshare, "--pid", "--fork", *command("-", str(out), "--model", str(model))],
            stdin=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env(),
        )
        for _ in inputs
    ]
    for proc, data in zip(procs, inputs, strict=True):
        assert proc.stdin is not None
        proc.stdin.write(data)
        proc.stdin.flush()
    deadline = 120.0
    while len(glob.glob(str(tmp_path / ".out.txt.tmp-*"))) < 2:  # both are writing, neither can finish
        assert all(p.poll() is None for p in procs) and deadline > 0, "the runs did not both start writing"
        select.select([], [], [], 0.01)
        deadline -= 0.01
    results = []
    for proc in procs:
        _, err = proc.communicate(timeout=300)  # closes its stdin: that run finishes
        results.append((proc.returncode, err.decode()))
    assert [code for code, _ in results] == [0, 0], results
    last = tmp_path / "last.txt"
    r = subprocess.run(command("-", str(last), "--model", str(model)), input=inputs[1], env=env(), timeout=300)
    assert r.returncode == 0 and out.read_bytes() == last.read_bytes()  # the second run's table, whole
    assert sorted(os.listdir(tmp_path)) == ["last.txt", "out.txt"]


def test_long_legal_output_name(model: Path, table: Path, expected: bytes, tmp_path: Path) -> None:
    out = tmp_path / ("t" * 246 + ".txt")  # 250 bytes: a legal name
    r = subprocess.run(
        command(str(table), str(out), "--model", str(model)), capture_output=True, env=env(), timeout=300
    )
    assert r.returncode == 0, r.stderr.decode()
    assert out.read_bytes() == expected and os.listdir(tmp_path) == [out.name]


# --- 4. permission bits --------------------------------------------------------------------------


def test_replaced_output_keeps_its_mode(model: Path, table: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.txt"
    out.write_bytes(b"previous")
    out.chmod(0o640)
    r = subprocess.run(
        command(str(table), str(out), "--model", str(model)), capture_output=True, env=env(), timeout=300
    )
    assert r.returncode == 0, r.stderr.decode()
    assert stat.S_IMODE(out.stat().st_mode) == 0o640


# --- 5. SIGHUP and SIGKILL ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("small") / "small.txt"
    path.write_bytes(b"".join(read_lines(SAMPLE)[:300]))
    return path


def start_waiting_run(model: Path, directory: Path) -> tuple[subprocess.Popen, Path]:
    """A run that reads stdin into ``directory/out.gz`` and waits for more input (so it is
    certainly running), once its temporary exists."""
    proc = subprocess.Popen(
        command("-", str(directory / "out.gz"), "--model", str(model), "--window", "100"),
        stdin=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env(),
    )
    assert proc.stdin is not None
    proc.stdin.write(b"".join(read_lines(SAMPLE)[:300]))
    proc.stdin.flush()
    deadline = 120.0
    while not (found := glob.glob(str(directory / f".out.gz.tmp-{proc.pid}-*"))):
        assert proc.poll() is None and deadline > 0, "the run ended before creating its output"
        select.select([], [], [], 0.005)
        deadline -= 0.005
    return proc, Path(found[0])


def test_sighup_leaves_nothing(model: Path, tmp_path: Path) -> None:
    """A closed terminal or ssh session: handled as SIGTERM is (it left its temporary for good)."""
    proc, _ = start_waiting_run(model, tmp_path)
    proc.send_signal(signal.SIGHUP)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 129, err.decode()
    assert err.decode().strip().splitlines()[-1] == (
        "phrase-rescorer: error: hung up (SIGHUP); no output was left behind"
    )
    assert os.listdir(tmp_path) == []


def test_temporary_of_a_killed_run_is_removed_by_the_next(model: Path, small: Path, tmp_path: Path) -> None:
    proc, left = start_waiting_run(model, tmp_path)
    proc.kill()
    proc.communicate(timeout=120)
    assert left.exists()  # SIGKILL cannot be caught
    r = subprocess.run(
        command(str(small), str(tmp_path / "out.gz"), "--model", str(model)),
        capture_output=True,
        env=env(),
        timeout=300,
    )
    assert r.returncode == 0, r.stderr.decode()
    assert r.stderr.decode().splitlines() == [
        f"warning: removed {left}: the temporary of an earlier run that was killed before it could clean up"
    ]
    assert os.listdir(tmp_path) == ["out.gz"]


def test_temporary_of_a_living_run_is_kept(model: Path, small: Path, tmp_path: Path) -> None:
    proc, temporary = start_waiting_run(model, tmp_path)
    try:
        r = subprocess.run(
            command(str(small), str(tmp_path / "out.gz"), "--model", str(model)),
            capture_output=True,
            env=env(),
            timeout=300,
        )
        assert r.returncode == 0 and r.stderr == b"", r.stderr.decode()
        assert temporary.exists()
    finally:
        proc.kill()
        proc.communicate(timeout=120)
