"""Properties of rescoring, checked on generated tables with hypothesis (derandomized: the same
examples on every run; ``make fuzz`` explores at random).

1. Byte for byte: for any well-formed table (random tokens with Moses escapes and non-ASCII
   letters, random extra fields, spacing and line ends, plain or gzip), the rescored table is
   the input with one column inserted at the end of every scores field. The expected output and
   the expected score are built from the generated parts (tokens, fields), not from the parser.
2. Invariance: a line's score does not depend on the batch size, the window size, the scorer,
   the other lines around it or their order.

Tolerance: |a - b| <= 1e-5 * max(1, |b|) in log space (see test_scoring.py).
"""

from __future__ import annotations

import functools
import gzip
import math
import tempfile
from dataclasses import dataclass
from pathlib import Path

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from phrase_rescorer.data.batching import sequences_batch
from phrase_rescorer.model.checkpoint import Checkpoint, load_checkpoint
from phrase_rescorer.model.cho2014 import sequence_log_probs
from phrase_rescorer.rescoring.engine import TableRescorer
from phrase_rescorer.rescoring.options import RescoreOptions
from phrase_rescorer.rescoring.scorers import SCORERS
from tests.helpers.paths import SAMPLE
from tests.helpers.rescore_data import read_lines, tiny_checkpoint

REL = 1e-5
PROPERTY = settings(max_examples=25, deadline=None, derandomize=True)


@functools.lru_cache(maxsize=1)
def checkpoint() -> Checkpoint:
    directory = Path(tempfile.mkdtemp(prefix="properties-"))
    return load_checkpoint(str(tiny_checkpoint(directory / "tiny.pt")))


def close(a: float, b: float) -> bool:
    return abs(a - b) <= REL * max(1.0, abs(b))


# --- 1. byte for byte ------------------------------------------------------------------------

# Frequent shortlist words (so that scores differ from line to line), Moses escapes, non-ASCII
# letters, a non-breaking space inside a token (not a separator), lone bars.
KNOWN = ["a", "the", "man", "la", "le", "homme", "de", ",", "."]
TOKEN = st.one_of(
    st.sampled_from(KNOWN),
    st.sampled_from(["&#124;", "&amp;", "&lt;", "&gt;", "&apos;s", "&quot;", "&#91;", "&#93;", "|", "||"]),
    st.text(alphabet="abzéàçœßΩж中文🙂\u0301'-.,09", min_size=1, max_size=6),
    st.sampled_from(["a\u00a0b", "\u00a0", "l'été", "naïve"]),
)
GAP = st.sampled_from([" ", " ", " ", "  "])  # Moses writes one space; two are read as one
NUMBER = st.one_of(
    st.floats(min_value=0.0, allow_nan=False, allow_infinity=False).map(repr),  # Moses' scores are probabilities
    st.integers(0, 10**20).map(str),
    st.sampled_from(["1e-05", "2.5E+3", ".5", "7.", "-0", "+1", "8.46215e-05", "0.0100219"]),
)
EXTRA = st.lists(st.sampled_from(["0-0", "1-2", "12", "3", "dlt=1", "{{Count", "7}}", "é"]), max_size=4).map(" ".join)


@dataclass
class Line:
    source: list[str]  # tokens
    target: list[str]
    head: bytes  # source ||| target ||| scores: where the column goes
    tail: bytes  # everything after the scores field, terminator included


@st.composite
def phrase(draw: st.DrawFn) -> tuple[list[str], str]:
    tokens = draw(st.lists(TOKEN, min_size=1, max_size=6))
    text = tokens[0]
    for token in tokens[1:]:
        text += draw(GAP) + token
    if draw(st.integers(0, 5)) == 0:
        text = " " + text
    if draw(st.integers(0, 5)) == 0:
        text += " "
    return tokens, text


@st.composite
def line(draw: st.DrawFn, terminator: str, scores: int) -> Line:
    (source, source_text), (target, target_text) = draw(phrase()), draw(phrase())
    numbers = draw(st.lists(NUMBER, min_size=scores, max_size=scores))  # as many on every line
    scores = numbers[0]
    for number in numbers[1:]:
        scores += draw(st.sampled_from([" ", " ", "  ", "\t", " \t"])) + number
    extras = draw(st.lists(EXTRA, max_size=4))
    tail = "".join(" ||| " + extra for extra in extras)
    if len(extras) < 4 and draw(st.booleans()):  # at most 7 fields, the empty last one included
        tail += " |||"  # as train-model.perl ends its lines
    head = f"{source_text} ||| {target_text} ||| {scores}"
    return Line(source, target, head.encode(), (tail + terminator).encode())


