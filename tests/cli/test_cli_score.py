"""``phrase-rescorer score`` as a user runs it: the numbers of the n-best feature and of
``sequence_log_probs`` for every kind of network, normalisation and word scores that add up,
the summary, pipes and compression, and bad input refused before the first line is scored."""

from __future__ import annotations

import gzip
import math
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from phrase_rescorer.cli import cli
from phrase_rescorer.data.batching import sequences_batch
from phrase_rescorer.lm.lm_file import load_lm
from phrase_rescorer.lm.scoring import plain_sentence_log_probs
from phrase_rescorer.model.checkpoint import load_checkpoint
from phrase_rescorer.model.cho2014 import sequence_log_probs
from tests.helpers.cslm import tiny_lm
from tests.helpers.nmt import SIZES, TINY_MOSES, tiny_nmt
from tests.helpers.paths import PYTHON, cli_env
from tests.helpers.train_options import TINY_NETWORK

SRC, TGT = TINY_MOSES / "dev.en", TINY_MOSES / "dev.fr"
KINDS = ["cslm", "nmt", "inverse", "phrase"]


def run(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    """The program, as a user runs it (exit codes, error lines)."""
    return subprocess.run(
        [PYTHON, "-m", "phrase_rescorer", *args], input=stdin, capture_output=True, env=cli_env(), timeout=300
    )


def run_here(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    """A run expected to succeed, in this process (the same command, without a Python start-up)."""
    r = CliRunner().invoke(cli, list(args), input=stdin, catch_exceptions=False)
    assert r.exit_code == 0, r.output
    return subprocess.CompletedProcess(args, r.exit_code, r.stdout_bytes, r.stderr_bytes)


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One network of each kind: a CSLM, an rnnsearch network each way, a cho2014 phrase network."""
    d = tmp_path_factory.mktemp("score-models")
    inverse = run(
        "-q", "train-nmt", str(SRC), str(TGT), str(d / "inv.pt"), "--max-steps", "10", *SIZES,
        "--valid-fraction", "0", "--direction", "inverse",
    )  # fmt: skip
    assert inverse.returncode == 0, inverse.stderr
    phrase = run(
        "-q", "train", str(TINY_MOSES / "phrase-table.gz"), str(d / "phrase.pt"), *TINY_NETWORK,
        "--max-steps", "10", "--valid-fraction", "0",
    )  # fmt: skip
    assert phrase.returncode == 0, phrase.stderr
    return {
        "cslm": tiny_lm(d / "lm.pt"),
        "nmt": tiny_nmt(d / "nmt.pt", steps=10),
        "inverse": d / "inv.pt",
        "phrase": d / "phrase.pt",
    }


def lines_of(path: Path) -> list[list[str]]:
    return [line.split() for line in path.read_text(encoding="utf-8").splitlines()]


def score(models: dict[str, Path], kind: str, *extra: str) -> subprocess.CompletedProcess:
    texts = [str(TGT)] if kind == "cslm" else [str(SRC), str(TGT)]
    return run_here("score", *texts, "-m", str(models[kind]), *extra)


def values(r: subprocess.CompletedProcess) -> list[float]:
    return [float(line.split(b" ||| ")[0]) for line in r.stdout.splitlines()]


def nbest_feature(models: dict[str, Path], kind: str, tmp_path: Path) -> list[float]:
    """The `nbest` feature of a list whose sentence i has one hypothesis, line i of TGT."""
    nbest = tmp_path / "in.nbest"
    nbest.write_text(
        "".join(f"{i} ||| {' '.join(t)} ||| LM0= -1 ||| -1\n" for i, t in enumerate(lines_of(TGT))), encoding="utf-8"
    )
    source = [] if kind == "cslm" else ["--source", str(SRC)]
    run_here("nbest", str(nbest), str(tmp_path / "out.nbest"), "-m", str(models[kind]), "--name", "F0", *source)
    fields = [line.split(" ||| ")[2].split() for line in (tmp_path / "out.nbest").read_text().splitlines()]
    return [float(f[f.index("F0=") + 1]) for f in fields]


@torch.no_grad()
def direct(models: dict[str, Path], kind: str) -> list[float]:
    """The library's definitions, one sentence at a time: ``plain_sentence_log_probs`` for the
    CSLM, ``sequence_log_probs`` for the translation networks (an inverse one reads TGT)."""
    if kind == "cslm":
        lm = load_lm(str(models[kind]))
        model = lm.build(torch.device("cpu"))
        return [plain_sentence_log_probs(model, lm.vocab, t) for t in lines_of(TGT)]
    ckpt = load_checkpoint(str(models[kind]))
    model = ckpt.build_model("cpu")
    pairs = list(zip(lines_of(SRC), lines_of(TGT), strict=True))
    out = []
    for src, tgt in pairs:
        reads, predicts = (tgt, src) if ckpt.inverse else (src, tgt)
        s = ckpt.src_vocab.encode(ckpt.split(" ".join(reads), 0))
        t = ckpt.tgt_vocab.encode(ckpt.split(" ".join(predicts), 1))
        b = sequences_batch([s], [t])
        out.append(float(sequence_log_probs(model, b.src, b.src_len, b.tgt, b.tgt_len)[0]))
    return out


@pytest.mark.parametrize("kind", KINDS)
def test_score_is_the_nbest_feature_and_sequence_log_probs(models: dict[str, Path], kind: str, tmp_path: Path) -> None:
    r = score(models, kind)
    scored = values(r)
    assert len(scored) == 8 and all(v < 0 for v in scored)
    assert scored == pytest.approx(nbest_feature(models, kind, tmp_path), abs=2e-6)
    assert scored == pytest.approx(direct(models, kind), abs=1e-4, rel=1e-5)
    if kind == "inverse":  # not the forward network's numbers under another name
        assert scored != pytest.approx(values(score(models, "nmt")), abs=1e-3)


@pytest.mark.parametrize("kind", ["cslm", "nmt"])
def test_nbest_and_score_split_words_alike_at_every_kind_of_space(
    models: dict[str, Path], kind: str, tmp_path: Path
) -> None:
    """A hypothesis with a no-break space, a thin space, a form feed ...: one word, as Moses reads
    it, in ``nbest`` as in ``score``; a space or a tab: two."""
    spaces = [chr(c) for c in range(sys.maxunicode + 1) if chr(c).isspace() and chr(c) != "\n"]
    hyps = [f"la{space}maison est petite" for space in spaces]
    text, src, nbest = tmp_path / "hyps.fr", tmp_path / "src.en", tmp_path / "in.nbest"
    text.write_bytes("".join(f"{h}\n" for h in hyps).encode("utf-8"))
    src.write_bytes(SRC.read_bytes().splitlines(keepends=True)[0] * len(hyps))
    nbest.write_bytes("".join(f"{i} ||| {h} ||| LM0= -1 ||| -1\n" for i, h in enumerate(hyps)).encode("utf-8"))
    source = [] if kind == "cslm" else ["--source", str(src)]
    run_here("nbest", str(nbest), str(tmp_path / "out.nbest"), "-m", str(models[kind]), "--name", "F0", *source)
    written = (tmp_path / "out.nbest").read_bytes().decode().split("\n")[:-1]  # \r, \x85 ... end no line
    fields = [line.split(" ||| ")[2].split(" ") for line in written]
    from_nbest = [float(f[f.index("F0=") + 1]) for f in fields]
    scored = values(run_here("score", *([] if kind == "cslm" else [str(src)]), str(text), "-m", str(models[kind])))
    assert scored == pytest.approx(from_nbest, abs=2e-6)
    by_space = dict(zip(spaces, scored, strict=True))
    assert by_space[" "] == by_space["\t"]  # two words
    assert all(v != by_space[" "] for s, v in by_space.items() if s not in " \t")  # one


@pytest.mark.parametrize("kind", KINDS)
def test_normalised_and_word_scores_add_up_to_the_total(models: dict[str, Path], kind: str) -> None:
    totals = values(score(models, kind))
    r = score(models, kind, "--normalize", "--word-scores")
    predicted = lines_of(SRC if kind == "inverse" else TGT)  # the side the network predicts
    words = [len(p) + 1 for p in predicted]  # its tokens and </s>
    for total, n, line in zip(totals, words, r.stdout.splitlines(), strict=True):
        head, tail = line.split(b" ||| WordScores= ")
        terms = [float(x) for x in tail.split()]  # never normalised
        assert len(terms) == n
        assert sum(terms) == pytest.approx(total, abs=1e-4)
        assert float(head) == pytest.approx(total / n, abs=2e-6)
    summary = r.stderr.decode().splitlines()[-1]
    assert summary.startswith(f"8 lines, {sum(words)} words (tokens + </s>), total ln p ")
    expected_ppl = math.exp(-sum(totals) / sum(words))
    assert float(summary.split("perplexity ")[1].split(";")[0]) == pytest.approx(expected_ppl, rel=1e-5)
    if kind == "nmt":
        figure = float(score(models, kind, "--summary", "perplexity").stdout)
        assert figure == pytest.approx(expected_ppl, rel=1e-5)


def test_pipes_and_compression_give_the_same_lines(models: dict[str, Path], tmp_path: Path) -> None:
    plain = score(models, "nmt").stdout
    (tmp_path / "tgt.gz").write_bytes(gzip.compress(TGT.read_bytes()))
    r = run("score", "-", str(tmp_path / "tgt.gz"), "-m", str(models["nmt"]), "-o", str(tmp_path / "s.xz"),
            stdin=SRC.read_bytes())  # fmt: skip
    assert r.returncode == 0, r.stderr  # the real program's stdin and output file
    import lzma

    assert lzma.decompress((tmp_path / "s.xz").read_bytes()) == plain
    assert run("score", "-", "-m", str(models["cslm"]), stdin=TGT.read_bytes()).stdout == score(models, "cslm").stdout


def test_pipes_that_cannot_be_read_twice_are_scored_whole(models: dict[str, Path]) -> None:
    """`score <(zcat a.gz) <(zcat b.gz)`: the checking pass must not leave the scoring pass an
    empty pipe (every line scored, none lost)."""
    command = f"exec {PYTHON} -m phrase_rescorer -q score <(cat {SRC}) <(gzip -c {TGT}) -m {models['nmt']}"
    r = subprocess.run(["bash", "-c", command], capture_output=True, env=cli_env(), timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout == score(models, "nmt").stdout and len(r.stdout.splitlines()) == 8


def test_a_file_changed_between_the_check_and_the_scoring_stops_the_run(tmp_path: Path) -> None:
    from phrase_rescorer.moses.phrase_table import PhraseTableError
    from phrase_rescorer.scoring.texts import Text

    text = tmp_path / "t.fr"
    text.write_bytes(TGT.read_bytes())
    checked = Text(str(text))
    assert checked.lines == 8 and list(checked) == lines_of(TGT)
    text.write_bytes(TGT.read_bytes() + b"une ligne de plus\n")
    with pytest.raises(PhraseTableError, match="changed while being scored"):
        list(checked)


def test_different_line_counts_are_refused_before_any_line_is_scored(models: dict[str, Path], tmp_path: Path) -> None:
    short = tmp_path / "short.fr"
    short.write_bytes(b"".join(TGT.read_bytes().splitlines(keepends=True)[:6]))
    r = run("score", str(SRC), str(short), "-m", str(models["nmt"]))
    assert r.returncode == 3 and r.stdout == b""
    assert f"error: {short}:7: ends here, but {SRC} goes on".encode() in r.stderr
    r = run("score", str(short), str(TGT), "-m", str(models["nmt"]), "-o", str(tmp_path / "out"))
    assert r.returncode == 3 and f"{short}:7: ends here".encode() in r.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("kind", ["nmt", "cslm"])
def test_bad_utf8_on_the_last_line_is_refused_before_any_line_is_scored(
    models: dict[str, Path], kind: str, tmp_path: Path
) -> None:
    bad = tmp_path / "bad.fr"
    bad.write_bytes(TGT.read_bytes().rstrip(b"\n") + b" caf\xe9\n")
    texts = [str(bad)] if kind == "cslm" else [str(SRC), str(bad)]
    for given in (texts, ["-"] if kind == "cslm" else [str(SRC), "-"]):
        r = run("score", *given, "-m", str(models[kind]), stdin=bad.read_bytes())
        assert r.returncode == 3 and r.stdout == b"", r.stderr  # not one score written
        name = str(bad) if given == texts else "-"
        assert f"{name}:8: invalid UTF-8".encode() in r.stderr and b"Traceback" not in r.stderr


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["TGT", "-m", "cslm"], 2, b"is a language model (CSLM): it scores one text; give SRC alone"),
        (["-m", "nmt"], 2, b"is a translation network: it scores sentence pairs; give SRC and TGT"),
        (["TGT", "-m", "nmt", "-o", "SRC"], 6, b"output is the same file as the input"),
        (["TGT", "-m", "nmt", "-o", "MODEL"], 6, b"output is the same file as the model file"),
        (["TGT", "-m", "nmt", "--summary", "perplexity", "--normalize"], 2, b"--normalize has no line to change"),
        (["TGT", "-m", "nmt", "--summary", "--word-scores"], 2, b"--word-scores has no line to change"),
        (["-m", "cslm", "--summary", "perplexity", "EMPTY"], 3, b"empty text: no lines to score"),
    ],
)
def test_refusals(models: dict[str, Path], args: list[str], code: int, message: bytes, tmp_path: Path) -> None:
    src, tgt = tmp_path / "s.en", tmp_path / "t.fr"
    src.write_bytes(SRC.read_bytes())
    tgt.write_bytes(TGT.read_bytes())
    before = {p: p.read_bytes() for p in (src, tgt, models["nmt"])}
    given = {"TGT": str(tgt), "SRC": str(src), "MODEL": str(models["nmt"]), "cslm": str(models["cslm"])}
    given["nmt"] = str(models["nmt"])
    if "EMPTY" in args:  # the text is SRC: empty
        src.write_bytes(b"")
        before[src] = b""
        args = [a for a in args if a != "EMPTY"]
    r = run("score", str(src), *[given.get(a, a) for a in args])
    assert r.returncode == code, r.stderr
    assert message in r.stderr and b"Traceback" not in r.stderr and r.stdout == b""
    assert all(p.read_bytes() == b for p, b in before.items())
