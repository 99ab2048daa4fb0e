"""A tiny CSLM, trained in a second on French text of the bundled tiny Moses system."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import torch

from phrase_rescorer.data.corpus import read_sentences
from phrase_rescorer.lm.network import LMConfig
from phrase_rescorer.lm.task import LMData, LMTask, LMTrainConfig
from phrase_rescorer.lm.text import build_vocabulary, text_ngrams
from phrase_rescorer.training.loop import fit
from tests.helpers.paths import REPO

TINY_MOSES = REPO / "tests" / "data" / "tiny-moses"
#: Training text: the tiny system's dev and test references (the tests score hypotheses of both).
TEXTS = (TINY_MOSES / "dev.fr", TINY_MOSES / "test.fr")


def tiny_lm(path: Path, *, vocab_size: int = 60, steps: int = 150, seed: int = 1, resume: bool = False) -> Path:
    """A 3-gram CSLM with a shortlist of ``vocab_size`` (so that some words are <unk>)."""
    sentences = [s for text in TEXTS for s in read_sentences(str(text))]
    vocab = build_vocabulary(sentences, vocab_size)
    config = LMConfig(order=3, embed_dim=8, hidden=(16,), vocab_size=len(vocab), init_range=0.1)
    data = text_ngrams(config.order, vocab, sentences)
    loop = replace(LMTrainConfig().loop, lr=1e-2, max_steps=steps, valid_every=1000, seed=seed)
    settings = LMTrainConfig(batch_size=32, loop=loop)
    lm_data = LMData(config, vocab, data, data, len(sentences), sentences)
    task = LMTask(lm_data, settings, torch.device("cpu"), {"language": "fr", "argv": []})
    fit(task, loop, str(path), device=torch.device("cpu"), resume=resume)
    return path
