"""Running the real command line in a test: in this process (as the installed program runs it)
or as ``python -m phrase_rescorer``, and what an atomic output may leave behind."""

from __future__ import annotations

import signal
import sys
from pathlib import Path

import pytest

from phrase_rescorer.cli import main
from tests.helpers.paths import cli_env


def subprocess_env() -> dict[str, str]:
    env = cli_env()
    env["OMP_NUM_THREADS"] = "1"  # tiny models: one thread is fastest on a shared machine
    return env


def run_cli(args: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """``phrase-rescorer ARGS`` in this process, exactly as the installed program runs it."""
    monkeypatch.setattr(sys, "argv", ["phrase-rescorer", *args])
    handlers = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGHUP)}
    code = 0
    try:
        main()
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    finally:
        for s, handler in handlers.items():
            signal.signal(s, handler)
    return code, capsys.readouterr().err


def left_behind(directory: Path) -> list[str]:
    """Temporary files of an atomic output (``.NAME.tmp-PID``), anywhere under ``directory``."""
    return [str(p) for p in directory.rglob(".*.tmp-*")]
