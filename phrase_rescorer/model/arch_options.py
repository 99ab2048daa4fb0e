"""Named architectures as sets of options (``ArchConfig``); ``architectures.build_model`` builds them
(``architectures.NETWORKS`` names every family; ``architectures.arch_config`` reads the options).

========== ============================================================================
cho2014    Cho et al. (2014): ``cho2014.RNNEncoderDecoder``, the paper's model,
           unchanged (the default). One GRU layer each side, a fixed summary c.
rnnsearch  Bahdanau et al. (2015): bidirectional GRU encoder, additive attention from
           the previous decoder state, the context fed to the decoder GRU and to the
           maxout deep output at each step.
gnmt       Wu et al. (2016) scaled to phrase pairs: LSTM cells, bidirectional bottom
           encoder layer then unidirectional layers, residual connections from the
           third layer up, attention from the bottom decoder layer fed to every other
           decoder layer and to the output. GNMT has 8 layers; a phrase of a few tokens
           needs fewer: 4 by default (``--layers``).
transformer Vaswani et al. (2017), pre-norm, as the Multi30k literature sizes it: 4
           layers a side, 4 heads (``--heads``); ``transformer.py``. It takes none of
           the recurrent options (cell, bidirectional, residual, attention kind, and
           ``ModelConfig``'s GRU variant and summary).
========== ============================================================================

Every option of ``ArchConfig`` can be overridden on top of a named architecture (``train
--layers 2 --attention general``); cho2014 takes none of them (it is the paper's network).
The sizes (embedding, hidden, maxout, output rank) and vocabularies stay in ``ModelConfig``.

``dropout`` and ``embed_dropout`` (``train --dropout``, ``--embed-dropout``) are stored with the
other options, so that a loaded network has the modules it trained with; they act only in
training mode, and a network that scores is in eval mode (``Checkpoint.build_model``), where
dropout is the identity.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

from .attention import ATTENTIONS
from .cells import CELL_TYPES
from .decoders import ATTENTION_FROM


@dataclass(frozen=True)
class ArchConfig:
    name: str = "rnnsearch"  # the named architecture these options started from
    cell_type: str = "gru"  # gru (ModelConfig.cell picks reset_before/reset_after) or lstm
    layers: int = 1  # encoder and decoder layers
    bidirectional: bool = True  # bidirectional bottom encoder layer
    residual_from: int = 0  # residual connections from this layer up; 0: none
    attention: str = "additive"  # none, additive, dot, general
    attention_from: str = "top"  # the decoder layer whose previous output is the query
    dropout: float = 0.0  # training only: recurrent outputs, attention context, readout (0: none)
    embed_dropout: float | None = None  # training only: embeddings (None: as ``dropout``)
    heads: int = 0  # attention heads of the transformer; 0 for the recurrent architectures

    def __post_init__(self) -> None:
        named = globals().get("ARCHITECTURES")  # None while the named sets below are built
        if named is not None and self.name not in named:
            raise ValueError(f"architecture must be one of {tuple(named)}, not {self.name!r}")
        if self.cell_type not in CELL_TYPES:
            raise ValueError(f"cell type must be one of {CELL_TYPES}, not {self.cell_type!r}")
        if self.attention not in ATTENTIONS:
            raise ValueError(f"attention must be one of {ATTENTIONS}, not {self.attention!r}")
        if self.attention_from not in ATTENTION_FROM:
            raise ValueError(f"attention_from must be one of {ATTENTION_FROM}, not {self.attention_from!r}")
        if self.layers < 1:
            raise ValueError("layers must be at least 1")
        self._check_heads(named)
        for name in ("dropout", "embed_dropout"):
            rate = getattr(self, name)
            if rate is not None and not (isinstance(rate, int | float) and 0.0 <= rate < 1.0):
                raise ValueError(f"{name} must be at least 0 and below 1, not {rate!r}")
        lowest = 3 if self.bidirectional else 2  # a residual needs equal sizes on both sides
        if self.residual_from and self.residual_from < lowest:
            why = (
                "the bidirectional bottom layer has twice the units"
                if self.bidirectional
                else "layer 1 reads embeddings"
            )
            raise ValueError(f"residual connections can start at layer {lowest} at the lowest ({why})")
        # Above the layer count a start means no residual connection. Only the architecture's own
        # start is kept there (gnmt's 3 in a 1- or 2-layer gnmt, as train writes it); train writes
        # no other, so one is a tampered file, whose weights may have been trained with the
        # connections it removes (every line would score differently).
        own = globals().get("ARCHITECTURES", {}).get(self.name)
        if self.residual_from > self.layers and (own is None or self.residual_from != own.residual_from):
            raise ValueError(
                f"residual connections from layer {self.residual_from} of {self.layers}: "
                "there is no such layer (0: none)"
            )

    def _check_heads(self, named: dict[str, ArchConfig] | None) -> None:
        """Heads for the transformer alone, which keeps the recurrent options at its own values."""
        if self.name != "transformer":
            if self.heads:
                raise ValueError(f"heads are the transformer's option; {self.name} takes none")
            return
        if self.heads < 1:
            raise ValueError("the transformer needs at least 1 head")
        own = None if named is None else named["transformer"]
        changed = [n for n in RECURRENT_OPTIONS if own is not None and getattr(self, n) != getattr(own, n)]
        if changed:
            raise ValueError(
                f"the transformer takes none of the recurrent options ({', '.join(changed)}); "
                "its options are --layers, --heads, --dropout and --embed-dropout"
            )

    @property
    def embedding_dropout(self) -> float:
        """The dropout rate of the embeddings (``embed_dropout``, else ``dropout``)."""
        return self.dropout if self.embed_dropout is None else self.embed_dropout

    def to_dict(self) -> dict[str, Any]:
        """The options as stored in model files and run records. The dropout rates are left out
        at their defaults, so a network without dropout is stored (and fingerprinted, and
        resumed) exactly as before they existed; files without them read as dropout 0."""
        d = asdict(self)
        for name in _OMITTED_AT_DEFAULT:
            if d[name] == getattr(ArchConfig, name):
                del d[name]
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ArchConfig:
        unknown = set(d) - {f.name for f in fields(cls)}
        if unknown:
            raise ValueError(f"unknown architecture settings: {sorted(unknown)}")
        return cls(**d)


#: The recurrent architectures' options, which the transformer keeps at its own placeholder values.
RECURRENT_OPTIONS = ("cell_type", "bidirectional", "residual_from", "attention", "attention_from")
#: ``ModelConfig``'s options that only the recurrent networks read (the GRU variant, cho2014's
#: summary c): a transformer given them is refused as for the options above.
RECURRENT_MODEL_OPTIONS = ("cell", "summary")
#: Options left out of the stored dict at their defaults, so that files made before they existed
#: read, fingerprint and resume as they did: the dropout rates (training only: dropout is off
#: whenever a network scores) and the transformer's heads.
_OMITTED_AT_DEFAULT = ("dropout", "embed_dropout", "heads")


ARCHITECTURES: dict[str, ArchConfig] = {
    "rnnsearch": ArchConfig("rnnsearch", "gru", 1, True, 0, "additive", "top"),
    "gnmt": ArchConfig("gnmt", "lstm", 4, True, 3, "additive", "bottom"),
    "transformer": ArchConfig("transformer", "gru", 4, False, 0, "dot", "top", heads=4),
}
