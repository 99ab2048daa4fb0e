"""The one model file: self-describing, versioned, loadable with ``torch.load(weights_only=True)``.

A checkpoint holds everything needed to score with a network and to know where it came from:

    format          "phrase_rescorer.checkpoint"
    format_version  1 for the paper's network (cho2014) on words, 2 for the other
                    architectures and for subword models
                    (``READ_VERSIONS``; any other is refused on load)
    package_version the phrase_rescorer version that wrote it
    config          ModelConfig as a dict
    arch            ArchConfig as a dict (format version 2 only; version 1 files are cho2014;
                    its dropout rates only where not 0: a file without them has none)
    subwords        {"source": uint8 tensor, "target": uint8 tensor}: each side's SentencePiece
                    model proto (``data.subwords``; format version 2 only, optional)
    src_vocab       source shortlist tokens (ids are list positions)
    tgt_vocab       target shortlist tokens
    state_dict      the weights
    info            training facts: seed, steps, best validation figures, argv, table hash ...
                    and source_lang / target_lang (``train --source-lang``; None or absent:
                    not recorded, as in files written before they were): the languages the
                    network reads and writes; direction ("forward": p(target | source) of the
                    data trained on, "inverse": p(source | target), the network reading the
                    data's target side; absent: forward) and trained_on ("phrase pairs",
                    "sentence pairs"); run_id, the identity of the training run that wrote
                    it (``training.same_run.run_id``; absent in files written before runs had
                    one), which ``average`` compares
    training_state  optimizer, RNG states and data position for ``--resume`` (optional)

A cho2014 model is written exactly as before the other architectures existed (version 1, no
``arch``), so older phrase_rescorer versions keep reading it and its fingerprint is unchanged;
a version-2 file is refused by them with the version message instead of a confusing weights
mismatch.

Only tensors, numbers, strings, lists and dicts are stored, so the safe ``weights_only`` loader
reads it. Files are written through ``output.AtomicOutput`` (an exclusive temporary, fsynced and
renamed), so a crash never leaves a partial checkpoint under the final name; a full disk is an
``OSError`` naming the model file, not torch's ``RuntimeError``.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

import torch

from .. import __version__
from ..data.subwords import SubwordError, Subwords
from ..data.vocab import Vocabulary
from ..moses.words import split_words
from .architectures import ArchConfig, Network, build_model, unused_sizes
from .cho2014 import ModelConfig
from .files import FORMAT, CheckpointError, write_torch_file
from .kinds import NETWORKS, ModelFile, ModelKind, check_kind, network_kind

FORMAT_VERSION = 2  # the newest; files are written with the lowest version that holds them
READ_VERSIONS = (1, 2)


def unusable_weights(path: str | None, value: float, where: str) -> CheckpointError:
    """The error of every command whose network (any kind: a phrase or translation network, a
    CSLM) gave a log p that is no finite value <= 0 (NaN: a diverged training) for the input at
    ``where`` (``FILE:LINE``); exit 4."""
    return CheckpointError(
        f"{path or 'model'}: the network gave log p = {value!r} for {where}; its weights are "
        "unusable (diverged training?)"
    )


#: ``info["target_order"]`` of a network that writes its output from the last token to the first
#: (``train-nmt --right-to-left``); a file without the key writes left to right.
RIGHT_TO_LEFT = "right-to-left"


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
    arch: ArchConfig | None = None  # None: cho2014
    subwords: tuple[Subwords, Subwords] | None = None  # (source, target) units; None: words

    def split(self, phrase: str, side: int) -> list[str]:
        """What the network reads of a table phrase: its tokens, or their subword units
        (``side`` 0: source, 1: target), the target's reversed for a right-to-left network."""
        tokens = split_words(phrase)
        units = tokens if self.subwords is None else self.subwords[side].split(tokens)
        return units[::-1] if side == 1 and self.right_to_left else units

    def written(self, units: list[str]) -> list[str]:
        """The target units a network predicted (``tgt_vocab.decode``), in reading order."""
        return units[::-1] if self.right_to_left else units

    @property
    def right_to_left(self) -> bool:
        """Whether the network writes its target from the last token to the first."""
        return self.info.get("target_order") == RIGHT_TO_LEFT

    @property
    def direction(self) -> str:
        """ "forward" (p(target | source) of the data it was trained on) or "inverse"
        (p(source | target): the network reads the data's target side)."""
        return "inverse" if self.info.get("direction") == "inverse" else "forward"

    @property
    def run_id(self) -> str | None:
        """The identity of the training run that wrote the file (None: not recorded)."""
        value = self.info.get("run_id")
        return value if isinstance(value, str) and value else None

    @property
    def kind(self) -> ModelKind:
        """(family, direction) of :data:`FAMILIES` and :data:`DIRECTIONS`."""
        return network_kind(self.info)

    @property
    def inverse(self) -> bool:
        return self.direction == "inverse"

    @property
    def source_lang(self) -> str | None:
        """The language the network reads (``en``; that of the table's source side for a
        forward network, of its target side for an inverse one), if the model file records it."""
        return _language(self.info.get("source_lang"))

    @property
    def target_lang(self) -> str | None:
        """The language the network writes (``fr`` for a forward network), if the model file
        records it."""
        return _language(self.info.get("target_lang"))

    def build_model(self, device: torch.device | str = "cpu") -> Network:
        model = build_model(self.config, self.arch)
        model.load_state_dict(self.state_dict)
        return model.to(device).eval()

    def fingerprint(self) -> str:
        """A short hash of the weights, config and vocabularies (for reproducibility signatures)."""
        h = hashlib.sha256()
        h.update(repr(sorted(self.config.to_dict().items())).encode())
        if self.arch is not None:  # cho2014 fingerprints stay what they were
            h.update(repr(sorted(self.arch.to_dict().items())).encode())
        for model in self.subwords or ():
            h.update(model.proto)
        h.update("\n".join(self.src_vocab.tokens).encode())
        h.update(b"\x00")
        h.update("\n".join(self.tgt_vocab.tokens).encode())
        for name in sorted(self.state_dict):
            h.update(name.encode())
            h.update(self.state_dict[name].detach().cpu().contiguous().float().numpy().tobytes())
        return h.hexdigest()[:12]


