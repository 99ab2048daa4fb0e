"""The prefix-sharing scorer of the stacked architectures gives the plain model's scores:
StackedPrefixScorer == ``sequence_log_probs`` pair by pair, for every building block (both
cells, every attention kind, attention from the top or the bottom layer, residual layers).

Tolerance, as for the cho2014 prefix scorer (test_fast_scoring): float32 throughout, the two
computations differ only in the order of float additions (batch shapes, GEMM blocking,
log-softmax vs log-sum-exp, float64 vs float32 sum over a pair), so
|prefix - plain| <= 1e-4 + 1e-5 |plain|. A wrong token, a prefix shared across two sources, a
wrong parent state or a missing </s> term moves a score by far more (tests below show it).
"""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import pytest
import torch

from phrase_rescorer.data.batching import flat_store, sequences_batch
from phrase_rescorer.model.architectures import Network
from phrase_rescorer.model.checkpoint import load_checkpoint
from phrase_rescorer.model.cho2014 import sequence_log_probs
from phrase_rescorer.rescoring.scorers import make_scorer
from phrase_rescorer.rescoring.stacked_prefix import StackedPrefixScorer
from phrase_rescorer.rescoring.trie import build_trie
from tests.helpers.rescore_data import ARCH_VARIANTS, sample_window, tiny_arch_checkpoint

pytestmark = pytest.mark.usefixtures("one_thread")

ATOL, RTOL = 1e-4, 1e-5
Window = tuple[list[list[int]], list[list[int]], np.ndarray]


def within(got: np.ndarray, want: np.ndarray) -> bool:
    return got.shape == want.shape and bool(np.all(np.abs(got - want) <= ATOL + RTOL * np.abs(want)))


def plain(model: Network, sources: list[list[int]], targets: list[list[int]], index: np.ndarray) -> np.ndarray:
    """log p(target|source) pair by pair, by the model's own teacher-forced forward pass."""
    out = []
    with torch.inference_mode():
        for j, t in zip(index, targets, strict=True):
            b = sequences_batch([sources[int(j)]], [t])
            out.append(float(sequence_log_probs(model, b.src, b.src_len, b.tgt, b.tgt_len)))
    return np.array(out)


def network(tmp_path: Path, variant: str) -> Network:
    path = tiny_arch_checkpoint(tmp_path / f"{variant}.pt", **ARCH_VARIANTS[variant])  # type: ignore[arg-type]
    return load_checkpoint(str(path)).build_model()


@pytest.fixture(scope="module")
def window() -> Window:
    return sample_window(150)


def shared_prefixes() -> Window:
    """Two sources, one a prefix of the other, each with targets that share prefixes: a target
    that is a prefix of another, duplicates, the empty target, one-token targets."""
    sources = [[5, 6, 7], [5, 6]]
    targets = [[8, 9, 10], [8, 9], [8, 9, 11, 12], [8], [], [8, 9, 10], [13, 8, 9], [8, 9, 10], [8], [14]]
    return sources, targets, np.array([0, 0, 0, 0, 0, 0, 1, 1, 1, 1])


@pytest.mark.parametrize("variant", sorted(ARCH_VARIANTS))
def test_prefix_scorer_equals_the_plain_per_pair_computation(variant: str, window: Window, tmp_path: Path) -> None:
    sources, targets, index = window
    model = network(tmp_path, variant)
    scorer = make_scorer("prefix", model, "cpu", batch_size=7)  # every depth in several batches
    assert isinstance(scorer, StackedPrefixScorer)
    want = plain(model, sources, targets, index)
    assert within(scorer.score(sources, targets, index), want) and np.ptp(want) > 1.0


@pytest.mark.parametrize("batch_size", [1, 3, 256])
@pytest.mark.parametrize("onednn", [True, False])
@pytest.mark.parametrize("variant", ["rnnsearch", "gnmt", "transformer"])
def test_targets_sharing_prefixes(variant: str, batch_size: int, onednn: bool, tmp_path: Path) -> None:
    sources, targets, index = shared_prefixes()
    model = network(tmp_path, variant)
    got = StackedPrefixScorer(model, batch_size=batch_size, onednn=onednn).score(sources, targets, index)
    want = plain(model, sources, targets, index)
    assert within(got, want)
    assert got[0] == got[5] and got[6] != got[0]  # one path, one score; the other source differs


def test_decoder_steps_are_shared(window: Window, tmp_path: Path) -> None:
    """One decoder step per distinct target prefix of a source (the empty one included), fewer
    than the plain computation's one per target token plus </s>."""
    sources, targets, index = window
    model = network(tmp_path, "gnmt")
    scorer = StackedPrefixScorer(model, batch_size=32)
    rows = []
    step = scorer.model.decoder.step

    def counting(y_prev, state, enc):  # type: ignore[no-untyped-def]
        rows.append(y_prev.shape[0])
        return step(y_prev, state, enc)

    scorer.model.decoder.step = counting
    scorer.score(sources, targets, index)
    trie = build_trie(*flat_store(targets), roots=index)
    assert sum(rows) == len(sources) + trie.node_count() < sum(len(t) + 1 for t in targets)


