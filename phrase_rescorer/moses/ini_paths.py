"""The files a moses.ini's features name (``path=``: tables, language models) as they are on
disk: each one's size and modification time, what tells cheaply that a file changed (a table
rewritten in place changes its modification time) without reading gigabytes."""

from __future__ import annotations

import contextlib
import os

from .ini_weights import features
from .stems import named_files


def ini_files(ini: str) -> dict[str, list[int]]:
    """``{path: [size, mtime_ns]}`` of every file (or directory) that the ini's features name
    (a stem's ``.gz``, a binarized table's ``.minphr`` or ``.minlexr``: ``stems.named_files``);
    a name with no file is left out."""
    with open(ini, encoding="utf-8", newline="") as f:
        lines = f.read().splitlines(keepends=True)
    found: dict[str, list[int]] = {}
    for feature in features(lines):
        path = feature.args.get("path")
        if path is None:
            continue
        for candidate in named_files(path):
            with contextlib.suppress(OSError):
                info = os.stat(candidate)
                found[candidate] = [info.st_size, info.st_mtime_ns]
    return found
