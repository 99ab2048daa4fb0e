"""The golden files: a tiny committed model and the column it gives a few bundled lines.

``tests/data/golden/`` holds ``tiny-cho2014.pt`` (random weights, see ``tiny_checkpoint``),
``lines.txt`` (every 487th line of the bundled sample, 61 lines of all lengths) and, per option
set in ``VARIANTS``, the rescored lines as the command line wrote them when the files were made.
A change to the model's arithmetic, to the number format or to the model-file format makes
``tests/cli/test_golden.py`` fail. Regenerate (only for an intended change, and say why in the
commit) with::

    python -m tests.helpers.golden
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.helpers.paths import PYTHON, REPO, SAMPLE, cli_env

GOLDEN = REPO / "tests" / "data" / "golden"
MODEL = GOLDEN / "tiny-cho2014.pt"
LINES = GOLDEN / "lines.txt"
EVERY = 487
#: name -> extra rescore options
VARIANTS = {"default": [], "unk-normalize": ["--unk-feature", "--normalize"]}


def expected_path(variant: str) -> Path:
    return GOLDEN / f"lines.{variant}.rescored.txt"


def rescore(model: Path, lines: Path, out: Path, variant: str) -> subprocess.CompletedProcess:
    env = cli_env()
    env["OMP_NUM_THREADS"] = "1"
    return subprocess.run(
        [PYTHON, "-m", "phrase_rescorer", "-q", "rescore", str(lines), str(out), "--model", str(model),
         *VARIANTS[variant]],
        capture_output=True, env=env, timeout=300,
    )


def write_golden_files() -> None:
    import gzip

    from tests.helpers.rescore_data import tiny_checkpoint

    GOLDEN.mkdir(parents=True, exist_ok=True)
    with gzip.open(SAMPLE, "rb") as f:
        LINES.write_bytes(b"".join(line for i, line in enumerate(f) if i % EVERY == 0))
    tiny_checkpoint(MODEL)
    for variant in VARIANTS:
        r = rescore(MODEL, LINES, expected_path(variant), variant)
        assert r.returncode == 0, r.stderr.decode()


if __name__ == "__main__":
    write_golden_files()
