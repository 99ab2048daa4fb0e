"""Fixtures shared by the Moses tests: the Moses found (or a skip naming why not), a small
trained network, the fixture table rescored by it, and the language model."""

from __future__ import annotations

from pathlib import Path

import pytest

from phrase_rescorer.rescoring.engine import rescore_table
from tests.helpers import moses as m


@pytest.fixture(scope="session")
def moses() -> Path:
    return m.moses_root()


@pytest.fixture(scope="session")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("moses")


@pytest.fixture(scope="session")
def network(moses: Path, trained_model: Path) -> Path:
    """30 Adadelta steps on the bundled sample (tests/conftest.py's ``trained_model``): scores
    that depend on the words, sums of log p over a sentence's phrase pairs well inside (-100, 0)."""
    return trained_model


@pytest.fixture(scope="session")
def lm(moses: Path, work: Path) -> Path:
    return m.build_lm(moses, work)


def rescored_table(work: Path, network: Path, unk: bool = False) -> Path:
    """tests/data/moses/phrase-table.gz with the network's column(s), made once per session."""
    out = work / f"phrase-table.rnn{'.unk' if unk else ''}.gz"
    if not out.exists():
        rescore_table(str(m.PHRASE_TABLE), str(out), str(network), unk_feature=unk)
    return out
