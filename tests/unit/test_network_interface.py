"""Every network is used through one interface (``model.network.Network``): a network that offers
that interface and nothing more is scored by every scorer and searched by the beam search, with
the scores of ``sequence_log_probs``.

The network here is cho2014 seen through the interface only (``InterfaceOnly`` hides its GRU
internals, so no cho2014 fast path can apply): it stands for a new network family. Tolerances
are those of the scorer tests (test_stacked_prefix, test_fast_scoring): float32, only the order
of float additions differs.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
from torch import nn

from phrase_rescorer.analysis.search import beam_search, greedy
from phrase_rescorer.data.batching import sequences_batch
from phrase_rescorer.model.architectures import NETWORKS, build_model
from phrase_rescorer.model.checkpoint import load_checkpoint
from phrase_rescorer.model.cho2014 import RNNEncoderDecoder, sequence_log_probs
from phrase_rescorer.model.network import SUMMARY_MEMBERS, Network, SummaryNetwork, is_summary_network
from phrase_rescorer.rescoring.prefix import PrefixScorer
from phrase_rescorer.rescoring.scorers import BatchedScorer, ReferenceScorer, make_scorer
from phrase_rescorer.rescoring.stacked_prefix import StackedPrefixScorer
from phrase_rescorer.rescoring.stacked_scorer import StackedScorer
from tests.helpers.rescore_data import one_thread, sample_window, tiny_arch_checkpoint  # noqa: F401

pytestmark = pytest.mark.usefixtures("one_thread")

ATOL, RTOL = 1e-4, 1e-5
INTERFACE = (
    "encode",
    "start",
    "step",
    "readout",
    "previous_word_embeddings",
    "decode_outputs",
    "representation",
    "reset_parameters",
    "forward",
    "config",
    "tgt_embed",
    "src_embed",
)


class InterfaceOnly(nn.Module):
    """A network offering ``Network`` and nothing else, computed by a cho2014 network."""

    def __init__(self, inner: RNNEncoderDecoder):
        super().__init__()
        self.inner = inner
        self.config, self.tgt_embed, self.src_embed = inner.config, inner.tgt_embed, inner.src_embed

    def encode(self, src: torch.Tensor, src_len: torch.Tensor) -> Any:
        return self.inner.encode(src, src_len)

    def start(self, enc: Any) -> torch.Tensor:
        return self.inner.start(enc)

    def step(self, y_prev: torch.Tensor, state: torch.Tensor, enc: Any) -> Any:
        return self.inner.step(y_prev, state, enc)

    def readout(self, top: torch.Tensor, y_prev: torch.Tensor, ctx: torch.Tensor) -> torch.Tensor:
        return self.inner.readout(top, y_prev, ctx)

    def previous_word_embeddings(self, tgt: torch.Tensor) -> torch.Tensor:
        return self.inner.previous_word_embeddings(tgt)

    def decode_outputs(self, enc: Any, tgt: torch.Tensor) -> Any:
        return self.inner.decode_outputs(enc, tgt)

    def representation(self, enc: Any) -> torch.Tensor:
        return self.inner.representation(enc)

    def reset_parameters(self, std: float = 0.01) -> None:
        self.inner.reset_parameters(std)

    def forward(self, src: torch.Tensor, src_len: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        return self.inner(src, src_len, tgt)


@pytest.fixture(scope="module")
def cho2014(tmp_path_factory: pytest.TempPathFactory) -> RNNEncoderDecoder:
    path = tiny_arch_checkpoint(tmp_path_factory.mktemp("net") / "cho2014.pt", arch="cho2014")
    model = load_checkpoint(str(path)).build_model()
    assert isinstance(model, RNNEncoderDecoder)
    return model


def plain(model: Network, sources: list[list[int]], targets: list[list[int]], index: np.ndarray) -> np.ndarray:
    out = []
    with torch.inference_mode():
        for j, t in zip(index, targets, strict=True):
            b = sequences_batch([sources[int(j)]], [t])
            out.append(float(sequence_log_probs(model, b.src, b.src_len, b.tgt, b.tgt_len)))
    return np.array(out)


def test_every_registered_family_builds_a_network_with_the_whole_interface(cho2014: RNNEncoderDecoder) -> None:
    from phrase_rescorer.model.architectures import arch_config

    for name in NETWORKS:
        net = build_model(cho2014.config, arch_config(name))
        assert [m for m in INTERFACE if not hasattr(net, m)] == []
    assert is_summary_network(cho2014)
    assert not is_summary_network(InterfaceOnly(cho2014))
    for name in NETWORKS:
        net = build_model(cho2014.config, arch_config(name))
        assert is_summary_network(net) == (name == "cho2014"), name


def test_the_summary_capability_is_found_on_every_python(cho2014: RNNEncoderDecoder) -> None:
    """The capability's members are the protocol's own, and a cho2014 network gets the fast
    scorers whatever the Python: on 3.12 and later an isinstance test against the runtime protocol
    missed a module's submodules and silently gave cho2014 the general scorers."""
    declared = set(SummaryNetwork.__annotations__) | {
        name for name, value in vars(SummaryNetwork).items() if callable(value) and not name.startswith("_")
    }
    assert declared == set(SUMMARY_MEMBERS)
    with pytest.raises(TypeError):  # not runtime-checkable: an isinstance test cannot creep back in
        isinstance(cho2014, SummaryNetwork)
    assert type(make_scorer("prefix", cho2014, "cpu")) is PrefixScorer
    assert type(make_scorer("batched", cho2014, "cpu")) is BatchedScorer
    assert type(make_scorer("prefix", cho2014, "cpu", dtype=torch.bfloat16)) is PrefixScorer


def test_a_network_with_the_interface_only_gets_the_general_scorers_and_their_scores(
    cho2014: RNNEncoderDecoder,
) -> None:
    sources, targets, index = sample_window(120)
    net = InterfaceOnly(cho2014)
    want = plain(cho2014, sources, targets, index)
    assert np.ptp(want) > 1.0
    prefix, batched = make_scorer("prefix", net, "cpu", batch_size=7), make_scorer("batched", net, "cpu")
    assert type(prefix) is StackedPrefixScorer and type(batched) is StackedScorer
    for scorer in (prefix, batched, ReferenceScorer(net)):
        got = scorer.score(sources, targets, index)
        assert np.all(np.abs(got - want) <= ATOL + RTOL * np.abs(want)), type(scorer).__name__
    # the cho2014 network itself keeps its own fast scorers, with the same scores
    got = make_scorer("prefix", cho2014, "cpu").score(sources, targets, index)
    assert np.all(np.abs(got - want) <= ATOL + RTOL * np.abs(want))


def test_search_through_the_interface_reports_the_model_scores(cho2014: RNNEncoderDecoder) -> None:
    net = InterfaceOnly(cho2014)
    src = [5, 6, 7]
    cands = beam_search(net, src, beam_size=4, max_length=6)
    assert cands == beam_search(cho2014, src, beam_size=4, max_length=6)
    assert greedy(net, src, max_length=6) == greedy(cho2014, src, max_length=6)
    for c in cands:
        want = plain(cho2014, [src], [list(c.tokens)], np.array([0]))[0]
        assert abs(c.logp - want) <= ATOL + RTOL * abs(want)