def test_a_prefix_shared_across_sources_or_a_changed_weight_is_caught(window: Window, tmp_path: Path) -> None:
    """The tolerance is tight enough to see the mistakes the scorer must not make."""
    sources, targets, index = window
    model = network(tmp_path, "rnnsearch")
    want = plain(model, sources, targets, index)
    scorer = StackedPrefixScorer(model)
    with torch.inference_mode():
        enc = scorer.encode_sources(sources)
        tokens, offsets = flat_store(targets)
        right = scorer.decode(build_trie(tokens, offsets, roots=index), enc).numpy()
        wrong = scorer.decode(build_trie(tokens, offsets, roots=np.zeros_like(index)), enc).numpy()
    assert within(right, want) and not within(wrong, want)
    changed = copy.deepcopy(model)
    with torch.no_grad():
        changed.decoder.attention.W_a.weight[0] += 0.3  # type: ignore[union-attr]  # one row, by one std
    assert not within(StackedPrefixScorer(changed).score(sources, targets, index), want)


def test_worker_threads_split_windows_without_changing_scores(tmp_path: Path) -> None:
    """600 lines: enough for split_window to give each of 2 workers a part."""
    rng = np.random.default_rng(0)
    sources = [rng.integers(4, 60, rng.integers(1, 5)).tolist() for _ in range(40)]
    index = np.sort(rng.integers(0, 40, 600))
    targets = [rng.integers(4, 12, rng.integers(0, 5)).tolist() for _ in range(600)]  # small alphabet: sharing
    model = network(tmp_path, "gnmt")
    one = StackedPrefixScorer(model, workers=1).score(sources, targets, index)
    two = StackedPrefixScorer(model, workers=2).score(sources, targets, index)
    assert within(two, one) and within(one, plain(model, sources, targets, index))
    assert torch.get_num_threads() == 1  # the caller's setting is restored


def test_a_very_long_source_steps_in_bounded_pieces(tmp_path: Path) -> None:
    """A 1,000-token source among short ones: the nodes batched with it attend over its 1,001
    positions in pieces of at most 32 * batch_size gathered positions (at least one node), the
    others over their own length, and the scores stay exact."""
    rng = np.random.default_rng(1)
    sources = [[5, 6], rng.integers(4, 300, 1000).tolist(), [7]]
    targets = [[8, 9], [8], [8, 9, 10], [8, 9], [], [11]]
    index = np.array([0, 1, 1, 1, 1, 2])
    model = network(tmp_path, "rnnsearch")
    scorer = StackedPrefixScorer(model, batch_size=4)
    gathered = []
    step = scorer.model.decoder.step

    def counting(y_prev, state, enc):  # type: ignore[no-untyped-def]
        gathered.append(tuple(enc.memory.shape[:2]))
        return step(y_prev, state, enc)

    scorer.model.decoder.step = counting
    assert within(scorer.score(sources, targets, index), plain(model, sources, targets, index))
    assert all(rows * width <= 32 * 4 or rows == 1 for rows, width in gathered)  # one row at a time
    assert (1, 1001) in gathered and (2, 3) in gathered  # the long source alone, the short ones batched


def test_empty_window(tmp_path: Path) -> None:
    model = network(tmp_path, "rnnsearch")
    assert StackedPrefixScorer(model).score([], [], np.zeros(0, dtype=np.int64)).shape == (0,)


@pytest.mark.parametrize("kind", ["prefix", "batched"])
def test_a_window_with_a_very_long_source_is_encoded_in_bounded_groups(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 600-token source among 60 short ones: padded to it, the window would encode 61 x 601
    positions; under a budget of 400 the sources are encoded in groups (the long one alone), every
    group within the budget, and the scores stay those of the plain computation."""
    from phrase_rescorer.rescoring import stacked_scorer

    monkeypatch.setattr(stacked_scorer, "MAX_ENCODED_POSITIONS", 400)
    rng = np.random.default_rng(2)
    sources = [rng.integers(4, 300, rng.integers(1, 6)).tolist() for _ in range(60)]
    sources.insert(17, rng.integers(4, 300, 600).tolist())
    index = np.sort(rng.integers(0, len(sources), 150))
    index[:2] = 17  # the long source has targets
    targets = [rng.integers(4, 40, rng.integers(0, 5)).tolist() for _ in range(len(index))]
    model = network(tmp_path, "rnnsearch")
    scorer = make_scorer(kind, model, "cpu")
    encoded = []
    encode = scorer.encode_sources

    def counting(group):  # type: ignore[no-untyped-def]
        enc = encode(group)
        encoded.append(tuple(enc.memory.shape[:2]))
        return enc

    scorer.encode_sources = counting  # type: ignore[method-assign]
    assert within(scorer.score(sources, targets, index), plain(model, sources, targets, index))
    assert encoded == [(60, 6), (1, 601)]  # the short sources together (60 x 6 <= 400), the long one alone


def test_source_groups() -> None:
    from phrase_rescorer.rescoring.stacked_scorer import source_groups

    lengths = np.array([3, 1, 50, 2, 2, 9])
    groups = source_groups(lengths, budget=12)
    assert sorted(np.concatenate(groups).tolist()) == list(range(6))
    assert [g.tolist() for g in groups] == [[1, 3, 4], [0], [5], [2]]  # 3 x 3, 1 x 4, 1 x 10, 1 x 51 alone
    assert source_groups(np.zeros(0, dtype=np.int64)) == []
