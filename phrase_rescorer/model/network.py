"""The one interface of every network (``Network``): what scorers, beam search, training and the
analyses call, whatever the architecture.

A network scores log p(target | source) one target token at a time, with no begin symbol
(e(y_0) = 0)::

    enc            = network.encode(src, src_len)       what the decoder reads of each source
    state          = network.start(enc)                 the decoder's state before y_1
    state, top, ctx, a = network.step(e(y_{t-1}), state, enc)
    logits         = network.readout(top, e(y_{t-1}), ctx)  over the target shortlist: p(y_t | y_<t, x)

``enc`` is an ``EncodedSource``: one row per source, ``select(which)`` gives one row per decoder
row (a source repeated for each of its targets or hypotheses), so that a step reads its own
source's rows. ``step`` also gives the attention weights ``a`` over the source positions (None
without attention: the coverage penalty of the beam search reads them). ``decode_outputs`` runs
the steps under teacher forcing (the network may compute them faster, all steps' input
projections at once) and ``forward(src, src_len, tgt)`` gives the teacher-forced logits that
``cho2014.sequence_log_probs``, the one definition of the score, reads.

A network may offer more than this interface for a faster exact path of its own; a caller asks
by capability, never by class: ``SummaryNetwork`` (cho2014's single left-to-right GRU summary)
lets the prefix scorer share encoder states over source prefixes and training run its packed
GRU computation.

Adding a network family: one module under ``model/`` with a class that implements ``Network``
(its ``EncodedSource`` included), and one line in ``architectures.NETWORKS`` naming its builder.
Every scorer (``prefix``, ``batched``, ``reference``), the beam search, sampling, training,
validation and the embedding export then work with it unchanged.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, Protocol, TypeGuard

import torch
from torch import nn

from .cho2014 import GRU, ModelConfig

#: (new decoder state, top output, context, attention weights or None): what ``Network.step``
#: gives; the top output and the context go to ``Network.readout``.
StepOutput = tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None]


class EncodedSource(Protocol):
    """What ``Network.encode`` gives for a batch of sources (one row per source)."""

    @property
    def sources(self) -> int:
        """The number of sources (rows)."""
        ...

    @property
    def width(self) -> int:
        """The source positions held per row (1 where the network keeps no positions)."""
        ...

    def select(self, which: torch.Tensor, width: int | None = None) -> Any:
        """The rows ``which`` (repeats allowed), cut to their first ``width`` positions when
        given (at least the longest of them: only padding goes)."""
        ...

    def padded(self, width: int) -> Any:
        """These rows with their positions padded to ``width`` (as masked padding)."""
        ...

    def cat(self, others: Sequence[Any]) -> Any:
        """These rows followed by the rows of ``others`` (of one width)."""
        ...


class Network(Protocol):
    """Every network of the tool (see the module docstring). The encoded source is typed
    ``Any`` in the decoder's calls: each network reads its own kind of ``EncodedSource``."""

    config: ModelConfig
    tgt_embed: nn.Embedding
    src_embed: nn.Embedding

    def encode(self, src: torch.Tensor, src_len: torch.Tensor) -> Any:
        """The ``EncodedSource`` of </s>-terminated, right-padded sources (B, S)."""
        ...

    def start(self, enc: Any) -> torch.Tensor:
        """The decoder's state before y_1 (B, N), one row per row of ``enc``."""
        ...

    def step(self, y_prev: torch.Tensor, state: torch.Tensor, enc: Any) -> StepOutput:
        """One decoder step from e(y_{t-1}) (B, E) and the state (B, N), each row reading its
        row of ``enc``."""
        ...

    def readout(self, top: torch.Tensor, y_prev: torch.Tensor, ctx: torch.Tensor) -> torch.Tensor:
        """Logits (.., V) over the target shortlist from a step's top output, e(y_{t-1}) and context."""
        ...

    def previous_word_embeddings(self, tgt: torch.Tensor) -> torch.Tensor:
        """e(y_{t-1}) for t = 1..T (B, T, E): a zero vector first, then the shifted targets."""
        ...

    def decode_outputs(
        self, enc: Any, tgt: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """Teacher forcing over targets (B, T): (top outputs (B, T, H), e(y_{t-1}) (B, T, E),
        contexts (B, T, D), attention weights (B, T, S) or None), for ``readout``."""
        ...

    def representation(self, enc: Any) -> torch.Tensor:
        """One vector per source (B, D): the network's phrase representation (``embed``)."""
        ...

    def reset_parameters(self, std: float = 0.01) -> None: ...

    def __call__(self, src: torch.Tensor, src_len: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        """Teacher-forced logits (B, T, V) (``forward``)."""
        ...

    # What every network has as a torch module.
    training: bool

    def parameters(self, recurse: bool = True) -> Iterator[nn.Parameter]: ...

    def named_parameters(self, *args: Any, **kwargs: Any) -> Iterator[tuple[str, nn.Parameter]]: ...

    def state_dict(self, *args: Any, **kwargs: Any) -> Any: ...

    def load_state_dict(self, *args: Any, **kwargs: Any) -> Any: ...

    def to(self, *args: Any, **kwargs: Any) -> Any: ...

    def train(self, mode: bool = True) -> Any: ...

    def eval(self) -> Any: ...


class SummaryNetwork(Network, Protocol):
    """A capability: the source read by one left-to-right GRU into a single summary c, the
    decoder a GRU fed by context terms of c (cho2014). The prefix scorer shares the encoder's
    states over common source prefixes with it, and training runs its packed GRU computation.
    Ask for it with :func:`is_summary_network`, not ``isinstance``."""

    encoder: GRU
    decoder: GRU
    G_l: nn.Linear  # the output layer: readout(...) = G_l(readout_features(...))

    def summarize(self, h_last: torch.Tensor) -> torch.Tensor: ...

    def context_terms(self, c: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]: ...

    def decoder_inputs(self, y_prev: torch.Tensor, ctx: torch.Tensor) -> torch.Tensor: ...

    def decoder_step(self, x_proj: torch.Tensor, h: torch.Tensor) -> torch.Tensor: ...

    def readout_features(self, h: torch.Tensor, y_prev: torch.Tensor, oc: torch.Tensor) -> torch.Tensor: ...


#: What ``SummaryNetwork`` adds to ``Network`` (tests/unit/test_network_interface.py keeps the two
#: lists equal).
SUMMARY_MEMBERS = (
    "encoder",
    "decoder",
    "G_l",
    "summarize",
    "context_terms",
    "decoder_inputs",
    "decoder_step",
    "readout_features",
)


def is_summary_network(model: object) -> TypeGuard[SummaryNetwork]:
    """Whether ``model`` offers the ``SummaryNetwork`` capability.

    Asked with ``hasattr``, which finds a module's submodules (``encoder``, ``decoder``): an
    ``isinstance`` test against a runtime-checkable protocol looks attributes up statically
    from Python 3.12 on and misses them, since ``nn.Module`` keeps submodules in its
    ``_modules`` dictionary, so cho2014 networks would silently lose their fast paths there."""
    return all(hasattr(model, name) for name in SUMMARY_MEMBERS)