def save_checkpoint(
    path: str,
    model: Network,
    src_vocab: Vocabulary,
    tgt_vocab: Vocabulary,
    info: dict[str, Any] | None = None,
    training_state: dict[str, Any] | None = None,
    subwords: tuple[Subwords, Subwords] | None = None,
) -> None:
    arch: ArchConfig | None = getattr(model, "arch", None)
    payload = {
        "format": FORMAT,
        "format_version": 1 if arch is None and subwords is None else 2,
        "package_version": __version__,
        "config": model.config.to_dict(),
        "src_vocab": list(src_vocab.tokens),
        "tgt_vocab": list(tgt_vocab.tokens),
        "state_dict": {k: v.detach().cpu() for k, v in model.state_dict().items()},
        "info": info or {},
        "training_state": _to_cpu(training_state),
    }
    if arch is not None:
        payload["arch"] = arch.to_dict()
    if subwords is not None:
        payload["subwords"] = {
            side: torch.from_numpy(m.tensor().copy()) for side, m in zip(("source", "target"), subwords, strict=True)
        }
    write_torch_file(path, payload)


def load_checkpoint(source: str | ModelFile, option: str = "load_checkpoint") -> Checkpoint:
    """The network of the model file ``source``, read (``kinds.open_model``) unless given read, and
    checked; every problem becomes a ``CheckpointError`` naming the file (a CSLM: what ``option``,
    the command and option given it, takes)."""
    opened = check_kind(source, option, NETWORKS)
    path, payload = opened.path, opened.payload
    version = payload.get("format_version")
    if version not in READ_VERSIONS:
        raise CheckpointError(
            f"{path}: model file format version {version} (written by phrase_rescorer "
            f"{payload.get('package_version', '?')}); this phrase_rescorer {__version__} reads "
            f"format versions {', '.join(map(str, READ_VERSIONS))}. Score with the version that "
            "trained it, or retrain."
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
            arch=ArchConfig.from_dict(payload["arch"]) if version == 2 and "arch" in payload else None,
            subwords=_subwords(payload.get("subwords")) if version == 2 else None,
        )
        # Refuse weights that do not fit the stated configuration now, not mid-run, and before
        # a network of the file's sizes is built (a tampered size would allocate gigabytes).
        check_weights(ckpt.config, ckpt.arch, ckpt.state_dict)
        if ckpt.subwords is not None:
            for side, units, vocab in zip(
                ("source", "target"), ckpt.subwords, (ckpt.src_vocab, ckpt.tgt_vocab), strict=True
            ):
                if units.vocabulary().tokens != vocab.tokens:
                    raise ValueError(f"its {side} subword units are not its {side} vocabulary")
    except SubwordError as e:
        raise CheckpointError(f"{path}: unreadable subword units: {e}") from e
    except (KeyError, ValueError, TypeError, RuntimeError) as e:
        raise CheckpointError(f"{path}: inconsistent model file: {e}") from e
    if len(ckpt.src_vocab) != ckpt.config.src_vocab_size or len(ckpt.tgt_vocab) != ckpt.config.tgt_vocab_size:
        raise CheckpointError(f"{path}: vocabulary sizes do not match the model configuration")
    return ckpt


