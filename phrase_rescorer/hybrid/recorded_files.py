"""The files a bundle records, each as an entry of ``bundle.json``, and the check that each is
still the one recorded.

Three kinds of entry (``bundle``'s module docstring says which file gets which):

* :func:`hashed`: a file by absolute path, size and SHA-256, hashed again on every check (the
  feature networks and the candidate networks: megabytes);
* :func:`copied`: a copy in the bundle's directory, by its name there (found wherever the
  bundle moves), the path it was copied from, size and SHA-256;
* :func:`read_by_decoder`: a file the decoder reads (tables, LMs: gigabytes), by absolute path,
  size, modification time (ns) and SHA-256, hashed again only when its modification time
  changed (``checksums.same_content``); an entry written before the hash was recorded compares
  size and modification time alone.

:func:`check` tells what differs (a file whose content cannot be read raises
:class:`errors.HostError`, exit 6); the reader words the refusal.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from ..checksums import content_sha256, same_content, sha256_of


def hashed(path: str) -> dict[str, Any]:
    """A network's entry: compared by size and SHA-256 on every check."""
    return {"path": os.path.abspath(path), "size": os.path.getsize(path), "sha256": sha256_of(path)}


def copied(path: str, name: str) -> dict[str, Any]:
    """A copy's entry: its name in the bundle, where it was copied from."""
    return {**hashed(path), "path": name, "from": os.path.abspath(path)}


def read_by_decoder(path: str) -> dict[str, Any]:
    """A file the decoder reads: compared by size and modification time, hashed again when the
    time changed."""
    info = os.stat(path)
    return {
        "path": os.path.abspath(path),
        "size": info.st_size,
        "mtime_ns": info.st_mtime_ns,
        "sha256": content_sha256(path),
    }


def entries(record: dict[str, Any]) -> list[dict[str, Any]]:
    """Every file entry of a bundle's record, copies first."""
    found = [record["ini"], record["weights"], *record["models"]]
    if record.get("candidates"):
        found += record["candidates"]["networks"]
    if record.get("ngram_lm"):
        found.append(record["ngram_lm"])
    return found + record["ini_files"]


@dataclass(frozen=True)
class Checked:
    path: str
    missing: str | None = None  # why the file cannot be found (the system's words for stat's failure)
    differs: str | None = None  # what differs from the record: "size", "content (SHA-256)", ...
    retimed: bool = False  # its modification time alone changed, its content is the recorded one


def check(directory: str, entry: dict[str, Any]) -> Checked:
    """The file of ``entry`` (a name relative to ``directory``, or an absolute path) against its record."""
    path = os.path.join(directory, entry["path"])  # an absolute path stays as it is
    try:
        info = os.stat(path)
    except OSError as e:
        return Checked(path, missing=e.strerror.lower() if e.strerror else "unreadable")
    if info.st_size != entry["size"] and not os.path.isdir(path):
        return Checked(path, differs="size")
    if "mtime_ns" in entry and info.st_mtime_ns != entry["mtime_ns"]:
        if "sha256" not in entry:
            return Checked(path, differs="size or modification time")
        if same_content(path, info.st_size, entry["size"], entry["sha256"]):
            return Checked(path, retimed=True)
        return Checked(path, differs="content (SHA-256)")
    if "sha256" in entry and "mtime_ns" not in entry and content_sha256(path) != entry["sha256"]:
        return Checked(path, differs="content (SHA-256)")
    return Checked(path)
