"""Where a picture may be written: a picture replaces only a picture. :func:`check_picture_output`,
before any work, refuses an output named otherwise than ``.png``, ``.pdf`` or ``.svg`` (a model
file's ``.pt``, a run's ``.log``, an experiment's ``settings.json``) and an existing file that is
no picture whatever its name (told by its first bytes), naming what it is, and gives the format
the name asks for. ``-`` and the targets written straight through (a device, a FIFO,
``/dev/stdout``) get PNG."""

from __future__ import annotations

import errno
import os
import stat

from ..compression import CompressionError, format_of_head
from ..output import OutputError, check_output_path
from ..output_targets import fd_of_link, is_special

#: The formats a picture is written in, by its name's suffix.
PICTURE_FORMATS = {".png": "png", ".pdf": "pdf", ".svg": "svg"}
#: The first bytes of each, as matplotlib writes them (an SVG: an XML declaration, then <svg).
_PICTURE_HEADS = (b"\x89PNG\r\n\x1a\n", b"%PDF-", b"<svg")
_HEAD_BYTES = 512


def check_picture_output(path: str) -> str:
    """The format of the picture to write at ``path`` (``png``, ``pdf``, ``svg``), once nothing
    stands in the way; else :class:`OutputError` (exit 6) naming the path: what
    ``output.check_output_path`` refuses, an existing file that is not a picture (an empty one
    holds nothing to lose), a name whose suffix is not one of :data:`PICTURE_FORMATS`. Cheap:
    for callers to check before any work."""
    check_output_path(path, by_name=False)
    if path == "-" or fd_of_link(path) is not None or is_special(path):
        return "png"
    what = _not_a_picture(path)
    if what is not None:
        raise OutputError(
            path, f"exists and is {what}, not a picture: a plot replaces only a PNG, PDF or SVG file", errno.EEXIST
        )
    suffix = os.path.splitext(path)[1]
    if suffix.lower() not in PICTURE_FORMATS:
        named = f"not {suffix}" if suffix else "not a name without one"
        raise OutputError(
            path,
            f"a picture is written as PNG, PDF or SVG, named by its suffix (.png, .pdf, .svg), {named}",
            errno.EINVAL,
        )
    return PICTURE_FORMATS[suffix.lower()]


def _not_a_picture(path: str) -> str | None:
    """What the file at ``path`` is when it holds something other than a picture, else None
    (a picture, an empty file, nothing there)."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return None
    except OSError:
        return None  # nothing there
    try:
        with open(path, "rb") as f:
            head = f.read(_HEAD_BYTES)
    except OSError:
        return "a file that cannot be read here"
    if not head or head.lstrip().startswith(_PICTURE_HEADS):
        return None
    if head.lstrip().startswith(b"<?xml") and b"<svg" in head:
        return None
    if head.startswith(b"PK\x03\x04"):
        return "a model file" if b"data.pkl" in head else "a zip archive"
    try:
        compressed = format_of_head(head)
    except CompressionError:
        return "compressed data"
    if compressed is not None:
        return f"{compressed}-compressed data"
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError as e:
        if e.start < len(head) - 3:  # not only a character cut at the end of the head
            return "binary data"
        text = head[: e.start].decode("utf-8")
    return "JSON text" if text.lstrip().startswith(("{", "[")) else "text"
