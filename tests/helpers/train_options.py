"""The size options of the tests' tiny network, for the tests that train through the command
line (unit, cli and faults tiers): one definition, so that a change of sizes is made once."""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

from tests.helpers.paths import REPO
from tests.helpers.synthetic import mapping_table

TINY_MOSES = REPO / "tests" / "data" / "tiny-moses"

#: 40-word shortlists, 8-dim embeddings, 16 hidden units, maxout 8, output rank 4: trains a step in
#: milliseconds and still learns the synthetic mappings of tests/helpers/synthetic.py
TINY_NETWORK = [
    "--vocab-size",
    "40",
    "--embed-dim",
    "8",
    "--hidden-dim",
    "16",
    "--maxout-dim",
    "8",
    "--output-rank",
    "4",
]


@dataclass(frozen=True)
class LoopTask:
    """A training command on tiny data, for the tests of the training loop run over every task:
    the phrase task (``train``; ``train-nmt`` shares it) and the CSLM's (``train-lm``). Both
    train 270 items (pairs, n-grams): 17 batches of 16 an epoch."""

    name: str
    command: str
    options: tuple[str, ...]
    unit: str  # what the log's rate counts
    valid_keys: frozenset[str]  # a valid event's own keys

    def inputs(self, directory: Path, seed: int = 0) -> list[str]:
        """The command's data files (``seed``: other data of the same size)."""
        if self.command == "train":
            return [str(mapping_table(directory / f"pt{seed}.gz", 300, seed=seed))]
        lines = [line for name in ("dev.fr", "test.fr") for line in (TINY_MOSES / name).read_text().splitlines()]
        if seed:
            random.Random(seed).shuffle(lines)
        text = directory / f"text{seed}.fr"
        text.write_text("".join(line + "\n" for line in lines))
        return [str(text)]


TASKS = (
    LoopTask(
        "phrase",
        "train",
        (*TINY_NETWORK, "--valid-fraction", "0.1"),
        "pairs",
        frozenset({"valid_mean_logp", "unigram_token_ppl"}),
    ),
    LoopTask(
        "cslm",
        "train-lm",
        (
            "--order",
            "3",
            "--embed-dim",
            "8",
            "--hidden",
            "16",
            "--vocab-size",
            "60",
            "--valid",
            str(TINY_MOSES / "dev.fr"),
        ),
        "ngrams",
        frozenset({"valid_ppl_with_unk"}),
    ),
)
