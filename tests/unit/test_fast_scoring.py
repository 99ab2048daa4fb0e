"""The prefix-trie scorer gives the plain model's scores: PrefixScorer == sequence_log_probs.

Tolerance: float32 throughout, so the two computations differ only in the order of float
additions (GEMM blocking, log-softmax vs log-sum-exp, float64 vs float32 sum over a pair). Each
token's log-probability moves by ~1e-6 (the weights here are large enough that the
distributions are far from uniform), so |prefix - plain| <= 1e-4 + 1e-5 * |plain| is tight:
a wrong token, a wrong parent state or a missing </s> term moves a score by 0.1 or more.
"""

from __future__ import annotations

import gzip
import itertools
from pathlib import Path

import numpy as np
import pytest
import torch

from phrase_rescorer import onednn
from phrase_rescorer.data.batching import flat_store, sequences_batch
from phrase_rescorer.data.vocab import Vocabulary
from phrase_rescorer.model.cho2014 import ModelConfig, RNNEncoderDecoder, sequence_log_probs
from phrase_rescorer.moses.words import split_words
from phrase_rescorer.rescoring.packed_linear import pack_linears
from phrase_rescorer.rescoring.prefix import PrefixScorer
from phrase_rescorer.rescoring.trie import build_trie
from phrase_rescorer.rescoring.window_threads import split_window

ATOL, RTOL = 1e-4, 1e-5
V = 40


pytestmark = pytest.mark.usefixtures("one_thread")


def make_model(
    seed: int = 0, vocab: int = V, hidden: int = 24, cell: str = "reset_before", summary: str = "tanh"
) -> RNNEncoderDecoder:
    torch.manual_seed(seed)
    config = ModelConfig(
        src_vocab_size=vocab,
        tgt_vocab_size=vocab,
        embed_dim=12,
        hidden_dim=hidden,
        maxout_dim=10,
        output_rank=8,
        cell=cell,
        summary=summary,
    )
    model = RNNEncoderDecoder(config)
    with torch.no_grad():  # far from the near-uniform outputs of the N(0, 0.01) initialisation
        for p in model.parameters():
            p.normal_(0.0, 0.4)
    return model.eval()


def plain_scores(
    model: RNNEncoderDecoder,
    sources: list[list[int]],
    targets: list[list[int]],
    source_index: np.ndarray,
    batch: int = 64,
) -> np.ndarray:
    out = []
    with torch.inference_mode():
        for a in range(0, len(targets), batch):
            src = [sources[int(j)] for j in source_index[a : a + batch]]
            b = sequences_batch(src, targets[a : a + batch])
            logp = sequence_log_probs(model, b.src, b.src_len, b.tgt, b.tgt_len)
            out.append(logp.double().numpy())
    return np.concatenate(out)


def assert_same(got: np.ndarray, want: np.ndarray) -> None:
    assert got.dtype == np.float64 and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)


def check(
    model: RNNEncoderDecoder,
    sources: list[list[int]],
    targets: list[list[int]],
    source_index: list[int] | np.ndarray,
    **kw: object,
) -> np.ndarray:
    source_index = np.asarray(source_index, dtype=np.int64)
    got = PrefixScorer(model, **kw).score(sources, targets, source_index)  # type: ignore[arg-type]
    assert_same(got, plain_scores(model, sources, targets, source_index))
    return got


# --- the trie ----------------------------------------------------------------------------------


def test_trie_has_each_distinct_prefix_once() -> None:
    rng = np.random.default_rng(1)
    seqs = [[int(t) for t in rng.integers(3, 6, rng.integers(0, 6))] for _ in range(200)]
    roots = rng.integers(0, 3, len(seqs))
    trie = build_trie(*flat_store(seqs), roots=roots)
    # Rebuild every node's (root, prefix) from the parent links and compare with the sequences.
    prefixes: list[list[tuple]] = [[(int(r),) for r in range(3)]]
    for level in trie.levels:
        edges = zip(level.parent, level.token, strict=True)
        prefixes.append([prefixes[-1][p] + (int(t),) for p, t in edges])
    want = {(int(r), *s[:d]) for s, r in zip(seqs, roots, strict=True) for d in range(1, len(s) + 1)}
    got = [p for level in prefixes[1:] for p in level]
    assert sorted(got) == sorted(want) and len(got) == len(set(got)) == trie.node_count()
    for depth, level in enumerate(trie.levels, start=1):
        assert sorted(level.seqs.tolist()) == [i for i, s in enumerate(seqs) if len(s) >= depth]
        for i, node in zip(level.seqs, level.node, strict=True):
            assert prefixes[depth][node] == (int(roots[i]), *seqs[i][:depth])


def test_trie_of_nothing_and_of_empty_sequences() -> None:
    assert build_trie(*flat_store([])).levels == []
    trie = build_trie(*flat_store([[], []]))
    assert trie.levels == [] and trie.lengths.tolist() == [0, 0]
    trie = build_trie(*flat_store([[4], []], end=2))
    assert [len(level) for level in trie.levels] == [2, 1]


