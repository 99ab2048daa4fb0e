"""The package as a user installs it: a wheel built from this checkout, installed into a fresh
virtual environment, runs the three programs, finds its Moses configs and rescores (the golden
model and lines of tests/data/golden, compared with the golden output)."""

from __future__ import annotations

import os
import subprocess
import sysconfig
from pathlib import Path

import pytest

from phrase_rescorer import __version__
from tests.cli.test_golden import mismatches
from tests.helpers.golden import LINES, MODEL
from tests.helpers.paths import PYTHON, REPO

pytestmark = pytest.mark.slow


def _run(argv: list[str | Path], **kwargs) -> subprocess.CompletedProcess:
    r = subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=600, **kwargs)
    assert r.returncode == 0, (argv, r.stdout[-2000:], r.stderr[-3000:])
    return r


def test_the_wheel_installs_and_runs(tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    # offline: setuptools of this environment, no download (--no-build-isolation), no dependency
    _run(
        [
            PYTHON,
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "-w",
            wheels,
            REPO,
        ],
        cwd=tmp_path,
    )
    (wheel,) = wheels.glob("phrase_rescorer-*.whl")
    assert wheel.name == f"phrase_rescorer-{__version__}-py3-none-any.whl"

    venv = tmp_path / "venv"
    _run([PYTHON, "-m", "venv", "--system-site-packages", venv])
    # The dependencies (torch, ...) are this environment's: its site-packages on the new
    # environment's path, after the environment's own (a path line of a .pth file: the .pth
    # files there, e.g. an editable install of this checkout, are not run).
    site = _run([venv / "bin" / "python", "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"])
    Path(site.stdout.strip(), "project-dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n")
    _run([venv / "bin" / "python", "-m", "pip", "install", "--quiet", "--no-deps", "--no-index", wheel])

    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["OMP_NUM_THREADS"] = "1"
    for program in ("phrase-rescorer", "rescore-phrase-table", "moses-rescore-step"):
        r = _run([venv / "bin" / program, "--version"], env=env, cwd=tmp_path)
        assert r.stdout == f"{program}, version {__version__}\n"

    configs = Path(_run([venv / "bin" / "phrase-rescorer", "moses-configs"], env=env, cwd=tmp_path).stdout.strip())
    assert configs == Path(site.stdout.strip(), "phrase_rescorer", "moses_configs")
    assert (configs / "ems-rnn-rescoring.config").is_file() and (configs / "moses.rnn.example.ini").is_file()
    # every module of the checkout is installed (a subpackage missing from pyproject's list is not)
    installed = Path(site.stdout.strip(), "phrase_rescorer")
    assert sorted(str(p.relative_to(installed)) for p in installed.rglob("*.py")) == sorted(
        str(p.relative_to(REPO / "phrase_rescorer")) for p in (REPO / "phrase_rescorer").rglob("*.py")
    )
    # the training loops' C sources, package data, built from the installed package (not the checkout)
    sources = sorted(p.name for p in (REPO / "phrase_rescorer" / "training").glob("*.[ch]"))
    assert (
        sources
        and sorted(p.name for p in Path(site.stdout.strip(), "phrase_rescorer", "training").glob("*.[ch]")) == sources
    )
    built = _run(
        [venv / "bin" / "python", "-c", "from phrase_rescorer.training import gru_gates as g; print(g.SOURCE[-200:])"],
        env=env,
        cwd=tmp_path,
    )
    assert built.stdout.strip() == (REPO / "phrase_rescorer" / "training" / "gru_gates.c").read_text()[-200:].strip()
    licence = next(Path(site.stdout.strip()).glob("phrase_rescorer-*.dist-info")) / "licenses" / "LICENSE"
    assert licence.read_text() == (REPO / "LICENSE").read_text()

    out = tmp_path / "out.txt"
    _run([venv / "bin" / "rescore-phrase-table", "-q", LINES, out, "-m", MODEL], env=env, cwd=tmp_path)
    assert mismatches(out, "default") == []  # the golden comparison of test_golden
