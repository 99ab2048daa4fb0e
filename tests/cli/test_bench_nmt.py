"""``make bench``'s n-best part with the NMT feature (``benchmarks.nbest_nmt``): it runs end to end
and its figures are consistent (the timings themselves are not checked: they depend on the
machine); the appended values are checked against the plain computation, whose FLOP count is
the analytic one."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from unittest import mock

import numpy as np
import pytest
import torch

from phrase_rescorer.data.vocab import SPECIALS
from tests.helpers.paths import PYTHON, cli_env


def _nmt_part(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [PYTHON, "-m", "benchmarks.nbest_nmt", "--sizes", "quick", "--threads", "1", *args],
        env=cli_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_nmt_part_alone(tmp_path: Path) -> None:
    """``python -m benchmarks.nbest_nmt``: hypotheses/s and useful GFLOP/s of ``append_features``
    with a translation network, both scorers, their values checked against the plain computation."""
    out = tmp_path / "nmt.json"
    r = _nmt_part("--lines", "300", "--repeats", "2", "--check", "20", "--flop-sample", "15", "--json", str(out))
    assert r.returncode == 0, r.stdout + r.stderr
    for heading in (
        "n-best scoring with the NMT feature",
        "list: synthetic: up to 200 variants",
        "sources: ",
        "hypotheses/s",
        "useful GFLOP/s",
        "% of matmul",
        "prefix / batched: ",
        "a 200-best list of 1,000 sentences at the prefix scorer's rate: ",
        "against the plain computation",
        ": equal",
    ):
        assert heading in r.stdout
    f = json.loads(out.read_text())
    q = f["quick"]
    assert f["scores_equal"] is True and f["arch"] == "rnnsearch" and q["scores_equal"] is True
    assert q["hypotheses"] >= 300 and q["checked"] == 20 and q["flop_sample"] == 15
    assert q["shortlists"] == [500, 500] and q["mflop_per_hypothesis"] > 0
    assert (q["prefix"]["scorer"], q["batched"]["scorer"]) == ("StackedPrefixScorer", "StackedScorer")
    for name in ("prefix", "batched"):
        s = q[name]
        assert len(s["runs"]) == 2 and s["hypotheses_per_s"] > 0 and s["max_abs_diff"] <= 1e-4
        assert s["useful_gflops"] == pytest.approx(q["mflop_per_hypothesis"] * s["hypotheses_per_s"] / 1e3)
        assert s["matmul_fraction"] == pytest.approx(s["useful_gflops"] / f["cpu_matmul_gflops"])
    assert q["ratio"] > 0
    assert q["minutes_per_200best_of_1000"] == pytest.approx(200_000 / q["prefix"]["hypotheses_per_s"] / 60)


def test_nmt_part_every_kind(tmp_path: Path) -> None:
    """``--kinds``: a right-to-left, an inverse and a subword network timed beside the forward one,
    each under its own name, each one's appended values equal to its own plain computation."""
    out = tmp_path / "kinds.json"
    r = _nmt_part(
        "--kinds",
        "forward,right-to-left,inverse,subword",
        "--lines",
        "200",
        "--repeats",
        "1",
        "--check",
        "10",
        "--flop-sample",
        "5",
        "--json",
        str(out),
    )
    assert r.returncode == 0, r.stdout + r.stderr
    f = json.loads(out.read_text())
    labels = {"quick": "forward", "quick-right-to-left": "right-to-left", "quick-inverse": "inverse"}
    labels["quick-subword"] = "subword"
    for label, kind in labels.items():
        assert f[label]["kind"] == kind and f[label]["scores_equal"] is True, label
        assert f[label]["prefix"]["max_abs_diff"] <= 1e-4 and f[label]["hypotheses"] >= 200
        assert f"  {label} " in r.stdout
    assert f["quick"]["shortlists"] == f["quick-inverse"]["shortlists"] == [500, 500]
    units = f["quick-subword"]["shortlists"]
    assert all(100 < n <= 500 + len(SPECIALS) for n in units), units  # at most 500 units a side, and the specials
    assert f["scores_equal"] is True
    bad = _nmt_part("--kinds", "sideways", "--lines", "10")
    assert bad.returncode == 2 and "'sideways' is not one of forward, right-to-left, inverse, subword" in bad.stderr


def test_nmt_part_fails_when_the_values_differ() -> None:
    """Exit status 1 when the appended values differ from the plain computation."""
    from click.testing import CliRunner

    from benchmarks import nbest_nmt

    plain = nbest_nmt.plain_scores

    def off(*args: object) -> tuple[np.ndarray, np.ndarray]:
        scores, flops = plain(*args)  # type: ignore[arg-type]
        return scores + 2e-4, flops

    before = torch.get_num_threads()
    try:
        with mock.patch.object(nbest_nmt, "plain_scores", off):
            r = CliRunner().invoke(
                nbest_nmt.main,
                [
                    "--sizes",
                    "quick",
                    "--threads",
                    "1",
                    "--lines",
                    "10",
                    "--repeats",
                    "1",
                    "--check",
                    "5",
                    "--flop-sample",
                    "3",
                ],
            )
    finally:
        torch.set_num_threads(before)
    assert r.exit_code == 1, r.output
    assert ": DIFFERENT" in r.output


def test_nmt_part_without_shared_data(tmp_path: Path) -> None:
    """Without ../shared the list and its sources are the bundled tiny system's test set, and the
    shortlists are filled up to the preset's size."""
    from benchmarks import nbest_nmt

    missing = tmp_path / "absent"
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with (
            mock.patch.object(nbest_nmt, "ONE_BEST", missing),
            mock.patch.object(nbest_nmt, "SOURCE_TEXT", missing),
            mock.patch.object(nbest_nmt, "CORPUS", (missing, missing)),
        ):
            src, tgt = nbest_nmt.shortlists("small")
            f = nbest_nmt.nmt_part(150, [("quick", "forward")], 1, 5, 5, 50.0, tmp_path)
    finally:
        torch.set_num_threads(before)
    assert len(src) == len(tgt) == 8000 and "<unused-0>" in src and "man" in src and "homme" in tgt
    assert "tiny-moses/test.fr" in f["list"] and "sources: " in f["list"] and "tiny-moses/test.en" in f["list"]
    assert f["scores_equal"] is True and f["quick"]["hypotheses"] >= 150


def test_counted_flops_of_the_plain_computation(tmp_path: Path) -> None:
    """FlopCounterMode's count of the plain computation (one hypothesis at a time) equals the
    analytic count of the paper's network (``benchmarks.flops.pair_flops``), and the scores are
    the network's log probabilities."""
    from benchmarks import parts
    from benchmarks.flops import pair_flops
    from benchmarks.nbest_nmt import plain_scores
    from phrase_rescorer.data.vocab import SPECIALS, Vocabulary
    from phrase_rescorer.model.checkpoint import load_checkpoint

    src = Vocabulary([*SPECIALS, *(f"s{i}" for i in range(40))])
    tgt = Vocabulary([*SPECIALS, *(f"t{i}" for i in range(50))])
    config = parts.model_config("quick", src, tgt)
    parts.random_checkpoint(tmp_path / "m.pt", config, src, tgt)
    scores, flops = plain_scores(load_checkpoint(str(tmp_path / "m.pt")), [("s1 s2 s3", "t1 t2 t3 t4"), ("s1", "t1")])
    assert flops.tolist() == pair_flops(config, np.array([3, 1]), np.array([4, 1])).tolist()
    assert np.all(scores < 0) and scores[0] < scores[1]
