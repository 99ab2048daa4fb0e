"""Golden files: the committed tiny models (every architecture, and a subword model) rescore the
committed lines as they did when they were made (tests/helpers/golden.py says how they were made
and how to regenerate them).

Every byte but the appended columns must be identical. The appended numbers must be written in
today's number format (each golden token is what ``format_number`` makes of its own value) and
equal the golden values to 1e-6 relative in log p: the golden files were written on one CPU, and
another CPU's BLAS may round the last float32 digit differently. Measured when the files were
made: windows of 5 lines or batches of 3 instead of the defaults move log p by at most 9e-8
relative for every model. A changed weight moves the scores far more than that (checked below),
and so does any change to a network's arithmetic.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from phrase_rescorer.model.checkpoint import load_checkpoint, save_checkpoint
from phrase_rescorer.moses.score_format import format_number
from tests.helpers.cli_run import run_cli
from tests.helpers.golden import GOLDEN, LINES, MODEL, MODELS, VARIANTS, expected_path, main, model_path, rescore

TOLERANCE = 1e-6  # relative, in log p


def split_line(line: bytes, appended: int) -> tuple[bytes, list[str]]:
    """The line without its last ``appended`` score tokens, and those tokens."""
    fields = line.split(b" ||| ")
    scores = fields[2].split(b" ")
    fields[2] = b" ".join(scores[:-appended])
    return b" ||| ".join(fields), [s.decode() for s in scores[-appended:]]


def log_value(token: str, column: int, variant: str) -> float:
    """log p of a score column (log p itself in the logprob format), log of a count's exp(n)."""
    return float(token) if column == 0 and VARIANTS[variant].logprob else math.log(float(token))


def mismatches(produced: Path, variant: str) -> list[str]:
    appended = VARIANTS[variant].columns
    want = expected_path(variant).read_bytes().splitlines(keepends=True)
    got = produced.read_bytes().splitlines(keepends=True)
    assert len(got) == len(want)
    problems = []
    for n, (g, w) in enumerate(zip(got, want, strict=True), 1):
        g_rest, g_tokens = split_line(g, appended)
        w_rest, w_tokens = split_line(w, appended)
        assert g_rest == w_rest, f"line {n}: bytes outside the appended columns changed"
        for column, (g_tok, w_tok) in enumerate(zip(g_tokens, w_tokens, strict=True)):
            a, b = log_value(g_tok, column, variant), log_value(w_tok, column, variant)
            if abs(a - b) > TOLERANCE * max(1.0, abs(b)):
                problems.append(f"line {n}: {g_tok} != {w_tok}")
    return problems


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_golden_column(variant: str, tmp_path: Path) -> None:
    out = tmp_path / "out.txt"
    r = rescore(model_path(variant), LINES, out, variant)
    assert r.returncode == 0, r.stderr.decode()
    assert mismatches(out, variant) == []


def test_golden_tokens_are_in_todays_number_format() -> None:
    for variant in VARIANTS:
        appended = VARIANTS[variant].columns
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


@pytest.mark.parametrize("variant", [v for v in VARIANTS if v != "default"])
def test_every_weight_moved_by_1e_4_fails_the_golden_check(
    variant: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same sensitivity for every other model: all weights scaled by 1 + 1e-4 (rescored in
    this process, as the installed program runs, to spare a start-up per model)."""
    ckpt = load_checkpoint(str(model_path(variant)))
    model = ckpt.build_model(torch.device("cpu"))
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(1 + 1e-4)
    changed = tmp_path / "changed.pt"
    save_checkpoint(
        str(changed), model, ckpt.src_vocab, ckpt.tgt_vocab, info={"purpose": "tests"}, subwords=ckpt.subwords
    )
    out = tmp_path / "out.txt"
    args = ["-q", "rescore", str(LINES), str(out), "--model", str(changed), *VARIANTS[variant].options]
    assert run_cli(args, monkeypatch, capsys) == (0, "")
    assert len(mismatches(out, variant)) > 10


def golden_names() -> set[str]:
    """Every file the golden variants use."""
    return {LINES.name, *MODELS, *(expected_path(v).name for v in VARIANTS)}


def test_every_model_has_a_golden_output_and_every_file_a_use() -> None:
    assert {spec.model for spec in VARIANTS.values()} == set(MODELS)
    assert {p.name for p in GOLDEN.iterdir()} == golden_names()


def test_making_the_golden_files_keeps_every_existing_one(capsys: pytest.CaptureFixture[str]) -> None:
    """``make golden`` writes only what is missing: here nothing, and it says so file by file."""
    before = {p: p.read_bytes() for p in GOLDEN.iterdir()}
    assert {p.name for p in before} >= golden_names()  # else main() would write into the checkout
    assert main([]) == 0
    assert sorted(capsys.readouterr().out.splitlines()) == sorted(f"kept {p}" for p in before)
    assert {p: p.read_bytes() for p in GOLDEN.iterdir()} == before
