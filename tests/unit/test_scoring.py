"""The streaming engine and its scorers, against the plain definition of log p(f|e).

Tolerances: the batched scorer sums token log-probs in float64, the reference path in float32,
and batch shapes change BLAS blocking; they agree to ~1e-6 relative. Tests allow
|a - b| <= 1e-5 * max(1, |b|) in log space (REL). The prob column carries 9 significant digits,
so reading it back and taking the log adds < 1e-8.
"""

from __future__ import annotations

import gzip
import math
import random
from pathlib import Path

import numpy as np
import pytest
import torch

from phrase_rescorer.model.checkpoint import load_checkpoint, save_checkpoint
from phrase_rescorer.model.files import CheckpointError
from phrase_rescorer.moses.phrase_table import PhraseTableError
from phrase_rescorer.moses.table_reader import InputTable
from phrase_rescorer.moses.words import split_words
from phrase_rescorer.output import OutputError
from phrase_rescorer.rescoring.engine import TableRescorer, rescore_table
from phrase_rescorer.rescoring.options import RescoreOptions
from phrase_rescorer.rescoring.scorers import BatchedScorer, ReferenceScorer, length_batches
from tests.helpers.paths import SAMPLE
from tests.helpers.rescore_data import appended_columns, log_column, read_lines, real_slice, reference_log_probs

REL = 1e-5
pytestmark = pytest.mark.usefixtures("one_thread")


def close(a: np.ndarray, b: np.ndarray, rel: float = REL) -> bool:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return bool(np.all(np.abs(a - b) <= rel * np.maximum(1.0, np.abs(b))))


@pytest.fixture(scope="module")
def real(tmp_path_factory: pytest.TempPathFactory, real_table: Path) -> Path:
    return real_slice(tmp_path_factory.mktemp("real") / "slice.gz")


@pytest.fixture(scope="module")
def real_scored(model: Path, real: Path) -> tuple[Path, object]:
    """The real slice rescored with the default settings (prob format, batched scorer)."""
    out = real.with_name("scored.gz")
    return out, rescore_table(str(real), str(out), str(model), device="cpu")


def test_real_table_every_line_kept_and_equal_to_the_reference(
    model: Path, real: Path, real_scored: tuple[Path, object]
) -> None:
    out, summary = real_scored
    values = appended_columns(real, out)  # byte identity of everything else, line count
    assert summary.lines == len(values) > 2000  # type: ignore[attr-defined]
    assert summary.first_unsorted_line is None  # type: ignore[attr-defined]  # Moses' order
    got = log_column(values)
    assert np.all(np.isfinite(got))
    ref = reference_log_probs(load_checkpoint(str(model)), real)  # pair by pair, every line
    assert close(got, np.array([ref[i + 1] for i in range(len(values))]))


def test_shuffled_real_table_gives_each_line_the_same_score(
    model: Path, real: Path, real_scored: tuple[Path, object], tmp_path: Path
) -> None:
    lines = read_lines(real)
    random.Random(3).shuffle(lines)
    shuffled = tmp_path / "shuffled.gz"
    shuffled.write_bytes(gzip.compress(b"".join(lines)))
    out_a, out_b = real_scored[0], tmp_path / "b.gz"
    warnings: list[str] = []
    summary = rescore_table(str(shuffled), str(out_b), str(model), device="cpu", on_warning=warnings.append)
    assert len(warnings) == 1 and "not sorted" in warnings[0] and summary.first_unsorted_line
    a = {_strip_column(x): _log_value(x) for x in read_lines(out_a)}
    b = {_strip_column(x): _log_value(x) for x in read_lines(out_b)}
    assert a.keys() == b.keys()
    assert max(abs(a[k] - b[k]) for k in a) <= 1e-5  # absolute, log space (the spec's bound)


def _fields(line: bytes) -> list[bytes]:
    return line.split(b" ||| ")


def _strip_column(line: bytes) -> bytes:
    f = _fields(line)
    f[2] = f[2].rsplit(b" ", 1)[0]
    return b" ||| ".join(f)


def _log_value(line: bytes) -> float:
    return math.log(float(_fields(line)[2].rsplit(b" ", 1)[1]))


@pytest.mark.parametrize(("batch_size", "window"), [(1, 8192), (3, 300), (1000, 7)])
def test_scores_do_not_depend_on_batch_size_or_window(
    model: Path, real: Path, real_scored: tuple[Path, object], tmp_path: Path, batch_size: int, window: int
) -> None:
    base, other = real_scored[0], tmp_path / "other.gz"
    rescore_table(str(real), str(other), str(model), device="cpu", batch_size=batch_size, window=window)
    assert close(log_column(appended_columns(real, other)), log_column(appended_columns(real, base)))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device here")
