"""Golden files: the committed tiny model rescores the committed lines as it did when they were
made (tests/helpers/golden.py says how they were made and how to regenerate them).

Every byte but the appended columns must be identical. The appended numbers must be written in
today's number format (each golden token is what ``format_number`` makes of its own value) and
equal the golden values to 1e-6 relative in log p: the golden files were written on one CPU, and
another CPU's BLAS may round the last float32 digit differently. A changed weight moves the
scores far more than that (checked below), and so does any change to the model's arithmetic.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from phrase_rescorer.model.checkpoint import load_checkpoint, save_checkpoint
from phrase_rescorer.moses.numbers import format_number
from tests.helpers.golden import LINES, MODEL, VARIANTS, expected_path, rescore

TOLERANCE = 1e-6  # relative, in log p


def split_line(line: bytes, appended: int) -> tuple[bytes, list[str]]:
    """The line without its last ``appended`` score tokens, and those tokens."""
    fields = line.split(b" ||| ")
    scores = fields[2].split(b" ")
    fields[2] = b" ".join(scores[:-appended])
    return b" ||| ".join(fields), [s.decode() for s in scores[-appended:]]


def mismatches(produced: Path, variant: str) -> list[str]:
    appended = 2 if VARIANTS[variant] else 1
    want = expected_path(variant).read_bytes().splitlines(keepends=True)
    got = produced.read_bytes().splitlines(keepends=True)
    assert len(got) == len(want)
    problems = []
    for n, (g, w) in enumerate(zip(got, want, strict=True), 1):
        g_rest, g_tokens = split_line(g, appended)
        w_rest, w_tokens = split_line(w, appended)
        assert g_rest == w_rest, f"line {n}: bytes outside the appended columns changed"
        for g_tok, w_tok in zip(g_tokens, w_tokens, strict=True):
            a, b = math.log(float(g_tok)), math.log(float(w_tok))
            if abs(a - b) > TOLERANCE * max(1.0, abs(b)):
                problems.append(f"line {n}: {g_tok} != {w_tok}")
    return problems


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_golden_column(variant: str, tmp_path: Path) -> None:
    out = tmp_path / "out.txt"
    r = rescore(MODEL, LINES, out, variant)
    assert r.returncode == 0, r.stderr.decode()
    assert mismatches(out, variant) == []


def test_golden_tokens_are_in_todays_number_format() -> None:
    for variant in VARIANTS:
        appended = 2 if VARIANTS[variant] else 1
        for line in expected_path(variant).read_bytes().splitlines():
            for token in split_line(line, appended)[1]:
                assert format_number(float(token)) == token


def test_a_changed_weight_fails_the_golden_check(tmp_path: Path) -> None:
    """The check is sensitive: one output-layer weight moved by 1e-3 changes the column."""
    ckpt = load_checkpoint(str(MODEL))
    model = ckpt.build_model(torch.device("cpu"))
    with torch.no_grad():
        model.G_r.weight[0, 0] += 1e-3
    changed = tmp_path / "changed.pt"
    save_checkpoint(str(changed), model, ckpt.src_vocab, ckpt.tgt_vocab, info={"purpose": "tests"})
    out = tmp_path / "out.txt"
    r = rescore(changed, LINES, out, "default")
    assert r.returncode == 0, r.stderr.decode()
    assert len(mismatches(out, "default")) > 10
