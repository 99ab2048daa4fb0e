"""`make bench` in miniature: the benchmark runs end to end on the bundled sample and its figures
are consistent (the timings themselves are not checked: they depend on the machine)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from benchmarks.flops import StepFlops, TrieCounter, pair_flops
from phrase_rescorer.model.cho2014 import PRESETS, ModelConfig
from tests.helpers.paths import PYTHON, cli_env


@pytest.mark.slow
def test_bench_quick_smoke(tmp_path: Path, sample_table: Path) -> None:
    out = tmp_path / "bench.json"
    r = subprocess.run(
        [
            PYTHON,
            "-m",
            "benchmarks.bench",
            "--quick",
            "--threads",
            "1",
            "--table",
            str(sample_table),
            "--lines",
            "200",
            "--json",
            str(out),
        ],
        env=cli_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    for heading in (
        "rescoring on the CPU",
        "prefix / reference",
        "peak RSS",
        "training on the CPU",
        "GFLOP/s",
        "CPU features: ",
        "avx512_bf16 ",
        "amx_bf16 ",
        "bound for prefix / reference",
        "rescoring per architecture",
        "n-best scoring with the CSLM",
        "n-best scoring with the NMT feature",
        "MBR over n-best lists",
        "the networks' own translation",
    ):
        assert heading in r.stdout
    figures = json.loads(out.read_text())
    batched = figures["translate_batch"]["sizes"]
    assert set(batched) == {"1", "2"} and min(b["sentences_per_s"] for b in batched.values()) > 0
    assert figures["lines"] == 200
    rescoring = figures["cpu_rescoring"]
    assert rescoring["scores_equal"] is True and rescoring["max_abs_diff"] <= 1e-4
    assert rescoring["prefix"]["pairs_per_s"] > 0 and rescoring["reference"]["pairs_per_s"] > 0
    assert 0 < figures["prefix_work_share"] < 1
    assert set(figures["peak_rss_mb"]) == {"200", "600"} and min(figures["peak_rss_mb"].values()) > 50
    assert rescoring["bound_fraction"] > 0 and rescoring["bound"] > 1
    assert rescoring["bound"] * rescoring["bound_fraction"] == pytest.approx(rescoring["ratio"])
    assert set(figures["cpu_training"]) == {
        f"quick {d}, batch {b}, 1 thread" for d in ("float32", "bfloat16") for b in (64, 256)
    }
    update = figures["adadelta_update"]
    if "problem" not in update:  # the compiled loop built: both kernels timed on 1 thread
        assert update["parameters"] > 0 and min(update["1 thread"].values()) > 0
        assert set(update["1 thread"]) == {"chunked", "compiled"}
    assert "Adadelta update alone" in r.stdout
    dropout = figures["dropout"]
    if "problem" not in dropout:  # the loop built: torch's masks and the loop's timed on 1 thread
        assert set(dropout["1 thread"]) == {"torch", "compiled"} and min(dropout["1 thread"].values()) > 0
    assert "dropout alone" in r.stdout
    for t in figures["cpu_training"].values():
        assert t["pairs_per_s"] > 0 and t["useful_gflops"] > 0
        assert t["matmul_fraction"] == pytest.approx(t["useful_gflops"] / figures["cpu_matmul_gflops"])
        assert t["beside_gflops"] > 0 and t["beside_fraction"] == pytest.approx(t["useful_gflops"] / t["beside_gflops"])
        assert t["page_faults_per_step"] >= 0
        assert t["beside_gflops"] == max(t["beside_by_library"].values()) and "blas" in t["beside_by_library"]
        assert t["warmup_steps"] >= 10
    archs = figures["arch_rescoring"]
    assert archs["lines"] == 200 and archs["scores_equal"] is True
    assert {a: archs[a]["prefix"]["scorer"] for a in ("cho2014", "rnnsearch", "gnmt", "transformer")} == {
        "cho2014": "PrefixScorer",
        "rnnsearch": "StackedPrefixScorer",
        "gnmt": "StackedPrefixScorer",
        "transformer": "StackedPrefixScorer",
    }
    assert set(figures["machine"]["cpu_flags"] or {}) <= {"avx2", "avx512f", "avx512_bf16", "amx_tile", "amx_bf16"}
    assert figures["nbest"]["scores_equal"] is True and figures["nbest"]["quick"]["hypotheses_per_s"] > 0
    nmt = figures["nbest_nmt"]
    assert nmt["scores_equal"] is True and nmt["quick"]["prefix"]["hypotheses_per_s"] > 0
    assert nmt["quick-transformer"]["prefix"]["hypotheses_per_s"] > 0
    if figures["gpu"] is None:
        assert "no CUDA device: GPU figures not measured" in r.stdout


def test_architecture_part_alone(tmp_path: Path, sample_table: Path) -> None:
    """``python -m benchmarks.architectures``: pairs/s of both scorers for every architecture."""
    out = tmp_path / "archs.json"
    r = subprocess.run(
        [
            PYTHON,
            "-m",
            "benchmarks.architectures",
            "--size",
            "quick",
            "--threads",
            "1",
            "--table",
            str(sample_table),
            "--lines",
            "120",
            "--repeats",
            "2",
            "--json",
            str(out),
        ],
        env=cli_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    figures = json.loads(out.read_text())
    assert figures["scores_equal"] is True and figures["lines"] == 120
    for arch, prefix, batched in (
        ("cho2014", "PrefixScorer", "BatchedScorer"),
        ("rnnsearch", "StackedPrefixScorer", "StackedScorer"),
        ("gnmt", "StackedPrefixScorer", "StackedScorer"),
        ("transformer", "StackedPrefixScorer", "StackedScorer"),
    ):
        f = figures[arch]
        assert (f["prefix"]["scorer"], f["batched"]["scorer"]) == (prefix, batched)
        assert len(f["ratios"]) == 2 and f["prefix"]["pairs_per_s"] > 0 and f["max_abs_diff"] <= 1e-4
        assert f"{arch:<13} prefix / batched: " in r.stdout


def _nbest_part(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [PYTHON, "-m", "benchmarks.nbest", "--sizes", "quick", "--threads", "1", *args],
        env=cli_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_nbest_part_alone(tmp_path: Path) -> None:
    """``python -m benchmarks.nbest``: hypotheses/s, contexts and GFLOP/s of ``score_nbest`` on a
    synthetic list, its scores checked against the plain computation."""
    out = tmp_path / "nbest.json"
    r = _nbest_part("--lines", "300", "--repeats", "2", "--check", "30", "--json", str(out))
    assert r.returncode == 0, r.stdout + r.stderr
    for heading in (
        "n-best scoring with the CSLM",
        "list: synthetic: up to 200 variants",
        "hypotheses/s",
        "useful GFLOP/s",
        "% of matmul",
        "against the plain computation",
        ": equal",
    ):
        assert heading in r.stdout
    f = json.loads(out.read_text())
    q = f["quick"]
    assert f["scores_equal"] is True and q["scores_equal"] is True and q["checked"] == 30
    assert q["max_abs_diff"] <= 1e-4 and len(q["runs"]) == 2 and q["hypotheses_per_s"] > 0
    assert q["hypotheses"] >= 300 and q["ngrams"] == q["words"] + q["hypotheses"]  # every word, then </s>
    assert 0 < q["distinct_contexts"] < q["ngrams"] and q["shortlist"] == 500 and q["order"] == 5
    assert q["useful_gflops"] == pytest.approx(
        q["distinct_contexts"] / q["hypotheses"] * 2 * (4 * 16 * 32 + 32 * 16 + 16 * 500) * q["hypotheses_per_s"] / 1e9
    )
    assert q["matmul_fraction"] == pytest.approx(q["useful_gflops"] / f["cpu_matmul_gflops"])


def test_nbest_part_on_a_given_list(tmp_path: Path) -> None:
    from benchmarks.synthetic_nbest import synthetic_nbest

    given = tmp_path / "given.nbest"
    synthetic_nbest([["un", "chien", "noir", "court", "sur", "l&apos;", "herbe", "."]], 100, given)
    out = tmp_path / "nbest.json"
    r = _nbest_part("--nbest", str(given), "--lines", "50", "--repeats", "1", "--check", "10", "--json", str(out))
    assert r.returncode == 0, r.stdout + r.stderr
    f = json.loads(out.read_text())
    assert f["list"] == f"{given}, first 50 lines" and f["quick"]["hypotheses"] == 50 and f["scores_equal"]


def test_nbest_part_fails_when_the_scores_differ(tmp_path: Path) -> None:
    """Exit status 1 when the batched scores differ from the plain computation."""
    from unittest import mock

    import torch
    from click.testing import CliRunner

    from benchmarks import nbest

    before = torch.get_num_threads()
    plain = nbest.plain_sentence_log_probs
    try:
        with mock.patch.object(nbest, "plain_sentence_log_probs", lambda *a: plain(*a) + 2e-4):
            r = CliRunner().invoke(
                nbest.main, ["--sizes", "quick", "--threads", "1", "--lines", "10", "--repeats", "1", "--check", "5"]
            )
    finally:
        torch.set_num_threads(before)
    assert r.exit_code == 1, r.output
    assert ": DIFFERENT" in r.output


def test_synthetic_nbest_list() -> None:
    """Distinct hypotheses made only of the sentence's own words, the sentence first; a valid
    Moses n-best list, the same for the same seed."""
    import numpy as np

    from benchmarks.synthetic_nbest import variants

    sentence = ["une", "femme", "en", "robe", "rouge", "marche", "dans", "la", "rue", "avec", "un", "chien", "."]
    hyps = variants(sentence, 200, np.random.default_rng(3))
    assert len(hyps) == 200 and hyps[0] == sentence
    assert len({tuple(h) for h in hyps}) == 200 and all(set(h) <= set(sentence) for h in hyps)
    assert variants(["seul"], 200, np.random.default_rng(3)) == [["seul"]]
    assert variants(sentence, 200, np.random.default_rng(3)) == hyps


def test_synthetic_nbest_file(tmp_path: Path) -> None:
    from benchmarks.synthetic_nbest import synthetic_nbest
    from phrase_rescorer.moses.nbest import read_nbest

    sentences = [s.split() for s in ("deux chiens jouent dans la neige .", "un homme court .", "oui")]
    assert synthetic_nbest(sentences, 10, tmp_path / "a") == (len((tmp_path / "a").read_text().splitlines()), 1)
    n, used = synthetic_nbest(sentences, 10**6, tmp_path / "b")
    lines = list(read_nbest(str(tmp_path / "b")))
    assert used == 3 and n == len(lines) and [line.sentence for line in lines][-1] == 2
    assert lines[0].tokens == sentences[0] and lines[-1].tokens == ["oui"]


def test_flop_count_of_a_context_at_paper_size() -> None:
    from benchmarks.nbest import context_flops
    from phrase_rescorer.lm.network import PRESETS as LM_PRESETS

    paper = LM_PRESETS["paper"]
    assert context_flops(paper) == 2 * (6 * 512 * 1536 + 1536 * 1024 + 1024 * paper.vocab_size)


def test_flop_count_of_a_pair_at_paper_size() -> None:
    sizes = dict(PRESETS["paper"])
    v = sizes.pop("vocab_size")
    config = ModelConfig(src_vocab_size=v, tgt_vocab_size=v, **sizes)
    f = StepFlops.of(config)
    assert f.encoder_step == 2 * (100 * 3000 + 1000 * 3000)
    assert f.source == 2 * (1000 * 1000 * 5 + 1000 * 1000)  # V, V', [C_r; C_z; C], O_c
    assert f.decoder_step == 2 * (100 * 3000 + 1000 * 3000 + 1000 * 1000 + 100 * 1000 + 500 * 100 + 100 * 15000)
    assert pair_flops(config, [3], [4]).tolist() == [4 * f.encoder_step + f.source + 5 * f.decoder_step]


def test_trie_counter_counts_shared_prefixes() -> None:
    counter = TrieCounter()
    # Sources "a b", "a": encoder nodes a, a-b, a-b-</s>, a-</s>. Targets of "a b": "x y", "x":
    # decoder nodes (root), x, x-y.
    scores = counter.score([[5, 6], [5]], [[7, 8], [7], [9]], [0, 0, 1])
    c = counter.count
    assert scores.tolist() == [0.0, 0.0, 0.0]
    assert (c.lines, c.sources, c.encoder_nodes, c.decoder_nodes) == (3, 2, 4, 3 + 2)
    assert (c.source_steps, c.target_steps) == (3 + 3 + 2, 3 + 2 + 2)


def test_the_gpu_section_runs_on_any_device(tmp_path: Path, sample_table: Path) -> None:
    """No GPU where this is developed: the CUDA section's code runs here on the CPU instead."""
    import torch

    from benchmarks import parts as parts
    from benchmarks.accelerator import accelerator_figures
    from phrase_rescorer.model.checkpoint import load_checkpoint

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        src, tgt = parts.shortlists(str(sample_table), parts.preset_vocab_size("quick"))
        config = parts.model_config("quick", src, tgt)
        parts.random_checkpoint(tmp_path / "m.pt", config, src, tgt)
        figures = accelerator_figures(
            load_checkpoint(str(tmp_path / "m.pt")),
            str(sample_table),
            300,
            tmp_path,
            config,
            src,
            tgt,
            32,
            torch.device("cpu"),
            matmul_n=128,
        )
    finally:
        torch.set_num_threads(before)
    assert figures["lines"] == 300
    assert figures["float32"]["pairs_per_s"] > 0 and figures["bfloat16"]["pairs_per_s"] > 0
    assert 0 <= figures["bfloat16"]["mean_abs_diff"] <= figures["bfloat16"]["max_abs_diff"] < 1.0
    assert set(figures["training"]) == {64, 32} and min(figures["training"].values()) > 0


