"""The CUDA path against the CPU, command by command: every program that computes, run with
``--device cuda`` and with ``--device cpu`` on the same input, must write the same bytes outside
its numbers and the same numbers within a stated tolerance. Skipped where torch sees no CUDA
device (CI has none); docs/reproducibility.md gives the figures measured on a GPU.

Tolerances: scoring differs only by the kernels' summation order (float32 terms, float64 sums),
1e-5 relative in log p plus 1e-5 absolute; training compounds that difference over its steps, so
the held-out mean log p of a short run may differ by 1e-3 relative."""

from __future__ import annotations

import gzip
import math
import re
import subprocess
from pathlib import Path

import pytest
import torch

from phrase_rescorer.training.log import read_log
from tests.helpers.cslm import TINY_MOSES, tiny_lm
from tests.helpers.golden import LINES, model_path
from tests.helpers.nmt import tiny_nmt
from tests.helpers.paths import PYTHON, SAMPLE, cli_env
from tests.helpers.train_options import TINY_NETWORK

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device here")

SCORE_REL, SCORE_ABS = 1e-5, 1e-5
TRAIN_REL = 1e-3


def run(*args: str) -> subprocess.CompletedProcess:
    r = subprocess.run([PYTHON, "-m", "phrase_rescorer", "-q", *args], capture_output=True, env=cli_env(), timeout=600)
    assert r.returncode == 0, r.stderr.decode()
    return r


def close(a: float, b: float, rel: float = SCORE_REL, abs_: float = SCORE_ABS) -> bool:
    return math.isclose(a, b, rel_tol=rel, abs_tol=abs_)


def split_scores(line: bytes, appended: int) -> tuple[bytes, list[float]]:
    fields = line.split(b" ||| ")
    scores = fields[2].split(b" ")
    fields[2] = b" ".join(scores[:-appended])
    return b" ||| ".join(fields), [float(s) for s in scores[-appended:]]


@pytest.mark.parametrize("variant", ["default", "rnnsearch", "gnmt", "subwords"])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_rescoring_on_cuda_equals_the_cpu(variant: str, dtype: str, tmp_path: Path) -> None:
    """Every architecture; bfloat16 (the prefix scorer's opt-in mode) within its own, looser bound."""
    if dtype == "bfloat16" and variant != "default":
        pytest.skip("bfloat16 is checked on the paper's network")
    outs = {}
    for device in ("cpu", "cuda"):
        out = tmp_path / f"{device}.txt"
        dt = dtype if device == "cuda" else "float32"
        run("rescore", str(LINES), str(out), "-m", str(model_path(variant)), "--device", device, "--dtype", dt)
        outs[device] = out.read_bytes().splitlines()
    rel, abs_ = (SCORE_REL, SCORE_ABS) if dtype == "float32" else (2e-2, 5e-2)
    assert len(outs["cpu"]) == len(outs["cuda"]) == len(LINES.read_bytes().splitlines())
    worst = 0.0
    for cpu_line, gpu_line in zip(outs["cpu"], outs["cuda"], strict=True):
        cpu_rest, (cpu_p,) = split_scores(cpu_line, 1)
        gpu_rest, (gpu_p,) = split_scores(gpu_line, 1)
        assert cpu_rest == gpu_rest
        a, b = math.log(cpu_p), math.log(gpu_p)
        worst = max(worst, abs(a - b))
        assert close(a, b, rel, abs_), (variant, cpu_line, gpu_line)
    print(f"{variant} {dtype}: largest |log p difference| {worst:.3g}")


def nbest_list(path: Path) -> Path:
    """Hypotheses of the tiny system's dev sentences: the reference, and the reference less its
    first and its last word (all distinct), with Moses' fields."""
    refs = (TINY_MOSES / "dev.fr").read_text(encoding="utf-8").splitlines()
    lines = []
    for i, ref in enumerate(refs):
        words = ref.split()
        for hyp in {" ".join(words), " ".join(words[1:]), " ".join(words[:-1])}:
            lines.append(f"{i} ||| {hyp} ||| LM0= -10 WordPenalty0= -{len(hyp.split())} ||| -3.5\n")
    path.write_text("".join(lines), encoding="utf-8")
    return path


def test_nbest_features_on_cuda_equal_the_cpu(tmp_path: Path) -> None:
    """The CSLM feature and the sentence-level translation feature, in one pass."""
    lm = tiny_lm(tmp_path / "lm.pt")
    nmt = tiny_nmt(tmp_path / "nmt.pt")
    source = TINY_MOSES / "dev.en"
    nbest = nbest_list(tmp_path / "in.nbest")
    feats = {}
    for device in ("cpu", "cuda"):
        out = tmp_path / f"{device}.nbest"
        run("nbest", str(nbest), str(out), "-m", str(lm), "-m", str(nmt), "--source", str(source), "--device", device)
        feats[device] = out.read_text(encoding="utf-8").splitlines()
    assert len(feats["cpu"]) == len(feats["cuda"]) == len(nbest.read_text(encoding="utf-8").splitlines())
    number = re.compile(r"(CSLM0|NMT0)= (\S+)")
    for a, b in zip(feats["cpu"], feats["cuda"], strict=True):
        assert number.sub("", a) == number.sub("", b)
        fa, fb = dict(number.findall(a)), dict(number.findall(b))
        assert fa.keys() == fb.keys() == {"CSLM0", "NMT0"}
        for name in fa:
            assert close(float(fa[name]), float(fb[name])), (name, a, b)


