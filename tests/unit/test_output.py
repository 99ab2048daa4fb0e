"""output.AtomicOutput, the one writer of files: atomic replacement, exclusive temporaries,
permission bits, special targets written straight through, and every byte written whatever the
system call accepts per call (a property over random write-size limits)."""

from __future__ import annotations

import errno
import gzip
import io
import os
import stat
import subprocess
import sys
import types
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from phrase_rescorer import output
from phrase_rescorer.model.checkpoint import load_checkpoint
from phrase_rescorer.output import (
    AtomicOutput,
    OutputError,
    check_distinct_outputs,
    check_distinct_paths,
    check_output_path,
)
from phrase_rescorer.rescoring.engine import TableRescorer
from phrase_rescorer.rescoring.options import RescoreOptions
from tests.helpers.paths import SAMPLE
from tests.helpers.rescore_data import read_lines

GOOD = b"the house ||| la maison ||| 0.5 0.25 1 0.125 ||| 0-0 1-1 ||| 2 2 1 ||| |||\n"


def read_back(path: Path) -> bytes:
    data = path.read_bytes()
    return gzip.decompress(data) if path.name.endswith(".gz") else data


@pytest.mark.parametrize("name", ["out.txt", "out.gz"])
def test_atomic_output_success(tmp_path: Path, name: str) -> None:
    final = tmp_path / name
    with AtomicOutput(str(final)) as out:
        out.write(GOOD * 3)
        assert not final.exists()
        assert len(os.listdir(tmp_path)) == 1
    assert os.listdir(tmp_path) == [name]
    assert read_back(final) == GOOD * 3


def test_gz_output_is_reproducible_gzip(tmp_path: Path) -> None:
    outputs = []
    for name in ("a.gz", "b.gz"):
        with AtomicOutput(str(tmp_path / name)) as out:
            out.write(GOOD * 1000)
        outputs.append((tmp_path / name).read_bytes())
    assert outputs[0] == outputs[1]
    assert outputs[0][:2] == b"\x1f\x8b"
    assert gzip.decompress(outputs[0]) == GOOD * 1000


@pytest.mark.parametrize("exception", [RuntimeError, KeyboardInterrupt, SystemExit])
@pytest.mark.parametrize("name", ["out.txt", "out.gz"])
def test_atomic_output_failure_leaves_nothing(tmp_path: Path, exception: type[BaseException], name: str) -> None:
    final = tmp_path / name
    with pytest.raises(exception), AtomicOutput(str(final)) as out:
        out.write(GOOD * 1000)
        raise exception()
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("exception", [KeyboardInterrupt, OSError])
def test_a_stop_while_opening_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, exception: type[BaseException]
) -> None:
    """A signal (or an error) after the temporary exists but before ``with`` has entered gets no
    ``__exit__``: the opening itself removes the temporary."""

    def stopped(*args: object, **kwargs: object) -> None:
        assert [p.name for p in tmp_path.iterdir()][0].startswith(".out.gz.tmp-")  # it did exist
        raise exception()

    monkeypatch.setattr(output, "open_writer", stopped)
    descriptors = len(os.listdir("/proc/self/fd"))
    with pytest.raises(exception), AtomicOutput(str(tmp_path / "out.gz")):
        pass
    assert list(tmp_path.iterdir()) == []
    assert len(os.listdir("/proc/self/fd")) == descriptors  # the temporary's descriptor closed too


