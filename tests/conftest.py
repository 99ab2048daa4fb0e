"""Shared fixtures and markers; the paths and helpers themselves live in tests/helpers/.

Tiers: unit/ (the library in this process), cli/ (the real command lines), faults/ (bad input,
signals, full disks, fuzzing), integration/ (the real Moses toolkit). Tests that need
../shared carry the ``shared`` marker and are skipped, with the reason, when it is absent."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from tests.helpers.analysis_model import train_tiny
from tests.helpers.paths import NO_SHARED, REAL_TABLE, SAMPLE, SHARED
from tests.helpers.rescore_data import one_thread, tiny_checkpoint  # noqa: F401  (one_thread: a fixture, for every module)

# Tests use tiny models: one thread avoids waiting on a busy second core (CI has two).
torch.set_num_threads(1)


@pytest.fixture(scope="session", autouse=True)
def adadelta_loop_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The compiled Adadelta loop is built into a directory of the test session (every process the
    tests start inherits it), never into the user's ~/.cache."""
    directory = tmp_path_factory.mktemp("adadelta-loop-cache")
    before = os.environ.get("PHRASE_RESCORER_CACHE")
    os.environ["PHRASE_RESCORER_CACHE"] = str(directory)
    yield directory
    if before is None:
        del os.environ["PHRASE_RESCORER_CACHE"]
    else:
        os.environ["PHRASE_RESCORER_CACHE"] = before


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("shared") is not None and not SHARED.exists():
        pytest.skip(NO_SHARED)


@pytest.fixture(scope="session")
def sample_table() -> Path:
    return SAMPLE


@pytest.fixture(scope="session")
def real_table() -> Path:
    if not REAL_TABLE.exists():
        pytest.skip(NO_SHARED)
    return REAL_TABLE


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny cho2014 network of ``tiny_checkpoint`` (a module may define its own ``model``)."""
    return tiny_checkpoint(tmp_path_factory.mktemp("model") / "tiny.pt")


@pytest.fixture(scope="session")
def small_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A smaller random-weight cho2014 network (8 hidden units, 50-word shortlists), for tests of
    everything around the network: files, streams, signals, faults. Read it; never write it."""
    return tiny_checkpoint(tmp_path_factory.mktemp("small-model") / "tiny.pt", hidden=8, vocab=50)


@pytest.fixture(scope="session")
def trained_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``train_tiny`` on the bundled sample (30 Adadelta steps, en -> fr recorded): scores that
    depend on the words, for the analysis commands and the decoder. Read it; never write it."""
    path = tmp_path_factory.mktemp("trained-model") / "tiny.pt"
    train_tiny(SAMPLE, path)
    return path
