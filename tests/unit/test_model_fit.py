"""The warning for a table that looks foreign to its network (rescoring.model_fit): the rule,
and the engine giving it once, for the sides of a table swapped."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from phrase_rescorer.data.vocab import UNK_ID, shortlist_coverage
from phrase_rescorer.model.checkpoint import load_checkpoint, save_checkpoint
from phrase_rescorer.moses.words import split_words
from phrase_rescorer.rescoring.engine import TableRescorer
from phrase_rescorer.rescoring.model_fit import fit_warning
from phrase_rescorer.rescoring.options import RescoreOptions
from tests.helpers.paths import SAMPLE
from tests.helpers.rescore_data import read_lines, tiny_checkpoint

INFO = {"best_valid": {"mean_logp": -12.0}, "valid_coverage": 0.95}


def test_shortlist_coverage() -> None:
    assert shortlist_coverage(np.array([3, UNK_ID]), np.array([4, 5])) == 0.75
    assert shortlist_coverage(np.array([], dtype=int)) is None


@pytest.mark.parametrize(
    ("coverage", "logp", "expected"),
    [
        (0.93, -11.0, None),
        (0.93, -21.9, None),
        (0.93, -22.1, "mean log p"),
        (0.69, -11.0, "shortlists"),
        (0.45, -11.0, "shortlists"),
        (None, -11.0, None),
    ],
)
def test_rule(coverage: float | None, logp: float, expected: str | None) -> None:
    warning = fit_warning(INFO, coverage, logp, "t:1-9")
    assert (warning is None) if expected is None else (expected in str(warning))


def test_old_model_files_are_not_checked() -> None:
    assert fit_warning({}, 0.01, -1000.0, "t:1-9") is None


def test_swapped_sides_warn_once(tmp_path: Path) -> None:
    """The network's held-out figures are those of the bundled table itself; the same table
    with its source and target swapped warns, once, with the numbers."""
    model = tmp_path / "tiny.pt"
    ckpt = load_checkpoint(str(tiny_checkpoint(model, hidden=8, vocab=400)))
    lines = read_lines(SAMPLE)[:3000]
    right, swapped = tmp_path / "right.txt", tmp_path / "swapped.txt"
    right.write_bytes(b"".join(lines))
    swapped.write_bytes(
        b"".join(
            b" ||| ".join([line.split(b" ||| ")[1], line.split(b" ||| ")[0], *line.split(b" ||| ")[2:]])
            for line in lines
        )
    )
    pairs = [line.decode().split(" ||| ")[:2] for line in lines]
    coverage = shortlist_coverage(
        np.array([i for s, _ in pairs for i in ckpt.src_vocab.encode(split_words(s))]),
        np.array([i for _, t in pairs for i in ckpt.tgt_vocab.encode(split_words(t))]),
    )
    warnings: list[str] = []
    options = RescoreOptions(window=500, window_cap=4000, device="cpu", score_format="logprob")
    TableRescorer(ckpt, options).rescore(str(right), str(tmp_path / "plain.txt"))
    mean = float(np.mean([float(line.split(b" ||| ")[2].split()[-1]) for line in read_lines(tmp_path / "plain.txt")]))
    ckpt.info = {"best_valid": {"mean_logp": mean}, "valid_coverage": coverage}
    save_checkpoint(str(model), ckpt.build_model(), ckpt.src_vocab, ckpt.tgt_vocab, ckpt.info)
    engine = TableRescorer(load_checkpoint(str(model)), options, on_warning=warnings.append)
    engine.rescore(str(right), str(tmp_path / "out.txt"))
    assert warnings == []
    engine.rescore(str(swapped), str(tmp_path / "out.txt"))
    fit = [w for w in warnings if "does not seem to fit" in w]  # (the other: swapped is not sorted)
    assert len(fit) == 1 and fit[0].startswith(f"{swapped}:1-500: the network does not seem to fit")
    assert "of its tokens are in the network's shortlists (held-out pairs: 81.5%)" in fit[0], fit[0]