def test_scores_do_not_depend_on_device(
    model: Path, real: Path, real_scored: tuple[Path, object], tmp_path: Path
) -> None:
    cpu, gpu = real_scored[0], tmp_path / "gpu.gz"
    rescore_table(str(real), str(gpu), str(model), device="cuda")
    assert close(log_column(appended_columns(real, gpu)), log_column(appended_columns(real, cpu)), rel=1e-4)


def test_batched_scorer_equals_reference_scorer_on_a_window(model: Path) -> None:
    ckpt = load_checkpoint(str(model))
    m = ckpt.build_model("cpu")
    rng = np.random.default_rng(0)
    sources = [list(rng.integers(1, 400, rng.integers(1, 9))) for _ in range(30)]
    source_index = rng.integers(0, 30, 150)
    targets = [list(rng.integers(1, 400, rng.integers(1, 12))) for _ in range(150)]
    ref = ReferenceScorer(m).score(sources, targets, source_index)
    for batch_size in (3, 64, 512):
        got = BatchedScorer(m, batch_size=batch_size).score(sources, targets, source_index)
        assert got.dtype == np.float64 and close(got, ref)


def test_length_batches_partition_and_bound_padded_size() -> None:
    rng = np.random.default_rng(1)
    for _ in range(100):
        lengths = rng.integers(1, 400, rng.integers(1, 300))
        batch_size = int(rng.integers(1, 64))
        batches = length_batches(lengths, batch_size)
        assert sorted(np.concatenate(batches).tolist()) == list(range(len(lengths)))
        for b in batches:
            assert len(b) <= batch_size
            assert len(b) == 1 or len(b) * (lengths[b].max() + 1) <= 32 * batch_size
    short = length_batches(np.full(1000, 7), 256)  # ordinary phrases: full batches
    assert [len(b) for b in short] == [256, 256, 256, 232]


def test_each_distinct_source_is_encoded_once(model: Path, tmp_path: Path) -> None:
    """Windows close only between source groups, so the scorer sees each source once."""
    ckpt = load_checkpoint(str(model))
    seen: list[int] = []

    class Counting(BatchedScorer):
        def score(self, sources, targets, source_index):  # type: ignore[no-untyped-def]
            seen.append(len(sources))
            return super().score(sources, targets, source_index)

    engine = TableRescorer(ckpt, RescoreOptions(window=100), scorer=Counting(ckpt.build_model()))
    summary = engine.rescore(str(SAMPLE), str(tmp_path / "out.gz"))
    with InputTable(str(SAMPLE)) as t:
        distinct = len({e.source for e in t})
    assert summary.lines == 29260 and len(seen) > 100
    assert sum(seen) == distinct == 22436


def test_window_never_exceeds_its_cap_on_a_long_source_run(model: Path, tmp_path: Path) -> None:
    table = tmp_path / "run.txt"
    table.write_bytes(b"".join(b"a ||| t%d ||| 0.5\n" % i for i in range(95)) + b"b ||| x ||| 0.5\n")
    ckpt = load_checkpoint(str(model))
    sizes: list[int] = []

    class Sizes(ReferenceScorer):
        def score(self, sources, targets, source_index):  # type: ignore[no-untyped-def]
            sizes.append(len(targets))
            return super().score(sources, targets, source_index)

    engine = TableRescorer(ckpt, RescoreOptions(window=4, window_cap=10), scorer=Sizes(ckpt.build_model()))
    engine.rescore(str(table), str(tmp_path / "out.txt"))
    assert sum(sizes) == 96 and max(sizes) == 10
    appended_columns(table, tmp_path / "out.txt")


def test_long_phrases_are_scored_whole(model: Path, tmp_path: Path) -> None:
    """No truncation: a 120-token target scores as the reference does (and below exp(-100),
    where the prob column holds exp(-100), never 0)."""
    long_target = " ".join(["la"] * 60 + ["maison"] * 60)
    table = tmp_path / "long.txt"
    table.write_text(f"a ||| le ||| 0.5 1\na ||| {long_target} ||| 0.5 1\nb c ||| {long_target} ||| 0.25 1\n")
    out = tmp_path / "long.out"
    ckpt = load_checkpoint(str(model))
    rescore_table(str(table), str(out), str(model), score_format="logprob")
    got = np.array([float(v[0]) for v in appended_columns(table, out)])
    ref = reference_log_probs(ckpt, table)
    assert close(got, np.array([ref[1], ref[2], ref[3]]))
    assert got[1] < -100
    rescore_table(str(table), str(out), str(model))
    probs = [float(v[0]) for v in appended_columns(table, out)]
    assert probs[1] == pytest.approx(math.exp(-100), rel=1e-8) and all(p > 0 for p in probs)


