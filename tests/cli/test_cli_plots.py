"""The pictures of a run: ``plot-log`` of a log of each training command (made by the real
command on tiny data) and ``plot-experiment`` of a small experiment directory; the PNG files
exist, and the data drawn is the log's and the report's."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest

from phrase_rescorer.analysis.plots import experiment_bleu, training_panels
from phrase_rescorer.experiment import bleu
from phrase_rescorer.experiment.report import RunScores, build_report
from phrase_rescorer.experiment.settings import write_json
from phrase_rescorer.experiment.systems import systems_for
from phrase_rescorer.training.log import read_log, read_training_curves
from tests.helpers.nmt import SIZES, TINY_MOSES
from tests.helpers.paths import PYTHON, REPO, cli_env
from tests.helpers.train_options import TINY_NETWORK

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([PYTHON, "-m", "phrase_rescorer", *args], capture_output=True, env=cli_env(), timeout=300)


def made_log(tmp_path: Path, *argv: str) -> Path:
    r = run("-q", *argv)
    assert r.returncode == 0, r.stderr
    model = Path(next(a for a in argv if a.endswith(".pt")))
    return model.with_suffix(".log")


def plotted(log: Path) -> bytes:
    png = log.with_suffix(".png")
    r = run("plot-log", str(log), "-o", str(png))
    assert r.returncode == 0, r.stderr
    assert r.stdout.decode().strip() == str(png)
    data = png.read_bytes()
    assert data[:8] == PNG_SIGNATURE and len(data) > 5000
    return data


def points(log: Path, event: str, key: str) -> tuple[list[float], list[float], list[float]]:
    """(steps, minutes, values) of a log's events."""
    events = [e for e in read_log(str(log)) if e["event"] == event and e.get(key) is not None]
    return [e["step"] for e in events], [e["elapsed"] / 60 for e in events], [e[key] for e in events]


def check_panels(log: Path, per: str, smoothed: str = "") -> list:
    """The four panels draw the log's loss and held-out perplexity by step and by minutes."""
    panels = training_panels(read_training_curves(str(log)))
    assert [p.title for p in panels] == [
        f"training loss by step{smoothed}",
        f"training loss by minutes{smoothed}",
        "held-out perplexity by step",
        "held-out perplexity by minutes",
    ]
    steps, minutes, losses = points(log, "train", "loss")
    assert steps, "the log has no training loss"
    assert panels[0].curves[0].x == steps and panels[0].curves[0].y == losses
    assert panels[1].curves[0].x == pytest.approx(minutes) and panels[1].curves[0].y == losses
    assert panels[0].ylabel == f"training loss (-ln p per {per})" and panels[0].note is None
    steps, minutes, ppl = points(log, "valid", "valid_token_ppl")
    assert steps, "the log has no held-out perplexity"
    network = [c for c in panels[2].curves if c.label == "network"][0]
    assert network.x == steps and network.y == ppl
    network = [c for c in panels[3].curves if c.label == "network"][0]
    assert network.x == pytest.approx(minutes) and network.y == ppl
    return panels


def test_plot_log_of_a_train_log(tmp_path: Path) -> None:
    log = made_log(
        tmp_path, "train", str(TINY_MOSES / "phrase-table.gz"), str(tmp_path / "p.pt"), *TINY_NETWORK,
        "--max-steps", "12", "--log-every", "4", "--valid-every", "6", "--valid-fraction", "0.2",
    )  # fmt: skip
    panels = check_panels(log, "sentence pair")
    unigram = [c for c in panels[2].curves if c.label == "unigram baseline"][0]
    assert unigram.y == points(log, "valid", "unigram_token_ppl")[2]
    plotted(log)


def test_plot_log_of_a_train_nmt_log_shorter_than_its_log_interval(tmp_path: Path) -> None:
    """10 steps under the default --log-every (50): the run's end logs its loss, the panel has it."""
    log = made_log(
        tmp_path, "train-nmt", str(TINY_MOSES / "dev.en"), str(TINY_MOSES / "dev.fr"), str(tmp_path / "n.pt"),
        *SIZES, "--max-steps", "10", "--valid-every", "5", "--valid-fraction", "0.25",
    )  # fmt: skip
    assert points(log, "train", "loss")[0] == [10]
    check_panels(log, "sentence pair")
    plotted(log)


