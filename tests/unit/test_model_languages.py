"""The languages a network was trained for, in its model file: recorded by train, kept on
resume, absent (None) in files written without them, which still load."""

from __future__ import annotations

from pathlib import Path

import torch
from click.testing import CliRunner

from phrase_rescorer.cli import cli
from phrase_rescorer.model.checkpoint import load_checkpoint, save_checkpoint
from tests.helpers.synthetic import mapping_table

TINY = (
    "--vocab-size",
    "20",
    "--embed-dim",
    "4",
    "--hidden-dim",
    "8",
    "--maxout-dim",
    "4",
    "--output-rank",
    "4",
    "--valid-every",
    "2",
    "--batch-size",
    "8",
    "--threads",
    "1",
    "--device",
    "cpu",
)


def train(table: Path, out: Path, *args: str) -> str:
    r = CliRunner().invoke(cli, ["-q", "train", str(table), str(out), *TINY, *args])
    assert r.exit_code == 0, r.output
    return r.output


def test_train_records_the_languages_and_resume_keeps_them(tmp_path: Path) -> None:
    table = mapping_table(tmp_path / "t.txt", 120)
    out = tmp_path / "m.pt"
    train(table, out, "--max-steps", "2", "--source-lang", "en", "--target-lang", "fr")
    for path in (out, tmp_path / "m.last.pt"):
        ckpt = load_checkpoint(str(path))
        assert (ckpt.source_lang, ckpt.target_lang) == ("en", "fr")
        assert torch.load(path, weights_only=True)["format_version"] == 1  # cho2014 files stay version 1
    train(table, out, "--max-steps", "4", "--resume")  # the same command, languages left out
    assert load_checkpoint(str(tmp_path / "m.last.pt")).source_lang == "en"
    r = CliRunner().invoke(
        cli, ["-q", "train", str(table), str(out), *TINY, "--max-steps", "6", "--resume", "--source-lang", "de"]
    )
    assert r.exit_code == 2 and "was trained with --source-lang en, not de" in r.output
    r = CliRunner().invoke(cli, ["train", str(table), str(out), "--source-lang", "french"])
    assert r.exit_code == 2 and "'french' is not a language code" in r.output


def test_without_languages_they_are_unknown(tmp_path: Path) -> None:
    table = mapping_table(tmp_path / "t.txt", 120)
    train(table, tmp_path / "m.pt", "--max-steps", "1")
    ckpt = load_checkpoint(str(tmp_path / "m.pt"))
    assert ckpt.source_lang is None and ckpt.target_lang is None
    assert ckpt.info["source_lang"] is None  # recorded as unknown
    # a file from before the languages were recorded: no such keys at all
    old = tmp_path / "old.pt"
    save_checkpoint(str(old), ckpt.build_model(), ckpt.src_vocab, ckpt.tgt_vocab, {"steps": 1})
    old_ckpt = load_checkpoint(str(old))
    assert old_ckpt.source_lang is None and old_ckpt.target_lang is None
    assert old_ckpt.fingerprint() == ckpt.fingerprint()
    for value in ("", 3, ["en"]):  # only a recorded code counts
        old_ckpt.info["target_lang"] = value
        assert old_ckpt.target_lang is None
