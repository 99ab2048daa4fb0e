"""Crafted model files, end to end: a configuration that does not fit the weights, a gnmt
file whose residual connections start above its layers, a subword model whose stored
SentencePiece model is empty. Each is refused when the file is loaded, before anything is
scored or allocated: exit 4, one line naming the file, nothing at OUT."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from phrase_rescorer.model import checkpoint
from phrase_rescorer.model.architectures import arch_config
from phrase_rescorer.model.checkpoint import load_checkpoint
from phrase_rescorer.model.files import CheckpointError
from tests.helpers.paths import PYTHON, SAMPLE, cli_env
from tests.helpers.rescore_data import read_lines, tiny_arch_checkpoint, tiny_checkpoint


def _hidden_3000(payload: dict) -> None:
    payload["config"]["hidden_dim"] = 3000


def _residual_above_layers(payload: dict) -> None:
    payload["arch"]["residual_from"] = payload["arch"]["layers"] + 1


def _empty_subwords(payload: dict) -> None:
    payload["format_version"] = 2
    payload["subwords"] = {side: torch.empty(0, dtype=torch.uint8) for side in ("source", "target")}


CASES: list[tuple[str, str, Callable[[dict], None], str]] = [
    (
        "hidden_dim 8 -> 3000",
        "cho2014",
        _hidden_3000,
        r"inconsistent model file: its configuration's hidden_dim 3000 is the size of none of its weights",
    ),
    (
        "gnmt residual_from above its layers",
        "gnmt",
        _residual_above_layers,
        r"inconsistent model file: residual connections from layer 4 of 3: there is no such layer",
    ),
    (
        "subword model with an empty SentencePiece model",
        "cho2014",
        _empty_subwords,
        r"unreadable subword units: an empty SentencePiece model",
    ),
]


def _model(kind: str, path: Path) -> Path:
    if kind == "gnmt":
        return tiny_arch_checkpoint(path, "gnmt", layers=3)
    return tiny_checkpoint(path, hidden=8, vocab=50)


@pytest.mark.parametrize(("kind", "change", "message"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_crafted_model_file_is_refused_at_load(
    kind: str, change: Callable[[dict], None], message: str, tmp_path: Path
) -> None:
    payload = torch.load(_model(kind, tmp_path / "good.pt"), weights_only=True)
    change(payload)
    torch.save(payload, tmp_path / "bad.pt")
    table = tmp_path / "in.txt"
    table.write_bytes(b"".join(read_lines(SAMPLE)[:50]))
    env = {**cli_env(), "OMP_NUM_THREADS": "1"}
    r = subprocess.run(
        [
            PYTHON,
            "-m",
            "phrase_rescorer",
            "-q",
            "rescore",
            str(table),
            str(tmp_path / "out.txt"),
            "--model",
            str(tmp_path / "bad.pt"),
        ],
        capture_output=True,
        env=env,
        timeout=300,
    )
    err = r.stderr.decode()
    assert r.returncode == 4, err
    assert len(err.splitlines()) == 1 and err.startswith(f"phrase-rescorer: error: {tmp_path / 'bad.pt'}: "), err
    assert re.search(message, err), err
    assert not (tmp_path / "out.txt").exists()


def test_no_network_is_built_before_the_weights_fit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The file's sizes are checked against its weights' dimensions before any network is
    built: a tampered size (hidden 3000) would otherwise allocate the network of that size first."""
    payload = torch.load(tiny_checkpoint(tmp_path / "good.pt", hidden=8, vocab=50), weights_only=True)
    _hidden_3000(payload)
    torch.save(payload, tmp_path / "bad.pt")
    devices = []
    real = checkpoint.build_model

    def recording(*args, **kwargs):  # type: ignore[no-untyped-def]
        devices.append(torch.empty(0).device.type)  # where tensors would be allocated now
        return real(*args, **kwargs)

    monkeypatch.setattr(checkpoint, "build_model", recording)
    with pytest.raises(CheckpointError, match="inconsistent model file: its configuration's hidden_dim 3000"):
        load_checkpoint(str(tmp_path / "bad.pt"))
    assert devices == []


def test_gnmt_with_fewer_layers_than_its_residual_start_keeps_loading(tmp_path: Path) -> None:
    """``train --arch gnmt --layers 2`` writes gnmt's own start (3): no residual connection, and
    such files load; a start above the layers that is not the architecture's own is refused."""
    assert arch_config("gnmt", layers=2).residual_from == 3  # type: ignore[union-attr]
    load_checkpoint(str(tiny_arch_checkpoint(tmp_path / "two.pt", "gnmt", layers=2)))
    with pytest.raises(ValueError, match="residual connections from layer 4 of 2"):
        arch_config("gnmt", layers=2, residual_from=4)
