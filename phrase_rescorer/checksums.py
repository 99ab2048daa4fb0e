"""The SHA-256 of a file's content, and of a directory's (a binarized table): what tells that a
file is unchanged when its size and modification time cannot (a copy that did not keep the
times). A file that cannot be read is refused naming it (:class:`errors.HostError`, exit 6).

:func:`same_content` is the one rule for a recorded file whose modification time changed, as the
experiment's restart and ``translate-hybrid``'s bundle apply it."""

from __future__ import annotations

import hashlib
import os

from .errors import HostError


def sha256_of(path: str) -> str:
    """The SHA-256 of the file ``path``'s bytes, in hex."""
    h = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
    except OSError as e:
        raise HostError(f"{path}: cannot read ({e.strerror})") from None
    return h.hexdigest()


def content_sha256(path: str) -> str:
    """``sha256_of`` a file; for a directory (a binarized table), of every file under it, each
    with its path relative to the directory, in sorted order."""
    if not os.path.isdir(path):
        return sha256_of(path)
    h = hashlib.sha256()
    for root, dirs, names in os.walk(path):
        dirs.sort()
        for name in sorted(names):
            full = os.path.join(root, name)
            h.update(os.path.relpath(full, path).encode("utf-8", "surrogateescape") + b"\0")
            h.update(bytes.fromhex(sha256_of(full)))
    return h.hexdigest()


def same_content(path: str, size_now: int, size: int, sha256: str) -> bool:
    """Whether ``path``, of ``size_now`` bytes by the stat its caller compared, still holds the
    content recorded as ``size`` bytes of SHA-256 ``sha256``: asked of a file whose modification
    time changed since it was recorded (a copy that did not keep the times, a restored backup);
    the caller accepts the file when it does. A file of another size is not hashed; a
    directory's own size depends on its file system, not its content: only its hash counts. A
    file that cannot be read raises :class:`errors.HostError`."""
    if size_now != size and not os.path.isdir(path):
        return False
    return content_sha256(path) == sha256
