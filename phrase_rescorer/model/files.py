"""A model file's bytes: the format names of the two kinds of file (a network's checkpoint, a
CSLM), the error of a file that cannot be used, and writing and reading with torch's safe loader
(``weights_only``: only tensors, numbers, strings, lists and dicts, no code runs). Files are
written through ``output.AtomicOutput`` (an exclusive temporary, fsynced and renamed), so a crash
never leaves a partial file under the final name."""

from __future__ import annotations

import hashlib
import os
import pickle
import struct
import warnings
import zipfile
from typing import Any

import torch

from ..errors import ModelError
from ..output import AtomicOutput

#: The format of a network's model file (``checkpoint``).
FORMAT = "phrase_rescorer.checkpoint"

#: The CSLM's model file format (``lm.lm_file`` writes it; ``kinds`` tells the kinds apart).
CSLM_FORMAT = "phrase_rescorer.cslm"


class CheckpointError(ModelError):
    """A model file that cannot be used; the message names the file and what is wrong."""


def write_torch_file(path: str, payload: dict[str, Any]) -> None:
    """``payload`` to ``path`` with ``torch.save``, through ``AtomicOutput`` (complete or absent);
    a failed write (a full disk) is the ``OSError`` naming the file, not torch's RuntimeError."""
    output = AtomicOutput(path, compress=False)
    with output as f:
        try:
            torch.save(payload, f)
        except RuntimeError as e:  # torch reports a failed write (a full disk) this way
            if output.write_error is None:
                raise
            raise output.write_error from e


def read_torch_file(path: str) -> Any:
    """What ``torch.load(weights_only=True)`` reads of ``path`` (no code runs); a missing,
    truncated or foreign file is a :class:`CheckpointError` naming it."""
    return _read(path, hashed=False)[0]


def read_torch_file_hashed(path: str) -> tuple[Any, str]:
    """``read_torch_file`` and the SHA-256 of the bytes it read: the fingerprint of what was
    loaded, even when the file is replaced while the caller works with it."""
    payload, digest = _read(path, hashed=True)
    return payload, str(digest)


def _read(path: str, *, hashed: bool) -> tuple[Any, str | None]:
    if os.path.isdir(path):
        raise CheckpointError(f"{path}: a directory, not a model file")
    if not os.path.isfile(path):
        raise CheckpointError(f"{path}: no such model file")
    try:
        with warnings.catch_warnings():  # a foreign file's first byte read as a pickle protocol
            warnings.filterwarnings("ignore", message="Detected pickle protocol", category=UserWarning)
            if not hashed:
                return torch.load(path, map_location="cpu", weights_only=True), None
            with open(path, "rb") as f:  # one open file: a file renamed over it meanwhile is not read
                h = hashlib.sha256()
                for chunk in iter(lambda: f.read(1 << 20), b""):
                    h.update(chunk)
                f.seek(0)
                digest = h.hexdigest()
                return torch.load(f, map_location="cpu", weights_only=True), digest
    except (
        RuntimeError,
        EOFError,
        OSError,
        pickle.UnpicklingError,
        zipfile.BadZipFile,
        ValueError,
        KeyError,  # the weights-only unpickler on text or random bytes (an unknown opcode, an empty stack)
        IndexError,
        TypeError,
        AttributeError,
        struct.error,
    ) as e:  # torch reports a cut-off zip archive as OSError(EINVAL)
        # torch's own text runs to several sentences of advice: keep the first
        detail = str(e).split(". ")[0] or type(e).__name__
        raise CheckpointError(
            f"{path}: not a readable phrase_rescorer model (truncated or corrupt file?): {detail}"
        ) from e