@st.composite
def table(draw: st.DrawFn) -> list[Line]:
    n = draw(st.integers(1, 12))
    terminators = draw(st.lists(st.sampled_from(["\n", "\r\n"]), min_size=n, max_size=n))
    if draw(st.booleans()):
        terminators[-1] = ""  # no newline at the end of the file
    scores = draw(st.integers(1, 6))
    return [draw(line(t, scores)) for t in terminators]


def reference(ckpt: Checkpoint, source: list[str], target: list[str]) -> float:
    """log p(f|e) of one pair, from its tokens, by the plain definition."""
    model = ckpt.build_model("cpu")
    batch = sequences_batch([ckpt.src_vocab.encode(source)], [ckpt.tgt_vocab.encode(target)])
    with torch.inference_mode():
        return float(sequence_log_probs(model, batch.src, batch.src_len, batch.tgt, batch.tgt_len)[0])


@given(table(), st.booleans(), st.booleans())
@PROPERTY
def test_rescored_line_is_the_input_line_plus_one_column(lines: list[Line], gz_in: bool, gz_out: bool) -> None:
    ckpt = checkpoint()
    data = b"".join(x.head + x.tail for x in lines)
    with tempfile.TemporaryDirectory() as tmp:
        in_path, out_path = Path(tmp) / "in", Path(tmp) / ("out.gz" if gz_out else "out")
        in_path.write_bytes(gzip.compress(data) if gz_in else data)
        summary = TableRescorer(ckpt, RescoreOptions(device="cpu", score_format="logprob")).rescore(
            str(in_path), str(out_path)
        )
        out = out_path.read_bytes()
    assert summary.lines == len(lines)
    if gz_out:
        out = gzip.decompress(out)
    for x in lines:  # walk the output: every line is head + " " + column + tail, in order
        assert out.startswith(x.head + b" ")
        column, separator, rest = out[len(x.head) + 1 :].partition(x.tail if x.tail else b"\n")
        if not x.tail:  # the last line without terminator and without fields after the scores
            column, rest = out[len(x.head) + 1 :], b""
        else:
            assert separator == x.tail
        assert b" " not in column and close(float(column), reference(ckpt, x.source, x.target))
        out = rest
    assert out == b""


# --- 2. invariance ---------------------------------------------------------------------------

POOL = read_lines(SAMPLE)[:500]  # real lines: groups of one source, and single lines


@functools.lru_cache(maxsize=1)
def pool_scores() -> dict[bytes, float]:
    """Every pool line's log p with the default options."""
    with tempfile.TemporaryDirectory() as tmp:
        return score_lines(POOL, RescoreOptions(device="cpu", score_format="logprob"), Path(tmp))


def score_lines(lines: list[bytes], options: RescoreOptions, tmp: Path) -> dict[bytes, float]:
    (tmp / "in.txt").write_bytes(b"".join(lines))
    TableRescorer(checkpoint(), options).rescore(str(tmp / "in.txt"), str(tmp / "out.txt"))
    out = (tmp / "out.txt").read_bytes().splitlines(keepends=True)
    assert len(out) == len(lines)
    scores: dict[bytes, float] = {}
    for line_in, line_out in zip(lines, out, strict=True):
        head = line_in.split(b" ||| ")[:3]
        value = float(line_out.split(b" ||| ")[2][len(head[2]) + 1 :])
        assert scores.setdefault(line_in, value) == value  # duplicates: the same score
    return scores


@given(
    st.lists(st.integers(0, len(POOL) - 1), min_size=1, max_size=120),
    st.integers(1, 300),
    st.integers(1, 150),
    st.sampled_from(sorted(SCORERS)),  # every registered scorer
)
@PROPERTY
def test_scores_do_not_depend_on_batch_window_order_or_neighbours(
    picks: list[int], batch_size: int, window: int, scorer: str
) -> None:
    """Any selection of pool lines (repeats allowed), in any order, any batch and window size."""
    options = RescoreOptions(
        device="cpu",
        score_format="logprob",
        batch_size=batch_size,
        window=window,
        window_cap=max(window, 2 * window),
        scorer=scorer,
    )
    expected = pool_scores()
    with tempfile.TemporaryDirectory() as tmp:
        got = score_lines([POOL[i] for i in picks], options, Path(tmp))
    for line_in, value in got.items():
        assert close(value, expected[line_in]), (line_in, value, expected[line_in])
    assert all(math.isfinite(v) for v in got.values())
