"""A full disk, three ways: a real 64 KiB tmpfs (when this process may mount one), the
temporary file's descriptor replaced by one of /dev/full (the kernel's ENOSPC on every write),
and a simulated one (the output's write(2) takes what fits in N bytes, then refuses, mid-run or
at the final flush). Rescoring and saving a model end with exit 6, the output's name, and
nothing at the output path, temporaries included."""

from __future__ import annotations

import errno
import gzip
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from phrase_rescorer import output
from phrase_rescorer.model.checkpoint import load_checkpoint, save_checkpoint
from tests.helpers.cli_run import left_behind, run_cli, subprocess_env
from tests.helpers.paths import PYTHON, SAMPLE
from tests.helpers.rescore_data import read_lines
from tests.helpers.synthetic import mapping_table

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture
def big_table(tmp_path: Path) -> Path:
    path = tmp_path / "in.txt"
    path.write_bytes(b"".join(read_lines(SAMPLE)[:3000]))  # about 380 KB, 430 KB rescored
    return path


@pytest.mark.parametrize("out_name", ["out.txt", "out.gz"])
@pytest.mark.parametrize("where", ["while scoring", "at the final flush"])
def test_disk_full_simulated(
    model: Path,
    big_table: Path,
    out_name: str,
    where: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = big_table.with_name(out_name)
    args = ["-q", "rescore", str(big_table), str(out), "--model", str(model), "--window", "500"]
    assert run_cli(args, monkeypatch, capsys)[0] == 0
    size = out.stat().st_size
    out.unlink()
    room = size // 3 if where == "while scoring" else size - 1

    def write_on_a_full_disk(fd: int, data: memoryview) -> int:
        """A device with ``room`` more bytes: a write beyond them writes what fits, then the
        next one fails with ENOSPC, as write(2) does on a full file system."""
        nonlocal room
        if room <= 0:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        written = os.write(fd, data[:room])
        room -= written
        return written

    monkeypatch.setattr(output, "_write", write_on_a_full_disk)
    monkeypatch.setattr(output, "_BUFFER_SIZE", 1 << 14)  # the disk fills up mid-run, not only at the end
    code, err = run_cli(args, monkeypatch, capsys)
    assert code == 6, err
    assert err.strip() == f"phrase-rescorer: error: {out}: disk full (no space left on device)"
    assert not out.exists() and left_behind(big_table.parent) == []


@pytest.fixture
def small_tmpfs(tmp_path: Path) -> Iterator[Path]:
    """A real 64 KiB file system (needs the right to mount; skipped otherwise)."""
    mount, umount = shutil.which("mount"), shutil.which("umount")
    directory = tmp_path / "small"
    directory.mkdir()
    if mount is None or umount is None:
        pytest.skip("no mount command")
    r = subprocess.run([mount, "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(directory)], capture_output=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.decode().strip()}")
    try:
        yield directory
    finally:
        subprocess.run([umount, str(directory)], check=True)


@pytest.mark.parametrize("out_name", ["out.txt", "out.gz"])
def test_disk_full_real_tmpfs(model: Path, small_tmpfs: Path, out_name: str, tmp_path: Path) -> None:
    table = tmp_path / "in.gz"
    lines = read_lines(SAMPLE)
    # rescored: plain 1,000 lines, 140 KB; gzip 5,000 lines, about 180 KB compressed
    table.write_bytes(gzip.compress(b"".join(lines[:1000] if out_name == "out.txt" else lines[:5000]), 1))
    out = small_tmpfs / out_name
    r = subprocess.run(
        [PYTHON, "-m", "phrase_rescorer", "-q", "rescore", str(table), str(out), "--model", str(model)],
        capture_output=True,
        env=subprocess_env(),
        timeout=300,
    )
    err = r.stderr.decode()
    assert r.returncode == 6, err
    assert err.strip() == f"phrase-rescorer: error: {out}: disk full (no space left on device)"
    assert os.listdir(small_tmpfs) == []  # neither the output nor its temporary


@pytest.fixture
def dev_full(monkeypatch: pytest.MonkeyPatch) -> str:
    """Every temporary an output creates writes to /dev/full: its descriptor is replaced by one
    of /dev/full (the kernel's ENOSPC on every write, no root needed), its name stays."""
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full here")
    mkstemp = output.tempfile.mkstemp

    def mkstemp_on_dev_full(*args, **kwargs):  # type: ignore[no-untyped-def]
        fd, name = mkstemp(*args, **kwargs)
        full = os.open("/dev/full", os.O_WRONLY)
        os.dup2(full, fd)
        os.close(full)
        return fd, name

    monkeypatch.setattr(output.tempfile, "mkstemp", mkstemp_on_dev_full)
    return "/dev/full"


@pytest.mark.parametrize("out_name", ["out.txt", "out.gz"])
def test_disk_full_dev_full_rescoring(
    model: Path,
    big_table: Path,
    out_name: str,
    dev_full: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The temporary writes to /dev/full, where every write fails with ENOSPC."""
    out = big_table.with_name(out_name)
    code, err = run_cli(["-q", "rescore", str(big_table), str(out), "--model", str(model)], monkeypatch, capsys)
    assert code == 6, err
    assert err.strip() == f"phrase-rescorer: error: {out}: disk full (no space left on device)"
    assert not out.exists() and left_behind(big_table.parent) == []


def test_disk_full_while_saving_a_model(
    tmp_path: Path, dev_full: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """torch.save reports a failed write as a RuntimeError about zip positions; the model file's
    writer keeps the OSError, so training ends with exit 6 and the model's name, no traceback."""
    table = mapping_table(tmp_path / "pt.gz", 100)
    models = tmp_path / "models"
    models.mkdir()
    code, err = run_cli(
        [
            "-q",
            "train",
            str(table),
            str(models / "rnn.pt"),
            "--log",
            str(tmp_path / "rnn.log"),
            "--vocab-size",
            "20",
            "--embed-dim",
            "4",
            "--hidden-dim",
            "8",
            "--maxout-dim",
            "4",
            "--output-rank",
            "2",
            "--max-steps",
            "2",
            "--valid-every",
            "1",
            "--device",
            "cpu",
        ],
        monkeypatch,
        capsys,
    )
    assert code == 6, err
    assert err.strip() == f"phrase-rescorer: error: {models / 'rnn.pt'}: disk full (no space left on device)"
    assert os.listdir(models) == []  # no model, and the temporary removed


def test_disk_full_real_tmpfs_saving_a_model(model: Path, small_tmpfs: Path) -> None:
    """A model file larger than the file system: torch.save fails inside a tensor's record and
    says so with a RuntimeError; save_checkpoint raises the OSError behind it, naming the file."""
    ckpt = load_checkpoint(str(model))
    assert model.stat().st_size > 2 * 64 * 1024  # twice the file system
    with pytest.raises(OSError) as caught:
        save_checkpoint(str(small_tmpfs / "rnn.pt"), ckpt.build_model(), ckpt.src_vocab, ckpt.tgt_vocab)
    assert caught.value.errno == errno.ENOSPC and caught.value.filename == str(small_tmpfs / "rnn.pt")
    # torch.save raises a RuntimeError when a write fails inside it; the buffered writer may
    # also meet the full disk only at its final flush: an OSError either way
    assert caught.value.__cause__ is None or isinstance(caught.value.__cause__, RuntimeError)
    assert os.listdir(small_tmpfs) == []