#: The sizes of a configuration that set the shape of some weight (each must be one of them).
_SIZES = ("src_vocab_size", "tgt_vocab_size", "embed_dim", "hidden_dim", "maxout_dim", "output_rank")


def check_weights(config: ModelConfig, arch: ArchConfig | None, state_dict: Any) -> None:
    """Raise ``ValueError`` unless ``state_dict`` holds exactly the tensors, of exactly the
    shapes, that the network of ``config`` and ``arch`` has.

    First, before anything of the file's sizes is allocated, every size of the configuration
    must be a dimension of some stored weight (a tampered hidden size of 3000 beside weights of
    256 is refused at once, not after building a network of that size). Then the network is
    built on the CPU and its shapes compared. (Building it on torch's meta device instead made
    torchrun's processes abort now and then, "terminate called without an active exception",
    and a Ctrl-C inside that device context end the program by SIGINT: not used.)"""
    if not isinstance(state_dict, dict) or not all(isinstance(v, torch.Tensor) for v in state_dict.values()):
        raise ValueError("its weights are not a dictionary of tensors")
    dims = {d for tensor in state_dict.values() for d in tensor.shape}
    for name in (n for n in _SIZES if n not in unused_sizes(arch)):
        value = getattr(config, name)
        if value not in dims:
            raise ValueError(f"its configuration's {name} {value} is the size of none of its weights")
    expected = {k: tuple(v.shape) for k, v in build_model(config, arch).state_dict().items()}
    missing, unexpected = sorted(set(expected) - set(state_dict)), sorted(set(state_dict) - set(expected))
    if missing or unexpected:
        raise ValueError(
            f"its weights do not fit its configuration (missing: {missing[:3]}, unexpected: {unexpected[:3]})"
        )
    for name, shape in expected.items():
        if tuple(state_dict[name].shape) != shape:
            raise ValueError(
                f"weight {name} has shape {tuple(state_dict[name].shape)}, its configuration gives {shape}"
            )
        if not state_dict[name].is_floating_point():
            raise ValueError(f"weight {name} is not a floating-point tensor")


def _subwords(stored: dict[str, torch.Tensor] | None) -> tuple[Subwords, Subwords] | None:
    if stored is None:
        return None
    return Subwords(stored["source"].numpy().tobytes()), Subwords(stored["target"].numpy().tobytes())


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
