"""Fixtures of the fault tests: the programs a test starts, ended when it ends (passed or
failed); for the ``experiment`` fault tests, a directory of stand-in Moses programs (enough for
refusals made before Moses runs) and a copy of the tiny system's ini, dev and test sets."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.moses import stand_in_moses as stand_in
from tests.helpers.paths import REPO

TINY = REPO / "tests" / "data" / "tiny-moses"


@pytest.fixture
def processes() -> Iterator[list[subprocess.Popen]]:
    """The processes a test starts (append them): killed and reaped when the test ends, so that a
    failing test leaves no training running after pytest exits."""
    started: list[subprocess.Popen] = []
    yield started
    for proc in started:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        for stream in (proc.stdout, proc.stderr, proc.stdin):
            if stream is not None:
                stream.close()


@pytest.fixture(scope="module")
def stand_in_moses(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return stand_in(tmp_path_factory.mktemp("moses"))


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    """A copy of the tiny system's ini (absolute paths) and of its dev and test sets."""
    ini = tmp_path / "moses.ini"
    ini.write_text((TINY / "moses.ini").read_text().replace("@MODEL_DIR@", str(TINY)))
    paths = {"ini": ini}
    for name in ("dev.en", "dev.fr", "test.en", "test.fr"):
        paths[name] = tmp_path / name
        paths[name].write_bytes((TINY / name).read_bytes())
    return paths
