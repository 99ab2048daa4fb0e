"""Scoring from Python (``phrase_rescorer.load``): the numbers ``phrase-rescorer score`` writes,
for a CSLM, a translation network each way and a phrase network, per word and term by term; the
refusals; a phrase network's table rescored as ``rescore_table`` does; and ``import
phrase_rescorer`` (and its ``load``) without torch."""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import phrase_rescorer
from phrase_rescorer.cli import cli
from phrase_rescorer.data.line_limit import DEFAULT_MAX_TOKENS, LineTooLong
from phrase_rescorer.errors import EXIT_INPUT, EXIT_USAGE, UsageError
from phrase_rescorer.model.files import CheckpointError
from phrase_rescorer.moses.nbest import format_value
from phrase_rescorer.rescoring.engine import rescore_table
from tests.helpers.cslm import tiny_lm
from tests.helpers.nmt import SIZES, TINY_MOSES, tiny_nmt
from tests.helpers.paths import PYTHON, REPO, cli_env

SRC, TGT = TINY_MOSES / "dev.en", TINY_MOSES / "dev.fr"
GOLDEN = REPO / "tests" / "data" / "golden"
KIND_OF = {
    "cslm": ("cslm", "forward"),
    "nmt": ("sentence", "forward"),
    "inverse": ("sentence", "inverse"),
    "phrase": ("phrase", "forward"),
    "transformer": ("phrase", "forward"),
    "subwords": ("phrase", "forward"),
}
KINDS = list(KIND_OF)


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A CSLM, an rnnsearch translation network each way (train-nmt), and golden phrase networks:
    an rnnsearch, a transformer, a cho2014 network of subword units."""
    d = tmp_path_factory.mktemp("api-models")
    inverse = subprocess.run(
        [PYTHON, "-m", "phrase_rescorer", "-q", "train-nmt", str(SRC), str(TGT), str(d / "inv.pt"),
         "--max-steps", "10", *SIZES, "--valid-fraction", "0", "--direction", "inverse"],
        capture_output=True, env=cli_env(), timeout=300,
    )  # fmt: skip
    assert inverse.returncode == 0, inverse.stderr
    return {
        "cslm": tiny_lm(d / "lm.pt"),
        "nmt": tiny_nmt(d / "nmt.pt", steps=10),
        "inverse": d / "inv.pt",
        "phrase": GOLDEN / "tiny-rnnsearch.pt",
        "transformer": GOLDEN / "tiny-transformer.pt",
        "subwords": GOLDEN / "tiny-cho2014-subwords.pt",
    }


def texts(kind: str) -> tuple[list[str], list[str] | None]:
    """What each kind scores: the French lines alone (a CSLM), else the sentence pairs."""
    lines = [path.read_text(encoding="utf-8").splitlines() for path in (SRC, TGT)]
    return (lines[1], None) if kind == "cslm" else (lines[0], lines[1])


def command(model: Path, kind: str, *extra: str) -> list[bytes]:
    """``phrase-rescorer score`` of the same texts: its output lines."""
    given = [str(TGT)] if kind == "cslm" else [str(SRC), str(TGT)]
    r = CliRunner().invoke(cli, ["-q", "score", *given, "-m", str(model), *extra], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    return r.stdout_bytes.splitlines()


@pytest.mark.parametrize("kind", KINDS)
def test_the_api_gives_the_numbers_of_the_score_command(models: dict[str, Path], kind: str) -> None:
    model = phrase_rescorer.load(str(models[kind]))
    assert model.is_language_model == (kind == "cslm")
    assert model.kind == KIND_OF[kind]
    sentences, targets = texts(kind)
    totals = model.score(sentences, targets)
    per_word = model.score(sentences, targets, normalize=True)
    terms = model.word_scores(sentences, targets)
    assert len(totals) == len(per_word) == len(terms) == 8 and all(isinstance(v, float) for v in totals)
    # the command's lines, digit for digit: the line values, normalised ones, and the word scores
    assert [format_value(v) for v in totals] == command(models[kind], kind)
    expected = [
        format_value(v) + b" ||| WordScores= " + b" ".join(format_value(t) for t in words)
        for v, words in zip(per_word, terms, strict=True)
    ]
    assert expected == command(models[kind], kind, "--normalize", "--word-scores")
    predicted = sentences if targets is None or kind == "inverse" else targets  # the side the network predicts
    if kind != "subwords":  # a subword network predicts units, more than the words
        assert [len(w) for w in terms] == [len(s.split()) + 1 for s in predicted]
    assert per_word == pytest.approx([t / len(w) for t, w in zip(totals, terms, strict=True)])
    assert [sum(w) for w in terms] == pytest.approx(totals, abs=1e-4)
    # one string in, one value out: the sentence's in a list (alone in its batch: float32 rounding apart)
    one = (sentences[2],) if targets is None else (sentences[2], targets[2])
    assert model.score(*one) == pytest.approx(totals[2], rel=1e-6)
    assert model.word_scores(*one) == pytest.approx(terms[2], rel=1e-5, abs=1e-6)
    assert model.score([], None if targets is None else []) == []


def test_the_inverse_network_scores_the_other_side(models: dict[str, Path]) -> None:
    sentences, targets = texts("nmt")
    forward = phrase_rescorer.load(str(models["nmt"])).word_scores(sentences, targets)
    inverse = phrase_rescorer.load(str(models["inverse"])).word_scores(sentences, targets)
    assert [len(w) for w in forward] == [len(t.split()) + 1 for t in targets or []]
    assert [len(w) for w in inverse] == [len(s.split()) + 1 for s in sentences]


@pytest.mark.parametrize(
    ("kind", "args", "message"),
    [
        ("cslm", (["le chat ."], ["the cat ."]), "is a language model (CSLM): it scores sentences alone"),
        ("nmt", (["the cat ."],), "is a translation network: it scores sentence pairs; give the targets"),
        ("phrase", (["the cat ."],), "is a translation network: it scores sentence pairs"),
        ("nmt", (["the cat .", "a dog ."], ["le chat ."]), "2 sentences and 1 targets"),
        ("nmt", ("the cat .", ["le chat ."]), "give sentences and targets alike"),
        ("cslm", ([b"le chat ."],), "a sentence is a string of space-separated tokens, not bytes"),
    ],
)
def test_refusals(models: dict[str, Path], kind: str, args: tuple, message: str) -> None:
    model = phrase_rescorer.load(str(models[kind]))
    for method in (model.score, model.word_scores):
        with pytest.raises(UsageError, match=message.replace("(", r"\(").replace(")", r"\)")) as refused:
            method(*args)
        assert isinstance(refused.value, ValueError) and refused.value.exit_code == EXIT_USAGE


def test_a_line_longer_than_max_tokens_is_refused_before_any_is_scored(
    models: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The limit of ``score --max-tokens``, with its default: a 20,000-token sentence would
    exhaust a machine's memory (``data.line_limit``)."""
    model = phrase_rescorer.load(str(GOLDEN / "tiny-rnnsearch.pt"))
    scored: list[int] = []
    real = model.feature.score

    def counted(lines):  # type: ignore[no-untyped-def]
        scored.append(len(lines))
        return real(lines)

    monkeypatch.setattr(model.feature, "score", counted)
    long = " ".join(["the"] * (DEFAULT_MAX_TOKENS + 1))
    for args, where in [
        ((["the cat .", long], ["le chat .", "le chat ."]), r"sentences\[1\]"),
        ((["the cat .", "a dog ."], ["le chat .", long]), r"targets\[1\]"),
        ((long, "le chat ."), r"sentences\[0\]"),
    ]:
        for method in (model.score, model.word_scores):
            with pytest.raises(LineTooLong, match=rf"^{where}: 1,001 tokens, more than max_tokens 1,000") as refused:
                method(*args)
            assert isinstance(refused.value, ValueError) and refused.value.exit_code == EXIT_INPUT
    with pytest.raises(LineTooLong, match=r"targets\[0\]: 4 tokens, more than max_tokens 3"):
        model.score(["the cat ."], ["le chat noir ."], max_tokens=3)
    assert scored == []
    assert len(model.score(["the cat .", long], ["le chat .", "le chat ."], max_tokens=None)) == 2
    assert len(model.word_scores(long, "le chat .", max_tokens=DEFAULT_MAX_TOKENS + 1)) == 4
    lm = phrase_rescorer.load(str(models["cslm"]))
    with pytest.raises(LineTooLong, match=r"sentences\[0\]: 1,001 tokens"):
        lm.score(long)


