from __future__ import annotations

import numpy as np

from phrase_rescorer.data.batching import collate, epoch_plan, fixed_batches, sequences_batch, trainable
from phrase_rescorer.data.pairs import EncodedPairs
from phrase_rescorer.data.vocab import EOS_ID, PAD_ID


def make_pairs(n: int, seed: int = 0) -> EncodedPairs:
    rng = np.random.default_rng(seed)
    sl, tl = rng.integers(1, 12, n), rng.integers(1, 12, n)
    so = np.concatenate([[0], np.cumsum(sl)]).astype(np.int64)
    to = np.concatenate([[0], np.cumsum(tl)]).astype(np.int64)
    return EncodedPairs(
        rng.integers(3, 50, int(so[-1])).astype(np.int32), so, rng.integers(3, 50, int(to[-1])).astype(np.int32), to
    )


def test_collate_pads_and_terminates() -> None:
    p = make_pairs(20)
    idx = np.array([4, 0, 17])
    b = collate(p, idx)
    for row, i in enumerate(idx):
        s = p.src_tokens[p.src_offsets[i] : p.src_offsets[i + 1]]
        n = len(s)
        assert list(b.src[row, :n]) == list(s)
        assert b.src[row, n] == EOS_ID and int(b.src_len[row]) == n + 1
        assert (b.src[row, n + 1 :] == PAD_ID).all()
    assert b.src.shape[1] == int(b.src_len.max()) and b.tgt.shape[1] == int(b.tgt_len.max())


def test_sequences_batch_matches_lists() -> None:
    b = sequences_batch([[5, 6], [7]], [[8], [9, 10, 11]])
    assert b.src.tolist() == [[5, 6, EOS_ID], [7, EOS_ID, PAD_ID]]
    assert b.tgt.tolist() == [[8, EOS_ID, PAD_ID, PAD_ID], [9, 10, 11, EOS_ID]]
    assert b.tgt_len.tolist() == [2, 4]


def test_epoch_plan_covers_each_pair_once_and_is_reproducible() -> None:
    p = make_pairs(1000)
    idx = trainable(p, np.arange(1000), max_len=9)
    assert (p.src_lengths[idx] <= 9).all() and (p.tgt_lengths[idx] <= 9).all()
    plan = epoch_plan(p, idx, batch_size=64, seed=3, epoch=2)
    assert sorted(np.concatenate(plan).tolist()) == sorted(idx.tolist())
    again = epoch_plan(p, idx, batch_size=64, seed=3, epoch=2)
    assert all((a == b).all() for a, b in zip(plan, again, strict=True))
    other = epoch_plan(p, idx, batch_size=64, seed=3, epoch=3)
    assert any(len(a) != len(b) or (a != b).any() for a, b in zip(plan, other, strict=False))
    # Bucketing: inside a batch the target lengths vary less than in the whole set.
    spread = np.mean([np.ptp(p.tgt_lengths[b]) for b in plan])
    assert spread < np.ptp(p.tgt_lengths[idx]) / 2


def test_fixed_batches_keep_everything() -> None:
    p = make_pairs(300)
    batches = fixed_batches(p, np.arange(300), 64)
    assert sorted(np.concatenate(batches).tolist()) == list(range(300))
