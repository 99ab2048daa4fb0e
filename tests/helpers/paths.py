"""Paths and the subprocess environment shared by every test tier.

Real data: the bundled sample (tests/data, from the Multi30k en-fr Moses system in
../shared/data/moses-en-fr; research-use data) and, when present, ../shared itself."""

from __future__ import annotations

import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "tests" / "data" / "sample.en-fr.phrase-table.gz"
SAMPLE_INI = REPO / "tests" / "data" / "sample.en-fr.moses.ini"  # the real system's tuned moses.ini
SHARED = REPO.parent / "shared"
REAL_TABLE = SHARED / "data" / "moses-en-fr" / "phrase-table.gz"
REAL_INI = SHARED / "data" / "moses-en-fr" / "moses.ini"
NO_SHARED = "../shared/data/moses-en-fr is not beside this checkout"

PYTHON = sys.executable


def cli_env() -> dict[str, str]:
    """Environment for running ``python -m phrase_rescorer`` from this checkout in a subprocess."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def sigint_as_at_a_terminal() -> None:
    """``preexec_fn`` for a program a test interrupts with SIGINT: a shell without job control
    (a CI script's background job) starts its commands with SIGINT ignored, and Python then
    keeps ignoring it; the program must see SIGINT as a user's Ctrl-C reaches it."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)