def test_plot_log_adds_a_row_for_the_held_out_bleu_of_a_run_that_logged_it(tmp_path: Path) -> None:
    log = made_log(
        tmp_path, "train-nmt", str(TINY_MOSES / "train.en"), str(TINY_MOSES / "train.fr"), str(tmp_path / "n.pt"),
        *SIZES, "--max-steps", "10", "--valid-every", "5", "--valid-fraction", "0.05", "--valid-bleu", "10",
    )  # fmt: skip
    panels = training_panels(read_training_curves(str(log)))
    assert [p.title for p in panels[4:]] == ["held-out BLEU by step (greedy)", "held-out BLEU by minutes (greedy)"]
    assert [p.title for p in panels[:2]] == ["training loss by step", "training loss by minutes"]
    steps, minutes, bleu = points(log, "valid", "valid_bleu")
    assert steps == [5, 10]
    assert panels[4].curves[0].x == steps and panels[4].curves[0].y == bleu
    assert panels[5].curves[0].x == pytest.approx(minutes) and panels[5].curves[0].y == bleu
    plotted(log)


def test_plot_log_says_the_loss_of_a_label_smoothed_run_is_the_smoothed_one(tmp_path: Path) -> None:
    log = made_log(
        tmp_path, "train-nmt", str(TINY_MOSES / "dev.en"), str(TINY_MOSES / "dev.fr"), str(tmp_path / "n.pt"),
        *SIZES, "--max-steps", "10", "--valid-every", "5", "--valid-fraction", "0.25", "--label-smoothing", "0.1",
    )  # fmt: skip
    check_panels(log, "sentence pair", ", label-smoothed 0.1")
    plotted(log)


def test_plot_log_of_a_train_lm_log(tmp_path: Path) -> None:
    log = made_log(
        tmp_path, "train-lm", str(TINY_MOSES / "dev.fr"), str(tmp_path / "lm.pt"), "--order", "3",
        "--embed-dim", "8", "--hidden", "16", "--max-steps", "110", "--valid", str(TINY_MOSES / "test.fr"),
        "--threads", "1",
    )  # fmt: skip
    panels = check_panels(log, "word")
    assert panels[2].hlines == []  # no --kenlm: no KenLM line
    plotted(log)


def test_a_log_without_loss_records_says_so_in_its_panel(tmp_path: Path) -> None:
    log = tmp_path / "valid-only.log"
    log.write_text(json.dumps({"event": "valid", "step": 5, "epoch": 0, "valid_token_ppl": 40.0, "elapsed": 30}))
    panels = training_panels(read_training_curves(str(log)))
    assert panels[0].curves == [] and panels[0].note == "no training-loss records in this log"
    assert panels[3].curves[0].x == [0.5] and panels[3].curves[0].y == [40.0]
    plotted(log)


#: The first bytes of each format, as matplotlib writes it.
HEADS = {".pdf": b"%PDF-", ".svg": b"<?xml", ".png": PNG_SIGNATURE}


def test_the_name_s_suffix_picks_the_format(tmp_path: Path) -> None:
    """curves.pdf is a PDF, curves.svg an SVG (with its <svg> element), CURVES.PNG a PNG."""
    log = tmp_path / "valid-only.log"
    log.write_text(json.dumps({"event": "valid", "step": 5, "epoch": 0, "valid_token_ppl": 40.0, "elapsed": 30}))
    for name in ("curves.pdf", "curves.svg", "CURVES.PNG"):
        r = run("plot-log", str(log), "-o", str(tmp_path / name))
        assert r.returncode == 0, r.stderr
        data = (tmp_path / name).read_bytes()
        assert data.startswith(HEADS[Path(name).suffix.lower()]) and len(data) > 1000
    assert b"<svg" in (tmp_path / "curves.svg").read_bytes()[:1000]


# --- plot-experiment ----------------------------------------------------------------------------

DATA = REPO / "tests" / "data" / "bleu"


def _run(hyps: list[str], refs: list[str], seed: int) -> RunScores:
    return RunScores(
        meta={"seed": seed},
        dev=bleu.tokenized_bleu(hyps[::-1], refs[::-1]),
        test=bleu.tokenized_bleu(hyps, refs),
        test_detok=bleu.detokenized_bleu(hyps, bleu.detokenize(refs, "fr"), "fr"),
    )


