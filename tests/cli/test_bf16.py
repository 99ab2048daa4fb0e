"""bfloat16 on the CPU from the command line: ``train --bf16`` and ``rescore --dtype bfloat16``,
the warning on a CPU without bf16 units, and the CPU feature detection behind it."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest
import torch
from click.testing import CliRunner

from phrase_rescorer.cli import cli
from phrase_rescorer.cpu_features import cpu_features
from phrase_rescorer.model.checkpoint import load_checkpoint
from phrase_rescorer.training.log import read_log
from tests.helpers.cli_run import run_cli
from tests.helpers.paths import SAMPLE
from tests.helpers.rescore_data import appended_columns, log_column, read_lines, tiny_checkpoint
from tests.helpers.synthetic import mapping_table
from tests.helpers.train_options import TINY_NETWORK

pytestmark = pytest.mark.usefixtures("one_thread")

EPYC = "processor\t: 0\nmodel name\t: AMD EPYC\nflags\t\t: fpu sse2 avx avx2 fma\n\nprocessor\t: 1\n"
XEON = "model name\t: Intel(R) Xeon(R) Platinum 8480+\nflags\t: avx2 avx512f avx512_bf16 amx_tile amx_bf16\n"
COOPER = "model name\t: Intel Xeon 8380H\nflags\t: avx2 avx512f avx512_bf16\n"
EMULATED = "no bf16 units (neither AMX-BF16 nor AVX512-BF16)"


@pytest.mark.parametrize("text,units", [(EPYC, None), (XEON, "AMX-BF16"), (COOPER, "AVX512-BF16")])
def test_cpu_features_from_cpuinfo(tmp_path: Path, text: str, units: str | None) -> None:
    (tmp_path / "cpuinfo").write_text(text)
    f = cpu_features(tmp_path / "cpuinfo")
    assert f.known and f.bf16_units == units
    assert (f.bf16_warning() is None) == (units is not None)
    if units is None:
        assert f.describe() == "AMD EPYC (avx2 yes, avx512f no, avx512_bf16 no, amx_tile no, amx_bf16 no)"
        assert EMULATED in (f.bf16_warning() or "") and "AMD EPYC" in (f.bf16_warning() or "")


def test_unreadable_cpuinfo_claims_nothing(tmp_path: Path) -> None:
    f = cpu_features(tmp_path / "absent")
    assert not f.known and f.bf16_units is None and f.bf16_warning() is None
    assert f.describe() == "unknown (CPU flags unknown)"


def _warns_here() -> bool:
    return cpu_features().bf16_warning() is not None


def test_rescore_dtype_bfloat16(tmp_path: Path) -> None:
    model = tiny_checkpoint(tmp_path / "tiny.pt")
    head = tmp_path / "head.gz"
    lines = read_lines(SAMPLE)[:300]
    head.write_bytes(gzip.compress(b"".join(lines)))
    outs = {}
    for dtype in ("float32", "bfloat16"):
        outs[dtype] = tmp_path / f"{dtype}.gz"
        r = CliRunner().invoke(cli, ["rescore", str(head), str(outs[dtype]), "--model", str(model), "--dtype", dtype])
        assert r.exit_code == 0, r.output
        assert f"|dtype:{dtype}|" in r.stderr
        assert (EMULATED in r.stderr) == (dtype == "bfloat16" and _warns_here())
    # Every line kept byte for byte, one column appended (checked by appended_columns).
    a = log_column(appended_columns(head, outs["float32"]))
    b = log_column(appended_columns(head, outs["bfloat16"]))
    d = np.abs(a - b)
    assert 0 < d.max() < 0.5  # approximate, and not the float32 path under another name


def test_rescore_dtype_bfloat16_needs_the_prefix_scorer(tmp_path: Path) -> None:
    model = tiny_checkpoint(tmp_path / "tiny.pt")
    r = CliRunner().invoke(
        cli,
        [
            "rescore",
            str(SAMPLE),
            str(tmp_path / "o.gz"),
            "--model",
            str(model),
            "--dtype",
            "bfloat16",
            "--scorer",
            "reference",
        ],
    )
    assert r.exit_code != 0 and "--dtype bfloat16 works with --scorer prefix only" in r.output
    assert not (tmp_path / "o.gz").exists()


def test_train_bf16_on_the_cpu(tmp_path: Path) -> None:
    table = mapping_table(tmp_path / "pt.gz", 200)
    args = [
        *TINY_NETWORK,
        "--batch-size",
        "16",
        "--valid-fraction",
        "0.1",
        "--seed",
        "3",
        "--log-every",
        "1",
        "--max-steps",
        "6",
        "--device",
        "cpu",
        "--init-std",
        "0.1",
    ]
    losses = {}
    for name, extra in (("fp32", []), ("bf16", ["--bf16"])):
        out = tmp_path / f"{name}.pt"
        r = CliRunner().invoke(cli, ["train", str(table), str(out), *args, *extra], catch_exceptions=False)
        assert r.exit_code == 0, r.output
        assert (EMULATED in r.stderr) == (name == "bf16" and _warns_here())
        losses[name] = np.array([e["loss"] for e in read_log(str(tmp_path / f"{name}.log")) if e["event"] == "train"])
    assert len(losses["bf16"]) == 6 and np.all(np.isfinite(losses["bf16"]))
    # bf16 products: the same curve to about 1 %, but not bit for bit.
    np.testing.assert_allclose(losses["bf16"], losses["fp32"], rtol=0.02)
    assert not np.array_equal(losses["bf16"], losses["fp32"])


def test_a_run_resumes_in_the_precision_it_started_in(tmp_path: Path) -> None:
    """A float32 run is not continued with bf16 products, nor a bf16 run with float32 ones: the
    refusal names the difference and nothing trains; the same precision resumes."""
    table = mapping_table(tmp_path / "pt.gz", 200)
    args = [*TINY_NETWORK, "--batch-size", "16", "--valid-fraction", "0.1", "--seed", "3", "--device", "cpu"]
    for name, started, other in (("fp32", [], ["--bf16"]), ("bf16", ["--bf16"], [])):
        out = tmp_path / f"{name}.pt"
        r = CliRunner().invoke(cli, ["train", str(table), str(out), *args, *started, "--max-steps", "3"])
        assert r.exit_code == 0, r.output
        log = read_log(str(tmp_path / f"{name}.log"))
        r = CliRunner().invoke(cli, ["train", str(table), str(out), *args, *other, "--max-steps", "6", "--resume"])
        was, now = ("float32", "bfloat16") if name == "fp32" else ("bfloat16", "float32")
        assert r.exit_code == 2, r.output
        assert f"the precision of the products (--bf16, --bf16-steps, --bf16-output) was {was}, now {now}" in r.output
        assert read_log(str(tmp_path / f"{name}.log")) == log  # nothing trained
        r = CliRunner().invoke(cli, ["train", str(table), str(out), *args, *started, "--max-steps", "6", "--resume"])
        assert r.exit_code == 0, r.output
        assert load_checkpoint(str(tmp_path / f"{name}.last.pt")).info["steps"] == 6
    # A bf16 run's state saved before the record named the precision: its model file's settings say it.
    payload = torch.load(tmp_path / "bf16.last.pt", weights_only=True)
    del payload["training_state"]["run"]["precision"]
    torch.save(payload, tmp_path / "bf16.last.pt")
    for extra, code in (([], 2), (["--bf16"], 0)):
        r = CliRunner().invoke(
            cli, ["train", str(table), str(tmp_path / "bf16.pt"), *args, *extra, "--max-steps", "9", "--resume"]
        )
        assert r.exit_code == code, r.output


def _nmt_args(tmp_path: Path) -> list[str]:
    from tests.helpers.nmt import SIZES, TINY_MOSES

    corpus = [str(TINY_MOSES / "dev.en"), str(TINY_MOSES / "dev.fr")]
    return [*corpus, *SIZES, "--valid-fraction", "0.1", "--seed", "3", "--log-every", "1", "--threads", "1"]


def test_train_nmt_bf16_steps(tmp_path: Path) -> None:
    """``train-nmt --bf16-steps``: the summary line and the run's record say so, the warning where
    the CPU lacks bf16 units; the losses of the first steps within 2 % of float32's, not equal."""
    args = _nmt_args(tmp_path)
    losses = {}
    for name, extra in (("fp32", []), ("steps", ["--bf16-steps"])):
        out = tmp_path / f"{name}.pt"
        r = CliRunner().invoke(cli, ["train-nmt", *args[:2], str(out), *args[2:], "--max-steps", "6", *extra])
        assert r.exit_code == 0, r.output
        assert ("(bf16 decoder steps)" in r.stderr) == (name == "steps")
        assert (EMULATED in r.stderr) == (name == "steps" and _warns_here())
        run = torch.load(tmp_path / f"{name}.last.pt", weights_only=True)["training_state"]["run"]
        assert run.get("precision") == (None if name == "fp32" else "bfloat16 decoder steps")
        losses[name] = np.array([e["loss"] for e in read_log(str(tmp_path / f"{name}.log")) if e["event"] == "train"])
    assert len(losses["steps"]) == 6 and np.all(np.isfinite(losses["steps"]))
    np.testing.assert_allclose(losses["steps"], losses["fp32"], rtol=0.02)
    assert not np.array_equal(losses["steps"], losses["fp32"])
    # A run resumes only in the precision it started in.
    r = CliRunner().invoke(
        cli,
        ["train-nmt", *args[:2], str(tmp_path / "fp32.pt"), *args[2:], "--max-steps", "9", "--bf16-steps", "--resume"],
    )
    assert r.exit_code == 2, r.output
    was = "the precision of the products (--bf16, --bf16-steps, --bf16-output) was float32"
    assert f"{was}, now bfloat16 decoder steps" in r.output


