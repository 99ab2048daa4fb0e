"""Progress lines as they appear in a log: each begins with a time stamp."""

from __future__ import annotations

import re

#: A log line's time stamp, as Marian's: [YYYY-MM-DD HH:MM:SS] and a space.
STAMP = re.compile(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\] ")


def unstamped(text: str) -> list[str]:
    """The lines of a log, each checked to begin with a time stamp, without it."""
    lines = text.splitlines()
    assert all(STAMP.match(line) for line in lines), lines
    return [STAMP.sub("", line) for line in lines]
