"""--threads N: one shared option on every command that computes (also as Moses spells it,
-threads N, and --threads all), its default (1, or OMP_NUM_THREADS), and --threads 1 really
computes on one thread (measured from the outside, per thread, in /proc)."""

from __future__ import annotations

import gzip
import os
import subprocess
import time
from pathlib import Path

import click
import pytest
import torch
from click.testing import CliRunner

from phrase_rescorer.cli import cli
from tests.helpers.paths import PYTHON, REPO, SAMPLE, cli_env
from tests.helpers.rescore_data import read_lines, tiny_checkpoint

COMPUTING = ("rescore", "moses-step", "train", "inspect", "suggest", "compare", "embed")


def test_every_computing_command_has_the_same_threads_option() -> None:
    options = []
    for name in COMPUTING:
        command = cli.commands[name]
        option = next(p for p in command.params if isinstance(p, click.Option) and "--threads" in p.opts)
        options.append((tuple(option.opts), option.help, type(option.type), option.default))
    assert len(set(options)) == 1, options
    assert options[0][0] == ("--threads", "-threads") and "as in Moses" in options[0][1]


@pytest.mark.parametrize(
    ("args", "expected"),
    [(["--threads", "2"], 2), (["-threads", "2"], 2), (["-threads=3"], 3), (["--threads", "all"], None), ([], 1)],
)
def test_threads_spellings_and_default(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, args: list[str], expected: int | None
) -> None:
    for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        monkeypatch.delenv(name, raising=False)
    table = tmp_path / "t.txt"
    table.write_bytes(b"a ||| le ||| 0.5\n")
    torch.set_num_threads(5)
    try:
        r = CliRunner().invoke(cli, ["-q", "inspect", *args, str(table)])
        assert r.exit_code == 0, r.output
        assert torch.get_num_threads() == (expected or len(os.sched_getaffinity(0)))
    finally:
        torch.set_num_threads(1)


