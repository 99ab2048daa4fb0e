"""Lines too long for a network's memory (a noisy corpus's concatenated document, a file without
newlines): `score`, `nbest` (its hypotheses and `--source`) and `translate` refuse a line of more
than `--max-tokens` tokens before the first line is scored, whatever the network (a Transformer,
a recurrent network, a CSLM): exit 3, one line naming the file and line, its token count and the
limit, nothing at OUT. `score --skip-long` writes -inf for such a line instead, one output line per
input line. An allocation that fails anyway (torch's CPU or CUDA allocator) is one line, exit 6,
never a traceback."""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

from phrase_rescorer.data.line_limit import DEFAULT_MAX_TOKENS
from phrase_rescorer.model import transformer
from tests.helpers.cli_run import left_behind, run_cli
from tests.helpers.cslm import tiny_lm
from tests.helpers.rescore_data import tiny_arch_checkpoint

pytestmark = pytest.mark.usefixtures("one_thread")

NETWORKS = ["transformer", "rnnsearch"]
LONG = "the house is small and the cat is black"  # 9 tokens
SOURCE = f"the house\n{LONG}\nthe cat\n"
TARGET = "la maison\nla maison est petite\nle chat\n"
NBEST = "".join(f"{i} ||| la maison ||| LM0= -3 ||| -1\n{i} ||| le chat ||| LM0= -4 ||| -2\n" for i in range(3))
#: The refusal of line 2 of the source, of 9 tokens, with --max-tokens 5.
TOO_LONG = "9 tokens, more than --max-tokens 5 (memory grows with a line's length): split or drop the line"


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("long-line-models")
    made = {arch: tiny_arch_checkpoint(d / f"{arch}.pt", arch=arch, layers=2) for arch in NETWORKS}
    made["cslm"] = tiny_lm(d / "lm.pt", steps=2)
    return made


@pytest.fixture
def texts(tmp_path: Path) -> dict[str, Path]:
    paths = {"src": tmp_path / "src.en", "tgt": tmp_path / "tgt.fr", "nbest": tmp_path / "list.nbest"}
    paths["src"].write_text(SOURCE)
    paths["tgt"].write_text(TARGET)
    paths["nbest"].write_text(NBEST)
    return paths


@dataclass
class Runs:
    """The networks, the texts and a test's directory, and the program run in this process."""

    models: dict[str, Path]
    texts: dict[str, Path]
    tmp: Path
    monkeypatch: pytest.MonkeyPatch
    capsys: pytest.CaptureFixture[str]

    def run(self, args: list[str]) -> tuple[int, str]:
        return run_cli(args, self.monkeypatch, self.capsys)

    def refused(self, args: list[str], out: Path, code: int = 3) -> str:
        """Run ``args``: the exit code, one error line on stderr (returned; the warning that the
        random networks are phrase networks aside), nothing at ``out`` or beside it."""
        got, err = self.run(args)
        assert got == code, err
        said = [line for line in err.strip().splitlines() if not line.startswith("warning: ")]
        assert len(said) == 1 and "Traceback" not in err, err
        assert not out.exists() and not left_behind(out.parent)
        return said[0]

    def source_command(self, command: str, model: str, out: Path) -> list[str]:
        """``score``, ``nbest`` (with ``--source``) or ``translate`` of the source text by ``model``."""
        src, model_path = str(self.texts["src"]), str(self.models[model])
        return {
            "score": ["score", src, str(self.texts["tgt"]), "-m", model_path, "-o", str(out)],
            "nbest": ["nbest", str(self.texts["nbest"]), str(out), "-m", model_path, "--source", src],
            "translate": ["translate", src, str(out), "-m", model_path],
        }[command]