def test_a_file_system_without_flock_still_gets_its_output(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The lock only tells live temporaries from stale ones: where flock is refused (ENOLCK),
    the output is written all the same."""

    def no_locks(fd: int, operation: int) -> None:
        raise OSError(errno.ENOLCK, os.strerror(errno.ENOLCK))

    monkeypatch.setattr(output.fcntl, "flock", no_locks)
    with AtomicOutput(str(tmp_path / "out.txt")) as f:
        f.write(b"a ||| b ||| 0.5\n")
    assert (tmp_path / "out.txt").read_bytes() == b"a ||| b ||| 0.5\n"
    assert [p.name for p in tmp_path.iterdir()] == ["out.txt"]


def test_atomic_output_failure_keeps_previous_file(tmp_path: Path) -> None:
    final = tmp_path / "out.txt"
    final.write_bytes(b"previous")
    with pytest.raises(KeyboardInterrupt), AtomicOutput(str(final)) as out:
        out.write(GOOD)
        raise KeyboardInterrupt
    assert os.listdir(tmp_path) == ["out.txt"]
    assert final.read_bytes() == b"previous"


def test_atomic_output_abort(tmp_path: Path) -> None:
    output_ = AtomicOutput(str(tmp_path / "out.gz"))
    with output_ as out:
        out.write(GOOD)
        output_.abort()
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("absent/out.gz", "output directory does not exist"),
        ("", "empty output path"),
        ("absent/", "output path ends with '/': it names a directory, not a file"),
        (".", "output path is a directory"),
    ],
)
def test_unusable_output_paths_fail_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, message: str
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(OutputError) as caught:
        AtomicOutput(name)
    assert str(caught.value) == f"{name or repr(name)}: {message}" and caught.value.filename == name
    assert isinstance(caught.value, OSError)
    assert os.listdir(tmp_path) == []


def test_closed_stdout_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stdout", None)
    with pytest.raises(OutputError, match="^-: standard output is closed$"):
        check_output_path("-")


def test_stdout_output(monkeypatch: pytest.MonkeyPatch) -> None:
    stdout = io.BytesIO()
    monkeypatch.setattr("sys.stdout", types.SimpleNamespace(buffer=stdout))
    with AtomicOutput("-") as out:
        out.write(GOOD)
    assert stdout.getvalue() == GOOD


@pytest.mark.parametrize("fd", [1, 2])
def test_the_file_a_standard_stream_is_redirected_to_is_refused(tmp_path: Path, fd: int) -> None:
    """A regular file behind this process's standard output or error is refused as an output;
    another file, ``-`` and the stream's own descriptor link are not (they are the stream)."""
    shared, other = tmp_path / "run.log", tmp_path / "other.log"
    shared.write_bytes(b"")
    other.write_bytes(b"")
    script = (
        "import sys\n"
        "from phrase_rescorer.output import OutputError, check_output_path\n"
        "with open(sys.argv[1] + '.result', 'w') as result:\n"
        "    for path in sys.argv[1:]:\n"
        "        try:\n"
        "            check_output_path(path)\n"
        "            print(path, 'ok', file=result)\n"
        "        except OutputError as e:\n"
        "            print(e, file=result)\n"
    )
    with open(shared, "ab") as f:
        subprocess.run(
            [sys.executable, "-c", script, str(other), str(shared), "-", f"/dev/fd/{fd}"],
            stdout=f if fd == 1 else subprocess.DEVNULL,
            stderr=f if fd == 2 else None,
            check=True,
        )
    name = "standard output" if fd == 1 else "standard error"
    assert (tmp_path / "other.log.result").read_text().splitlines() == [
        f"{other} ok",
        f"{shared}: this command's {name} is redirected to this file; redirect it elsewhere",
        "- ok",
        f"/dev/fd/{fd} ok",
    ]
    assert shared.read_bytes() == b""


def one_file_by_its_names(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, suffix: str) -> tuple[Path, list[str]]:
    """A file ``sub/f.SUFFIX`` under ``tmp_path`` (the working directory now) and its names:
    its path, relative spellings, a symbolic link and a hard link."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sub").mkdir()
    path = tmp_path / "sub" / f"f{suffix}"
    path.write_bytes(b"")
    (tmp_path / f"link{suffix}").symlink_to(path)
    os.link(path, tmp_path / f"hard{suffix}")
    return path, [str(path), f"sub/f{suffix}", f"./sub/../sub/f{suffix}", f"link{suffix}", f"hard{suffix}"]


def test_check_distinct_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    table, names = one_file_by_its_names(tmp_path, monkeypatch, ".gz")
    for spelling in names:
        with pytest.raises(OutputError, match="same file"):
            check_distinct_paths(str(table), spelling)
    with pytest.raises(OutputError, match="same file"):
        check_distinct_paths("new.gz", "./sub/../new.gz")
    check_distinct_paths(str(table), "sub/other.gz")
    check_distinct_paths("-", "-")
    check_distinct_paths(str(table), "-")


def test_check_distinct_outputs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two outputs of one command to one place are refused: one file by any spelling, one
    descriptor (``-`` and ``/dev/stdout``), one pipe through two descriptors; two files, or a
    device opened twice, are not."""
    out, names = one_file_by_its_names(tmp_path, monkeypatch, ".txt")
    for spelling in names:
        with pytest.raises(OutputError, match="same place as the output"):
            check_distinct_outputs(str(out), [("output", spelling)])
    with pytest.raises(OutputError, match="same place"):
        check_distinct_outputs("new.txt", [("output", "./sub/../new.txt")])  # not there yet
    for a, b in (("-", "-"), ("-", "/dev/stdout"), ("/dev/fd/1", "-")):
        with pytest.raises(OutputError, match="same place"):
            check_distinct_outputs(a, [("n-best list", b)])
    read, write = os.pipe()
    again = os.dup(write)
    try:
        with pytest.raises(OutputError, match="same place"):
            check_distinct_outputs(f"/dev/fd/{write}", [("output", f"/dev/fd/{again}")])
    finally:
        for fd in (read, write, again):
            os.close(fd)
    check_distinct_outputs(str(out), [("output", "sub/other.txt"), ("log", None)])
    check_distinct_outputs(os.devnull, [("output", os.devnull)])


# --- temporaries -------------------------------------------------------------------------------


def test_temporary_is_exclusive_and_ignores_a_planted_link(tmp_path: Path) -> None:
    """The old predictable name ``.NAME.tmp-PID``, planted as a link to a victim file: the run
    neither writes through it nor removes it (it is not a temporary of a dead run: a link)."""
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious")
    (tmp_path / f".out.txt.tmp-{os.getpid()}").symlink_to(victim)
    with AtomicOutput(str(tmp_path / "out.txt")) as out:
        out.write(GOOD)
        temporaries = [p for p in tmp_path.iterdir() if p.name.startswith(".out.txt.tmp-") and not p.is_symlink()]
        assert len(temporaries) == 1 and stat.S_IMODE(temporaries[0].stat().st_mode) == 0o600
    assert victim.read_bytes() == b"precious"
    assert (tmp_path / "out.txt").read_bytes() == GOOD


def test_two_writers_of_one_path_never_share_a_temporary(tmp_path: Path) -> None:
    """Two outputs to one path in one process (two runs with the same PID in two PID
    namespaces look the same): each has its own temporary; the last to finish wins, whole."""
    first, second = AtomicOutput(str(tmp_path / "out.txt")), AtomicOutput(str(tmp_path / "out.txt"))
    with first as a, second as b:
        a.write(b"first\n" * 1000)
        b.write(b"second\n" * 1000)
        assert first.temporary != second.temporary
    assert (tmp_path / "out.txt").read_bytes() == b"first\n" * 1000


def test_long_legal_name(tmp_path: Path) -> None:
    name = "p" * 250 + ".gz"  # 253 bytes: legal; its temporary's name must be too
    with AtomicOutput(str(tmp_path / name)) as out:
        out.write(GOOD)
    assert os.listdir(tmp_path) == [name]


@pytest.mark.parametrize("mode", [0o640, 0o444, 0o600])
def test_replaced_file_keeps_its_mode(tmp_path: Path, mode: int) -> None:
    final = tmp_path / "out.txt"
    final.write_bytes(b"old")
    final.chmod(mode)
    with AtomicOutput(str(final)) as out:
        out.write(GOOD)
    assert stat.S_IMODE(final.stat().st_mode) == mode and final.read_bytes() == GOOD


def test_new_file_gets_the_umask_mode(tmp_path: Path) -> None:
    previous = os.umask(0o027)
    try:
        with AtomicOutput(str(tmp_path / "out.txt")) as out:
            out.write(GOOD)
    finally:
        os.umask(previous)
    assert stat.S_IMODE((tmp_path / "out.txt").stat().st_mode) == 0o640


def test_stale_temporary_of_a_killed_run_is_removed_with_a_warning(tmp_path: Path) -> None:
    """A temporary left by a process that no longer exists (SIGKILL) is removed by the next
    run to the same path, which says so; one whose writer lives (its lock held) is kept."""
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    stale = tmp_path / f".out.txt.tmp-{int(dead.stdout)}-abcd1234"
    living = AtomicOutput(str(tmp_path / "out.txt"))
    warnings: list[str] = []
    with living as f:
        f.write(b"x")
        stale.write_bytes(b"half a table")
        with AtomicOutput(str(tmp_path / "out.txt"), on_warning=warnings.append) as out:
            out.write(GOOD)
        assert living.temporary is not None and os.path.exists(living.temporary)  # alive: kept
    assert not stale.exists()
    assert warnings == [f"removed {stale}: the temporary of an earlier run that was killed before it could clean up"]


def test_a_users_file_named_like_an_old_temporary_is_not_removed(tmp_path: Path) -> None:
    """Only the temporaries this program makes (``.NAME.tmp-PID-`` and 8 characters) are taken
    for a killed run's: a file ``.NAME.tmp-PID`` of a dead PID is someone else's, and stays."""
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    kept = tmp_path / f".out.txt.tmp-{int(dead.stdout)}"
    kept.write_bytes(b"notes")
    warnings: list[str] = []
    with AtomicOutput(str(tmp_path / "out.txt"), on_warning=warnings.append) as out:
        out.write(GOOD)
    assert kept.read_bytes() == b"notes" and warnings == []


def test_a_thread_never_takes_anothers_new_temporary_for_stale(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two threads of one process write the same destination. The second starts while the
    first's temporary exists but is not yet locked (the moment after mkstemp): it must not take
    that temporary for a killed run's, and both outputs complete (the last rename wins)."""
    import threading

    target = tmp_path / "out.txt"
    real_mkstemp = output.tempfile.mkstemp
    second_done: list[str] = []
    threads: list[threading.Thread] = []

    def second() -> None:
        with AtomicOutput(str(target), on_warning=second_done.append) as out:
            out.write(b"second\n")
        second_done.append("done")

    def mkstemp_then_second_thread(*args, **kwargs):  # type: ignore[no-untyped-def]
        made = real_mkstemp(*args, **kwargs)
        if not second_done and threading.current_thread() is threading.main_thread():
            t = threading.Thread(target=second)
            threads.append(t)
            t.start()
            t.join(timeout=2)  # the second thread waits for this creation to be finished
            second_done.append("started")
        return made

    monkeypatch.setattr(output.tempfile, "mkstemp", mkstemp_then_second_thread)
    first = AtomicOutput(str(target))
    with first as out:
        out.write(b"first\n")
        assert first.temporary is not None and os.path.exists(first.temporary)
    threads[0].join(timeout=60)  # it finishes once the first released the creation lock
    assert second_done[0] == "started" and "done" in second_done
    assert not any(w.startswith("removed") for w in second_done)
    assert target.read_bytes() in (b"first\n", b"second\n") and os.listdir(tmp_path) == ["out.txt"]


# --- special targets ---------------------------------------------------------------------------


def test_character_device_is_written_not_replaced(tmp_path: Path) -> None:
    """A character device at OUT (here a /dev/null made with mknod, as root) stays a device."""
    null = tmp_path / "null"
    try:
        os.mknod(null, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    except PermissionError:
        pytest.skip("mknod needs root")
    with AtomicOutput(str(null)) as out:
        out.write(GOOD * 1000)
    assert stat.S_ISCHR(null.stat().st_mode) and os.listdir(tmp_path) == ["null"]


def test_fd_link_writes_to_the_descriptor(tmp_path: Path) -> None:
    target = tmp_path / "target"
    with open(target, "wb") as f:
        f.write(b"before\n")
        f.flush()
        with AtomicOutput(f"/dev/fd/{f.fileno()}") as out:
            out.write(GOOD)
    assert target.read_bytes() == b"before\n" + GOOD and os.listdir(tmp_path) == ["target"]


# --- short writes ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def engine(small_model: Path) -> TableRescorer:
    return TableRescorer(load_checkpoint(str(small_model)), RescoreOptions(window=100, window_cap=800, device="cpu"))


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("table") / "in.txt"
    path.write_bytes(b"".join(read_lines(SAMPLE)[:300]))
    return path


@pytest.fixture(scope="module")
def expected(engine: TableRescorer, table: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    """The output of one run with nothing limited, per kind of target."""
    directory = tmp_path_factory.mktemp("expected")
    for name in ("out.txt", "out.gz"):
        engine.rescore(str(table), str(directory / name))
    plain = (directory / "out.txt").read_bytes()
    return {"out.txt": plain, "out.gz": (directory / "out.gz").read_bytes(), "-": plain}


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(limit=st.integers(min_value=0, max_value=70_000), target=st.sampled_from(["out.txt", "out.gz", "-"]))
def test_every_byte_arrives_whatever_a_write_accepts(
    engine: TableRescorer,
    table: Path,
    expected: dict[str, bytes],
    tmp_path_factory: pytest.TempPathFactory,
    limit: int,
    target: str,
) -> None:
    """A sink that accepts at most ``limit`` bytes per call (a pipe interrupted by a signal, a
    raw unbuffered stdout): what arrives is the one-shot output, or the run fails (0 bytes)."""
    directory = tmp_path_factory.mktemp("out")
    calls = 0

    def limited_write(fd: int, data: memoryview) -> int:
        nonlocal calls
        calls += 1
        return os.write(fd, data[:limit])

    stdout_path = directory / "stdout"
    out = str(directory / target) if target != "-" else "-"
    with open(stdout_path, "wb") as stdout, pytest.MonkeyPatch.context() as patch:
        patch.setattr("sys.stdout", types.SimpleNamespace(fileno=stdout.fileno, flush=lambda: None))
        patch.setattr(output, "_write", limited_write)
        if limit == 0:
            with pytest.raises(OutputError, match="short write: 0 of"):
                engine.rescore(str(table), out)
            assert os.listdir(directory) == ["stdout"]  # no output, no temporary
            return
        engine.rescore(str(table), out)
    arrived = stdout_path if target == "-" else directory / target
    assert arrived.read_bytes() == expected[target]
    assert calls >= len(expected[target]) // limit


def test_write_error_is_kept_and_labelled(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def full(fd: int, data: memoryview) -> int:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(output, "_write", full)
    writer = AtomicOutput(str(tmp_path / "out.txt"))
    with pytest.raises(OSError) as caught, writer as out:
        out.write(GOOD)
    assert caught.value.errno == errno.ENOSPC and caught.value.filename == str(tmp_path / "out.txt")
    assert writer.write_error is caught.value and os.listdir(tmp_path) == []
