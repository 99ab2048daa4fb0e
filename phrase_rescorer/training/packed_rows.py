"""Rows packed step-major, as the training computation runs its recurrences.

Rows sorted longest first, step t holds the first ``counts[t]`` of them (those still inside their
phrase); the packed rows are those of step 0, then those of step 1, and so on (N = sum of the
counts). This module is where each step's rows begin (``step_offsets``), each row's last state
(``last_states``), and per-row terms repeated at every step of their row (``prefix_rows``: the
decoder's context terms C c and O_c c).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import torch
from torch.autograd.function import once_differentiable


def step_offsets(counts: Sequence[int]) -> list[int]:
    """Where each step's rows begin in the packed rows, and the end: [0, c0, c0 + c1, ..., N]."""
    return [0, *itertools.accumulate(counts)]


def active_counts(lengths_desc: list[int], steps: int) -> list[int]:
    """For lengths sorted longest first: how many rows are still running at each step."""
    counts, n = [], len(lengths_desc)
    for t in range(steps):
        while n and lengths_desc[n - 1] <= t:
            n -= 1
        counts.append(n)
    return counts


def packed_index(counts: list[int], device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """(steps, rows) of the real positions, step-major: row i at step t for i < counts[t]
    (``counts`` without its trailing zeros)."""
    steps = torch.cat([torch.full((n,), t, dtype=torch.long) for t, n in enumerate(counts)])
    rows = torch.cat([torch.arange(n) for n in counts])
    return steps.to(device), rows.to(device)


def last_states(states: torch.Tensor, counts: Sequence[int], lengths: Sequence[int]) -> torch.Tensor:
    """Each row's state after its last step (B, H), from packed states (N, H); rows in the counts'
    order, ``lengths`` the steps of each (non-increasing)."""
    offsets = step_offsets(counts)
    index = torch.tensor([offsets[n - 1] + i for i, n in enumerate(lengths)], device=states.device)
    return states.index_select(0, index)


def prefix_rows(x: torch.Tensor, counts: Sequence[int]) -> torch.Tensor:
    """The packed rows (N, D) of a per-row tensor x (B, D): at step t its first ``counts[t]`` rows.

    The same values and gradient as indexing x with the packed row numbers, but its backward pass
    adds each step's slice of the gradient into the first rows of one buffer, in torch's
    vectorised, threaded add, where indexing's backward scatters with accumulation row by row on
    one thread. The additions run in the same order (step 0 first), so the gradient matches
    indexing's to float32 rounding (``tests/unit/test_packed_rows.py``)."""
    if any(n > x.shape[0] for n in counts):
        raise ValueError(f"prefix_rows: row counts {list(counts)} exceed the tensor's {x.shape[0]} rows")
    return _PrefixRows.apply(x, tuple(counts))


class _PrefixRows(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, counts: tuple[int, ...]) -> torch.Tensor:
        ctx.counts, ctx.rows = counts, x.shape[0]
        return torch.cat([x[:n] for n in counts])

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        out = grad.new_zeros(ctx.rows, *grad.shape[1:])
        for n, a in zip(ctx.counts, step_offsets(ctx.counts), strict=False):
            out[:n] += grad[a : a + n]
        return out, None