@pytest.mark.slow
def test_training_profile_accounts_for_the_step(tmp_path: Path, sample_table: Path) -> None:
    """``python -m benchmarks.training_profile``: every phase of ``Loop.step`` is found, the
    kinds of operators and the time outside them add up to the profiled step, and the matrix
    products carry a FLOP count."""
    out = tmp_path / "profile.json"
    r = subprocess.run(
        [
            PYTHON,
            "-m",
            "benchmarks.training_profile",
            "--preset",
            "quick",
            "--threads",
            "1",
            "--table",
            str(sample_table),
            "--lines",
            "300",
            "--steps",
            "2",
            "--json",
            str(out),
        ],
        env=cli_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    f = json.loads(out.read_text())
    assert set(f["phases"]) == {"batch", "forward", "backward", "clip", "optimizer"}
    for p in f["phases"].values():
        assert 0 <= p["outside_operators_ms"] <= p["ms"]
    assert sum(p["ms"] for p in f["phases"].values()) <= f["profiled_step_ms"] * 1.01
    assert sum(f["kinds_ms"].values()) + f["outside_operators_ms"] == pytest.approx(f["profiled_step_ms"])
    assert f["kinds_ms"]["matrix products"] > 0 and f["matmul_gflops"] > 0
    assert f["beside_gflops"] > 0 and f["beside_fraction"] == pytest.approx(f["useful_gflops"] / f["beside_gflops"])
    assert f["page_faults_per_step"] >= 0 and "minor page faults per timed step" in r.stdout
    assert f["beside_gflops"] == max(f["beside_by_library"].values()) and "blas" in f["beside_by_library"]
    assert "machine fp32 matrix product (2048^3, best of 5): blas " in r.stdout
    ops = ("aten::mm", "aten::addmm", "aten::bmm", "mkldnn::_linear_pointwise")
    assert f["matmul_shapes"] and all(s["op"] in ops and s["gflops"] > 0 for s in f["matmul_shapes"])
    assert "phases of Loop.step" in r.stdout and "costliest matrix products" in r.stdout
    c = f["ceiling"]  # every product shape timed alone
    assert c["shapes"] > 0 and c["unknown_ms"] == 0
    assert 0 < c["alone_ms"] <= min(c["alone_ms_by_library"].values()) * (1 + 1e-9)
    assert set(c["alone_ms_by_library"]) == set(c["bound_by_library"]) == set(f["beside_by_library"])
    assert c["useful_gflops"] == pytest.approx(f["useful_gflops"] * f["step_ms"] / c["alone_ms"])
    assert c["share"] == pytest.approx(c["useful_gflops"] / max(c["bound_by_library"].values()))
    families = c["by_family"]
    assert sum(d["step_ms"] for d in families) == pytest.approx(c["step_ms"])
    assert c["step_ms"] > 0  # per step, timed in another pass: no bound against f["step_ms"] (load moves it)
    assert sum(d["alone_ms"] for d in families) == pytest.approx(c["alone_ms"])
    assert "ceiling of these products" in r.stdout and "where the step loses most" in r.stdout


def test_operator_kinds() -> None:
    from benchmarks.profile_analysis import is_operator, kind_of

    assert [
        kind_of(n)
        for n in (
            "aten::addmm",
            "aten::_log_softmax_backward_data",
            "aten::cat",
            "aten::sigmoid",
            "aten::linalg_vector_norm",
            "autograd::engine::evaluate_function: MmBackward0",
            "aten::tanh_backward",
            "aten::index_add_",
            "aten::mul_",
        )
    ] == [
        "matrix products",
        "softmax and loss",
        "copies and indexing",
        "element-wise",
        "reductions",
        "autograd bookkeeping",
        "element-wise",
        "copies and indexing",
        "element-wise",
    ]
    assert not is_operator("Optimizer.step#ChunkedAdadelta.step") and not is_operator("train.forward")
    assert is_operator("aten::mm") and is_operator("MmBackward0")
    assert is_operator("mkldnn::_linear_pointwise") and kind_of("mkldnn::_linear_pointwise") == "matrix products"


def test_onednn_products_flops_from_their_shapes() -> None:
    """The profiler counts no FLOPs for oneDNN's product: 2 M N K from x (M, K) and W (N, K),
    the addend (M, N) between them in the binary form."""
    from benchmarks.profile_analysis import linear_flops

    assert linear_flops("mkldnn::_linear_pointwise", [[64, 100], [300, 100], [], [], [], []]) == 2 * 64 * 100 * 300
    assert linear_flops("mkldnn::_linear_pointwise", [[64, 100], [64, 300], [300, 100], [], []]) == 2 * 64 * 100 * 300
    assert linear_flops("aten::mm", [[64, 100], [100, 300]]) == 0
    assert linear_flops("mkldnn::_linear_pointwise", [[64, 100], [300, 99]]) == 0


def test_products_timed_in_plain_steps() -> None:
    """``plain_products.time_products``: every product the steps run, forward and backward,
    counted once under its (m, k, n) with its calls per step; other operators not counted;
    batched products timed as of no known shape."""
    import torch

    from benchmarks.plain_products import time_products
    from benchmarks.profile_analysis import Shape
    from phrase_rescorer import onednn

    a, b, w = torch.randn(4, 5), torch.randn(5, 7), torch.randn(7, 5, requires_grad=True)
    out = torch.empty(4, 7)

    def steps() -> None:
        for _ in range(2):
            torch.mm(a, b, out=out)
            torch.addmm(torch.zeros(7), a, b).tanh()
            (a @ w.t()).sum().backward()  # forward (4, 5, 7); backward: dW = g^T a (7, 4, 5)
            torch.bmm(a[None], b[None])
        if onednn.available():
            onednn.times_transposed(a, w.detach())

    found, unknown_ms = time_products(steps, steps=2)
    calls = {s: c.calls for s, c in found.items()}
    linear = 0.5 if onednn.available() else 0.0
    assert calls == {Shape(4, 5, 7): 3.0 + linear, Shape(7, 4, 5): 1.0}
    assert all(c.ms > 0 for c in found.values()) and unknown_ms > 0


def test_product_shapes_from_the_profiler() -> None:
    """(m, k, n) of each product the profiler records, whatever the operator's argument order;
    the shapes that differ in one dimension only are one family, that dimension N."""
    from benchmarks.product_ceiling import families
    from benchmarks.profile_analysis import Shape, shape_of

    assert shape_of("aten::mm", [[448, 100], [100, 15000]]) == Shape(448, 100, 15000)
    assert shape_of("aten::addmm", [[1000], [64, 1000], [1000, 3000], [], []]) == Shape(64, 1000, 3000)
    assert shape_of("aten::addmm", [[64, 3000], [64, 1000], [1000, 3000], [], []]) == Shape(64, 1000, 3000)
    linear = "mkldnn::_linear_pointwise"
    assert shape_of(linear, [[64, 1000], [2000, 1000], [], [], [], []]) == Shape(64, 1000, 2000)
    assert shape_of(linear, [[64, 1000], [64, 2000], [2000, 1000], [], []]) == Shape(64, 1000, 2000)
    assert shape_of("aten::mm", [[4, 5], [5, 7], [4, 7]]) == Shape(4, 5, 7)  # with out=
    assert shape_of("aten::mm", [[4, 5], [6, 7]]) is None and shape_of("aten::bmm", [[2, 3, 4], [2, 4, 5]]) is None
    assert shape_of("aten::mm", [[4, 0], [0, 7]]) is None
    shapes = [Shape(448, 100, 15000), Shape(512, 100, 15000), Shape(2000, 448, 1000), Shape(2000, 512, 1000)]
    assert families([*shapes, Shape(64, 1000, 3000)]) == {
        shapes[0]: "N x 100 x 15000",
        shapes[1]: "N x 100 x 15000",
        shapes[2]: "2000 x N x 1000",
        shapes[3]: "2000 x N x 1000",
        Shape(64, 1000, 3000): "N x 1000 x 3000",
    }


def test_nbest_part_without_shared_data(tmp_path: Path) -> None:
    """Without ../shared the list is made from the bundled tiny system's French text, and the
    shortlist is filled up to the French one's size."""
    from unittest import mock

    import torch

    from benchmarks import nbest, synthetic_nbest

    missing = tmp_path / "absent"
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with mock.patch.object(synthetic_nbest, "ONE_BEST", missing), mock.patch.object(nbest, "LM_TEXT", missing):
            vocab = nbest.shortlist("small")
            assert len(vocab) == nbest.FRENCH_SHORTLIST and "<unused-0>" in vocab and "homme" in vocab
            f = nbest.nbest_part(None, 250, ["quick"], 1, 5, 50.0, tmp_path)
    finally:
        torch.set_num_threads(before)
    assert f["list"].startswith("synthetic: up to 200 variants of each of the first ")
    assert "the bundled tiny system" in f["list"] and f["scores_equal"] is True
    assert f["quick"]["hypotheses"] >= 250 and f["quick"]["shortlist"] == 500
