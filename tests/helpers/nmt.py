"""A tiny sentence-level network, trained by ``train-nmt`` on the tiny Moses system's dev
corpus: what the n-best and experiment tests score lists with (seconds to train)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.helpers.paths import PYTHON, REPO, cli_env

TINY_MOSES = REPO / "tests" / "data" / "tiny-moses"
#: Sizes that train a step in milliseconds.
SIZES = ["--embed-dim", "16", "--hidden-dim", "16", "--maxout-dim", "8", "--output-rank", "8"]


def tiny_nmt(path: Path, steps: int = 20, right_to_left: bool = False) -> Path:
    """A train-nmt network of the tiny corpus (dev.en -> dev.fr), every pair training
    (``right_to_left``: writing its target from the last word, train-nmt --right-to-left)."""
    argv = [PYTHON, "-m", "phrase_rescorer", "-q", "train-nmt", str(TINY_MOSES / "dev.en"), str(TINY_MOSES / "dev.fr")]
    argv += [str(path), "--max-steps", str(steps), *SIZES, "--valid-fraction", "0"]
    argv += ["--right-to-left"] if right_to_left else []
    argv += ["--source-lang", "en", "--target-lang", "fr"]
    trained = subprocess.run(argv, capture_output=True, env=cli_env(), timeout=300)
    assert trained.returncode == 0, trained.stderr
    return path
