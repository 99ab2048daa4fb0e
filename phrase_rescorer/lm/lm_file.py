"""The CSLM's model file: self-describing, versioned, read with ``torch.load(weights_only=True)``.

    format          "phrase_rescorer.cslm"
    format_version  1
    package_version the phrase_rescorer version that wrote it
    config          LMConfig as a dict
    vocab           the shortlist (ids are list positions; starts <pad> <unk> </s> <s>)
    state_dict      the weights
    info            training facts: seed, steps, epochs, held-out perplexity, argv, language
    training_state  optimizer, RNG states and data position for ``--resume`` (optional)

The configuration is checked against the stored weights' shapes before the network is built, so
a tampered file is refused without allocating what it claims. Written through
``output.AtomicOutput`` (complete or absent).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from .. import __version__
from ..data.vocab import Vocabulary
from ..model.files import CSLM_FORMAT, CheckpointError, write_torch_file
from ..model.kinds import ModelFile, check_kind
from .network import CSLM, LMConfig
from .text import check_vocabulary

FORMAT = CSLM_FORMAT
FORMAT_VERSION = 1


@dataclass
class LMFile:
    config: LMConfig
    vocab: Vocabulary
    state_dict: dict[str, torch.Tensor]
    info: dict[str, Any] = field(default_factory=dict)
    training_state: dict[str, Any] | None = None
    path: str | None = None

    def build(self, device: torch.device | str = "cpu") -> CSLM:
        model = CSLM(self.config)
        model.load_state_dict(self.state_dict)
        return model.to(device).eval()

    @property
    def language(self) -> str | None:
        value = self.info.get("language")
        return value if isinstance(value, str) and value else None


def save_lm(
    path: str,
    model: CSLM,
    vocab: Vocabulary,
    info: dict[str, Any] | None = None,
    training_state: dict[str, Any] | None = None,
) -> None:
    payload = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "package_version": __version__,
        "config": model.config.to_dict(),
        "vocab": list(vocab.tokens),
        "state_dict": {k: v.detach().cpu() for k, v in model.state_dict().items()},
        "info": info or {},
        "training_state": training_state,
    }
    write_torch_file(path, payload)


def load_lm(source: str | ModelFile, option: str = "load_lm") -> LMFile:
    """The CSLM of the model file ``source``, read (``model.kinds.open_model``) unless given read,
    and checked; every problem is a ``CheckpointError`` naming the file (a network: what
    ``option``, the command and option given it, takes)."""
    opened = check_kind(source, option, ("cslm",))
    path, payload = opened.path, opened.payload
    if payload.get("format_version") != FORMAT_VERSION:
        raise CheckpointError(
            f"{path}: CSLM file format version {payload.get('format_version')}; this "
            f"phrase_rescorer {__version__} reads version {FORMAT_VERSION}"
        )
    try:
        config = LMConfig.from_dict(payload["config"])
        vocab = Vocabulary(payload["vocab"])
        check_vocabulary(vocab)
        state = payload["state_dict"]
        expected = config.weight_shapes()
        if not isinstance(state, dict) or set(state) != set(expected):
            raise ValueError("its weights are not those of its configuration")
        for name, shape in expected.items():
            if tuple(state[name].shape) != shape:
                raise ValueError(f"{name} has shape {tuple(state[name].shape)}, its configuration says {shape}")
        if len(vocab) != config.vocab_size:
            raise ValueError(f"{len(vocab)} shortlist words for a vocab_size of {config.vocab_size}")
        return LMFile(config, vocab, state, payload.get("info") or {}, payload.get("training_state"), path)
    except (KeyError, ValueError, TypeError, AttributeError) as e:
        raise CheckpointError(f"{path}: inconsistent model file: {e}") from e
