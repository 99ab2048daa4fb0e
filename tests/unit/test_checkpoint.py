"""The one model file: round trip, safe loading, self-description, refusals."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from phrase_rescorer import __version__
from phrase_rescorer.data.batching import collate
from phrase_rescorer.data.pairs import load_pairs
from phrase_rescorer.model.checkpoint import FORMAT_VERSION, load_checkpoint, save_checkpoint
from phrase_rescorer.model.cho2014 import ModelConfig, sequence_log_probs
from phrase_rescorer.model.files import CheckpointError
from phrase_rescorer.training.loop import fit
from phrase_rescorer.training.phrase_task import PhraseTask
from phrase_rescorer.training.run_settings import TrainConfig, prepare_data
from phrase_rescorer.training.task_interface import LoopConfig
from tests.helpers.synthetic import mapping_table

SIZES = dict(embed_dim=8, hidden_dim=16, maxout_dim=8, output_rank=4)


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> tuple[PhraseTask, Path]:
    """A tiny network after a few Adadelta steps (weights no longer at their start)."""
    d = tmp_path_factory.mktemp("ckpt")
    pairs = load_pairs(str(mapping_table(d / "t.txt", 200)))
    cfg = TrainConfig(batch_size=16, valid_fraction=0.1, loop=LoopConfig(max_steps=6, valid_every=3, seed=5))
    data = prepare_data(pairs, 40, cfg)
    config = ModelConfig(len(data.src_vocab), len(data.tgt_vocab), **SIZES)
    trainer = PhraseTask(data, config, cfg, torch.device("cpu"), argv=["x", "y"])
    fit(trainer, cfg.loop, str(d / "m.pt"), device=torch.device("cpu"))
    return trainer, d


def scores(model: torch.nn.Module, trainer: PhraseTask) -> torch.Tensor:
    batch = collate(trainer.data.encoded, np.arange(len(trainer.data.encoded)))
    model.eval()
    with torch.no_grad():
        return sequence_log_probs(model, batch.src, batch.src_len, batch.tgt, batch.tgt_len)


def test_round_trip_scores_identically(trained: tuple[PhraseTask, Path], tmp_path: Path) -> None:
    trainer, _ = trained
    path = tmp_path / "rt.pt"
    save_checkpoint(str(path), trainer.network, trainer.data.src_vocab, trainer.data.tgt_vocab, {"note": "x"})
    ckpt = load_checkpoint(str(path))
    assert ckpt.config == trainer.network.config
    assert ckpt.src_vocab == trainer.data.src_vocab and ckpt.tgt_vocab == trainer.data.tgt_vocab
    assert ckpt.info == {"note": "x"} and ckpt.training_state is None
    assert torch.equal(scores(ckpt.build_model(), trainer), scores(trainer.network, trainer))
    assert ckpt.fingerprint() == load_checkpoint(str(path)).fingerprint()


def test_training_files_are_self_describing(trained: tuple[PhraseTask, Path]) -> None:
    trainer, d = trained
    for name in ("m.pt", "m.last.pt"):
        raw = torch.load(d / name, weights_only=True)  # the safe loader reads it as it is
        assert raw["format_version"] == 1 and raw["package_version"] == __version__  # cho2014: version 1
        assert raw["config"] == trainer.network.config.to_dict()
        assert raw["src_vocab"] == trainer.data.src_vocab.tokens
        assert raw["tgt_vocab"] == trainer.data.tgt_vocab.tokens
        info = raw["info"]
        assert info["seed"] == 5 and info["argv"] == ["x", "y"]
        assert info["table_hash"] == trainer.data.table_hash and len(info["table_hash"]) == 64
        assert info["train_config"]["batch_size"] == 16
        assert info["best_valid"]["token_ppl"] > 1 and info["unigram_token_ppl"] > 1
    best, last = load_checkpoint(str(d / "m.pt")), load_checkpoint(str(d / "m.last.pt"))
    assert best.training_state is None
    assert last.info["steps"] == 6 and last.training_state is not None
    state = last.training_state
    assert state["progress"]["step"] == 6 and state["optimizer"]["state"]
    assert isinstance(state["torch_rng"], torch.Tensor)
    # the best network is the one whose validation figures it carries
    assert best.info["steps"] == best.info["best_valid"]["step"]


def test_last_checkpoint_scores_like_the_trained_model(trained: tuple[PhraseTask, Path]) -> None:
    trainer, d = trained
    reloaded = load_checkpoint(str(d / "m.last.pt")).build_model()
    assert torch.equal(scores(reloaded, trainer), scores(trainer.network, trainer))


def test_unknown_format_version_is_refused(trained: tuple[PhraseTask, Path], tmp_path: Path) -> None:
    _, d = trained
    payload = torch.load(d / "m.pt", weights_only=True)
    payload["format_version"] = FORMAT_VERSION + 98
    torch.save(payload, tmp_path / "future.pt")
    with pytest.raises(CheckpointError, match=f"format version {FORMAT_VERSION + 98}.*retrain"):
        load_checkpoint(str(tmp_path / "future.pt"))


def test_damaged_or_foreign_files_are_refused(trained: tuple[PhraseTask, Path], tmp_path: Path) -> None:
    _, d = trained
    data = (d / "m.pt").read_bytes()
    (tmp_path / "cut.pt").write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match="truncated or corrupt"):
        load_checkpoint(str(tmp_path / "cut.pt"))
    torch.save({"weights": torch.zeros(3)}, tmp_path / "other.pt")
    with pytest.raises(CheckpointError, match="not a phrase_rescorer model"):
        load_checkpoint(str(tmp_path / "other.pt"))
    with pytest.raises(CheckpointError, match="no such model file"):
        load_checkpoint(str(tmp_path / "absent.pt"))
