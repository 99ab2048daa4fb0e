"""The one place that builds a network: ``NETWORKS`` names every network family and its builder;
``build_model`` gives the network of a named architecture (``arch_options``: cho2014,
rnnsearch, gnmt, transformer, and the options that override them).

Every network implements ``network.Network``, so scorers, beam search, training and the
analyses take any of them. **Adding a network family** is one module under ``model/`` (a class
implementing ``network.Network``) and one line here: ``"name": builder`` in ``NETWORKS``, the
builder taking the sizes (``ModelConfig``) and the architecture's options (``ArchConfig``, whose
``name`` picks the family; None only for cho2014, whose model file holds no options). The model
file stores ``ArchConfig`` options: a family that is a named set of them (as rnnsearch, gnmt and transformer
are) also lists its defaults in ``arch_options.ARCHITECTURES``.

The architectures' options live in ``arch_options`` (imported here too, so that
``architectures.ArchConfig`` and the rest keep their names); this module adds the networks.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import replace
from typing import Any

from .arch_options import ARCHITECTURES, RECURRENT_MODEL_OPTIONS, RECURRENT_OPTIONS, ArchConfig
from .cho2014 import ModelConfig, RNNEncoderDecoder
from .network import Network
from .stacked import StackedEncoderDecoder
from .transformer import UNUSED_SIZES, TransformerEncoderDecoder, size_problem

__all__ = ["ARCH_NAMES", "ARCHITECTURES", "NETWORKS", "ArchConfig", "Network", "arch_config", "build_model"]


def _stacked(config: ModelConfig, arch: ArchConfig | None) -> Network:
    if arch is None:
        raise ValueError("a stacked network needs its architecture options")
    return StackedEncoderDecoder(config, arch)


def _transformer(config: ModelConfig, arch: ArchConfig | None) -> Network:
    if arch is None:
        raise ValueError("a transformer needs its architecture options")
    return TransformerEncoderDecoder(config, arch)


#: Network families by name: name -> builder(sizes, options or None). One line per family.
NETWORKS: dict[str, Callable[[ModelConfig, ArchConfig | None], Network]] = {
    "cho2014": lambda config, arch: RNNEncoderDecoder(config),
    "rnnsearch": _stacked,
    "gnmt": _stacked,
    "transformer": _transformer,
}


#: The architectures ``train --arch`` offers, the first the default.
ARCH_NAMES = tuple(NETWORKS)


def arch_config(name: str, *, model_options: Collection[str] = (), **overrides: Any) -> ArchConfig | None:
    """The options of architecture ``name`` with the non-None ``overrides``; None for a family
    built without options (cho2014, the paper's network), which refuses every override.
    ``model_options``: the options of ``ModelConfig`` that were given (not left at their
    defaults); the transformer refuses those only the recurrent networks read, as it refuses
    the recurrent overrides."""
    given = {k: v for k, v in overrides.items() if v is not None}
    if name not in NETWORKS:
        raise ValueError(f"architecture must be one of {ARCH_NAMES}, not {name!r}")
    if name not in ARCHITECTURES:
        if given:
            why = "cho2014 is the paper's network and" if name == "cho2014" else f"{name}"
            raise ValueError(
                f"{why} takes no architecture option ({', '.join(sorted(given))}); "
                f"choose --arch {' or '.join(ARCHITECTURES)}"
            )
        return None
    recurrent = (
        [n for n in RECURRENT_OPTIONS if n in given] + [n for n in RECURRENT_MODEL_OPTIONS if n in model_options]
        if name == "transformer"
        else []
    )
    if recurrent:
        raise ValueError(
            f"the transformer takes none of the recurrent options ({', '.join(_option(n) for n in recurrent)}); "
            "its options are --layers, --heads, --dropout and --embed-dropout"
        )
    return replace(ARCHITECTURES[name], **given)


def _option(name: str) -> str:
    """The command-line option of a setting: ``cell_type`` -> ``--cell-type``."""
    return "--" + name.replace("_", "-")


def sizes_problem(embed_dim: int, arch: ArchConfig | None) -> str | None:
    """Why a network of ``arch`` cannot have these sizes (None where it can), said before any
    data is read: the transformer's width must be divisible by its heads."""
    return size_problem(embed_dim, arch) if arch is not None and arch.name == "transformer" else None


def unused_sizes(arch: ArchConfig | None) -> tuple[str, ...]:
    """The sizes of ``ModelConfig`` that a network of ``arch`` does not read (the transformer's
    maxout and output rank): no weight has them, and the training summary leaves them out."""
    return UNUSED_SIZES if arch is not None and arch.name == "transformer" else ()


def build_model(config: ModelConfig, arch: ArchConfig | None = None) -> Network:
    """The network of ``arch`` (None: cho2014) with the sizes of ``config``."""
    return NETWORKS["cho2014" if arch is None else arch.name](config, arch)