def test_translate_on_cuda_equals_the_cpu(tmp_path: Path) -> None:
    nmt = tiny_nmt(tmp_path / "nmt.pt", steps=60)
    outs = {}
    for device in ("cpu", "cuda"):
        out = tmp_path / f"{device}.fr"
        run("translate", str(TINY_MOSES / "dev.en"), str(out), "-m", str(nmt), "--device", device)
        outs[device] = out.read_text(encoding="utf-8").splitlines()
    assert len(outs["cpu"]) == 8 and outs["cpu"] == outs["cuda"]


def held_out(log: Path, key: str = "valid_mean_logp") -> list[float]:
    return [e[key] for e in read_log(str(log)) if e["event"] == "valid"]


def follows_the_cpu(tmp_path: Path, command: str, inputs: list[str], args: list[str], key: str) -> int:
    """``command`` trained on both devices: every validation's figure ``key`` agrees; returns how
    many there were."""
    curves = {}
    for device in ("cpu", "cuda"):
        run(command, *inputs, str(tmp_path / f"{device}.pt"), *args, "--device", device)
        curves[device] = held_out(tmp_path / f"{device}.log", key)
    for a, b in zip(curves["cpu"], curves["cuda"], strict=True):
        assert close(a, b, TRAIN_REL, 0), curves
    return len(curves["cpu"])


TRAIN = [*TINY_NETWORK, "--batch-size", "16", "--valid-every", "10", "--patience", "0", "--seed", "3"]


def test_training_on_cuda_follows_the_cpu(tmp_path: Path) -> None:
    """The same 30 steps on both devices: the held-out log p of every validation agrees."""
    assert follows_the_cpu(tmp_path, "train", [str(SAMPLE)], [*TRAIN, "--max-steps", "30"], "valid_mean_logp") == 3


def test_a_resumed_cuda_run_continues_where_it_stopped(tmp_path: Path) -> None:
    """Saved and restored on the GPU (its RNG state included): 20 + 20 steps = 40 steps."""
    whole, parts = tmp_path / "whole.pt", tmp_path / "parts.pt"
    run("train", str(SAMPLE), str(whole), *TRAIN, "--max-steps", "40", "--device", "cuda")
    run("train", str(SAMPLE), str(parts), *TRAIN, "--max-steps", "20", "--device", "cuda")
    run("train", str(SAMPLE), str(parts), *TRAIN, "--max-steps", "40", "--device", "cuda", "--resume")
    a, b = held_out(tmp_path / "whole.log"), held_out(tmp_path / "parts.log")
    assert len(a) == len(b) == 4
    for x, y in zip(a, b, strict=True):
        assert close(x, y, 1e-4, 0), (a, b)


def test_bf16_training_on_cuda_learns(tmp_path: Path) -> None:
    """Under bfloat16 autocast: a different network by design, but it learns like the float32 one."""
    curves = {}
    for name, extra in (("fp32", []), ("bf16", ["--bf16"])):
        run("train", str(SAMPLE), str(tmp_path / f"{name}.pt"), *TRAIN, "--max-steps", "30", "--device", "cuda", *extra)
        curves[name] = held_out(tmp_path / f"{name}.log")
    assert curves["bf16"][-1] > curves["bf16"][0]
    assert close(curves["bf16"][-1], curves["fp32"][-1], 0.05, 0), curves


def test_train_lm_on_cuda_follows_the_cpu(tmp_path: Path) -> None:
    text = tmp_path / "text.fr"
    text.write_bytes((TINY_MOSES / "dev.fr").read_bytes() + (TINY_MOSES / "test.fr").read_bytes())
    args = ["--order", "3", "--embed-dim", "8", "--hidden", "16", "--dropout", "0", "--vocab-size", "60"]
    args += ["--max-steps", "40", "--batch-size", "32", "--valid-every", "10", "--valid", str(TINY_MOSES / "dev.fr")]
    assert follows_the_cpu(tmp_path, "train-lm", [str(text)], args, "valid_token_ppl") >= 4


def test_train_nmt_on_cuda_follows_the_cpu(tmp_path: Path) -> None:
    args = ["--embed-dim", "16", "--hidden-dim", "16", "--maxout-dim", "8", "--output-rank", "8"]
    args += ["--max-steps", "20", "--valid-every", "5", "--valid-fraction", "0.25", "--patience", "0"]
    inputs = [str(TINY_MOSES / "dev.en"), str(TINY_MOSES / "dev.fr")]
    assert follows_the_cpu(tmp_path, "train-nmt", inputs, args, "valid_mean_logp") == 4


def test_gz_output_on_cuda_is_the_cpu_bytes_outside_the_column(tmp_path: Path) -> None:
    """The streaming path with compression: the same lines in the same order."""
    outs = {}
    for device in ("cpu", "cuda"):
        out = tmp_path / f"{device}.gz"
        run("rescore", str(SAMPLE), str(out), "-m", str(model_path("default")), "--device", device)
        outs[device] = gzip.decompress(out.read_bytes()).splitlines()
    assert len(outs["cpu"]) == len(outs["cuda"]) > 20000
    assert all(split_scores(a, 1)[0] == split_scores(b, 1)[0] for a, b in zip(outs["cpu"], outs["cuda"], strict=True))
