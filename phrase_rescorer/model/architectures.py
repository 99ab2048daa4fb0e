"""The one place that builds a network: ``build_model`` gives the network of a named
architecture (``arch_options``: cho2014, rnnsearch, gnmt, and the options that override them).

The architectures' options live in ``arch_options`` (imported here too, so that
``architectures.ArchConfig`` and the rest keep their names); this module adds the networks.
"""

from __future__ import annotations

from .arch_options import ARCH_NAMES, ARCHITECTURES, ArchConfig, arch_config, arch_name
from .encoder_decoder import ModelConfig, RNNEncoderDecoder
from .stacked import StackedEncoderDecoder

__all__ = ["ARCH_NAMES", "ARCHITECTURES", "ArchConfig", "Network", "arch_config", "arch_name", "build_model"]

#: A network of any architecture (what ``build_model`` and ``Checkpoint.build_model`` give).
Network = RNNEncoderDecoder | StackedEncoderDecoder


def build_model(config: ModelConfig, arch: ArchConfig | None = None) -> Network:
    """The network of ``arch`` (None: cho2014) with the sizes of ``config``."""
    if arch is None:
        return RNNEncoderDecoder(config)
    return StackedEncoderDecoder(config, arch)
