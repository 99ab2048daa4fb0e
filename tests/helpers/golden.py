"""The golden files: tiny committed models and the column each gives a few bundled lines.

``tests/data/golden/`` holds ``lines.txt`` (every 487th line of the bundled sample, 61 lines of
all lengths), one tiny random-weight model per entry of ``MODELS`` (every architecture, and a
subword model) and, per entry of ``VARIANTS`` (a model and rescore options), the rescored lines
as the command line wrote them when the files were made. A change to a network's arithmetic, to
the number format or to the model-file format makes ``tests/cli/test_golden.py`` fail.

Make the missing files (a new model or variant) with ``make golden``; existing files are kept,
and the program names each one it kept. Rewrite a variant's files (its model, and every output
of that model) only for an intended change, and say why in the commit::

    python -m tests.helpers.golden --force VARIANT...
"""

from __future__ import annotations

import argparse
import gzip
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from tests.helpers.paths import PYTHON, REPO, SAMPLE, cli_env

GOLDEN = REPO / "tests" / "data" / "golden"
LINES = GOLDEN / "lines.txt"
EVERY = 487


def _cho2014(path: Path) -> Path:
    from tests.helpers.rescore_data import tiny_checkpoint

    return tiny_checkpoint(path)


def _rnnsearch(path: Path) -> Path:
    from tests.helpers.rescore_data import tiny_arch_checkpoint

    return tiny_arch_checkpoint(path, "rnnsearch")


def _gnmt(path: Path) -> Path:
    from tests.helpers.rescore_data import tiny_arch_checkpoint

    return tiny_arch_checkpoint(path, "gnmt")


def _transformer(path: Path) -> Path:
    from tests.helpers.rescore_data import tiny_arch_checkpoint

    return tiny_arch_checkpoint(path, "transformer", layers=2)


def _cho2014_subwords(path: Path) -> Path:
    from tests.helpers.rescore_data import tiny_checkpoint

    return tiny_checkpoint(path, subwords=500)


#: model file name -> what makes it (random weights from a fixed seed; ``tests.helpers.rescore_data``)
MODELS: dict[str, Callable[[Path], Path]] = {
    "tiny-cho2014.pt": _cho2014,
    "tiny-rnnsearch.pt": _rnnsearch,  # the architecture's own options, 16 units
    "tiny-gnmt.pt": _gnmt,  # 4 LSTM layers, residual connections, attention from the bottom layer
    "tiny-cho2014-subwords.pt": _cho2014_subwords,  # at most 500 SentencePiece units per side
    "tiny-transformer.pt": _transformer,  # 2 layers a side, 4 heads, width 16
}


class Variant(NamedTuple):
    model: str  # a key of MODELS
    options: list[str]  # extra rescore options
    columns: int  # the columns it appends
    logprob: bool = False  # its score column is log p (--score-format logprob), not p


#: name -> the model and options of lines.NAME.rescored.txt
VARIANTS: dict[str, Variant] = {
    "default": Variant("tiny-cho2014.pt", [], 1),
    "unk-normalize": Variant("tiny-cho2014.pt", ["--unk-feature", "--normalize"], 2),
    "rnnsearch": Variant("tiny-rnnsearch.pt", [], 1),
    "gnmt": Variant("tiny-gnmt.pt", [], 1),
    "transformer": Variant("tiny-transformer.pt", [], 1),
    # log p: a long phrase is 20 units or more, some below the floor exp(-100) of the prob format
    "subwords": Variant("tiny-cho2014-subwords.pt", ["--unk-feature", "--score-format", "logprob"], 2, True),
}
MODEL = GOLDEN / VARIANTS["default"].model  # the paper's network (test_wheel, test_determinism)


def model_path(variant: str) -> Path:
    return GOLDEN / VARIANTS[variant].model


def expected_path(variant: str) -> Path:
    return GOLDEN / f"lines.{variant}.rescored.txt"


def rescore(model: Path, lines: Path, out: Path, variant: str) -> subprocess.CompletedProcess:
    env = cli_env()
    env["OMP_NUM_THREADS"] = "1"
    return subprocess.run(
        [
            PYTHON,
            "-m",
            "phrase_rescorer",
            "-q",
            "rescore",
            str(lines),
            str(out),
            "--model",
            str(model),
            *VARIANTS[variant].options,
        ],
        capture_output=True,
        env=env,
        timeout=300,
    )


def write_golden_files(force: list[str]) -> list[str]:
    """Write every missing golden file, and rewrite those of the variants in ``force`` (their
    model and every output of that model); return what was written, kept, refused."""
    rewrite_models = {VARIANTS[v].model for v in force}
    rewrite = {v for v, spec in VARIANTS.items() if spec.model in rewrite_models}
    report = []
    GOLDEN.mkdir(parents=True, exist_ok=True)
    if not LINES.exists():
        with gzip.open(SAMPLE, "rb") as f:
            LINES.write_bytes(b"".join(line for i, line in enumerate(f) if i % EVERY == 0))
        report.append(f"wrote {LINES}")
    else:
        report.append(f"kept {LINES}")
    for name, make in MODELS.items():
        path = GOLDEN / name
        outputs = [expected_path(v) for v, spec in VARIANTS.items() if spec.model == name]
        if path.exists() and name not in rewrite_models:
            report.append(f"kept {path}")
            continue
        if not path.exists() and name not in rewrite_models and any(p.exists() for p in outputs):
            # a new model would not give the kept outputs
            report.append(f"refused {path}: missing, but its outputs exist (--force a variant of it)")
            continue
        make(path)
        report.append(f"wrote {path}")
    for variant in VARIANTS:
        out = expected_path(variant)
        if out.exists() and variant not in rewrite:
            report.append(f"kept {out}")
            continue
        if not model_path(variant).exists():
            continue  # refused above
        r = rescore(model_path(variant), LINES, out, variant)
        if r.returncode != 0:
            raise SystemExit(f"rescoring for {out} failed:\n{r.stderr.decode()}")
        report.append(f"wrote {out}")
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.helpers.golden",
        description="Write the missing golden files; existing files are kept unless their variant is --force'd.",
    )
    parser.add_argument(
        "--force",
        nargs="+",
        default=[],
        choices=list(VARIANTS),
        metavar="VARIANT",
        help=f"rewrite the model of these variants and every output of it ({', '.join(VARIANTS)})",
    )
    args = parser.parse_args(argv)
    report = write_golden_files(args.force)
    print("\n".join(report))
    return 1 if any(line.startswith("refused") for line in report) else 0


if __name__ == "__main__":
    sys.exit(main())
