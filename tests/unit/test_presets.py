"""The named sizes of ``--preset``: what each one sets, and that a size option overrides it."""

from __future__ import annotations

import pytest

from phrase_rescorer.model.cho2014 import PRESETS
from phrase_rescorer.training.run_settings import preset_sizes


@pytest.mark.parametrize(
    ("preset", "vocab", "sizes"),
    [
        ("paper", 15000, dict(embed_dim=100, hidden_dim=1000, maxout_dim=500, output_rank=100)),
        ("medium", 8000, dict(embed_dim=256, hidden_dim=512, maxout_dim=256, output_rank=128)),
        ("small", 8000, dict(embed_dim=64, hidden_dim=256, maxout_dim=128, output_rank=64)),
    ],
)
def test_a_preset_sets_the_documented_sizes(preset: str, vocab: int, sizes: dict) -> None:
    assert preset_sizes(preset) == (vocab, sizes)


def test_a_size_option_overrides_its_preset_and_none_does_not() -> None:
    vocab, sizes = preset_sizes("medium", hidden_dim=300, embed_dim=None, vocab_size=5000)
    assert vocab == 5000 and sizes["hidden_dim"] == 300 and sizes["embed_dim"] == 256
    assert PRESETS["medium"]["hidden_dim"] == 512  # the preset itself is not changed