# --- the scorer against the plain model --------------------------------------------------------


Window = tuple[list[list[int]], list[list[int]], np.ndarray]


def sample_windows(path: Path, lines: int, window: int) -> list[Window]:
    """The first ``lines`` lines of a real table, as the engine hands them to a scorer."""
    with gzip.open(path, "rt", encoding="utf-8") as f:
        rows = [line.split(" ||| ")[:2] for line in itertools.islice(f, lines)]
    src_types = sorted({t for s, _ in rows for t in split_words(s)})
    tgt_types = sorted({t for _, t in rows for t in split_words(t)})
    # A shortlist smaller than the text's vocabulary, so that <unk> merges some phrases too.
    sv = Vocabulary(["<pad>", "<unk>", "</s>", *src_types[: V - 3]])
    tv = Vocabulary(["<pad>", "<unk>", "</s>", *tgt_types[: V - 3]])
    out = []
    for a in range(0, len(rows), window):
        position: dict[str, int] = {}
        sources, targets, index = [], [], []
        for s, t in rows[a : a + window]:
            if s not in position:
                position[s] = len(sources)
                sources.append(sv.encode(split_words(s)))
            index.append(position[s])
            targets.append(tv.encode(split_words(t)))
        out.append((sources, targets, np.array(index)))
    return out


def test_sample_windows_score_as_the_plain_model(sample_table: Path) -> None:
    model = make_model()
    for sources, targets, index in sample_windows(sample_table, 1500, 500):
        check(model, sources, targets, index, batch_size=64)


@pytest.mark.parametrize("onednn", [True, False])
@pytest.mark.parametrize("batch_size", [1, 3, 256])
def test_one_source_many_targets_sharing_prefixes(batch_size: int, onednn: bool) -> None:
    model = make_model(1)
    targets = [list(p) for n in range(1, 4) for p in itertools.product([3, 4, 5], repeat=n)]  # 39
    targets += [[3, 4, 5, 6, 7], [3, 4, 5, 6], [3, 4, 5, 6]]  # a prefix of another; a duplicate
    check(model, [[7, 8, 9]], targets, [0] * len(targets), batch_size=batch_size, onednn=onednn)


def test_sources_that_are_prefixes_of_others_and_unsorted_input() -> None:
    model = make_model(2)
    sources = [[5, 6, 7, 8], [5], [5, 6], [9, 9, 9], [5, 6, 7], [6, 5], [9]]
    rng = np.random.default_rng(0)
    index = rng.permutation(np.repeat(np.arange(len(sources)), 3))
    targets = [[int(t) for t in rng.integers(3, 9, rng.integers(1, 4))] for _ in index]
    check(model, sources, targets, index, batch_size=2)


def test_length_one_phrases_and_unknown_words() -> None:
    model = make_model(3)
    sources = [[3], [1], [4], [1, 1]]
    targets = [[3], [1], [5], [3], [1], [1, 1]]
    check(model, sources, targets, [0, 0, 1, 2, 3, 3])


def test_equal_sources_in_one_window_share_nothing_wrong() -> None:
    # The protocol hands distinct sources, but two phrases can have the same ids (unknown words).
    model = make_model(4)
    check(model, [[1, 5], [1, 5], [6]], [[3, 4], [3], [3, 4], [5]], [0, 1, 1, 2])


def test_a_ten_thousand_token_phrase() -> None:
    model = make_model(5, hidden=8)
    rng = np.random.default_rng(5)
    long = [int(t) for t in rng.integers(3, V, 10_000)]
    got = check(model, [long, [4, 5]], [long[:3], long, [6, 7]], [0, 1, 1])
    assert np.isfinite(got).all()


@pytest.mark.parametrize("cell,summary", [("reset_after", "tanh"), ("reset_before", "last")])
def test_other_cells_and_summaries(cell: str, summary: str) -> None:
    model = make_model(6, cell=cell, summary=summary)
    check(model, [[3, 4], [3, 5]], [[6], [6, 7], [8]], [0, 0, 1])


def test_empty_window_and_empty_target() -> None:
    model = make_model(7)
    assert PrefixScorer(model).score([], [], np.zeros(0, dtype=np.int64)).shape == (0,)
    check(model, [[3]], [[], [4]], [0, 0])


def test_scores_do_not_depend_on_the_window_cut() -> None:
    model = make_model(8)
    rng = np.random.default_rng(8)
    sources = [[int(t) for t in rng.integers(3, 8, rng.integers(1, 5))] for _ in range(40)]
    index = np.sort(rng.integers(0, 40, 120))
    targets = [[int(t) for t in rng.integers(3, 8, rng.integers(1, 5))] for _ in index]
    scorer = PrefixScorer(model, batch_size=16)
    whole = scorer.score(sources, targets, index)
    halves = np.concatenate(
        [scorer.score(sources, targets[:60], index[:60]), scorer.score(sources, targets[60:], index[60:])]
    )
    np.testing.assert_allclose(whole, halves, rtol=0, atol=1e-9 + 1e-6 * np.abs(whole).max())


