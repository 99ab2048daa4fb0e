"""Training the stacked architectures through the real command line: they learn a synthetic
word-by-word mapping better than the unigram baseline, train a few steps on the bundled sample,
record their architecture, and refuse to resume under another one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from phrase_rescorer.cli import cli
from phrase_rescorer.model.architectures import arch_config
from phrase_rescorer.model.checkpoint import load_checkpoint
from tests.helpers.paths import SAMPLE
from tests.helpers.synthetic import mapping_table

TINY = [
    "--vocab-size",
    "40",
    "--embed-dim",
    "16",
    "--hidden-dim",
    "32",
    "--maxout-dim",
    "16",
    "--output-rank",
    "16",
    "--batch-size",
    "16",
    "--valid-fraction",
    "0.1",
    "--seed",
    "1",
    "--patience",
    "0",
    "--init-std",
    "0.1",
    "--threads",
    "1",
]


def train(*args: str) -> Result:
    return CliRunner().invoke(cli, ["train", *args], catch_exceptions=False)


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return mapping_table(tmp_path_factory.mktemp("table") / "pt.gz", 300)


@pytest.mark.parametrize("arch", [["--arch", "rnnsearch"], ["--arch", "gnmt", "--layers", "3"]])
def test_it_learns_a_deterministic_mapping(arch: list[str], table: Path, tmp_path: Path) -> None:
    """Target = source word by word through a permutation of 12 words. The unigram baseline's
    held-out perplexity is about 11.4; 300 steps of attention bring it to about 7 (the source's
    words are read; what remains is mostly the target length, unknown to the model)."""
    r = train(str(table), str(tmp_path / "m.pt"), *TINY, *arch, "--max-steps", "300", "--valid-every", "50")
    assert r.exit_code == 0, r.output
    ckpt = load_checkpoint(str(tmp_path / "m.pt"))
    best: dict[str, Any] = ckpt.info["best_valid"]
    unigram = ckpt.info["unigram_token_ppl"]
    assert unigram > 10 and best["pairs"] >= 30
    assert best["token_ppl"] < 0.75 * unigram, (best, unigram)
    assert ckpt.arch is not None and ckpt.arch.name == arch[1]


@pytest.mark.parametrize("arch", ["rnnsearch", "gnmt"])
def test_a_few_steps_on_the_bundled_sample(arch: str, tmp_path: Path) -> None:
    r = train(
        str(SAMPLE),
        str(tmp_path / "m.pt"),
        "--arch",
        arch,
        "--layers",
        "2",
        "--vocab-size",
        "300",
        "--embed-dim",
        "8",
        "--hidden-dim",
        "16",
        "--maxout-dim",
        "8",
        "--output-rank",
        "8",
        "--batch-size",
        "32",
        "--max-steps",
        "3",
        "--valid-max",
        "50",
        "--threads",
        "1",
    )
    assert r.exit_code == 0, r.output
    assert f"{arch} (2 layers, additive attention)" in r.output
    assert load_checkpoint(str(tmp_path / "m.pt")).arch == arch_config(arch, layers=2)


def test_resume_refuses_another_architecture_and_cho2014_refuses_options(table: Path, tmp_path: Path) -> None:
    out = str(tmp_path / "m.pt")
    assert train(str(table), out, *TINY, "--arch", "rnnsearch", "--max-steps", "2").exit_code == 0
    r = train(str(table), out, *TINY, "--arch", "gnmt", "--max-steps", "4", "--resume")
    assert r.exit_code != 0 and "architecture was" in r.output
    r = train(str(table), out, *TINY, "--layers", "2", "--max-steps", "2")
    assert r.exit_code != 0 and "cho2014 is the paper's network" in r.output