@pytest.fixture
def runs(
    models: dict[str, Path],
    texts: dict[str, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> Runs:
    return Runs(models, texts, tmp_path, monkeypatch, capsys)


@contextmanager
def fed(fifo: Path, text: str) -> Iterator[None]:
    """``text`` written into the FIFO ``fifo`` (made here) by a thread while the block runs; a run
    that never opened the FIFO: its writer is let go."""
    os.mkfifo(fifo)
    writer = threading.Thread(target=fifo.write_text, args=(text,), daemon=True)
    writer.start()
    try:
        yield
    finally:
        reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
        writer.join(timeout=60)
        os.close(reader)


@pytest.mark.parametrize("arch", NETWORKS)
@pytest.mark.parametrize("command", ["score", "nbest", "translate"])
def test_a_source_line_over_the_limit_is_refused_before_scoring(arch: str, command: str, runs: Runs) -> None:
    out, src = runs.tmp / "out.txt", runs.texts["src"]
    err = runs.refused([*runs.source_command(command, arch, out), "--max-tokens", "5"], out)
    assert err.startswith(f"phrase-rescorer: error: {src}:2: {TOO_LONG}"), err


@pytest.mark.parametrize("model", ["transformer", "rnnsearch", "cslm"])
def test_a_long_target_line_or_hypothesis_is_refused(model: str, runs: Runs) -> None:
    """The other side of a pair (TGT), a CSLM's text, and an n-best list's hypotheses."""
    texts, tmp_path = runs.texts, runs.tmp
    texts["tgt"].write_text(f"la maison\nle chat\n{LONG}\n")
    texts["nbest"].write_text(NBEST.replace("2 ||| le chat |||", f"2 ||| {LONG} |||"))
    short = tmp_path / "short.en"
    short.write_text("the house\nthe cat\nthe cat\n")
    out, m = tmp_path / "out.txt", ["-m", str(runs.models[model]), "--max-tokens", "8"]
    given = [str(texts["tgt"])] if model == "cslm" else [str(short), str(texts["tgt"])]
    err = runs.refused(["score", *given, *m, "-o", str(out)], out)
    assert err.startswith(f"phrase-rescorer: error: {texts['tgt']}:3: 9 tokens, more than --max-tokens 8 "), err
    args = ["nbest", str(texts["nbest"]), str(out), *m, *([] if model == "cslm" else ["--source", str(short)])]
    err = runs.refused(args, out)
    assert err.startswith(f"phrase-rescorer: error: {texts['nbest']}:6: 9 tokens, more than --max-tokens 8 "), err


def test_a_long_hypothesis_of_a_list_read_once_is_refused_before_its_window_is_scored(runs: Runs) -> None:
    """A list from a pipe cannot be read twice: it is checked as it streams."""
    fifo, out = runs.tmp / "list.fifo", runs.tmp / "out.nbest"
    with fed(fifo, NBEST.replace("2 ||| le chat |||", f"2 ||| {LONG} |||")):
        err = runs.refused(["nbest", str(fifo), str(out), "-m", str(runs.models["cslm"]), "--max-tokens", "8"], out)
    assert err.startswith(f"phrase-rescorer: error: {fifo}:6: 9 tokens, more than --max-tokens 8 "), err


def test_the_default_limit_refuses_a_line_longer_than_any_sentence(runs: Runs) -> None:
    texts = runs.texts
    texts["src"].write_text("the house\n" + " ".join(["the"] * (DEFAULT_MAX_TOKENS + 1)) + "\nthe cat\n")
    out = runs.tmp / "out.txt"
    err = runs.refused(runs.source_command("score", "transformer", out), out)
    assert f"{texts['src']}:2: 1,001 tokens, more than --max-tokens 1,000 " in err
    assert err.endswith("give --skip-long (-inf for it)"), err


@pytest.mark.parametrize("side", ["source", "target"])
@pytest.mark.parametrize("read", ["file", "pipe"])
def test_rescore_refuses_a_phrase_over_the_limit_before_scoring(side: str, read: str, runs: Runs) -> None:
    """A table's absurd line (a phrase of a whole document) is refused like a long sentence, from a
    file (checked before any line is scored) or a pipe (checked as it streams)."""
    lines = [
        "la ||| le ||| 0.5 0.5 0.5 0.5 ||| 0-0 ||| 1 1 1",
        "maison ||| maison ||| 0.5 0.5 0.5 0.5 ||| 0-0 ||| 1 1 1",
    ]
    long = f"{LONG} ||| le chat" if side == "source" else f"the ||| {LONG}"
    table_text = "".join(f"{line}\n" for line in [lines[0], f"{long} ||| 0.5 0.5 0.5 0.5 ||| 0-0 ||| 1 1 1", lines[1]])
    table, out = runs.tmp / "phrase-table", runs.tmp / "out.txt"
    args = ["rescore", str(table), str(out), "-m", str(runs.models["transformer"]), "--max-tokens", "5"]
    if read == "file":
        table.write_text(table_text)
        err = runs.refused(args, out)
    else:
        with fed(table, table_text):
            err = runs.refused(args, out)
    assert err.startswith(f"phrase-rescorer: error: {table}:2: {TOO_LONG}"), err
    if read == "file":  # the default limit lets a real phrase through, and refuses 1,001 tokens
        code, err = runs.run(["rescore", str(table), str(out), "-m", str(runs.models["transformer"])])
        assert code == 0, err
        out.unlink()
        table.write_text(table_text.replace(LONG, " ".join(["the"] * (DEFAULT_MAX_TOKENS + 1))))
        err = runs.refused(["rescore", str(table), str(out), "-m", str(runs.models["rnnsearch"])], out)
        assert f"{table}:2: 1,001 tokens, more than --max-tokens 1,000 " in err


@pytest.mark.parametrize("model", ["transformer", "rnnsearch", "cslm"])
@pytest.mark.parametrize("extra", [[], ["--normalize"], ["--word-scores"]])
def test_skip_long_writes_minus_inf_for_the_long_line_and_scores_the_others_alike(
    model: str, extra: list[str], runs: Runs
) -> None:
    texts, tmp_path = runs.texts, runs.tmp
    short = {name: tmp_path / f"short.{name}" for name in ("src", "tgt")}
    for name, path in short.items():
        lines = texts[name].read_text().splitlines(keepends=True)
        path.write_text(lines[0] + lines[2])
    side = ["tgt"] if model == "cslm" else ["src", "tgt"]
    if model == "cslm":
        texts["tgt"].write_text(TARGET.replace("la maison est petite", LONG))
    skipped, plain = tmp_path / "skipped.txt", tmp_path / "plain.txt"
    m = ["-m", str(runs.models[model]), *extra]
    code, err = runs.run(
        ["score", *(str(texts[s]) for s in side), *m, "-o", str(skipped), "--max-tokens", "8", "--skip-long"]
    )
    assert code == 0, err
    assert "warning: 1 line of more than --max-tokens 8 tokens not scored: written as -inf (--skip-long)" in err
    code, err = runs.run(["score", *(str(short[s]) for s in side), *m, "-o", str(plain)])
    assert code == 0, err
    got, expected = skipped.read_text().splitlines(), plain.read_text().splitlines()
    assert len(got) == 3
    assert got[1] == ("-inf ||| WordScores=" if extra == ["--word-scores"] else "-inf")
    assert math.isinf(float(got[1].split(" ||| ")[0]))
    assert [got[0], got[2]] == expected


def test_skip_long_summaries_count_the_lines_scored(runs: Runs) -> None:
    short = runs.tmp / "short.fr"
    short.write_text("la maison\nle chat\n")
    runs.texts["tgt"].write_text(f"la maison\n{LONG}\nle chat\n")
    m = ["-m", str(runs.models["cslm"]), "--summary", "ce-sum"]
    skipped, plain = runs.tmp / "skipped.txt", runs.tmp / "plain.txt"
    code, err = runs.run(["score", str(runs.texts["tgt"]), *m, "--max-tokens", "8", "--skip-long", "-o", str(skipped)])
    assert code == 0, err
    code, err = runs.run(["score", str(short), *m, "-o", str(plain)])
    assert code == 0, err
    assert skipped.read_text() == plain.read_text() != "nan\n"


ALLOCATION_FAILURES = {
    "cpu": RuntimeError(
        "[enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: can't allocate memory: you tried to "
        "allocate 3200160016 bytes. Error code 12 (Cannot allocate memory)"
    ),
    "cuda": torch.OutOfMemoryError(
        "CUDA out of memory. Tried to allocate 2.98 GiB. GPU 0 has a total capacity of 79.10 GiB\n"
        "If reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF"
    ),
}


@pytest.mark.parametrize("allocator", ["cpu", "cuda"])
@pytest.mark.parametrize("command", ["score", "nbest", "translate"])
def test_an_allocation_that_fails_is_one_line_exit_6(allocator: str, command: str, runs: Runs) -> None:
    """A limit raised too far (or a network too large for the machine): the transformer's
    attention, where a 20,000-token line failed, cannot allocate its weights."""

    def attend(*args: object, **kwargs: object) -> None:
        raise ALLOCATION_FAILURES[allocator]

    runs.monkeypatch.setattr(transformer, "attend", attend)
    out = runs.tmp / "out.txt"
    err = runs.refused(runs.source_command(command, "transformer", out), out, code=6)
    expected = {
        "cpu": "out of memory: DefaultCPUAllocator: can't allocate memory: you tried to allocate 3200160016 bytes. "
        "Error code 12 (Cannot allocate memory)",
        "cuda": "out of memory: CUDA out of memory. Tried to allocate 2.98 GiB. GPU 0 has a total capacity of "
        "79.10 GiB",
    }[allocator]
    assert err == f"phrase-rescorer: error: {expected}"
