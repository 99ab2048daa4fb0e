"""Progress: timed plain lines when stderr is not a terminal, bounded however many updates;
a bar on a terminal; nothing under --quiet; nothing before the first update."""

from __future__ import annotations

import io
import time

import pytest

from phrase_rescorer.cli.progress import Progress
from tests.helpers.progress_lines import unstamped


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_log_gets_one_line_per_interval_however_many_updates() -> None:
    out, clock = io.StringIO(), Clock()
    bar = Progress("rescore", in_bytes=True, stream=out, interval=30, clock=clock)
    size = 100 * 2**20
    for i in range(1, 1_000_001):  # an hour of updates, 278 a second
        clock.now += 0.0036
        bar.set_postfix(f"{i:,} lines")
        bar.update_to(i * 100, size)
    bar.close()
    text = out.getvalue()
    lines = unstamped(text)
    assert "\r" not in text and text.endswith("\n")
    assert 119 <= len(lines) <= 121  # 3600 s / 30 s, and the closing line
    assert len(text) < 121 * 122  # bounded: about 100 bytes a line
    assert lines[0] == "rescore: 813.9 KiB of 100.0 MiB (1 %) in 30 s (27.1 KiB/s); 8,334 lines"
    assert lines[-1] == "rescore: 95.4 MiB done in 3,600 s (27.1 KiB/s); 1,000,000 lines"


def test_counts_with_a_unit_and_a_total() -> None:
    out, clock = io.StringIO(), Clock()
    with Progress("train", " steps", total=200, initial=100, stream=out, interval=10, clock=clock) as bar:
        for _ in range(100):
            clock.now += 1
            bar.update()
    assert unstamped(out.getvalue()) == [
        "train: 110 steps of 200 (55 %) in 10 s (1.0 steps/s)",
        "train: 120 steps of 200 (60 %) in 20 s (1.0 steps/s)",
        *[f"train: {n} steps of 200 ({n // 2} %) in {n - 100} s (1.0 steps/s)" for n in range(130, 201, 10)],
        "train: 200 steps done in 100 s (1.0 steps/s)",
    ]


def test_nothing_before_the_first_update_and_nothing_when_quiet() -> None:
    out = io.StringIO()
    Progress("rescore", in_bytes=True, stream=out, interval=0.0001).close()  # e.g. the model was refused
    assert out.getvalue() == ""
    with Progress("rescore", quiet=True, stream=out, interval=0.0001) as bar:
        bar.update(5)
        bar.write("resumed")
    assert out.getvalue() == ""


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_terminal_gets_a_bar_only_after_the_first_update() -> None:
    out = FakeTerminal()
    bar = Progress("inspect", " lines", stream=out)
    assert out.getvalue() == ""
    bar.update_to(65536)
    bar.close()
    assert "\r" in out.getvalue() and "inspect" in out.getvalue() and "65.5k lines" in out.getvalue()


def test_a_stage_that_fails_gets_no_done_line() -> None:
    out, clock = io.StringIO(), Clock()
    try:
        with Progress("rescore", " lines", stream=out, interval=10, clock=clock) as bar:
            clock.now += 11
            bar.update(100)
            raise KeyboardInterrupt
    except KeyboardInterrupt:
        pass
    assert unstamped(out.getvalue()) == ["rescore: 100 lines in 11 s (9.1 lines/s)"]


def test_log_lines_begin_with_the_local_date_and_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    try:
        out, clock, wall = io.StringIO(), Clock(), [1795839003.0]  # 2026-11-28 04:10:03 UTC

        with Progress("train", " steps", stream=out, interval=10, clock=clock, wall_clock=lambda: wall[0]) as bar:
            clock.now += 10
            bar.update(50)
            wall[0] += 3600 + 62
            bar.write("step 50: held-out perplexity 81.20")
            clock.now += 10
            wall[0] += 1
            bar.update(50)
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()
    assert out.getvalue().splitlines() == [
        "[2026-11-28 04:10:03] train: 50 steps in 10 s (5.0 steps/s)",
        "[2026-11-28 05:11:05] step 50: held-out perplexity 81.20",
        "[2026-11-28 05:11:06] train: 100 steps in 20 s (5.0 steps/s)",
        "[2026-11-28 05:11:06] train: 100 steps done in 20 s (5.0 steps/s)",
    ]


def test_a_terminal_gets_no_time_stamps() -> None:
    out = FakeTerminal()
    bar = Progress("inspect", " lines", stream=out, wall_clock=lambda: 0.0)
    bar.write("resumed")
    bar.close()
    assert out.getvalue() == "resumed\n"
