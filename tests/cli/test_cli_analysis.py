"""The analysis commands end to end: suggest, compare, embed, plot-log (PNG files included)."""

from __future__ import annotations

import json
import struct
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from phrase_rescorer.analysis.table_groups import pick_groups, source_groups
from phrase_rescorer.cli import cli
from phrase_rescorer.data.batching import sequences_batch
from phrase_rescorer.model.checkpoint import load_checkpoint
from phrase_rescorer.model.cho2014 import sequence_log_probs
from tests.helpers.paths import PYTHON, cli_env

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def run(*args: str, input: str | None = None) -> str:
    r = CliRunner().invoke(cli, ["-q", *args], input=input)
    assert r.exit_code == 0, r.output
    return r.stdout


def assert_png(path: Path, min_side: int = 200) -> None:
    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE, f"{path} is not a PNG"
    width, height = struct.unpack(">II", data[16:24])  # the IHDR chunk comes first
    assert width >= min_side and height >= min_side
    assert len(data) > 5000, f"{path} is suspiciously small ({len(data)} bytes)"


# --- suggest ------------------------------------------------------------------------------------


def test_suggest_scores_are_rescoring_scores_and_table_marks_are_right(trained_model: Path, sample_table: Path) -> None:
    out = run(
        "suggest",
        "-m",
        str(trained_model),
        "looking at",
        "a zebra qwxyz",
        "--table",
        str(sample_table),
        "--beam-size",
        "5",
        "--samples",
        "30",
        "--top",
        "4",
        "--format",
        "json",
    )
    results = json.loads(out)
    ckpt = load_checkpoint(str(trained_model))
    model = ckpt.build_model()
    known, _ = pick_groups(source_groups(str(sample_table)), given=["looking at"])
    table_targets = set(known[0].targets)
    assert [r["source"] for r in results] == ["looking at", "a zebra qwxyz"]
    assert results[0]["in_table"] is True and results[1]["in_table"] is False
    assert results[1]["unknown_words"] >= 1
    for r in results:
        assert [m["method"].split(" (")[0] for m in r["methods"]] == ["beam search", "sampling"]
        for m in r["methods"]:
            cands = m["candidates"]
            assert 1 <= len(cands) <= 4
            logps = [c["logp"] for c in cands]
            assert logps == sorted(logps, reverse=True)
            src = [ckpt.src_vocab.encode(r["source"].split())] * len(cands)
            tgt = [ckpt.tgt_vocab.encode(c["target"].split()) for c in cands]
            b = sequences_batch(src, tgt)
            with torch.no_grad():
                ref = sequence_log_probs(model, b.src, b.src_len, b.tgt, b.tgt_len)
            assert torch.allclose(torch.tensor(logps), ref, atol=1e-4)
            for c in cands:
                expected = c["target"] in table_targets if r["source"] == "looking at" else False
                assert c["in_table"] is expected


def test_suggest_reads_stdin_and_is_reproducible(trained_model: Path) -> None:
    args = ("suggest", "-m", str(trained_model), "--samples", "20", "--seed", "4", "--format", "tsv")
    first = run(*args, input="sit at a table\n\nlooking at\n")
    assert first == run(*args, input="sit at a table\nlooking at\n")
    rows = [line.split("\t") for line in first.splitlines()]
    assert rows[0] == ["source", "method", "rank", "logp", "target", "in_table", "truncated"]
    assert {r[0] for r in rows[1:]} == {"sit at a table", "looking at"}
    assert all(r[5] == "" for r in rows[1:])  # no --table: nothing to mark
    text = run("suggest", "-m", str(trained_model), "looking at", "--samples", "0", "--top", "2")
    assert text.splitlines()[:2] == ["looking at", "  beam search (beam 10)"]


def test_suggest_refuses_nothing_to_do(trained_model: Path) -> None:
    r = CliRunner().invoke(cli, ["suggest", "-m", str(trained_model), "a", "--beam-size", "0", "--samples", "0"])
    assert r.exit_code == 2 and "nothing to do" in r.output


# --- compare ------------------------------------------------------------------------------------


def test_compare_report_formats_and_scatter_plot(trained_model: Path, sample_table: Path, tmp_path: Path) -> None:
    base = ["compare", "-m", str(trained_model), "-t", str(sample_table), "--max-sources", "3", "--top", "2"]
    png = tmp_path / "scatter.png"
    text = run(*base, "--scatter-pairs", "400", "--plot", str(png))
    assert text.count("\n[") == 3 and "p(target|source)" in text and "Spearman" in text
    assert_png(png)
    rows = run(*base, "--format", "tsv", "--scatter-pairs", "0").splitlines()
    assert len(rows) == 1 + 3 * 2 * 2
    data = json.loads(run(*base, "--format", "json", "--scatter-pairs", "50"))
    assert len(data["sources"]) == 3 and data["table_column"] == 3 and data["scatter_pairs"] == 50
    for s in data["sources"]:
        assert len(s["source"].split()) >= 4 and s["targets"] >= 6


def test_compare_given_sources(trained_model: Path, sample_table: Path) -> None:
    data = json.loads(
        run(
            "compare",
            "-m",
            str(trained_model),
            "-t",
            str(sample_table),
            "--source",
            "looking at",
            "--source",
            "no such source",
            "--format",
            "json",
            "--scatter-pairs",
            "0",
            "--top",
            "40",
        )
    )
    (s,) = data["sources"]
    assert s["source"] == "looking at" and s["targets"] == 40 and len(s["by_network"]) == 40
    assert data["missing"] == ["no such source"]
    assert {r["target"] for r in s["by_table"]} == {r["target"] for r in s["by_network"]}


