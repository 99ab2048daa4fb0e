"""Tiny random-weight networks and real-table slices for the rescoring tests.

The networks are untrained (random N(0, 0.01^2) weights, as the paper initialises them), so their
scores are not meaningful translations, but every code path that turns a line into a column is
exercised exactly as with a trained network. Vocabularies come from the bundled real sample.
"""

from __future__ import annotations

import functools
import gzip
import zlib
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch

from phrase_rescorer.data.batching import sequences_batch
from phrase_rescorer.data.pairs import load_pairs
from phrase_rescorer.data.subwords import learn_pair_subwords
from phrase_rescorer.data.vocab import Vocabulary
from phrase_rescorer.model.checkpoint import Checkpoint, save_checkpoint
from phrase_rescorer.model.cho2014 import ModelConfig, RNNEncoderDecoder, sequence_log_probs
from phrase_rescorer.moses.table_reader import InputTable
from phrase_rescorer.moses.words import split_words
from tests.helpers.paths import REAL_TABLE, SAMPLE


@pytest.fixture(scope="module")
def one_thread() -> Iterator[None]:
    """Tiny networks run thousands of small ops; with two threads every op waits for the second
    one to be scheduled, which on a busy 2-core machine costs milliseconds per op (measured:
    120 s instead of 8 s for test_scoring.py). One thread for a module that uses it
    (``pytestmark = pytest.mark.usefixtures("one_thread")``; tests/conftest.py offers it to every
    module), restored after, whatever a test of another module set."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@functools.lru_cache(maxsize=4)
def sample_vocabularies(size: int = 400) -> tuple[Vocabulary, Vocabulary]:
    return load_pairs(str(SAMPLE)).build_vocabularies(size, size)


def tiny_checkpoint(
    path: Path, hidden: int = 32, vocab: int = 400, seed: int = 0, scale: float = 30.0, subwords: int | None = None
) -> Path:
    """A random-weight network saved at ``path``; with ``subwords`` N, a subword model (as
    ``train --subwords N`` makes: at most N units per side learned on the bundled sample, whose
    vocabularies replace the shortlists of ``vocab`` words).

    With the paper's N(0, 0.01^2) init every token gets log p ~ -log V, so scores would depend
    on the target length only and a test could not tell one line's score from another's.
    ``scale`` multiplies every non-recurrent weight (embeddings, input, context and output
    matrices): scores then differ by several percent from source to source, while the
    recurrent matrices stay orthogonal, so the network is not chaotic and scores stay stable
    to ~2e-7 across batch shapes (scaling U as well makes them diverge by percents)."""
    units = learn_pair_subwords(load_pairs(str(SAMPLE)), subwords) if subwords else None
    sv, tv = (units[0].vocabulary(), units[1].vocabulary()) if units else sample_vocabularies(vocab)
    config = ModelConfig(
        src_vocab_size=len(sv), tgt_vocab_size=len(tv), embed_dim=16, hidden_dim=hidden, maxout_dim=16, output_rank=8
    )
    torch.manual_seed(seed)
    model = RNNEncoderDecoder(config)
    if scale != 1.0:
        with torch.no_grad():
            for name, p in model.named_parameters():
                if not name.endswith("bias") and ".U" not in name:
                    p.mul_(scale)
    save_checkpoint(str(path), model, sv, tv, info={"purpose": "tests"}, subwords=units)
    return path


def real_slice(path: Path, modulus: int = 600) -> Path:
    """Whole source groups of the real table (sorted, as Moses wrote it): every source whose
    CRC32 is 0 mod ``modulus``, plus the two largest groups (``a``, ``the``)."""
    with gzip.open(REAL_TABLE, "rb") as f, gzip.open(path, "wb") as out:
        for line in f:
            source = line.split(b" ||| ", 1)[0]
            if zlib.crc32(source) % modulus == 0 or source in (b"a", b"the"):
                out.write(line)
    return path


def read_lines(path: Path) -> list[bytes]:
    """Lines with their terminators (plain or gzip)."""
    data = path.read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    return data.splitlines(keepends=True)


def appended_columns(in_path: Path, out_path: Path, columns: int = 1) -> list[list[str]]:
    """Check that OUT is IN with ``columns`` numbers inserted at the end of every scores field,
    every other byte identical; return the inserted numbers of each line."""
    with InputTable(str(in_path)) as table:
        entries = list(table)
    out_lines = read_lines(out_path)
    assert len(out_lines) == len(entries)
    found = []
    for entry, out in zip(entries, out_lines, strict=True):
        head, tail = entry.raw[: entry.scores_end], entry.raw[entry.scores_end :] + entry.terminator
        assert out.startswith(head + b" ") and out.endswith(tail), (entry.line_no, out)
        middle = out[len(head) + 1 : len(out) - len(tail)].decode()
        values = middle.split(" ")
        assert len(values) == columns and all(values), (entry.line_no, middle)
        found.append(values)
    return found


def reference_log_probs(checkpoint: Checkpoint, table: Path, every: int = 1, batch: int = 1) -> dict[int, float]:
    """log p(f|e) of every ``every``-th line by the plain definition: ``sequence_log_probs`` on
    batches of ``batch`` consecutive lines (1: pair by pair), built with ``sequences_batch``,
    in file order. Returns {line_no: log p}."""
    model = checkpoint.build_model("cpu")
    out: dict[int, float] = {}
    pending: list[tuple[int, list[int], list[int]]] = []

    def flush() -> None:
        b = sequences_batch([p[1] for p in pending], [p[2] for p in pending])
        logp = sequence_log_probs(model, b.src, b.src_len, b.tgt, b.tgt_len)
        out.update((p[0], float(v)) for p, v in zip(pending, logp.tolist(), strict=True))
        pending.clear()

    with torch.inference_mode(), InputTable(str(table)) as t:
        for entry in t:
            if (entry.line_no - 1) % every:
                continue
            src = checkpoint.src_vocab.encode(split_words(entry.source))
            tgt = checkpoint.tgt_vocab.encode(split_words(entry.target))
            pending.append((entry.line_no, src, tgt))
            if len(pending) == batch:
                flush()
        if pending:
            flush()
    return out


def log_column(values: list[list[str]], k: int = 0) -> np.ndarray:
    return np.log(np.array([float(v[k]) for v in values], dtype=np.float64))


def tiny_arch_checkpoint(path: Path, arch: str = "gnmt", seed: int = 0, std: float = 0.3, **options: object) -> Path:
    """A random-weight network of architecture ``arch`` (with ``options`` overriding its own),
    N(0, std^2) weights so that scores differ from line to line, saved at ``path``."""
    from phrase_rescorer.model.architectures import arch_config, build_model

    sv, tv = sample_vocabularies(400)
    config = ModelConfig(
        src_vocab_size=len(sv), tgt_vocab_size=len(tv), embed_dim=16, hidden_dim=16, maxout_dim=8, output_rank=8
    )
    torch.manual_seed(seed)
    model = build_model(config, arch_config(arch, **options))
    model.reset_parameters(std)  # type: ignore[operator]
    save_checkpoint(str(path), model, sv, tv, info={"purpose": "tests"})
    return path


#: Small networks covering every building block: both cells, each attention kind (none,
#: additive, dot, general), attention from the top and the bottom layer, uni- and bidirectional
#: bottom layers, residual connections; and a 2-layer transformer. Options for ``tiny_arch_checkpoint``.
ARCH_VARIANTS: dict[str, dict[str, object]] = {
    "rnnsearch": dict(arch="rnnsearch"),
    "gnmt": dict(arch="gnmt", layers=3),
    "gnmt-general-gru": dict(arch="gnmt", layers=3, attention="general", cell_type="gru"),
    "rnnsearch-dot-uni": dict(arch="rnnsearch", attention="dot", bidirectional=False, layers=2, residual_from=2),
    "lstm-no-attention": dict(arch="rnnsearch", attention="none", cell_type="lstm"),
    "transformer": dict(arch="transformer", layers=2),
}


def sample_window(lines: int = 150) -> tuple[list[list[int]], list[list[int]], np.ndarray]:
    """The first ``lines`` lines of the bundled sample as a scorer window (distinct sources,
    targets, source index), as ids of the 400-word shortlists of ``tiny_arch_checkpoint``."""
    sv, tv = sample_vocabularies(400)
    pairs = load_pairs(str(SAMPLE))
    position: dict[tuple[str, ...], int] = {}
    sources, targets, index = [], [], []
    for i in range(lines):
        s, t = pairs.pair(i)
        j = position.setdefault(tuple(s), len(position))
        if j == len(sources):
            sources.append(sv.encode(s))
        targets.append(tv.encode(t))
        index.append(j)
    return sources, targets, np.array(index, dtype=np.int64)