def test_train_nmt_bf16_output(tmp_path: Path) -> None:
    """``train-nmt --bf16-output``: the transformer's summary line and run record say so, and with
    ``--bf16-steps`` the rnnsearch network's name both; the first steps' losses within 2 % of
    float32's, not equal; the warning where the CPU lacks bf16 units."""
    from tests.helpers.nmt import SIZES

    args = _nmt_args(tmp_path)
    transformer = ["--arch", "transformer", "--embed-dim", "16", "--hidden-dim", "16", "--layers", "1", "--heads", "2"]
    no_sizes = args[2 + len(SIZES) :]
    runs = {
        "t32": ([*no_sizes, *transformer], None, None),
        "tout": ([*no_sizes, *transformer, "--bf16-output"], "bf16 output layer", "bfloat16 output layer"),
        "both": (
            [*args[2:], "--bf16-steps", "--bf16-output"],
            "bf16 decoder steps and bf16 output layer",
            "bfloat16 decoder steps and bfloat16 output layer",
        ),
    }
    losses = {}
    for name, (rest, says, precision) in runs.items():
        r = CliRunner().invoke(cli, ["train-nmt", *args[:2], str(tmp_path / f"{name}.pt"), *rest, "--max-steps", "5"])
        assert r.exit_code == 0, r.output
        assert (f"({says})" in r.stderr) if says else "(bf16" not in r.stderr
        assert (EMULATED in r.stderr) == (says is not None and _warns_here())
        run = torch.load(tmp_path / f"{name}.last.pt", weights_only=True)["training_state"]["run"]
        assert run.get("precision") == precision
        losses[name] = np.array([e["loss"] for e in read_log(str(tmp_path / f"{name}.log")) if e["event"] == "train"])
    assert len(losses["tout"]) == 5 and np.all(np.isfinite(losses["tout"]))
    np.testing.assert_allclose(losses["tout"], losses["t32"], rtol=0.02)
    assert not np.array_equal(losses["tout"], losses["t32"])
    # A run resumes only in the precision it started in: each flag left out is refused.
    was = "the precision of the products (--bf16, --bf16-steps, --bf16-output) was"
    for name, rest, says in (
        ("tout", [*no_sizes, *transformer], f"{was} bfloat16 output layer, now float32"),
        ("both", [*args[2:], "--bf16-steps"], f"{was} bfloat16 decoder steps and bfloat16 output layer, now bfloat16 "),
    ):
        out = str(tmp_path / f"{name}.pt")
        r = CliRunner().invoke(cli, ["train-nmt", *args[:2], out, *rest, "--max-steps", "7", "--resume"])
        assert r.exit_code == 2 and says in r.output, r.output