def test_compare_column_beyond_the_scores_names_the_line(trained_model: Path, sample_table: Path) -> None:
    r = subprocess.run(
        [
            PYTHON,
            "-m",
            "phrase_rescorer",
            "-q",
            "compare",
            "-m",
            str(trained_model),
            "-t",
            str(sample_table),
            "--tm-column",
            "5",
        ],
        capture_output=True,
        text=True,
        env=cli_env(),
        timeout=120,
    )
    assert r.returncode == 3
    assert f"{sample_table}:1: has 4 scores, so there is no score column 5" in r.stderr


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["--plot", "MISSING_DIR/x.png"], 6, "x.png: output directory does not exist"),
        (["--min-length", "5", "--max-length", "2"], 2, "--max-length 2 is below --min-length 5"),
    ],
)
def test_compare_refuses_before_reading_the_table(
    trained_model: Path, tmp_path: Path, args: list[str], code: int, message: str
) -> None:
    """The table is a FIFO no one writes: a refusal that waited for the table would hang, not
    exit with its code."""
    import os

    table = tmp_path / "never-written.gz"
    os.mkfifo(table)
    given = [a.replace("MISSING_DIR", str(tmp_path / "missing")) for a in args]
    r = subprocess.run(
        [PYTHON, "-m", "phrase_rescorer", "compare", "-m", str(trained_model), "-t", str(table), *given],
        capture_output=True,
        text=True,
        env=cli_env(),
        timeout=120,
    )
    assert r.returncode == code and message in r.stderr, r.stderr


# --- embed --------------------------------------------------------------------------------------


def _count_rows(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").split("\n")) - 1


def test_embed_exports_projector_files_and_tsne_maps(trained_model: Path, sample_table: Path, tmp_path: Path) -> None:
    out = tmp_path / "emb"
    printed = run(
        "embed",
        "-m",
        str(trained_model),
        "-o",
        str(out),
        "-t",
        str(sample_table),
        "--num-phrases",
        "40",
        "--phrase",
        "looking at",
        "--plot",
        "--plot-words",
        "40",
        "--labels",
        "15",
        "--perplexity",
        "5",
    )
    paths = [Path(p) for p in printed.splitlines()]
    assert all(p.exists() for p in paths)
    for name, header in (("source-words", 0), ("target-words", 0), ("phrases", 1)):
        vectors, meta = out / f"{name}.vectors.tsv", out / f"{name}.metadata.tsv"
        assert vectors in paths and meta in paths
        assert _count_rows(vectors) == _count_rows(meta) - header
        assert_png(out / f"{name}.tsne.png")
    assert _count_rows(out / "source-words.vectors.tsv") == 300  # the whole shortlist
    assert _count_rows(out / "phrases.vectors.tsv") == 41  # the given one and 40 sampled
    config = (out / "projector_config.pbtxt").read_text()
    assert config.count("embeddings {") == 3 and 'tensor_path: "phrases.vectors.tsv"' in config


def test_plots_without_scikit_learn_say_how_to_install(
    trained_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "sklearn", None)
    monkeypatch.setitem(sys.modules, "sklearn.manifold", None)
    r = CliRunner().invoke(
        cli, ["-q", "embed", "-m", str(trained_model), "-o", str(tmp_path), "--phrase", "a b", "--plot"]
    )
    assert r.exit_code == 2
    assert "pip install 'phrase_rescorer[plots]'" in r.output


# --- plot-log -----------------------------------------------------------------------------------


def test_plot_log_draws_curves_and_tolerates_other_records(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    lines = [json.dumps({"event": "start", "argv": ["train"]})]
    for step in range(1, 201):
        lines.append(
            json.dumps(
                {
                    "event": "train",
                    "step": step,
                    "epoch": 0,
                    "loss": 40 / step**0.3,
                    "pairs_per_s": 900.0,
                    "elapsed": step * 0.1,
                    "extra": [1],
                }
            )
        )
        if step % 50 == 0:
            lines.append(
                json.dumps(
                    {
                        "event": "valid",
                        "step": step,
                        "epoch": 0,
                        "valid_token_ppl": 300 / step**0.2,
                        "valid_mean_logp": -20.0,
                        "unigram_token_ppl": 250.0,
                        "elapsed": step * 0.1,
                        "best": True,
                    }
                )
            )
    lines.append('{"event": "train", "step": 201, "lo')  # a run still writing its log
    log.write_text("\n".join(lines) + "\n")
    png = tmp_path / "curves.png"
    assert run("plot-log", str(log), "--out", str(png)).strip() == str(png)
    assert_png(png)


def test_moving_average() -> None:
    from phrase_rescorer.analysis.plots import moving_average

    assert moving_average([1.0, 2.0, 3.0, 4.0], 2).tolist() == [1.0, 1.5, 2.5, 3.5]
    assert moving_average([5.0, 1.0], 1).tolist() == [5.0, 1.0]


def test_plot_log_without_records_is_bad_input(tmp_path: Path) -> None:
    log = tmp_path / "empty.log"
    log.write_text('{"event": "start"}\nnot json\n')
    r = CliRunner().invoke(cli, ["plot-log", str(log), "--out", str(tmp_path / "x.png")])
    assert r.exit_code == 3 and "no training or validation records" in r.output
    assert not (tmp_path / "x.png").exists()