def test_default_threads_is_omp_num_threads_when_set(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    table = tmp_path / "t.txt"
    table.write_bytes(b"a ||| le ||| 0.5\n")
    try:
        assert CliRunner().invoke(cli, ["-q", "inspect", str(table)]).exit_code == 0
        assert torch.get_num_threads() == 3
    finally:
        torch.set_num_threads(1)


@pytest.mark.parametrize("value", ["0", "-1", "two", ""])
def test_threads_refuses_what_is_not_a_count(tmp_path: Path, value: str) -> None:
    r = CliRunner().invoke(cli, ["inspect", "-threads", value, str(tmp_path / "t.txt")])
    assert r.exit_code == 2 and "is not a thread count: give a number (1 or more) or 'all'" in r.output


def test_experiment_takes_the_same_spellings() -> None:
    option = next(p for p in cli.commands["experiment"].params if "--threads" in p.opts)
    assert option.opts == ["--threads", "-threads"] and option.type.convert("all", None, None) >= 1


def test_threads_sets_torchs_thread_count(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        monkeypatch.setenv(name, "")  # restored after the test
    table = tmp_path / "t.txt"
    table.write_bytes(b"a ||| le ||| 0.5\n")
    torch.set_num_threads(2)
    try:
        r = CliRunner().invoke(cli, ["-q", "inspect", "--threads", "1", str(table)])
        assert r.exit_code == 0, r.output
        assert torch.get_num_threads() == 1 and os.environ["OMP_NUM_THREADS"] == "1"
    finally:
        torch.set_num_threads(1)


def _thread_cpu(pid: int) -> dict[int, int]:
    """CPU ticks (user + system) of every thread of a process, by thread id."""
    ticks = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:  # the thread ended
            continue
        ticks[int(tid)] = int(fields[11]) + int(fields[12])  # utime, stime (fields 14, 15)
    return ticks


def _busiest_share(args: list[str]) -> tuple[float, int]:
    """Run a program and sample its threads' CPU time until it ends: the busiest thread's share
    of the process's CPU time, and the total in ticks."""
    env = cli_env()
    for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env.pop(name, None)
    seen: dict[int, int] = {}
    process = subprocess.Popen([PYTHON, *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    while process.poll() is None:
        try:
            for tid, ticks in _thread_cpu(process.pid).items():
                seen[tid] = max(seen.get(tid, 0), ticks)
        except OSError:  # the process ended between poll() and the read
            break
        time.sleep(0.05)
    assert process.wait(timeout=300) == 0, process.stderr.read().decode() if process.stderr else ""
    total = sum(seen.values())
    return max(seen.values()) / total, total


@pytest.mark.skipif(
    not os.path.isdir("/proc/self/task") or (os.cpu_count() or 1) < 2, reason="needs Linux /proc and at least 2 CPUs"
)
@pytest.mark.slow
def test_threads_1_scores_on_one_thread(tmp_path: Path) -> None:
    model = tiny_checkpoint(tmp_path / "m.pt", hidden=64)
    table = tmp_path / "t.gz"
    table.write_bytes(gzip.compress(b"".join(read_lines(SAMPLE)[:20000])))
    args = [str(REPO / "bin" / "rescore-phrase-table"), str(table), str(tmp_path / "o.gz"), "-m", str(model)]
    one, total = _busiest_share([*args, "--threads", "1"])
    assert total > 50, "too short to measure"  # ticks of 10 ms
    assert one >= 0.9, f"with --threads 1 the busiest thread did only {one:.0%} of the work"
    two, _ = _busiest_share([*args, "-threads", "2"])  # the measurement can tell: 2 threads share the work
    if two >= 0.85:  # the control failed: on a loaded machine the second thread gets little CPU
        pytest.skip(
            f"inconclusive: with --threads 2 one thread also did {two:.0%} of the work "
            f"(load average {os.getloadavg()[0]:.1f}: other work holds the other cores)"
        )


@pytest.mark.moses
def test_moses_decoder_defaults_to_one_thread() -> None:
    # what the default of --threads follows (threads.py): the decoder's own help text
    from tests.helpers.moses import moses_root

    r = subprocess.run([str(moses_root() / "bin" / "moses"), "--help"], capture_output=True, text=True, timeout=60)
    assert "(defaults to single-threaded)" in " ".join((r.stdout + r.stderr).split())


# --- OpenMP's waiting threads sleep (a busy machine: benchmarks/threads_under_load.py) --------

#: A program started through ``entry`` (its function named first, then its arguments), printing
#: OpenMP's wait variables as they were at the moment torch was first imported.
_WAIT_AT_TORCH_IMPORT = """
import os, sys
seen = []
class Watch:
    def find_spec(self, name, path=None, target=None):
        if name == "torch" and not seen:
            seen.append((os.environ.get("OMP_WAIT_POLICY"), os.environ.get("GOMP_SPINCOUNT")))
        return None
sys.meta_path.insert(0, Watch())
from phrase_rescorer import entry
program = getattr(entry, sys.argv.pop(1))
try:
    program()
except SystemExit:
    pass
print(seen, "torch" in sys.modules, file=sys.stderr)
"""


@pytest.mark.parametrize(
    ("entry_point", "environment", "expected"),
    [
        ("main", {}, "[('PASSIVE', None)] True"),
        ("rescore_main", {}, "[('PASSIVE', None)] True"),
        ("moses_step_main", {}, "[('PASSIVE', None)] True"),
        ("main", {"OMP_WAIT_POLICY": "active"}, "[('active', None)] True"),
        ("main", {"GOMP_SPINCOUNT": "1000"}, "[(None, '1000')] True"),
    ],
)
def test_openmp_threads_wait_passively_from_before_torch_loads(
    entry_point: str, environment: dict[str, str], expected: str
) -> None:
    """Every program sets OMP_WAIT_POLICY=PASSIVE before torch (and its libgomp, which reads it
    once, at load) is imported; a wait the user's environment sets is kept."""
    env = {k: v for k, v in cli_env().items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    done = subprocess.run(
        [PYTHON, "-c", _WAIT_AT_TORCH_IMPORT, entry_point, "--version"],
        capture_output=True,
        text=True,
        env={**env, **environment},
        timeout=120,
    )
    assert done.stderr.strip().splitlines()[-1] == expected, done.stderr
