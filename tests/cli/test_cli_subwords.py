"""``--subwords`` at its documented minimum (300) on the project's own data, whose text has more
distinct characters than 300 units hold beside the byte units: the command trains."""

from __future__ import annotations

import subprocess
from pathlib import Path

from phrase_rescorer.model.checkpoint import load_checkpoint
from tests.helpers.nmt import SIZES, TINY_MOSES
from tests.helpers.paths import PYTHON, SAMPLE, cli_env


def test_the_documented_minimum_trains_on_the_bundled_data(tmp_path: Path) -> None:
    runs = {
        "train": ["train", str(SAMPLE), str(tmp_path / "pt.pt"), "--arch", "rnnsearch"],
        "train-nmt": [
            "train-nmt",
            str(TINY_MOSES / "train.en"),
            str(TINY_MOSES / "train.fr"),
            str(tmp_path / "nmt.pt"),
        ],
    }
    for argv in runs.values():
        argv += ["--subwords", "300", "--max-steps", "1", *SIZES, "--valid-fraction", "0", "--threads", "1"]
        r = subprocess.run(
            [PYTHON, "-m", "phrase_rescorer", "-q", *argv], capture_output=True, text=True, env=cli_env(), timeout=300
        )
        assert r.returncode == 0, r.stderr
        model = load_checkpoint(argv[3 if argv[0] == "train-nmt" else 2])
        assert model.subwords is not None
        for side in model.subwords:
            assert side.processor.get_piece_size() <= 300
