"""Training through the real command line. The training loop's properties (resume exactness,
signals, determinism, limits, patience, the log, the resume checks) for every task (phrase pairs
with ``train``, the CSLM with ``train-lm``); then the phrase task's own: the baseline, skipped
pairs, extract files, the update and product variants, and a "does it learn" check on a table
with a known mapping."""

from __future__ import annotations

import gzip
import math
import os
import re
import signal
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from click.testing import CliRunner, Result

from phrase_rescorer.cli import cli
from phrase_rescorer.data.pairs import EncodedPairs
from phrase_rescorer.model.checkpoint import load_checkpoint
from phrase_rescorer.model.cho2014 import ModelConfig, RNNEncoderDecoder, sequence_log_probs
from phrase_rescorer.training.evaluate import UnigramBaseline, evaluate
from phrase_rescorer.training.log import read_log
from phrase_rescorer.training.loop import Loop
from tests.helpers.synthetic import mapping_table
from tests.helpers.train_options import TASKS, LoopTask

#: The loop's options of every run here: 16 items a step, a train event a step, a validation
#: every 8 steps that never stops the run.
LOOP = ["--batch-size", "16", "--seed", "3", "--log-every", "1", "--valid-every", "8", "--patience", "0"]
TINY = [*TASKS[0].options, *LOOP]  # the phrase task's, for the tests of the phrase task alone
STEPS = 40  # crosses two epoch boundaries of the 270 training items (17 batches an epoch)


def train(*args: str) -> Result:
    return CliRunner().invoke(cli, ["train", *args], catch_exceptions=False)


def losses(log: Path) -> list[tuple[int, float]]:
    return [(e["step"], e["loss"]) for e in read_log(str(log)) if e["event"] == "train"]


def valids(log: Path) -> dict[int, float]:
    return {e["step"]: e["valid_token_ppl"] for e in read_log(str(log)) if e["event"] == "valid"}


def raw(path: Path) -> dict[str, Any]:
    """A model file's payload (the phrase networks' and the CSLM's hold the same two keys read here)."""
    return torch.load(path, weights_only=True)


@dataclass
class Run:
    """A loop task on its data: ``run(out, *options)`` trains through the real command line."""

    task: LoopTask
    inputs: list[str]
    data_dir: Path

    def run(self, out: Path | str, *options: str, catch: bool = False) -> Result:
        argv = [self.task.command, *self.inputs, str(out), *self.task.options, *LOOP, *options]
        return CliRunner().invoke(cli, argv, catch_exceptions=catch)


