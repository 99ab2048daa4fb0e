"""``training.packed_rows``: the step-major packed rows of the training computation. ``prefix_rows``
against indexing with the packed row numbers (its plain form): equal values, and gradients equal
to float32 rounding (both add each step's slice in step order; indexing's scatter may split its
rows over threads), with ragged counts, fewer rows at step 0 than the tensor has, and in float64
to 1e-12."""

from __future__ import annotations

import pytest
import torch

from phrase_rescorer.training.packed_rows import last_states, prefix_rows, step_offsets


def _packed_row_numbers(counts: list[int]) -> torch.Tensor:
    return torch.cat([torch.arange(n) for n in counts])


@pytest.mark.parametrize(
    "rows, counts", [(6, [6, 6, 4, 4, 1]), (6, [3, 2, 2]), (1, [1]), (5, [5]), (64, [64, 64, 60, 52, 40, 25, 12, 5, 2])]
)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_prefix_rows_is_indexing_by_the_packed_rows(rows: int, counts: list[int], dtype: torch.dtype) -> None:
    torch.manual_seed(rows + len(counts))
    x = torch.randn(rows, 7, dtype=dtype, requires_grad=True)
    grad = torch.randn(sum(counts), 7, dtype=dtype)
    plain = x[_packed_row_numbers(counts)]
    (plain_grad,) = torch.autograd.grad(plain, x, grad)
    packed = prefix_rows(x, counts)
    (packed_grad,) = torch.autograd.grad(packed, x, grad)
    assert torch.equal(packed, plain)
    tolerance = 1e-5 if dtype == torch.float32 else 1e-12
    torch.testing.assert_close(packed_grad, plain_grad, rtol=0, atol=tolerance)
    if rows > counts[0]:  # rows no step holds get a zero gradient
        assert torch.equal(packed_grad[counts[0] :], torch.zeros(rows - counts[0], 7, dtype=dtype))


def test_prefix_rows_refuses_counts_beyond_the_rows() -> None:
    with pytest.raises(ValueError, match="exceed the tensor's 3 rows"):
        prefix_rows(torch.zeros(3, 2), [3, 4])


def test_step_offsets() -> None:
    assert step_offsets([3, 2, 1]) == [0, 3, 5, 6]
    assert step_offsets([]) == [0]


def test_last_states_picks_each_rows_final_step() -> None:
    counts, lengths = [3, 2, 1], [3, 2, 1]
    states = torch.arange(6.0).unsqueeze(1)  # step 0: rows 0-2, step 1: rows 0-1, step 2: row 0
    assert last_states(states, counts, lengths).squeeze(1).tolist() == [5.0, 4.0, 2.0]
