"""The one model file: self-describing, versioned, loadable with ``torch.load(weights_only=True)``.

A checkpoint holds everything needed to score with a network and to know where it came from:

    format          "phrase_rescorer.checkpoint"
    format_version  FORMAT_VERSION (refused on load if different)
    package_version the phrase_rescorer version that wrote it
    config          ModelConfig as a dict
    src_vocab       source shortlist tokens (ids are list positions)
    tgt_vocab       target shortlist tokens
    state_dict      the weights
    info            training facts: seed, steps, best validation figures, argv, table hash ...
                    and source_lang / target_lang (``train --source-lang``; None or absent:
                    not recorded, as in files written before they were)
    training_state  optimizer, RNG states and data position for ``--resume`` (optional)

Only tensors, numbers, strings, lists and dicts are stored, so the safe ``weights_only`` loader
reads it. Files are written to a temporary name and renamed, so a crash never leaves a partial
checkpoint under the final name.
"""

from __future__ import annotations

import hashlib
import io
import os
import pickle
import zipfile
from dataclasses import dataclass, field
from typing import Any

import torch

from .. import __version__
from ..data.vocab import Vocabulary
from .encoder_decoder import ModelConfig, RNNEncoderDecoder

FORMAT = "phrase_rescorer.checkpoint"
FORMAT_VERSION = 1


class CheckpointError(ValueError):
    """A model file that cannot be used; the message names the file and what is wrong."""


@dataclass
class Checkpoint:
    config: ModelConfig
    src_vocab: Vocabulary
    tgt_vocab: Vocabulary
    state_dict: dict[str, torch.Tensor]
    info: dict[str, Any] = field(default_factory=dict)
    training_state: dict[str, Any] | None = None
    package_version: str = __version__
    path: str | None = None

    @property
    def source_lang(self) -> str | None:
        """The language of the table's source side (``en``), if the model file records it."""
        return _language(self.info.get("source_lang"))

    @property
    def target_lang(self) -> str | None:
        """The language of the table's target side (``fr``), if the model file records it."""
        return _language(self.info.get("target_lang"))

    def build_model(self, device: torch.device | str = "cpu") -> RNNEncoderDecoder:
        model = RNNEncoderDecoder(self.config)
        model.load_state_dict(self.state_dict)
        return model.to(device).eval()

    def fingerprint(self) -> str:
        """A short hash of the weights, config and vocabularies (for reproducibility signatures)."""
        h = hashlib.sha256()
        h.update(repr(sorted(self.config.to_dict().items())).encode())
        h.update("\n".join(self.src_vocab.tokens).encode())
        h.update(b"\x00")
        h.update("\n".join(self.tgt_vocab.tokens).encode())
        for name in sorted(self.state_dict):
            h.update(name.encode())
            h.update(self.state_dict[name].detach().cpu().contiguous().float().numpy().tobytes())
        return h.hexdigest()[:12]


def save_checkpoint(
    path: str,
    model: RNNEncoderDecoder,
    src_vocab: Vocabulary,
    tgt_vocab: Vocabulary,
    info: dict[str, Any] | None = None,
    training_state: dict[str, Any] | None = None,
) -> None:
    payload = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "package_version": __version__,
        "config": model.config.to_dict(),
        "src_vocab": list(src_vocab.tokens),
        "tgt_vocab": list(tgt_vocab.tokens),
        "state_dict": {k: v.detach().cpu() for k, v in model.state_dict().items()},
        "info": info or {},
        "training_state": _to_cpu(training_state),
    }
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise CheckpointError(f"{path}: output directory does not exist")
    tmp = os.path.join(directory, f".{os.path.basename(path)}.tmp-{os.getpid()}")
    try:
        with _File(tmp, "wb") as f:
            try:
                torch.save(payload, f)
            except RuntimeError as e:  # torch reports a failed write (a full disk) this way
                if f.error is None:
                    raise
                raise f.error from e
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as e:
        if os.path.exists(tmp):
            os.unlink(tmp)
        if isinstance(e, OSError) and e.filename in (None, tmp):
            e.filename = path  # "rnn.pt: disk full", not a temporary name or nothing
        raise


class _File(io.FileIO):
    """An unbuffered file that keeps the first OSError of a write, which torch.save would
    otherwise turn into a RuntimeError about zip positions."""

    error: OSError | None = None

    def write(self, data) -> int:  # type: ignore[no-untyped-def, override]
        try:
            return super().write(data)
        except OSError as e:
            self.error = self.error or e
            raise


def load_checkpoint(path: str) -> Checkpoint:
    """Read and check a model file; every problem becomes a ``CheckpointError`` naming the file."""
    if not os.path.isfile(path):
        raise CheckpointError(f"{path}: no such model file")
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except (RuntimeError, EOFError, OSError, pickle.UnpicklingError, zipfile.BadZipFile,
            ValueError) as e:  # torch reports a cut-off zip archive as OSError(EINVAL)
        # torch's own text runs to several sentences of advice: keep the first
        detail = str(e).split(". ")[0] or type(e).__name__
        raise CheckpointError(
            f"{path}: not a readable phrase_rescorer model (truncated or corrupt file?): {detail}"
        ) from e
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise CheckpointError(f"{path}: not a phrase_rescorer model file")
    version = payload.get("format_version")
    if version != FORMAT_VERSION:
        raise CheckpointError(
            f"{path}: model file format version {version} (written by phrase_rescorer "
            f"{payload.get('package_version', '?')}); this phrase_rescorer {__version__} reads "
            f"format version {FORMAT_VERSION}. Score with the version that trained it, or retrain."
        )
    try:
        ckpt = Checkpoint(
            config=ModelConfig.from_dict(payload["config"]),
            src_vocab=Vocabulary(payload["src_vocab"]),
            tgt_vocab=Vocabulary(payload["tgt_vocab"]),
            state_dict=payload["state_dict"],
            info=payload.get("info") or {},
            training_state=payload.get("training_state"),
            package_version=payload.get("package_version", "?"),
            path=path,
        )
        # Refuse weights that do not fit the stated configuration now, not mid-run.
        RNNEncoderDecoder(ckpt.config).load_state_dict(ckpt.state_dict)
    except (KeyError, ValueError, TypeError, RuntimeError) as e:
        raise CheckpointError(f"{path}: inconsistent model file: {e}") from e
    if len(ckpt.src_vocab) != ckpt.config.src_vocab_size or len(ckpt.tgt_vocab) != ckpt.config.tgt_vocab_size:
        raise CheckpointError(f"{path}: vocabulary sizes do not match the model configuration")
    return ckpt


def _language(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _to_cpu(obj: Any) -> Any:
    """``obj`` with every tensor inside (optimizer state, RNG states) copied to the CPU."""
    if isinstance(obj, torch.Tensor):
        return obj.detach().cpu()
    if isinstance(obj, dict):
        return {k: _to_cpu(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return type(obj)(_to_cpu(v) for v in obj)
    return obj