@pytest.fixture(scope="module", params=TASKS, ids=[t.name for t in TASKS])
def task(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Run:
    directory = tmp_path_factory.mktemp(request.param.name)
    return Run(request.param, request.param.inputs(directory), directory)


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return mapping_table(tmp_path_factory.mktemp("table") / "pt.gz", 300)


@pytest.fixture(scope="module")
def phrase_straight(table: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``straight`` of the phrase task, for the tests of the phrase task alone."""
    d = tmp_path_factory.mktemp("phrase_straight")
    r = train(str(table), str(d / "m.pt"), *TINY, "--max-steps", str(STEPS))
    assert r.exit_code == 0, r.output
    return d


@pytest.fixture(scope="module")
def straight(task: Run, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An uninterrupted run of STEPS steps; its directory holds m.pt, m.last.pt and m.log."""
    d = tmp_path_factory.mktemp("straight")
    r = task.run(d / "m.pt", "--max-steps", str(STEPS))
    assert r.exit_code == 0, r.output
    return d


def assert_same_run(a: Path, b: Path) -> None:
    assert losses(b / "m.log") == losses(a / "m.log")
    assert len(losses(a / "m.log")) == STEPS
    scheduled = {s: v for s, v in valids(a / "m.log").items() if s % 8 == 0}
    assert {s: v for s, v in valids(b / "m.log").items() if s in scheduled} == scheduled
    sa, sb = raw(a / "m.last.pt"), raw(b / "m.last.pt")
    assert all(torch.equal(sa["state_dict"][k], sb["state_dict"][k]) for k in sa["state_dict"])
    assert sa["training_state"]["progress"] == sb["training_state"]["progress"]


def test_resume_after_a_limit_gives_the_uninterrupted_run(task: Run, straight: Path, tmp_path: Path) -> None:
    out = tmp_path / "m.pt"
    assert task.run(out, "--max-steps", "21").exit_code == 0
    r = task.run(out, "--max-steps", str(STEPS), "--resume")
    assert r.exit_code == 0, r.output
    assert_same_run(straight, tmp_path)
    assert [e["resumed"] for e in read_log(str(tmp_path / "m.log")) if e["event"] == "start"] == [False, True]


@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_saves_a_resumable_state(
    task: Run, straight: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sig: int, code: int
) -> None:
    real_step, calls = Loop.step, [0]

    def step_then_signal(self: Loop, batch: Any) -> torch.Tensor:
        calls[0] += 1
        loss = real_step(self, batch)
        if calls[0] == 13:  # the signal lands in the middle of the 13th step
            os.kill(os.getpid(), sig)
        return loss

    monkeypatch.setattr(Loop, "step", step_then_signal)
    out = tmp_path / "m.pt"
    r = task.run(out, "--max-steps", str(STEPS), catch=True)
    assert r.exit_code == code
    assert "interrupted at step 13" in r.output and "--resume" in r.output
    assert raw(tmp_path / "m.last.pt")["training_state"]["progress"]["step"] == 13
    assert read_log(str(tmp_path / "m.log"))[-1]["reason"] == "interrupted"
    monkeypatch.setattr(Loop, "step", real_step)
    assert task.run(out, "--max-steps", str(STEPS), "--resume").exit_code == 0
    assert_same_run(straight, tmp_path)


def test_same_seed_same_bytes(task: Run, straight: Path, tmp_path: Path) -> None:
    r = task.run(tmp_path / "m.pt", "--max-steps", str(STEPS))
    assert r.exit_code == 0, r.output
    for name in ("m.pt", "m.last.pt"):
        assert (tmp_path / name).read_bytes() == (straight / name).read_bytes()
    other = tmp_path / "other.pt"
    assert task.run(other, "--max-steps", "3", "--seed", "4").exit_code == 0  # the last --seed counts
    assert losses(tmp_path / "other.log")[0] != losses(straight / "m.log")[0]


def test_log_events(task: Run, straight: Path) -> None:
    events = read_log(str(straight / "m.log"))
    assert [e["event"] for e in events][:2] == ["start", "train"] and events[-1]["event"] == "end"
    assert events[-1]["reason"] == "max_steps" and events[-1]["step"] == STEPS
    train_keys = {"event", "step", "epoch", "loss", f"{task.task.unit}_per_s", "elapsed"}
    valid_keys = {"event", "step", "epoch", "valid_token_ppl", "elapsed", "best", *task.task.valid_keys}
    for e in events:
        if e["event"] == "train":
            assert set(e) == train_keys and e["loss"] > 0 and e[f"{task.task.unit}_per_s"] > 0
        if e["event"] == "valid":
            assert set(e) == valid_keys and e["valid_token_ppl"] > 1
    assert sorted(valids(straight / "m.log")) == [8, 16, 24, 32, 40]
    elapsed = [e["elapsed"] for e in events if "elapsed" in e]
    assert elapsed == sorted(elapsed)
    epochs = [e["epoch"] for e in events if e["event"] == "train"]
    assert epochs[16] == 1 and epochs[33] == 2  # 17 batches an epoch


def test_best_checkpoint_holds_the_best_validation(task: Run, straight: Path) -> None:
    info = raw(straight / "m.pt")["info"]
    best = min(valids(straight / "m.log").values())
    if task.task.command == "train":
        assert info["best_valid"]["token_ppl"] == pytest.approx(best, rel=1e-12)
        assert info["best_valid"]["mean_logp"] < 0 and 0 < info["valid_coverage"] <= 1  # rescoring compares
    else:
        assert info["valid"]["ppl"] == pytest.approx(best, rel=1e-12)


def test_patience_stops_a_run_that_no_longer_improves(task: Run, tmp_path: Path) -> None:
    # a learning rate of 1e-30 leaves every float32 weight as it is: no validation improves
    r = task.run(tmp_path / "m.pt", "--valid-every", "2", "--patience", "3", "--lr", "1e-30", "--max-steps", "100")
    assert r.exit_code == 0, r.output
    end = read_log(str(tmp_path / "m.log"))[-1]
    assert end["reason"] == "patience" and end["step"] == 8  # best at 2; 4, 6, 8 are no better


def test_epoch_and_time_limits(task: Run, tmp_path: Path) -> None:
    assert task.run(tmp_path / "e.pt", "--epochs", "1").exit_code == 0
    end = read_log(str(tmp_path / "e.log"))[-1]
    assert (end["reason"], end["step"], end["epoch"]) == ("epochs", 17, 1)
    # the epochs count the whole run, --max-time this invocation alone
    assert task.run(tmp_path / "e.pt", "--epochs", "2", "--max-time", "1e-6", "--resume").exit_code == 0
    end = read_log(str(tmp_path / "e.log"))[-1]
    assert end["reason"] == "max_time" and 17 <= end["step"] <= 18
    assert task.run(tmp_path / "e.pt", "--max-epochs", "2", "--max-time", "3600", "--resume").exit_code == 0
    end = read_log(str(tmp_path / "e.log"))[-1]
    assert (end["reason"], end["step"], end["epoch"]) == ("epochs", 34, 2)


def test_max_time_counts_this_invocation(task: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """On a clock that moves 10 s at every reading, a first run of 5 steps takes far more than
    25 s; resumed with --max-time 25 the run still trains: its own time counts, not the run's."""
    import phrase_rescorer.training.loop as loop

    now = [0.0]

    def tick() -> float:
        now[0] += 10.0
        return now[0]

    monkeypatch.setattr(loop, "time", types.SimpleNamespace(monotonic=tick))
    assert task.run(tmp_path / "m.pt", "--max-steps", "5").exit_code == 0
    r = task.run(tmp_path / "m.pt", "--max-steps", "40", "--max-time", "25", "--resume")
    assert r.exit_code == 0, r.output
    end = read_log(str(tmp_path / "m.log"))[-1]
    assert end["reason"] == "max_time" and 5 < end["step"] < 40, end


def test_a_decaying_rate_resumes_exactly_and_ends_the_run(task: Run, tmp_path: Path) -> None:
    """--lr-decay-steps 30: the log's rates follow the cosine, the run ends at step 30 for it, a
    run stopped at step 13 and resumed is the uninterrupted one, and the schedule is part of the
    run's record (another, or none, is refused)."""
    whole, parts = tmp_path / "whole", tmp_path / "parts"
    whole.mkdir(), parts.mkdir()
    r = task.run(whole / "m.pt", "--lr", "0.01", "--lr-decay-steps", "30")
    assert r.exit_code == 0, r.output
    log = read_log(str(whole / "m.log"))
    assert (log[-1]["reason"], log[-1]["step"]) == ("lr_decay_steps", 30)
    rates = [(e["step"], e["lr"]) for e in log if e["event"] == "train"]
    assert rates == [(s, 0.005 * (1 + math.cos(math.pi * (s - 1) / 30))) for s in range(1, 31)]
    assert task.run(parts / "m.pt", "--lr", "0.01", "--lr-decay-steps", "30", "--max-steps", "13").exit_code == 0
    for options, said in (([], "lr_decay_steps was 30, now None"), (["--lr-decay-steps", "40"], "was 30, now 40")):
        r = task.run(parts / "m.pt", "--lr", "0.01", "--resume", *options)
        assert r.exit_code == 2 and said in r.output, r.output
    r = task.run(parts / "m.pt", "--lr", "0.01", "--lr-decay-steps", "30", "--resume")
    assert r.exit_code == 0, r.output
    assert losses(parts / "m.log") == losses(whole / "m.log")
    a, b = raw(whole / "m.last.pt"), raw(parts / "m.last.pt")
    assert all(torch.equal(a["state_dict"][k], b["state_dict"][k]) for k in a["state_dict"])


def test_a_constant_rate_resumes_with_a_cool_down_from_where_it_stands(task: Run, tmp_path: Path) -> None:
    """A run at the constant rate stopped at step 12 and resumed with --lr-decay-start 12
    --lr-decay-steps 30 is the run trained with that schedule from the start (its first 12 rates
    were --lr too); a cool-down that would have lowered a step already taken is refused, and the
    resumed run's record is the new schedule (resuming it without one is refused)."""
    whole, parts = tmp_path / "whole", tmp_path / "parts"
    whole.mkdir(), parts.mkdir()
    cool = ("--lr-decay-steps", "30", "--lr-decay-start", "12")
    r = task.run(whole / "m.pt", "--lr", "0.01", *cool)
    assert r.exit_code == 0, r.output
    log = read_log(str(whole / "m.log"))
    assert (log[-1]["reason"], log[-1]["step"]) == ("lr_decay_steps", 30)
    rates = [(e["step"], e["lr"]) for e in log if e["event"] == "train"]
    assert rates[:12] == [(s, 0.01) for s in range(1, 13)]
    assert rates[12:] == [(s, 0.005 * (1 + math.cos(math.pi * (s - 13) / 18))) for s in range(13, 31)]
    assert task.run(parts / "m.pt", "--lr", "0.01", "--max-steps", "12").exit_code == 0
    r = task.run(parts / "m.pt", "--lr", "0.01", "--lr-decay-steps", "30", "--lr-decay-start", "10", "--resume")
    assert r.exit_code == 2 and "lr_decay_start was 0, now 10: other learning rates for the 12 steps" in r.output
    r = task.run(parts / "m.pt", "--lr", "0.01", *cool, "--resume")
    assert r.exit_code == 0, r.output
    assert losses(parts / "m.log") == losses(whole / "m.log")
    a, b = raw(whole / "m.last.pt"), raw(parts / "m.last.pt")
    assert all(torch.equal(a["state_dict"][k], b["state_dict"][k]) for k in a["state_dict"])
    r = task.run(parts / "m.pt", "--lr", "0.01", "--resume")
    assert r.exit_code == 2 and "lr_decay_steps was 30, now None" in r.output, r.output


def test_a_warm_up_resumes_exactly_and_is_part_of_the_run(task: Run, tmp_path: Path) -> None:
    """--warmup-steps 8: the log's rates rise to --lr at step 8 and fall as 1/sqrt(step) after,
    a run stopped at step 5 and resumed is the uninterrupted one, and another warm-up is refused."""
    whole, parts = tmp_path / "whole", tmp_path / "parts"
    whole.mkdir(), parts.mkdir()
    r = task.run(whole / "m.pt", "--lr", "0.01", "--warmup-steps", "8", "--max-steps", "20")
    assert r.exit_code == 0, r.output
    log = read_log(str(whole / "m.log"))
    rates = [(e["step"], e["lr"]) for e in log if e["event"] == "train"]
    assert rates == [(s, pytest.approx(0.01 * min(s / 8, math.sqrt(8 / s)))) for s in range(1, 21)]
    assert task.run(parts / "m.pt", "--lr", "0.01", "--warmup-steps", "8", "--max-steps", "5").exit_code == 0
    r = task.run(parts / "m.pt", "--lr", "0.01", "--resume", "--max-steps", "20")
    assert r.exit_code == 2 and "warmup_steps was 8, now None" in r.output, r.output
    r = task.run(parts / "m.pt", "--lr", "0.01", "--warmup-steps", "8", "--max-steps", "20", "--resume")
    assert r.exit_code == 0, r.output
    assert losses(parts / "m.log") == losses(whole / "m.log")


def test_a_run_longer_than_its_schedule_is_refused_before_reading(task: Run, tmp_path: Path) -> None:
    absent = Run(task.task, [str(tmp_path / "absent.txt")], tmp_path)
    r = absent.run(tmp_path / "m.pt", "--lr-decay-steps", "30", "--max-steps", "31")
    assert r.exit_code == 2 and "--max-steps 31 goes past --lr-decay-steps 30" in r.output, r.output
    assert not (tmp_path / "m.log").exists()


def test_a_cool_down_in_time_without_a_time_limit_is_refused_before_reading(task: Run, tmp_path: Path) -> None:
    absent = Run(task.task, [str(tmp_path / "absent.txt")], tmp_path)
    r = absent.run(tmp_path / "m.pt", "--lr-decay-time", "30")
    assert r.exit_code == 2 and "--lr-decay-time T cools down the last T seconds of --max-time" in r.output, r.output
    r = absent.run(tmp_path / "m.pt", "--lr-decay-time", "30", "--max-time", "30")
    assert r.exit_code == 2 and "must be above 0 and below --max-time 30" in r.output, r.output
    assert not (tmp_path / "m.log").exists()


def test_train_defaults_are_the_measured_recipe(phrase_straight: Path) -> None:
    """train without --clip-norm or --init-std: clipping at 5 and N(0, 0.05^2) initial weights."""
    recorded = raw(phrase_straight / "m.pt")["info"]["train_config"]
    assert (recorded["clip_norm"], recorded["init_std"]) == (5.0, 0.05)


def test_the_model_file_records_every_setting_in_one_level_in_its_order(phrase_straight: Path) -> None:
    """The loop's settings among the others, in the order of the files written before they were
    one config (a setting added since comes after them)."""
    recorded = raw(phrase_straight / "m.pt")["info"]["train_config"]
    assert " ".join(recorded) == (
        "batch_size batch_tokens max_length seed optimizer optimizer_kernel lr rho eps clip_norm init_std max_steps "
        "max_time epochs valid_fraction valid_max valid_every valid_batch_size patience log_every bf16 "
        "label_smoothing keep_checkpoints lr_decay_steps warmup_steps lr_decay_start lr_decay_time dropout_kernel "
        "bf16_steps bf16_output"
    )
    assert (recorded["seed"], recorded["valid_every"], recorded["patience"]) == (3, 8, 0)


def test_resume_refusals(task: Run, straight: Path, tmp_path: Path) -> None:
    out = tmp_path / "m.pt"
    r = task.run(out, "--resume")
    assert r.exit_code == 2 and "no " in r.output and "last.pt to resume from" in r.output
    # refused before any input is read: a missing input is not even looked at
    missing = Run(task.task, [str(tmp_path / "absent.txt")], tmp_path).run(out, "--resume")
    assert missing.exit_code == 2 and "last.pt to resume from" in missing.output
    r = task.run(tmp_path / "absent" / "m.pt")
    assert r.exit_code == 6 and "output directory does not exist" in r.output
    for name in ("m.last.pt", "m.log"):
        (tmp_path / name).write_bytes((straight / name).read_bytes())
    for options, said in (
        (["--batch-size", "8"], "batch_size was 16, now 8"),
        (["--lr", "0.5"], "lr was "),
        (["--seed", "4"], "seed was 3, now 4"),
    ):
        r = task.run(out, "--max-steps", "50", "--resume", *options)
        assert r.exit_code == 2 and said in r.output, r.output
        assert "repeat the original options" in r.output
    other = Run(task.task, task.task.inputs(tmp_path, seed=9), tmp_path)
    r = other.run(out, "--max-steps", "50", "--resume")
    assert r.exit_code == 2 and "trained on other data" in r.output
    # a state without the run's record (an older version's .last.pt) is refused with one line
    payload = raw(tmp_path / "m.last.pt")
    del payload["training_state"]["run"]
    torch.save(payload, tmp_path / "m.last.pt")
    r = task.run(out, "--max-steps", "50", "--resume")
    assert r.exit_code == 2 and "holds no training state this version can resume" in r.output
    assert read_log(str(tmp_path / "m.log")) == read_log(str(straight / "m.log"))  # nothing trained


def test_resume_checks_the_network_sizes(task: Run, straight: Path, tmp_path: Path) -> None:
    for name in ("m.last.pt", "m.log"):
        (tmp_path / name).write_bytes((straight / name).read_bytes())
    size = ["--hidden-dim", "12"] if task.task.command == "train" else ["--hidden", "12"]
    r = task.run(tmp_path / "m.pt", *size, "--max-steps", "50", "--resume")
    assert r.exit_code == 2 and re.search(r"hidden(_dim)? was \S*16\S*, now \S*12", r.output), r.output


def test_long_pairs_are_skipped_and_counted(tmp_path: Path) -> None:
    t = mapping_table(tmp_path / "pt.txt", 100, long_pairs=5, long_len=31)
    r = train(str(t), str(tmp_path / "m.pt"), *TINY, "--max-steps", "2", "--valid-fraction", "0")
    assert r.exit_code == 0, r.output
    start = read_log(str(tmp_path / "m.log"))[0]
    assert start["skipped_long"] == 5 and start["train_pairs"] == 100
    assert "5 longer than 30 tokens skipped" in r.output
    assert "no held-out pairs" in r.output


def test_extract_files_train_on_unique_pairs(tmp_path: Path) -> None:
    t = tmp_path / "extract.gz"
    with gzip.open(t, "wt", encoding="utf-8") as f:
        f.write("a b ||| x y ||| 0-0 1-1\n" * 3 + "c ||| z ||| 0-0\n" * 2 + "a ||| x ||| 0-0\n")
    r = train(str(t), str(tmp_path / "m.pt"), *TINY, "--extract", "--max-steps", "1", "--valid-fraction", "0")
    assert r.exit_code == 0, r.output
    assert "6 lines, 3 unique pairs" in r.output


def test_unigram_baseline_by_hand() -> None:
    # targets (ids): [3, 3], [4]; </s> = 2. Counts +1 over the 5 non-pad ids of a 6-symbol
    # shortlist (<unk> = 1, </s> = 2, 3, 4, 5): </s> 3, 3 -> 3, 4 -> 2, <unk> 1, 5 -> 1; total 10.
    pairs = EncodedPairs(
        np.array([7, 7], np.int32), np.array([0, 1, 2]), np.array([3, 3, 4], np.int32), np.array([0, 2, 3])
    )
    uni = UnigramBaseline(pairs, np.array([0, 1]), vocab_size=6)
    held = uni.evaluate(pairs, np.array([1]))  # "4 </s>"
    assert held.tokens == 2 and held.pairs == 1
    assert held.total_logp == pytest.approx(math.log(0.2) + math.log(0.3), abs=1e-12)
    assert held.token_ppl == pytest.approx(math.exp(-(math.log(0.2) + math.log(0.3)) / 2))


def test_validation_figures_do_not_depend_on_the_batch_size() -> None:
    torch.manual_seed(0)
    model = RNNEncoderDecoder(ModelConfig(12, 12, 4, 8, 4, 3))
    lens = np.array([1, 3, 2, 5, 1])
    offsets = np.concatenate([[0], np.cumsum(lens)])
    toks = np.random.default_rng(0).integers(1, 12, offsets[-1]).astype(np.int32)
    pairs = EncodedPairs(toks, offsets, toks, offsets)
    idx = np.arange(5)
    a = evaluate(model, pairs, idx, torch.device("cpu"), batch_size=1)
    b = evaluate(model, pairs, idx, torch.device("cpu"), batch_size=256)
    assert a.tokens == b.tokens == int(lens.sum()) + 5
    assert a.total_logp == pytest.approx(b.total_logp, rel=1e-6)
    from phrase_rescorer.data.batching import collate

    batch = collate(pairs, idx)
    with torch.no_grad():
        direct = sequence_log_probs(model, batch.src, batch.src_len, batch.tgt, batch.tgt_len)
    assert a.total_logp == pytest.approx(float(direct.sum()), rel=1e-6)
    assert a.token_ppl == pytest.approx(math.exp(-float(direct.sum()) / a.tokens), rel=1e-6)


@pytest.mark.slow
def test_it_learns_a_deterministic_mapping(tmp_path: Path) -> None:
    """Target = source word by word through a fixed permutation of 30 words (1-2 words a phrase).

    The unigram baseline's held-out perplexity is about 18; a network that ignores the source
    stalls near 10.5 (it learns the lengths, not the words). Below 4, the network reads the
    source. With the paper's Adadelta and N(0, 0.01^2) start the source signal takes some
    2,000-3,000 steps to break through; 5,000 steps reached 1.7-2.5 over three seeds.
    """
    t = mapping_table(tmp_path / "map.txt", 800, n_words=30, max_len=2)
    args = [
        "--vocab-size",
        "100",
        "--embed-dim",
        "16",
        "--hidden-dim",
        "32",
        "--maxout-dim",
        "16",
        "--output-rank",
        "16",
        "--batch-size",
        "32",
        "--valid-fraction",
        "0.1",
        "--seed",
        "1",
        "--max-steps",
        "5000",
        "--valid-every",
        "1000",
        "--patience",
        "0",
        "--init-std",  # the paper's start and clipping, not train's defaults
        "0.01",
        "--clip-norm",
        "1",
    ]
    r = train(str(t), str(tmp_path / "m.pt"), *args)
    assert r.exit_code == 0, r.output
    best: dict[str, Any] = load_checkpoint(str(tmp_path / "m.pt")).info["best_valid"]
    unigram = load_checkpoint(str(tmp_path / "m.pt")).info["unigram_token_ppl"]
    assert unigram > 15 and best["pairs"] >= 60
    assert best["token_ppl"] < 4.0, (best, valids(tmp_path / "m.log"))


def test_the_compiled_and_the_chunked_update_train_the_same_run(
    table: Path, phrase_straight: Path, tmp_path: Path
) -> None:
    """The default run (compiled Adadelta loop) against torch's own operations (chunked): the
    same losses within float32 rounding (1e-5 relative over 40 steps), and each summary line
    names its update."""
    from phrase_rescorer.training import adadelta_loop

    r = train(str(table), str(tmp_path / "m.pt"), *TINY, "--max-steps", str(STEPS), "--optimizer-kernel", "chunked")
    assert r.exit_code == 0, r.output
    assert "adadelta (chunked update)" in r.output
    ours, theirs = losses(phrase_straight / "m.log"), losses(tmp_path / "m.log")
    assert [s for s, _ in ours] == [s for s, _ in theirs]
    for (_, a), (_, b) in zip(ours, theirs, strict=True):
        assert math.isclose(a, b, rel_tol=1e-5), (a, b)
    if adadelta_loop.load() is not None:
        assert adadelta_loop.problem() is None
        r = train(str(table), str(tmp_path / "c.pt"), *TINY, "--max-steps", "1")
        assert "adadelta (compiled update)" in r.output


def test_the_products_in_blas_train_the_same_run(
    table: Path, phrase_straight: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The default run (the recurrences' products in oneDNN where torch has it) against every
    product in torch's BLAS: the same losses within float32 rounding (1e-5 relative, 40 steps)."""
    monkeypatch.setenv("PHRASE_RESCORER_PRODUCTS", "blas")
    r = train(str(table), str(tmp_path / "m.pt"), *TINY, "--max-steps", str(STEPS))
    assert r.exit_code == 0, r.output
    ours, theirs = losses(phrase_straight / "m.log"), losses(tmp_path / "m.log")
    assert [s for s, _ in ours] == [s for s, _ in theirs] and len(ours) == STEPS
    for (_, a), (_, b) in zip(ours, theirs, strict=True):
        assert math.isclose(a, b, rel_tol=1e-5), (a, b)


def test_without_a_compiler_the_run_says_so_and_goes_on_chunked(
    table: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The GRU's gate loops and the output layer's loops fall back too: the run's passes use
    torch's operators."""
    from phrase_rescorer.training import adadelta_loop, gru_gates, target_log_probs

    monkeypatch.setenv("PHRASE_RESCORER_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("CC", str(tmp_path / "no-cc"))
    for library in (adadelta_loop.LIBRARY, gru_gates.LIBRARY, target_log_probs.LIBRARY):
        monkeypatch.setattr(library, "_loaded", [])
        monkeypatch.setattr(library, "_problem", [])
    r = train(str(table), str(tmp_path / "m.pt"), *TINY, "--max-steps", "2")
    assert r.exit_code == 0, r.output
    assert (tmp_path / "m.pt").exists()
    problem = gru_gates.LIBRARY.problem()  # tried in the run's first backward pass
    assert problem is not None and "no-cc" in problem
    problem = target_log_probs.LIBRARY.problem()  # tried in the run's first forward pass
    assert problem is not None and "no-cc" in problem
    warning = [line for line in r.output.splitlines() if "--optimizer-kernel" in line]
    assert len(warning) == 1 and "the loop cannot be built here" in warning[0] and "no-cc" in warning[0], r.output
    assert "adadelta (chunked update)" in r.output


def test_without_a_compiler_dropout_says_so_and_runs_torchs(
    table: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A network with dropout: one warning, torch's dropout, the setting recorded; with
    --dropout-kernel torch nothing is said."""
    from phrase_rescorer.training import dropout_masks

    monkeypatch.setenv("PHRASE_RESCORER_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("CC", str(tmp_path / "no-cc"))
    monkeypatch.setattr(dropout_masks.LIBRARY, "_loaded", [])
    monkeypatch.setattr(dropout_masks.LIBRARY, "_problem", [])
    arch = ["--arch", "rnnsearch", "--dropout", "0.3", "--max-steps", "2"]
    r = train(str(table), str(tmp_path / "m.pt"), *TINY, *arch)
    assert r.exit_code == 0, r.output
    warning = [line for line in r.output.splitlines() if "--dropout-kernel" in line]
    assert len(warning) == 1 and "cannot be built here" in warning[0] and "no-cc" in warning[0], r.output
    assert raw(tmp_path / "m.pt")["info"]["train_config"]["dropout_kernel"] == "compiled"
    r = train(str(table), str(tmp_path / "t.pt"), *TINY, *arch, "--dropout-kernel", "torch")
    assert r.exit_code == 0 and "--dropout-kernel" not in r.output, r.output
    assert raw(tmp_path / "t.pt")["info"]["train_config"]["dropout_kernel"] == "torch"


def test_a_misspelt_products_library_is_refused_before_training(
    table: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PHRASE_RESCORER_PRODUCTS", "mkl")
    r = CliRunner().invoke(cli, ["train", str(table), str(tmp_path / "m.pt"), *TINY, "--max-steps", "1"])
    assert r.exit_code == 2, r.output
    assert "PHRASE_RESCORER_PRODUCTS='mkl': give onednn or blas" in r.output
    assert not (tmp_path / "m.log").exists()
