"""Progress of a long stage on stderr, suited to where stderr goes.

* A terminal: a tqdm bar, redrawn in place.
* Anything else (a log file, a pipe, a batch system's output): one plain line every
  ``interval`` seconds (``PHRASE_RESCORER_PROGRESS_SECONDS``, default 30), as Moses and Marian
  log, and one line when the stage ends; no carriage returns, so a log grows by about one line
  per interval however long the run (a bar's redraws would make one line of megabytes). Each
  line, and each line of :meth:`Progress.write`, begins with the local date and time as
  Marian stamps its log, ``[2026-11-28 04:10:03] ``, so that a log tells when each step ran.
* ``--quiet``: nothing.

Nothing is shown before the first update, so a run that stops on a bad input or model file
shows its error alone, without an empty bar above it.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from typing import IO, Any

from tqdm import tqdm

#: The time stamp that begins each line written to a log (``time.strftime``; local time).
STAMP_FORMAT = "[%Y-%m-%d %H:%M:%S] "

#: Seconds between two progress lines when stderr is not a terminal.
DEFAULT_INTERVAL = 30.0
INTERVAL_VARIABLE = "PHRASE_RESCORER_PROGRESS_SECONDS"


def log_interval() -> float:
    """The interval between progress lines, from the environment (invalid values: the default)."""
    try:
        value = float(os.environ.get(INTERVAL_VARIABLE, DEFAULT_INTERVAL))
    except ValueError:
        return DEFAULT_INTERVAL
    return value if value > 0 else DEFAULT_INTERVAL


def _amount(n: float, in_bytes: bool) -> str:
    if not in_bytes:
        return f"{n:,.0f}"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


class Progress:
    """One stage's progress: ``update(k)`` / ``update_to(n, total)``, ``set_postfix(text)``,
    ``write(line)``, ``close()`` (also as a context manager).

    ``unit`` names what is counted (" lines", " steps"); ``in_bytes`` counts bytes of input
    instead. ``stream`` (default stderr), ``clock`` (for rates) and ``wall_clock`` (for the time
    stamps) are parameters for the tests.
    """

    def __init__(
        self,
        desc: str,
        unit: str = "",
        *,
        total: float | None = None,
        initial: int = 0,
        quiet: bool = False,
        in_bytes: bool = False,
        stream: IO[str] | None = None,
        interval: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ):
        self.desc, self.unit, self.total = desc, unit, total
        self.n: float = initial
        self.initial, self.quiet, self.in_bytes = initial, quiet, in_bytes
        self.stream = stream if stream is not None else sys.stderr
        self.interval = log_interval() if interval is None else interval
        self.clock, self.wall_clock = clock, wall_clock
        self.postfix = ""
        self.started = clock()
        self.terminal = not quiet and _isatty(self.stream)
        self._bar: tqdm | None = None
        self._shown = False  # anything shown yet (a first update came)
        self._last_line = self.started
        self._closed = False

    # --- feeding -------------------------------------------------------------------------------

    def update(self, k: int = 1) -> None:
        self.update_to(self.n + k)

    def update_to(self, n: float, total: float | None = None) -> None:
        if total is not None:
            self.total = total
        delta, self.n = n - self.n, n
        if self.quiet or self._closed:
            return
        self._shown = True
        if self.terminal:
            bar = self._terminal_bar()
            if self.total is not None and bar.total != self.total:
                bar.total = self.total
            bar.update(delta)
        elif self.clock() - self._last_line >= self.interval:
            self._line()

    def set_postfix(self, text: str) -> None:
        self.postfix = text
        if self._bar is not None:
            self._bar.set_postfix_str(text, refresh=False)

    def write(self, message: str) -> None:
        """A line of its own (above the bar on a terminal); nothing under --quiet."""
        if self.quiet:
            return
        if self._bar is not None:
            self._bar.write(message, file=self.stream)
        else:
            print(self._stamp() + message, file=self.stream, flush=True)

    @property
    def elapsed(self) -> float:
        return self.clock() - self.started

    # --- ending --------------------------------------------------------------------------------

    def close(self, finished: bool = True) -> None:
        """End the display; a log gets its closing line only for a stage that ``finished`` (an
        error or an interruption is reported by the caller, not as "done")."""
        if self._closed:
            return
        self._closed = True
        if self._bar is not None:
            self._bar.close()
        elif finished and self._shown and not self.quiet and not self.terminal:
            self._line(done=True)

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *rest: Any) -> None:
        self.close(finished=exc_type is None)

    # --- display -------------------------------------------------------------------------------

    def _terminal_bar(self) -> tqdm:
        if self._bar is None:
            scale = (
                {"unit": "B", "unit_scale": True, "unit_divisor": 1024}
                if self.in_bytes
                else {"unit": self.unit, "unit_scale": True}
            )
            self._bar = tqdm(
                file=self.stream, dynamic_ncols=True, desc=self.desc, total=self.total, initial=self.initial, **scale
            )
            if self.postfix:
                self._bar.set_postfix_str(self.postfix, refresh=False)
        return self._bar

    def _line(self, done: bool = False) -> None:
        now = self.clock()
        self._last_line = now
        elapsed = now - self.started
        text = f"{self.desc}: {_amount(self.n, self.in_bytes)}{'' if self.in_bytes else self.unit}"
        if self.total and not done:
            text += f" of {_amount(self.total, self.in_bytes)} ({100 * self.n / self.total:.0f} %)"
        rate = (self.n - self.initial) / elapsed if elapsed > 0 else 0.0
        per_second = f"{_amount(rate, self.in_bytes)}/s" if self.in_bytes else f"{rate:,.1f}{self.unit}/s"
        text += f"{' done' if done else ''} in {elapsed:,.0f} s ({per_second.strip()})"
        if self.postfix:
            text += f"; {self.postfix}"
        print(self._stamp() + text, file=self.stream, flush=True)

    def _stamp(self) -> str:
        """The time stamp of a line in a log; nothing on a terminal (the bar is the display)."""
        return "" if self.terminal else time.strftime(STAMP_FORMAT, time.localtime(self.wall_clock()))


def _isatty(stream: IO[str]) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # closed or not a real file
        return False
