"""A picture replaces only a picture: ``plot-log``, ``plot-experiment`` and ``compare --plot``
refuse (exit 6, one line naming the file and what it is, before any work) an output that is a
model file, a run's log, an experiment's own file or any other file that is no picture, and a
name whose suffix asks for no picture format; the file is left as it was."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.helpers.paths import PYTHON, cli_env

LOG = '{"event": "start", "kind": "phrase"}\n{"event": "train", "step": 1, "loss": 3.0, "elapsed": 1.0}\n'
REPORT = {"systems": {"baseline": {"label": "baseline", "runs": [{"dev": 20.0, "test": 21.0}]}}}
NOT_A_PICTURE = "not a picture: a plot replaces only a PNG, PDF or SVG file"


def run(*args: str, cwd: Path) -> tuple[int, str]:
    r = subprocess.run(
        [PYTHON, "-m", "phrase_rescorer", "-q", *args],
        capture_output=True,
        text=True,
        env=cli_env(),
        cwd=cwd,
        timeout=300,
    )
    return r.returncode, r.stderr.strip()


@pytest.mark.parametrize("name", ["nmt.pt", "nmt.last.pt"])
def test_plot_log_keeps_a_model_file(small_model: Path, tmp_path: Path, name: str) -> None:
    shutil.copy(small_model, tmp_path / name)
    (tmp_path / "nmt.log").write_text(LOG)
    before = (tmp_path / name).read_bytes()
    code, err = run("plot-log", "nmt.log", "-o", name, cwd=tmp_path)
    assert (code, err) == (6, f"phrase-rescorer: error: {name}: exists and is a model file, {NOT_A_PICTURE}")
    assert (tmp_path / name).read_bytes() == before
    assert sorted(os.listdir(tmp_path)) == sorted([name, "nmt.log"])


@pytest.mark.parametrize(("name", "what"), [("settings.json", "JSON text"), ("experiment.json", "JSON text")])
def test_plot_experiment_keeps_the_experiment_s_files(tmp_path: Path, name: str, what: str) -> None:
    """After `plot-experiment DIR -o DIR/settings.json` the experiment could not be continued."""
    (tmp_path / "experiment.json").write_text(json.dumps(REPORT))
    (tmp_path / "settings.json").write_text('{"seed": 1}\n')
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    code, err = run("plot-experiment", ".", "-o", name, cwd=tmp_path)
    if name == "experiment.json":  # the report itself: refused as the input it is
        assert (code, err) == (6, f"phrase-rescorer: error: {name}: output is the same file as the input './{name}'")
    else:
        assert (code, err) == (6, f"phrase-rescorer: error: {name}: exists and is {what}, {NOT_A_PICTURE}")
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


@pytest.mark.parametrize(
    ("content", "what"),
    [
        (b"tuned weights\n", "text"),
        (b"\x1f\x8b\x08\x00\x00\x00", "gzip-compressed data"),
        (b"\x00\xff" * 40, "binary data"),
    ],
    ids=["text", "gzip", "binary"],
)
def test_a_picture_name_over_another_file_is_refused(tmp_path: Path, content: bytes, what: str) -> None:
    (tmp_path / "r.log").write_text(LOG)
    (tmp_path / "curves.png").write_bytes(content)
    code, err = run("plot-log", "r.log", "-o", "curves.png", cwd=tmp_path)
    assert (code, err) == (6, f"phrase-rescorer: error: curves.png: exists and is {what}, {NOT_A_PICTURE}")
    assert (tmp_path / "curves.png").read_bytes() == content


@pytest.mark.parametrize("name", ["rnn.pt", "curves.txt", "curves", "curves.png.gz"])
def test_a_name_of_no_picture_format_is_refused_before_the_log_is_read(tmp_path: Path, name: str) -> None:
    """The log does not exist: the name is refused first."""
    suffix = os.path.splitext(name)[1]
    code, err = run("plot-log", "missing.log", "-o", name, cwd=tmp_path)
    said = f"not {suffix}" if suffix else "not a name without one"
    assert (code, err) == (
        6,
        f"phrase-rescorer: error: {name}: a picture is written as PNG, PDF or SVG, named by its suffix "
        f"(.png, .pdf, .svg), {said}",
    )
    assert os.listdir(tmp_path) == []


def test_a_picture_is_replaced(tmp_path: Path) -> None:
    (tmp_path / "r.log").write_text(LOG)
    (tmp_path / "curves.png").write_bytes(b"%PDF-1.4\n")  # an older picture, in any of the formats
    (tmp_path / "empty.png").write_bytes(b"")  # nothing to lose
    for name in ("curves.png", "empty.png"):
        assert run("plot-log", "r.log", "-o", name, cwd=tmp_path) == (0, "")
        assert (tmp_path / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_compare_keeps_another_model_file(small_model: Path, tmp_path: Path) -> None:
    """compare --plot naming a model file other than its -m: refused before the table is read
    (a FIFO no one writes: a refusal that waited for it would hang)."""
    shutil.copy(small_model, tmp_path / "other.pt")
    os.mkfifo(tmp_path / "never-written.gz")
    before = (tmp_path / "other.pt").read_bytes()
    code, err = run(
        *("compare", "-m", str(small_model), "-t", "never-written.gz", "--scatter-pairs", "10", "--plot", "other.pt"),
        cwd=tmp_path,
    )
    assert (code, err) == (6, f"phrase-rescorer: error: other.pt: exists and is a model file, {NOT_A_PICTURE}")
    assert (tmp_path / "other.pt").read_bytes() == before


def test_embed_keeps_a_file_where_a_map_would_go(small_model: Path, tmp_path: Path) -> None:
    """Refused before any file of OUT is written (the TSVs included) and before t-SNE."""
    (tmp_path / "target-words.tsne.png").write_text("notes\n")
    code, err = run("embed", "-m", str(small_model), "-o", ".", "--plot", cwd=tmp_path)
    assert (code, err) == (6, f"phrase-rescorer: error: ./target-words.tsne.png: exists and is text, {NOT_A_PICTURE}")
    assert os.listdir(tmp_path) == ["target-words.tsne.png"]