def test_unreadable_files_devices_and_thread_counts_are_refused(tmp_path: Path) -> None:
    (tmp_path / "x.pt").write_bytes(b"not a model")
    with pytest.raises(CheckpointError, match="x.pt"):
        phrase_rescorer.load(str(tmp_path / "x.pt"))
    with pytest.raises(ValueError, match="unknown device"):
        phrase_rescorer.load(str(GOLDEN / "tiny-rnnsearch.pt"), device="tpu:7")
    with pytest.raises(ValueError, match="thread count must be at least 1"):
        phrase_rescorer.load(str(GOLDEN / "tiny-rnnsearch.pt"), threads=0)


def test_a_network_giving_nan_names_the_sentence(models: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    model = phrase_rescorer.load(str(models["cslm"]))
    real = model.feature.score

    def broken(lines):  # type: ignore[no-untyped-def]
        totals, unknown = real(lines)
        totals[1] = np.nan
        return totals, unknown

    monkeypatch.setattr(model.feature, "score", broken)
    with pytest.raises(CheckpointError, match=r"log p = nan for sentences\[1\]"):
        model.score(["le chat .", "le chien .", "la maison ."])


def test_a_phrase_network_rescores_a_table_as_rescore_table(tmp_path: Path) -> None:
    table = GOLDEN / "lines.txt"
    model = phrase_rescorer.load(str(GOLDEN / "tiny-rnnsearch.pt"))
    model.rescore_table(str(table), str(tmp_path / "api.txt"))
    rescore_table(str(table), str(tmp_path / "function.txt"), str(GOLDEN / "tiny-rnnsearch.pt"), device="cpu")
    assert (tmp_path / "api.txt").read_bytes() == (tmp_path / "function.txt").read_bytes()


def test_a_cslm_rescores_no_table(models: dict[str, Path], tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match="CSLM"):
        phrase_rescorer.load(str(models["cslm"])).rescore_table(str(GOLDEN / "lines.txt"), str(tmp_path / "out.txt"))
    assert not (tmp_path / "out.txt").exists()


def test_import_phrase_rescorer_and_its_load_leave_torch_unloaded() -> None:
    """``import phrase_rescorer`` and its public names are light: torch loads when a model does."""
    code = (
        "import sys, phrase_rescorer\n"
        "phrase_rescorer.load, phrase_rescorer.Model\n"
        "print(sorted(m for m in ('torch', 'numpy') if m in sys.modules))\n"
        f"phrase_rescorer.load({str(GOLDEN / 'tiny-rnnsearch.pt')!r})\n"
        "print('torch' in sys.modules)\n"
    )
    done = subprocess.run([PYTHON, "-c", code], capture_output=True, text=True, env=cli_env(), timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["[]", "True"]