@pytest.mark.parametrize(
    "given,says",
    [
        (
            ["--bf16-steps", "--arch", "transformer"],
            "--bf16-steps: only the recurrent attention networks (rnnsearch, gnmt)",
        ),
        (
            ["--bf16-steps", "--arch", "cho2014"],
            "--bf16-steps: only the recurrent attention networks (rnnsearch, gnmt)",
        ),
        (["--bf16-steps", "--bf16"], "--bf16 and --bf16-steps: give one"),
        (
            ["--bf16-output", "--arch", "cho2014"],
            "--bf16-output: only the sentence networks (rnnsearch, gnmt, transformer)",
        ),
        (["--bf16-output", "--bf16"], "--bf16 and --bf16-output: give one"),
    ],
)
def test_train_nmt_reduced_precision_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], given: list[str], says: str
) -> None:
    """``--bf16-steps`` and ``--bf16-output`` where they do not apply: refused with exit 2 before
    the corpus is read (here it does not exist), nothing written."""
    missing = [str(tmp_path / "absent.en"), str(tmp_path / "absent.fr")]
    code, err = run_cli(["train-nmt", *missing, str(tmp_path / "m.pt"), *given], monkeypatch, capsys)
    assert code == 2, err
    assert says in err and "Traceback" not in err
    assert list(tmp_path.iterdir()) == []
