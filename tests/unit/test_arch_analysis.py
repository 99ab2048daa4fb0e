"""suggest, compare and embed on the stacked architectures: beam candidates carry the model's
own log p, GNMT's ranking (length normalisation, coverage penalty) by hand, the phrase
representation of attention models, and the commands end to end."""

from __future__ import annotations

import gzip
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from click.testing import CliRunner

from phrase_rescorer.analysis.embed import phrase_representations
from phrase_rescorer.analysis.search import beam_search, gnmt_score, greedy, make_stepper
from phrase_rescorer.cli import cli
from phrase_rescorer.data.batching import sequences_batch
from phrase_rescorer.model.checkpoint import load_checkpoint
from phrase_rescorer.model.cho2014 import sequence_log_probs
from phrase_rescorer.moses.words import split_words
from tests.helpers.paths import SAMPLE
from tests.helpers.rescore_data import read_lines, tiny_arch_checkpoint

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def model_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_arch_checkpoint(tmp_path_factory.mktemp("g") / "g.pt", "gnmt", layers=3, std=0.5)


def _logp(model, src: list[int], tgt: tuple[int, ...]) -> float:  # type: ignore[no-untyped-def]
    b = sequences_batch([src], [list(tgt)])
    with torch.inference_mode():
        return float(sequence_log_probs(model, b.src, b.src_len, b.tgt, b.tgt_len))


def test_beam_candidates_carry_the_model_score(model_path: Path) -> None:
    ckpt = load_checkpoint(str(model_path))
    model = ckpt.build_model()
    src = ckpt.src_vocab.encode(split_words("a young man"))
    found = beam_search(model, src, 4, max_length=6)
    assert 1 <= len(found) <= 4 and [c.logp for c in found] == sorted((c.logp for c in found), reverse=True)
    for c in found + [greedy(model, src, max_length=6)]:
        assert math.isclose(c.logp, _logp(model, src, c.tokens), rel_tol=1e-5, abs_tol=1e-5)


def test_gnmt_ranking_by_hand(model_path: Path) -> None:
    assert gnmt_score(-6.0, 4, None, 0.0, 0.0) == -6.0
    assert math.isclose(gnmt_score(-6.0, 4, None, 0.2, 0.0), -6.0 / (9 / 6) ** 0.2)
    cov = torch.tensor([0.5, 1.5, 1.0])
    assert math.isclose(gnmt_score(-6.0, 4, cov, 0.0, 0.2), -6.0 + 0.2 * math.log(0.5), rel_tol=1e-6)
    ckpt = load_checkpoint(str(model_path))
    model = ckpt.build_model()
    src = ckpt.src_vocab.encode(split_words("two dogs"))
    ranked = beam_search(model, src, 5, max_length=6, alpha=0.2, beta=0.2)
    scores = [c.rank_score for c in ranked]
    assert all(s is not None for s in scores) and scores == sorted(scores, reverse=True)  # type: ignore[type-var]
    assert {c.tokens for c in ranked} == {c.tokens for c in beam_search(model, src, 5, max_length=6)}
    step = make_stepper(model, src, False)  # coverage: every step's attention sums to 1
    for _ in range(3):
        step.log_probs()
    assert torch.allclose(step.coverage.sum(1), torch.tensor([3.0]))


def test_embed_uses_the_mean_encoder_state(model_path: Path) -> None:
    ckpt = load_checkpoint(str(model_path))
    model = ckpt.build_model()
    vectors = phrase_representations(model, ckpt.src_vocab, ["a dog", "the man in red"])
    src = torch.tensor([ckpt.src_vocab.encode(["a", "dog"]) + [2]])
    with torch.inference_mode():
        memory = model.encode(src, torch.tensor([3])).memory  # type: ignore[union-attr]
    assert vectors.shape == (2, model.config.hidden_dim)
    assert np.allclose(vectors[0], memory[0].mean(0).numpy(), atol=1e-6)


def test_commands_work_for_an_attention_model(model_path: Path, tmp_path: Path) -> None:
    run = CliRunner().invoke
    r = run(
        cli,
        [
            "suggest",
            "-m",
            str(model_path),
            "a man",
            "--samples",
            "3",
            "--beam-size",
            "3",
            "--length-alpha",
            "0.2",
            "--coverage-beta",
            "0.2",
            "--max-length",
            "5",
            "--raw",
        ],
        catch_exceptions=False,
    )
    assert r.exit_code == 0 and "beam search" in r.output, r.output
    r = run(
        cli,
        [
            "embed",
            "-m",
            str(model_path),
            "-o",
            str(tmp_path / "e"),
            "--phrase",
            "a man",
            "--phrase",
            "two dogs",
            "--raw",
        ],
        catch_exceptions=False,
    )
    assert r.exit_code == 0 and "mean of the encoder states" in r.output, r.output
    table = tmp_path / "t.gz"
    table.write_bytes(gzip.compress(b"".join(read_lines(SAMPLE)[:400])))
    r = run(
        cli,
        [
            "compare",
            "-m",
            str(model_path),
            "-t",
            str(table),
            "--max-sources",
            "3",
            "--min-length",
            "1",
            "--min-targets",
            "2",
        ],
        catch_exceptions=False,
    )
    assert r.exit_code == 0, r.output
