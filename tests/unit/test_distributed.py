"""Several processes under torchrun (gloo, on the CPU): sharded rescoring equals one process byte
for byte, training with 2 processes x B pairs (train-nmt: target tokens) follows the loss curve of
1 process x 2B, a 2-process run resumes in 1 process; and the parts of a table are cut and joined
exactly.

Tolerance of the training comparison: the two runs add the same float32 numbers in a different
order (per-process sums, then a gradient all-reduce), so losses agree to float32 rounding, which
a few Adadelta steps amplify a little: 1e-5 relative on every logged loss (measured: 2e-7).
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from click.testing import CliRunner

from phrase_rescorer.cli import cli
from phrase_rescorer.model.checkpoint import load_checkpoint
from phrase_rescorer.moses.phrase_table import PhraseTableError
from phrase_rescorer.moses.table_reader import InputTable
from phrase_rescorer.parallel.distributed import Group, Launch
from phrase_rescorer.parallel.sharding import TablePart, concatenate, find_cuts, plan_parts
from phrase_rescorer.rescoring.engine import TableRescorer
from phrase_rescorer.rescoring.options import RescoreOptions
from phrase_rescorer.run_lock import held_lock
from phrase_rescorer.training.log import read_log
from tests.helpers.paths import REPO, SAMPLE
from tests.helpers.synthetic import mapping_table
from tests.helpers.train_options import TINY_NETWORK

REL = 1e-5  # training: relative difference allowed on a logged loss (see the docstring)
TINY = [
    *TINY_NETWORK,
    "--valid-fraction",
    "0.1",
    "--seed",
    "3",
    "--log-every",
    "1",
    "--valid-every",
    "5",
    "--patience",
    "0",
    "--device",
    "cpu",
]


def torchrun(*args: str, nproc: int = 2, quiet: bool = True) -> subprocess.CompletedProcess:
    """``python -m phrase_rescorer ARGS`` in ``nproc`` processes started by torchrun (``-q`` unless
    ``quiet`` is false)."""
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""), OMP_NUM_THREADS="1")
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc-per-node",
        str(nproc),
        "--standalone",
        "-m",
        "phrase_rescorer",
        *(["-q"] if quiet else []),
        *args,
    ]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=180)


def one_process(*args: str) -> None:
    result = CliRunner().invoke(cli, ["-q", *args], catch_exceptions=False)
    assert result.exit_code == 0, result.output


@pytest.fixture(scope="module")
def plain_sample(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("plain") / "sample.txt"
    path.write_bytes(gzip.decompress(SAMPLE.read_bytes()))
    return path


# --- cutting and joining (one process) ---------------------------------------------------------


class WindowSizes:
    """A scorer that records how many lines each window has (scores are not looked at)."""

    def __init__(self) -> None:
        self.sizes: list[int] = []

    def score(self, sources: list, targets: list, source_index: np.ndarray) -> np.ndarray:
        self.sizes.append(len(targets))
        return np.full(len(targets), -1.0)


@pytest.mark.parametrize(("window", "cap"), [(8192, 65536), (500, 4000), (40, 50), (3, 3)])
def test_cuts_are_the_engine_window_starts_at_a_source_change(
    model: Path, window: int, cap: int, tmp_path: Path
) -> None:
    recorder = WindowSizes()
    engine = TableRescorer(load_checkpoint(str(model)), RescoreOptions(window=window, window_cap=cap), scorer=recorder)
    engine.rescore(str(SAMPLE), str(tmp_path / "out.txt"))
    starts = np.cumsum(recorder.sizes)[:-1]  # 0-based first line of every window but the first
    with InputTable(str(SAMPLE)) as table:
        sources = [e.source for e in table]
    expected = [int(i) + 1 for i in starts if sources[i] != sources[i - 1]]
    index = find_cuts(str(SAMPLE), window, cap)
    assert [c.line_no for c in index.cuts] == expected
    assert index.lines == len(sources) and len(expected) > 0
    if cap == window:  # every window is cut at the cap; sources longer than 3 lines are split
        assert len(expected) < len(starts)


@pytest.mark.parametrize("parts", [2, 3, 7])
@pytest.mark.parametrize("kind", ["gz", "plain"])
def test_parts_together_are_the_table(kind: str, parts: int, plain_sample: Path) -> None:
    path = str(SAMPLE if kind == "gz" else plain_sample)
    plan = plan_parts(find_cuts(path, 500, 4000), parts)
    assert plan[0].start == 0 and plan[-1].end == len(plain_sample.read_bytes())
    assert all(a.end == b.start for a, b in zip(plan, plan[1:], strict=False))
    sizes = [p.size for p in plan]
    assert max(sizes) - min(sizes) < 0.1 * sum(sizes)  # even to a window or so
    got = []
    for part in plan:
        with TablePart(path, part) as table:
            entries = list(table)
        assert table.position() == table.size() == part.size
        if entries:
            assert entries[0].line_no == part.first_line
            assert part.previous_source is None or entries[0].source.encode() != part.previous_source
        got.extend((e.line_no, e.raw, e.terminator) for e in entries)
    with InputTable(path) as table:
        assert got == [(e.line_no, e.raw, e.terminator) for e in table]


def test_a_table_with_few_windows_leaves_parts_empty(plain_sample: Path) -> None:
    index = find_cuts(str(plain_sample), 8192, 65536)
    plan = plan_parts(index, 8)
    assert len(plan) == 8 and plan[-1].end == index.size
    assert sum(p.size for p in plan) == index.size and sum(p.size == 0 for p in plan) >= 4
    with TablePart(str(plain_sample), next(p for p in plan if p.size == 0)) as table:
        assert list(table) == []


def test_errors_in_a_part_name_the_line_of_the_whole_table(plain_sample: Path, tmp_path: Path) -> None:
    lines = plain_sample.read_bytes().split(b"\n")
    lines[20000 - 1] = b"a line without separators"
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"\n".join(lines))
    last = plan_parts(find_cuts(str(bad), 500, 4000), 2)[1]
    assert last.first_line < 20000
    with TablePart(str(bad), last) as table, pytest.raises(PhraseTableError) as e:
        list(table)
    assert e.value.line_no == 20000 and str(e.value).startswith(f"{bad}:20000: ")


def test_concatenate_is_atomic(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.write_bytes(b"one\n")
    b.write_bytes(b"two\n")
    out = tmp_path / "out.txt"
    concatenate([str(a), str(b)], str(out))
    assert out.read_bytes() == b"one\ntwo\n"
    with pytest.raises(FileNotFoundError):
        concatenate([str(a), str(tmp_path / "missing")], str(out))
    assert out.read_bytes() == b"one\ntwo\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "b", "out.txt"]


def test_one_process_group_does_nothing() -> None:
    g = Group()
    assert (g.rank, g.world_size, g.is_main, g.distributed) == (0, 1, True, False)
    rows = np.arange(5)
    assert g.share(rows) is rows and g.sum([1.5, 2]) == [1.5, 2] and g.max([0, 3]) == [0, 3]
    assert g.broadcast("x") == "x" and g.gather("x") == ["x"]
    m = torch.nn.Linear(2, 2)
    assert g.wrap(m) is m
    assert Launch.from_env({}) is None and Launch.from_env({"WORLD_SIZE": "1", "RANK": "0"}) is None
    assert Launch.from_env({"WORLD_SIZE": "4", "RANK": "2", "LOCAL_RANK": "0"}) == Launch(2, 4, 0)
    shares = [Group(Launch(r, 3, r)).share(np.arange(8)) for r in range(3)]
    assert sorted(np.concatenate(shares).tolist()) == list(range(8))


# --- torchrun, 2 processes ---------------------------------------------------------------------


@pytest.mark.slow
def test_two_processes_rescore_the_sample_byte_for_byte(model: Path, tmp_path: Path) -> None:
    one, two = tmp_path / "one.txt", tmp_path / "two.txt"
    one_process("rescore", str(SAMPLE), str(one), "--model", str(model), "--device", "cpu")
    r = torchrun("rescore", str(SAMPLE), str(two), "--model", str(model), "--device", "cpu")
    assert r.returncode == 0, r.stderr
    assert two.read_bytes() == one.read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["one.txt", "two.txt"]  # no leftovers


@pytest.mark.slow
def test_two_processes_plain_input_gz_output(model: Path, plain_sample: Path, tmp_path: Path) -> None:
    """One gzip member per part: a valid .gz whose decompressed bytes are the one-process
    output (the compressed bytes differ: compression restarts at every part)."""
    one, two = tmp_path / "one.gz", tmp_path / "two.gz"
    window = ["--window", "1000"]  # parts of about 15,000 lines, many windows each
    one_process("rescore", str(plain_sample), str(one), "--model", str(model), "--device", "cpu", *window)
    r = torchrun("rescore", str(plain_sample), str(two), "--model", str(model), "--device", "cpu", *window)
    assert r.returncode == 0, r.stderr
    assert gzip.decompress(two.read_bytes()) == gzip.decompress(one.read_bytes())
    assert two.read_bytes().count(b"\x1f\x8b\x08") >= 2  # a member per process


@pytest.mark.slow
def test_two_processes_xz_input_zst_output(model: Path, plain_sample: Path, tmp_path: Path) -> None:
    """A compressed IN of another format is entered by decompressing; a .zst OUT is one zstd
    frame per part, together the one-process output."""
    import lzma

    import zstandard

    table = tmp_path / "in.xz"
    table.write_bytes(lzma.compress(b"\n".join(plain_sample.read_bytes().split(b"\n")[:6000]) + b"\n"))
    one, two = tmp_path / "one.txt", tmp_path / "two.zst"
    window = ["--window", "500"]
    one_process("rescore", str(table), str(one), "--model", str(model), "--device", "cpu", *window)
    r = torchrun("rescore", str(table), str(two), "--model", str(model), "--device", "cpu", *window)
    assert r.returncode == 0, r.stderr
    frames, data = 0, two.read_bytes()
    out = b""
    while data:
        decoder = zstandard.ZstdDecompressor().decompressobj()
        out += decoder.decompress(data)
        data, frames = decoder.unused_data, frames + 1
    assert out == one.read_bytes() and frames == 2


@pytest.mark.slow
def test_a_failing_part_leaves_nothing(model: Path, plain_sample: Path, tmp_path: Path) -> None:
    lines = plain_sample.read_bytes().split(b"\n")
    lines[25000 - 1] = b"a line without separators"
    bad, out = tmp_path / "bad.txt", tmp_path / "out.txt"
    bad.write_bytes(b"\n".join(lines))
    r = torchrun("rescore", str(bad), str(out), "--model", str(model), "--device", "cpu")
    assert r.returncode != 0
    assert f"error: {bad}:25000: expected 3 to 7 fields" in r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.txt"]


def _losses(log: Path) -> dict[int, float]:
    return {e["step"]: e["loss"] for e in read_log(str(log)) if e["event"] == "train"}


def _valid(log: Path) -> dict[int, float]:
    return {e["step"]: e["valid_token_ppl"] for e in read_log(str(log)) if e["event"] == "valid"}


def _close(a: dict[int, float], b: dict[int, float]) -> bool:
    return a.keys() == b.keys() and all(abs(a[k] - b[k]) <= REL * abs(b[k]) for k in a)


@pytest.mark.slow
def test_two_processes_train_like_one_with_the_same_global_batch(tmp_path: Path) -> None:
    table = mapping_table(tmp_path / "pt.gz", 300)  # 267 training pairs: 17 batches of 16
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir(), two.mkdir()
    one_process("train", str(table), str(one / "m.pt"), *TINY, "--batch-size", "16", "--max-steps", "24")
    r = torchrun("train", str(table), str(two / "m.pt"), *TINY, "--batch-size", "8", "--max-steps", "12")
    assert r.returncode == 0, r.stderr
    ref, got = _losses(one / "m.log"), _losses(two / "m.log")
    assert _close(got, {k: v for k, v in ref.items() if k <= 12})
    early = {k: v for k, v in _valid(two / "m.log").items() if k < 12}  # 12: the closing one
    assert _close(early, {k: v for k, v in _valid(one / "m.log").items() if k < 12})
    assert len(read_log(str(two / "m.log"))) == 1 + 12 + 3 + 1  # one writer: start, train, valid, end
    info = load_checkpoint(str(two / "m.last.pt")).info
    assert info["processes"] == 2 and info["global_batch"] == 16

    # Resume in one process: the global batch must stay 16 ...
    refused = CliRunner().invoke(
        cli, ["train", str(table), str(two / "m.pt"), *TINY, "--batch-size", "8", "--max-steps", "24", "--resume"]
    )
    assert refused.exit_code == 2 and "global batch" in refused.output
    # ... and then it continues at the same place in the data (the 17-batch epoch ends at 17).
    one_process("train", str(table), str(two / "m.pt"), *TINY, "--batch-size", "16", "--max-steps", "24", "--resume")
    assert _close(_losses(two / "m.log"), ref)
    valid = _valid(two / "m.log")
    del valid[12]  # the 2-process run's closing validation
    assert _close(valid, _valid(one / "m.log"))


def _sentence_corpus(directory: Path, pairs: int = 240) -> tuple[Path, Path]:
    """A parallel corpus of 3-12-word sentences over 30 words, each target the source's words mapped
    one to one and reversed: batches of several lengths."""
    rng = np.random.default_rng(5)
    source, target = directory / "train.en", directory / "train.fr"
    lines = [[f"w{i}" for i in rng.integers(0, 30, rng.integers(3, 13))] for _ in range(pairs)]
    source.write_text("".join(" ".join(words) + "\n" for words in lines))
    target.write_text("".join(" ".join(f"m{w[1:]}" for w in reversed(words)) + "\n" for words in lines))
    return source, target


@pytest.mark.slow
def test_two_processes_train_the_sentence_network_like_one_with_the_same_global_batch(tmp_path: Path) -> None:
    """train-nmt under torchrun: 2 processes x T target tokens follow 1 process x 2T (dropout 0, label
    smoothing on, Adam, the attention network's faster step): the same batches, every logged loss and
    held-out perplexity within float32 rounding; the run says its global batch in tokens."""
    source, target = _sentence_corpus(tmp_path)
    sizes = ["--embed-dim", "16", "--hidden-dim", "16", "--maxout-dim", "8", "--output-rank", "8"]
    args = [str(source), str(target), *sizes, "--dropout", "0", "--label-smoothing", "0.1", "--valid-fraction", "0.1"]
    args += ["--seed", "3", "--log-every", "1", "--valid-every", "5", "--patience", "0", "--max-steps", "12"]
    args += ["--device", "cpu"]
    one_process("train-nmt", *args[:2], str(tmp_path / "one.pt"), *args[2:], "--batch-tokens", "120")
    r = torchrun("train-nmt", *args[:2], str(tmp_path / "two.pt"), *args[2:], "--batch-tokens", "60", quiet=False)
    assert r.returncode == 0, r.stderr
    assert "2 processes (gloo): global batch of 120 padded target tokens = 60 x 2\n" in r.stderr
    ref, got = _losses(tmp_path / "one.log"), _losses(tmp_path / "two.log")
    assert len(ref) == 12 and _close(got, ref)
    assert _close(_valid(tmp_path / "two.log"), _valid(tmp_path / "one.log"))
    info = load_checkpoint(str(tmp_path / "two.last.pt")).info
    assert info["processes"] == 2


@pytest.mark.slow
def test_under_torchrun_a_model_out_another_run_holds_is_refused_by_every_process(tmp_path: Path) -> None:
    """Rank 0 holds MODEL_OUT's lock for the job: held by another run, every process refuses with
    its line (exit 6), nothing written; free, the job trains and gives the lock back."""
    table = mapping_table(tmp_path / "pt.gz", 300)
    out, lock = tmp_path / "m.pt", tmp_path / "m.lock"
    with held_lock(str(lock), json.dumps({"pid": os.getpid(), "host": "h", "command": "c"}), remove=True):
        r = torchrun("train", str(table), str(out), *TINY, "--max-steps", "2")
    assert r.returncode != 0
    line = f"phrase-rescorer: error: {out}: another training is writing this model's files (PID {os.getpid()} on h: c"
    assert r.stderr.count(line) == 2, r.stderr  # both processes, the same line
    assert not out.exists() and not lock.exists()
    r = torchrun("train", str(table), str(out), *TINY, "--max-steps", "2")
    assert r.returncode == 0, r.stderr
    assert out.exists() and not lock.exists()


def _lm_ppl(log: Path) -> dict[int, float]:
    return {e["step"]: e["valid_token_ppl"] for e in read_log(str(log)) if e["event"] == "valid"}


@pytest.mark.slow
def test_two_processes_train_the_cslm_like_one_with_the_same_global_batch(tmp_path: Path) -> None:
    """train-lm under torchrun: 2 processes x B n-grams follow 1 process x 2B (dropout 0), also
    through an epoch's last batch of one n-gram (process 1's share empty); a resume with another
    global batch is refused."""
    from phrase_rescorer.data.corpus import read_sentences
    from tests.helpers.cslm import TEXTS

    text = tmp_path / "text.fr"
    text.write_bytes(b"".join(t.read_bytes() for t in TEXTS) + b"le chat\n")
    ngrams = sum(len(s) + 1 for s in read_sentences(str(text)))
    b = next(b for b in range(8, 40) if ngrams % (2 * b) == 1)  # the last global batch: 1 n-gram
    sizes = ["--order", "3", "--embed-dim", "8", "--hidden", "16", "--dropout", "0", "--vocab-size", "60"]
    steps = 2 * (ngrams // (2 * b) + 1)  # two epochs
    args = [*sizes, "--max-steps", str(steps), "--valid-every", "5", "--valid", str(TEXTS[0]), "--device", "cpu"]
    one_process("train-lm", str(text), str(tmp_path / "one.pt"), *args, "--batch-size", str(2 * b))
    r = torchrun("train-lm", str(text), str(tmp_path / "two.pt"), *args, "--batch-size", str(b))
    assert r.returncode == 0, r.stderr
    ref, got = _lm_ppl(tmp_path / "one.log"), _lm_ppl(tmp_path / "two.log")
    assert len(ref) >= 4 and _close(got, ref)
    events = [e["event"] for e in read_log(str(tmp_path / "two.log"))]
    assert events.count("start") == 1 and events.count("end") == 1  # one writer
    refused = CliRunner().invoke(
        cli, ["train-lm", str(text), str(tmp_path / "two.pt"), *args, "--batch-size", str(b), "--resume"]
    )
    assert refused.exit_code == 2 and f"batch_size was {2 * b}, now {b}" in refused.output


def test_a_group_is_left_together_only_after_a_command_that_succeeded(monkeypatch: pytest.MonkeyPatch) -> None:
    """Group.close waits for the other processes unless an exception is unwinding: closed as the
    command's click context closes, it sees the command's exception (with every click >= 8.1)."""
    import click

    import phrase_rescorer.parallel.distributed as distributed

    waited: list[bool] = []
    monkeypatch.setattr(distributed.dist, "is_initialized", lambda: True)
    monkeypatch.setattr(distributed.dist, "destroy_process_group", lambda: None)
    monkeypatch.setattr(Group, "wait_for_all", lambda self, poll=0.05: waited.append(True))
    group = Group(Launch(rank=1, world_size=2, local_rank=1))

    @click.command()
    @click.option("--fail", is_flag=True)
    @click.pass_context
    def command(ctx: click.Context, fail: bool) -> None:
        ctx.call_on_close(group.close)
        if fail:
            raise click.UsageError("bad input")

    assert CliRunner().invoke(command, []).exit_code == 0 and waited == [True]
    waited.clear()
    assert CliRunner().invoke(command, ["--fail"]).exit_code == 2 and waited == []