@pytest.mark.parametrize("workers", [2, 3])
def test_worker_threads_split_windows_without_changing_scores(sample_table: Path, workers: int) -> None:
    model = make_model(11)
    ((sources, targets, index),) = sample_windows(sample_table, 1200, 1200)
    one = PrefixScorer(model, workers=1).score(sources, targets, index)
    scorer = PrefixScorer(model, workers=workers)
    assert len(split_window(sources, targets, index, workers)) == workers
    assert_same(scorer.score(sources, targets, index), one)  # other batch shapes: float rounding
    # Unsorted lines: each part takes its sources' lines wherever they are.
    order = np.random.default_rng(0).permutation(len(targets))
    assert_same(scorer.score(sources, [targets[i] for i in order], index[order]), one[order])
    assert torch.get_num_threads() == 1  # the caller's setting is restored


def test_split_window_keeps_every_line_once() -> None:
    rng = np.random.default_rng(12)
    sources = [[int(t)] for t in range(50)]
    index = rng.integers(0, 50, 2000)
    targets = [[3] * int(k) for k in rng.integers(1, 6, 2000)]
    parts = split_window(sources, targets, index, 4)
    assert len(parts) == 4
    lines = np.concatenate([p[0] for p in parts])
    assert sorted(lines.tolist()) == list(range(2000))
    for lines, srcs, tgts, idx in parts:
        assert [srcs[j] for j in idx] == [sources[index[i]] for i in lines]
        assert tgts == [targets[i] for i in lines]
    steps = [sum(len(t) + 1 for t in p[2]) for p in parts]
    assert max(steps) < 1.5 * min(steps)
    assert len(split_window(sources, targets[:300], index[:300], 4)) == 1  # too few lines to split


@pytest.mark.skipif(not onednn.available(), reason="this torch has no oneDNN")
def test_packed_linears_compute_the_same_function() -> None:
    model = make_model(9)
    packed = pack_linears(model, rows_hint=6)
    assert packed is not model
    assert all(type(m) is not torch.nn.Linear for m in packed.modules())
    assert packed.O_h.weight.data_ptr() == model.O_h.weight.data_ptr()  # shared, not copied
    with torch.inference_mode():
        for rows in (6, 5, 7):  # oneDNN for the packed row count, F.linear for the others
            x = torch.randn(rows, model.config.hidden_dim)
            torch.testing.assert_close(packed.O_h(x), model.O_h(x), rtol=1e-5, atol=1e-6)
        b = sequences_batch([[3, 4, 5], [6]], [[7, 8], [9, 10, 11]])  # (2, 3) and (2, 4) inputs
        want = sequence_log_probs(model, b.src, b.src_len, b.tgt, b.tgt_len)
        got = sequence_log_probs(packed, b.src, b.src_len, b.tgt, b.tgt_len)  # type: ignore[arg-type]
    torch.testing.assert_close(got, want, rtol=RTOL, atol=ATOL)


def test_bfloat16_mode_is_close_but_documented_as_approximate() -> None:
    model = make_model(10)
    sources, targets, index = [[3, 4, 5], [6, 7]], [[8, 9], [10], [11, 12, 13]], np.array([0, 0, 1])
    exact = plain_scores(model, sources, targets, index)
    approx = PrefixScorer(model, dtype=torch.bfloat16).score(sources, targets, index)
    assert np.isfinite(approx).all()
    # bfloat16 keeps 8 bits of mantissa: about 1% of a score, far above the float32 tolerance.
    np.testing.assert_allclose(approx, exact, rtol=0.05, atol=0.5)
    assert next(model.parameters()).dtype == torch.float32  # the caller's model is untouched


# --- through the engine ------------------------------------------------------------------------


def test_engine_default_scorer_is_prefix_and_equals_the_reference(tmp_path: Path) -> None:
    from phrase_rescorer.rescoring.engine import rescore_table
    from phrase_rescorer.rescoring.options import RescoreOptions
    from tests.helpers.paths import SAMPLE
    from tests.helpers.rescore_data import appended_columns, tiny_checkpoint

    assert RescoreOptions().scorer == "prefix"
    table = tmp_path / "head.gz"
    with gzip.open(SAMPLE, "rb") as f:
        table.write_bytes(gzip.compress(b"".join(itertools.islice(f, 3000))))
    model = tiny_checkpoint(tmp_path / "tiny.pt")
    columns = {}
    for scorer in ("prefix", "reference"):
        out = tmp_path / f"{scorer}.gz"
        rescore_table(str(table), str(out), str(model), device="cpu", scorer=scorer, score_format="logprob", window=700)
        columns[scorer] = np.array([float(v[0]) for v in appended_columns(table, out)])
    assert len(columns["prefix"]) == 3000
    assert_same(columns["prefix"], columns["reference"])