@pytest.fixture
def experiment_dir(tmp_path: Path) -> Path:
    """An --out directory whose report has two systems of three runs each."""
    refs, hyps = bleu.read_lines(str(DATA / "ref.tok.fr")), bleu.read_lines(str(DATA / "hyp.tok.fr"))
    short = [" ".join(h.split()[:-2]) for h in hyps]
    base = [_run(short, refs, 1), _run(hyps[:10] + short[10:], refs, 2), _run(hyps[:4] + short[4:], refs, 3)]
    rnn = [_run(hyps, refs, 4), _run(short[:5] + hyps[5:], refs, 5), _run(short[:8] + hyps[8:], refs, 6)]
    report = build_report(
        systems_for(True, False), {"baseline": base, "rnn": rnn}, settings_json={}, raw_reference=False, trials=500
    )
    write_json(str(tmp_path / "experiment.json"), report)
    return tmp_path


def test_plot_experiment_draws_every_run_and_the_mean_with_its_interval(experiment_dir: Path) -> None:
    report = json.loads((experiment_dir / "experiment.json").read_text())
    for key in ("dev", "test"):
        drawn = experiment_bleu(report, key)
        assert [s.label for s in drawn] == ["baseline", "+ RNN"]
        for system, entry in zip(drawn, report["systems"].values(), strict=True):
            assert system.runs == [r[key] for r in entry["runs"]] and len(system.runs) == 3
            assert system.mean == pytest.approx(np.mean(system.runs), abs=1e-4)
            assert system.interval is not None and system.interval == tuple(entry[key]["interval_95"])
            assert system.interval[0] <= system.mean <= system.interval[1]
    r = run("plot-experiment", str(experiment_dir))
    assert r.returncode == 0, r.stderr
    png = experiment_dir / "experiment.png"
    assert r.stdout.decode().strip() == str(png)
    assert png.read_bytes()[:8] == PNG_SIGNATURE
    r = run("plot-experiment", str(experiment_dir), "-o", str(experiment_dir / "bleu.pdf"))
    assert r.returncode == 0 and (experiment_dir / "bleu.pdf").read_bytes()[:5] == b"%PDF-", r.stderr


def test_plot_experiment_refuses_a_directory_without_a_report(tmp_path: Path) -> None:
    r = run("plot-experiment", str(tmp_path), "-o", str(tmp_path / "x.png"))
    assert r.returncode == 3 and b"experiment.json: no such file" in r.stderr and b"Traceback" not in r.stderr
    assert not (tmp_path / "x.png").exists()


def test_plot_experiment_of_an_unfinished_experiment(tmp_path: Path) -> None:
    refs, hyps = bleu.read_lines(str(DATA / "ref.tok.fr")), bleu.read_lines(str(DATA / "hyp.tok.fr"))
    report = build_report(
        systems_for(True, False), {"baseline": [_run(hyps, refs, 1)], "rnn": []}, settings_json={}, raw_reference=True
    )
    write_json(str(tmp_path / "experiment.json"), report)
    base, rnn = experiment_bleu(report, "test")
    assert base.runs == [report["systems"]["baseline"]["runs"][0]["test"]] and base.mean == base.runs[0]
    assert rnn.label == "+ RNN" and rnn.runs == [] and rnn.mean is None and rnn.interval is None
    r = run("plot-experiment", str(tmp_path), "-o", str(tmp_path / "so-far.png"))
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "so-far.png").read_bytes()[:8] == PNG_SIGNATURE


@pytest.mark.parametrize(
    ("start", "want"),
    [
        ({"label_smoothing": 0.2, "argv": ["--label-smoothing", "0.1"]}, 0.2),  # the recorded value first
        ({"argv": ["train-nmt", "a", "b", "m.pt", "--label-smoothing", "0.1"]}, 0.1),  # a log before it
        ({"argv": ["train-nmt", "--label-smoothing=0.05"]}, 0.05),
        ({"argv": ["train-nmt", "--label-smoothing"]}, 0.0),
        ({"argv": ["train-nmt"]}, 0.0),
        ({}, 0.0),
    ],
)
def test_the_label_smoothing_of_a_log(tmp_path: Path, start: dict, want: float) -> None:
    log = tmp_path / "m.log"
    train = {"event": "train", "step": 1, "epoch": 0, "loss": 2.0, "elapsed": 1.0}
    log.write_text(json.dumps({"event": "start", "step": 0, "epoch": 0, **start}) + "\n" + json.dumps(train) + "\n")
    assert read_training_curves(str(log)).label_smoothing == want
