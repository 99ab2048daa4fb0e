"""The size options of the tests' tiny network, for the tests that train through the command
line (unit, cli and faults tiers): one definition, so that a change of sizes is made once."""

from __future__ import annotations

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