def test_formats_normalisation_and_unknown_word_feature(model: Path, tmp_path: Path) -> None:
    table = tmp_path / "t.txt"
    lines = [b"a ||| le ||| 0.5 0.5", b"a zzzunknown ||| le qqqinconnu wwwx ||| 0.5 0.5 ||| 0-0 |||"]
    table.write_bytes(b"\n".join(lines) + b"\n")
    ckpt = load_checkpoint(str(model))
    ref = reference_log_probs(ckpt, table)
    out = tmp_path / "o.txt"
    rescore_table(str(table), str(out), str(model), score_format="neglogprob")
    assert close([float(v[0]) for v in appended_columns(table, out)], [-ref[1], -ref[2]])
    rescore_table(str(table), str(out), str(model), score_format="logprob", normalize=True)
    assert close([float(v[0]) for v in appended_columns(table, out)], [ref[1] / 2, ref[2] / 4])
    rescore_table(str(table), str(out), str(model), unk_feature=True)
    values = appended_columns(table, out, columns=2)
    expected = []
    for raw in lines:
        src, tgt = raw.decode().split(" ||| ")[:2]
        expected.append(ckpt.src_vocab.count_unknown(split_words(src)) + ckpt.tgt_vocab.count_unknown(split_words(tgt)))
    assert expected == [0, 3]
    assert [round(math.log(float(v[1])), 6) for v in values] == expected
    assert close(log_column(values), [ref[1], ref[2]])


def test_crlf_and_missing_final_newline_are_kept(model: Path, tmp_path: Path) -> None:
    table = tmp_path / "crlf.txt"
    table.write_bytes(b"a ||| le ||| 0.5 ||| 0-0 ||| 1 1 1\r\nb ||| la ||| 0.25\r\nc ||| un ||| 1 |||")
    out = tmp_path / "crlf.out.gz"
    rescore_table(str(table), str(out), str(model))
    appended_columns(table, out)
    data = gzip.decompress(out.read_bytes())
    assert data.count(b"\r\n") == 2 and data.endswith(b" |||") and data.startswith(b"a ||| le ||| 0.5 ")


def test_bad_line_names_file_and_line_and_leaves_no_output(model: Path, tmp_path: Path) -> None:
    table = tmp_path / "bad.txt"
    table.write_bytes(b"a ||| le ||| 0.5\n" * 3 + b"b ||| la ||| nan\n")
    out = tmp_path / "out.gz"
    with pytest.raises(PhraseTableError, match=r"bad\.txt:4"):
        rescore_table(str(table), str(out), str(model))
    assert list(tmp_path.iterdir()) == [table]


def test_output_must_not_be_the_input(model: Path, tmp_path: Path) -> None:
    table = tmp_path / "t.txt"
    table.write_bytes(b"a ||| le ||| 0.5\n")
    with pytest.raises(OutputError, match="same file"):
        rescore_table(str(table), str(table), str(model))
    assert table.read_bytes() == b"a ||| le ||| 0.5\n"


def test_a_network_giving_nan_is_refused_with_the_line(model: Path, tmp_path: Path) -> None:
    ckpt = load_checkpoint(str(model))
    m = ckpt.build_model()
    with torch.no_grad():
        m.G_l.bias.fill_(float("nan"))
    broken = tmp_path / "broken.pt"
    save_checkpoint(str(broken), m, ckpt.src_vocab, ckpt.tgt_vocab)
    table = tmp_path / "t.txt"
    table.write_bytes(b"a ||| le ||| 0.5\n")
    with pytest.raises(CheckpointError, match=r"t\.txt:1"):
        rescore_table(str(table), str(tmp_path / "o.txt"), str(broken))
    assert not (tmp_path / "o.txt").exists()


def test_options_are_checked() -> None:
    for bad in (
        {"score_format": "log"},
        {"dtype": "float16"},
        {"dtype": "bfloat16", "scorer": "reference"},
        {"window": 10, "window_cap": 5},
        {"scorer": "fast"},
        {"batch_size": 0},
    ):
        with pytest.raises(ValueError):
            RescoreOptions(**bad)  # type: ignore[arg-type]
    assert RescoreOptions(unk_feature=True).columns == 2
    assert RescoreOptions(dtype="bfloat16").dtype == "bfloat16"  # with the prefix scorer
