"""``phrase-rescorer nbest`` and ``train-lm`` as a user runs them: every byte kept, compressed
files and pipes, and one clear line with the documented exit code for what is refused."""

from __future__ import annotations

import gzip
import os
import shlex
import subprocess
from pathlib import Path

import pytest

from tests.helpers.cslm import TINY_MOSES, tiny_lm
from tests.helpers.paths import PYTHON, cli_env

NBEST = (
    b"0 ||| un homme .  ||| LM0= -10.5 WordPenalty0= -3 TranslationModel0= -1 -2.5 ||| -3.71621 ||| 0-0\n"
    b"0 ||| un chien inconnu-xyz .  ||| LM0= -12 WordPenalty0= -3 TranslationModel0= -1.5 -2 ||| -3.9\r\n"
    b"1 |||  ||| LM0= -2.3 WordPenalty0= 0 TranslationModel0= 0 0 ||| -0.5\n"
    b"2 ||| une femme  ||| LM0= -8 sparse_x= 1 WordPenalty0= -2 TranslationModel0= -1 -1 ||| -2"
)


def run(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [PYTHON, "-m", "phrase_rescorer", *args], input=stdin, capture_output=True, env=cli_env(), timeout=300
    )


@pytest.fixture(scope="module")
def lm(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_lm(tmp_path_factory.mktemp("cslm") / "lm.pt")


def _without_feature(data: bytes, name: bytes = b"CSLM0") -> bytes:
    out = []
    for line in data.splitlines(keepends=True):
        head, _, rest = line.partition(b" " + name + b"= ")
        out.append(head + b" |||" + rest.split(b" |||", 1)[1])
    return b"".join(out)


def test_every_byte_kept_in_order_gz_out(lm: Path, tmp_path: Path) -> None:
    (tmp_path / "in.nbest").write_bytes(NBEST)
    r = run("nbest", str(tmp_path / "in.nbest"), str(tmp_path / "out.gz"), "-m", str(lm), "--name", "NLM1")
    assert r.returncode == 0, r.stderr
    out = gzip.decompress((tmp_path / "out.gz").read_bytes())
    assert _without_feature(out, b"NLM1") == NBEST
    assert out.count(b" NLM1= -") == 4
    assert b"1 of 9 words outside the shortlist" in r.stderr  # inconnu-xyz


def test_stdin_to_stdout(lm: Path) -> None:
    r = run("nbest", "-", "-", "-m", str(lm), stdin=gzip.compress(NBEST))
    assert r.returncode == 0, r.stderr
    assert _without_feature(r.stdout) == NBEST


def test_a_truncated_line_names_file_and_line(lm: Path, tmp_path: Path) -> None:
    (tmp_path / "bad.nbest").write_bytes(NBEST + b"\n3 ||| cut here\n")
    r = run("nbest", str(tmp_path / "bad.nbest"), str(tmp_path / "out"), "-m", str(lm))
    assert r.returncode == 3
    assert f"{tmp_path / 'bad.nbest'}:5: not an n-best line".encode() in r.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["--name", "CSLM_0"], 2, b"--name: feature name 'CSLM_0'"),
        (["-m", "MODEL_IS_PHRASE_NET"], 2, b"is a translation network: it scores a hypothesis given its source"),
        (["--name", "A", "-m", "LM", "--name", "A"], 2, b"--name A given twice: each -m's feature needs a name"),
        (["--name", "WordPenalty0", "--word-penalty"], 2, b"--name WordPenalty0 with --word-penalty"),
        # a decoder's list has its word penalty already
        (["--word-penalty"], 3, b"in.nbest:1: already has the feature WordPenalty0: each feature is appended once"),
    ],
)
def test_refusals(lm: Path, tmp_path: Path, model: Path, args: list[str], code: int, message: bytes) -> None:
    (tmp_path / "in.nbest").write_bytes(NBEST)
    args = [{"MODEL_IS_PHRASE_NET": str(model), "LM": str(lm)}.get(a, a) for a in args]
    r = run("nbest", str(tmp_path / "in.nbest"), str(tmp_path / "out"), "-m", str(lm), *args)
    assert r.returncode == code, r.stderr
    assert message in r.stderr and b"Traceback" not in r.stderr


def test_the_word_penalty_of_a_networks_list(lm: Path, tmp_path: Path) -> None:
    """--word-penalty: minus the hypothesis' words (tokens between spaces), after the models'
    features, every byte of the line kept; nothing said of its shortlist."""
    listed = (
        b"0 ||| un homme .  ||| ENS0= -1.5 ||| -1.5\n0 |||  ||| ENS0= -4 ||| -4\n1 ||| une  femme ||| ENS0= -2 ||| -2\n"
    )
    (tmp_path / "in.nbest").write_bytes(listed)
    r = run("nbest", str(tmp_path / "in.nbest"), "-", "-m", str(lm), "--word-penalty")
    assert r.returncode == 0, r.stderr
    values = [line.split(b" ||| ")[2].split(b" CSLM0= ")[1].split(b" ")[1:] for line in r.stdout.splitlines()]
    assert values == [[b"WordPenalty0=", b"-3"], [b"WordPenalty0=", b"0"], [b"WordPenalty0=", b"-2"]]
    assert _without_feature(_without_feature(r.stdout, b"WordPenalty0"), b"CSLM0") == listed
    assert b"features CSLM0, WordPenalty0;" in r.stderr and b"shortlist of WordPenalty0" not in r.stderr


def test_an_empty_list_is_refused(lm: Path, tmp_path: Path) -> None:
    """As rescore and rerank refuse empty input: most likely the trace of a step that failed."""
    (tmp_path / "in.nbest").write_bytes(b"")
    r = run("nbest", str(tmp_path / "in.nbest"), str(tmp_path / "out"), "-m", str(lm))
    assert r.returncode == 3 and b"empty n-best list: no lines to score" in r.stderr, r.stderr
    assert not (tmp_path / "out").exists()


def test_output_onto_its_input_is_refused(lm: Path, tmp_path: Path) -> None:
    (tmp_path / "in.nbest").write_bytes(NBEST)
    r = run("nbest", str(tmp_path / "in.nbest"), str(tmp_path / "in.nbest"), "-m", str(lm))
    assert r.returncode == 6 and (tmp_path / "in.nbest").read_bytes() == NBEST


def test_an_output_that_cannot_be_written_is_refused_before_the_networks_are_read(tmp_path: Path) -> None:
    """OUT in a directory that does not exist: exit 6 naming it, before -m (not a network here)
    is loaded or the list read."""
    (tmp_path / "in.nbest").write_bytes(NBEST)
    (tmp_path / "bad.pt").write_bytes(b"not a network")
    r = run("nbest", str(tmp_path / "in.nbest"), str(tmp_path / "none" / "out.nbest"), "-m", str(tmp_path / "bad.pt"))
    assert r.returncode == 6 and b"output directory does not exist" in r.stderr, r.stderr


def test_the_model_as_output_and_the_text_as_model_are_refused(lm: Path, tmp_path: Path) -> None:
    (tmp_path / "in.nbest").write_bytes(NBEST)
    before = lm.read_bytes()
    r = run("nbest", str(tmp_path / "in.nbest"), str(lm), "-m", str(lm))
    assert r.returncode == 6 and b"same file as the model file" in r.stderr and lm.read_bytes() == before
    text = tmp_path / "t.fr"
    text.write_bytes((TINY_MOSES / "dev.fr").read_bytes())
    r = run("train-lm", str(text), str(text), "--max-steps", "1")
    assert r.returncode == 6 and b"same file as the input" in r.stderr
    assert text.read_bytes() == (TINY_MOSES / "dev.fr").read_bytes()


@pytest.mark.slow
def test_train_lm_command(tmp_path: Path) -> None:
    text = (TINY_MOSES / "dev.fr").read_bytes() + (TINY_MOSES / "test.fr").read_bytes()
    (tmp_path / "t.fr.gz").write_bytes(gzip.compress(text * 20))
    r = run(
        "train-lm",
        str(tmp_path / "t.fr.gz"),
        str(tmp_path / "lm.pt"),
        "--order",
        "3",
        "--embed-dim",
        "8",
        "--hidden",
        "16",
        "--max-steps",
        "20",
        "--valid",
        str(TINY_MOSES / "dev.fr"),
        "--test",
        str(TINY_MOSES / "test.fr"),
        "--threads",
        "1",
    )
    assert r.returncode == 0, r.stderr
    assert b"stopped (max_steps) after 20 steps" in r.stderr
    assert b"test.fr: CSLM perplexity" in r.stderr
    assert (tmp_path / "lm.pt").exists() and (tmp_path / "lm.last.pt").exists() and (tmp_path / "lm.log").exists()
    r = run(
        "train-lm",
        str(tmp_path / "t.fr.gz"),
        str(tmp_path / "lm.pt"),
        "--order",
        "3",
        "--embed-dim",
        "8",
        "--hidden",
        "16",
        "--max-steps",
        "30",
        "--valid",
        str(TINY_MOSES / "dev.fr"),
        "--resume",
    )
    assert r.returncode == 0, r.stderr
    assert b"resumed at step 20" in r.stderr


def test_train_lm_refuses_what_it_cannot_finish_before_training(tmp_path: Path) -> None:
    """A --test text that cannot be read, and --kenlm with no text to compare on (KenLM was
    estimated on TEXT: the 1 % held out of it is no held-out text for it), are refused before
    anything is trained or written."""
    text = str(TINY_MOSES / "dev.fr")
    r = run("train-lm", text, str(tmp_path / "lm.pt"), "--test", str(tmp_path / "missing.fr"), "--max-steps", "2")
    assert r.returncode == 6 and b"missing.fr: cannot read" in r.stderr, r.stderr
    r = run("train-lm", text, str(tmp_path / "lm.pt"), "--kenlm", text, "--max-steps", "2")
    assert r.returncode == 2 and b"--kenlm compares on the --valid or --test text" in r.stderr, r.stderr
    assert list(tmp_path.iterdir()) == []


def test_train_lm_never_writes_over_its_kenlm_file(tmp_path: Path) -> None:
    """The n-gram LM given to --kenlm is an input: as the model file or the log it is refused
    before any work, and left as it was."""
    kenlm = tmp_path / "lm.fr.arpa"
    kenlm.write_bytes(b"not yet read")
    text = str(TINY_MOSES / "dev.fr")
    for args in ((str(kenlm),), (str(tmp_path / "lm.pt"), "--log", str(kenlm))):
        r = run("train-lm", text, *args, "--kenlm", str(kenlm), "--valid", text, "--max-steps", "2")
        assert r.returncode == 6 and b"same file" in r.stderr, r.stderr
        assert kenlm.read_bytes() == b"not yet read"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lm.fr.arpa"]


def test_train_lm_refuses_a_device_it_cannot_use(tmp_path: Path) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present (tests/cli/test_cuda.py trains on it)")
    r = run("train-lm", str(TINY_MOSES / "dev.fr"), str(tmp_path / "lm.pt"), "--device", "cuda")
    assert r.returncode == 2 and b"no CUDA device" in r.stderr and b"Traceback" not in r.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("old", "new", "why"),
    [
        (b"LM0= -8 ", b"LM0= x ", b"feature value 'x' is not a number"),
        (b"LM0= -8 ", b"LM0= nan ", b"feature value 'nan' is not a finite number"),
        (b"LM0= -8 ", b"LM0= -inf ", b"feature value '-inf' is not a finite number"),
        (b"-1 -1 |||", b"-1 -1 CSLM0= -3 |||", b"features LM0(1) WordPenalty0(1) TranslationModel0(2) CSLM0(1) differ"),
        (b"-1 -1 |||", b"-1 -1 LM0= -3 |||", b"feature LM0 twice in the features field"),
        (b"sparse_x= 1", b"sparse_x=1", b"Moses writes a feature as 'name= value'"),
    ],
)
def test_every_line_is_checked_not_only_the_first(lm: Path, tmp_path: Path, old: bytes, new: bytes, why: bytes) -> None:
    """Line 4 carries the fault: a value that is no finite number, the feature being added
    already there, a feature named twice, a ``name=value`` token Moses' extractor misreads."""
    lines = NBEST.splitlines(keepends=True)
    lines[3] = lines[3].replace(old, new)
    assert lines[3] != NBEST.splitlines(keepends=True)[3]
    (tmp_path / "bad.nbest").write_bytes(b"".join(lines))
    r = run("nbest", str(tmp_path / "bad.nbest"), str(tmp_path / "out"), "-m", str(lm))
    assert r.returncode == 3, r.stderr
    assert f"{tmp_path / 'bad.nbest'}:4: ".encode() in r.stderr and why in r.stderr, r.stderr
    assert not (tmp_path / "out").exists()


def test_words_outside_the_shortlist_are_counted_per_feature(lm: Path, tmp_path: Path) -> None:
    (tmp_path / "in.nbest").write_bytes(NBEST)
    r = run("nbest", str(tmp_path / "in.nbest"), str(tmp_path / "o"), "-m", str(lm), "-m", str(lm))
    assert r.returncode == 0, r.stderr
    said = r.stderr.decode()
    assert "1 of 9 words outside the shortlist of CSLM0; 1 of 9 words outside the shortlist of CSLM1" in said
    assert "2 of 9" not in said


SOURCE = "a man .\na dog .\n\na woman\n"


@pytest.mark.parametrize("how", ["fifo", "/dev/stdin", "process substitution"])
def test_source_features_read_the_list_once(model: Path, tmp_path: Path, how: str) -> None:
    """A list that can be read only once (a FIFO, a pipe on /dev/stdin, bash's <(...)) is scored
    like the same list in a file."""
    import threading

    data = NBEST + b"\n3 ||| une  ||| LM0= -1 WordPenalty0= -1 TranslationModel0= -1 -1 ||| -1\n"
    (tmp_path / "in.nbest").write_bytes(data)
    (tmp_path / "src.en").write_text(SOURCE)
    common = ["-m", str(model), "--name", "NMT0", "--source", str(tmp_path / "src.en")]
    r = run("nbest", str(tmp_path / "in.nbest"), str(tmp_path / "want"), *common)
    assert r.returncode == 0, r.stderr
    out = tmp_path / "got"
    if how == "fifo":
        fifo = tmp_path / "list.fifo"
        os.mkfifo(fifo)

        def write() -> None:
            with open(fifo, "wb") as f:
                f.write(data)

        writer = threading.Thread(target=write, daemon=True)
        writer.start()
        try:
            r = run("nbest", str(fifo), str(out), *common)
        finally:
            if writer.is_alive():  # the run did not open the FIFO: unblock the writer
                with open(fifo, "rb") as f:
                    f.read()
            writer.join(10)
    elif how == "/dev/stdin":
        r = run("nbest", "/dev/stdin", str(out), *common, stdin=data)
    else:
        command = " ".join(
            shlex.quote(a) for a in [PYTHON, "-m", "phrase_rescorer", "nbest", "IN", str(out), *common]
        ).replace("IN", f"<(cat {shlex.quote(str(tmp_path / 'in.nbest'))})")
        r = subprocess.run(["bash", "-c", command], capture_output=True, env=cli_env(), timeout=120)
    assert r.returncode == 0, r.stderr
    assert out.read_bytes() == (tmp_path / "want").read_bytes()


@pytest.mark.parametrize("how", ["/dev/stdin", "file"])
def test_source_of_another_length_is_refused(model: Path, tmp_path: Path, how: str) -> None:
    (tmp_path / "src.en").write_text(SOURCE + "one more\n")
    args = ["-m", str(model), "--source", str(tmp_path / "src.en")]
    (tmp_path / "in.nbest").write_bytes(NBEST)
    if how == "file":
        r = run("nbest", str(tmp_path / "in.nbest"), str(tmp_path / "o"), *args)
    else:
        r = run("nbest", "/dev/stdin", str(tmp_path / "o"), *args, stdin=NBEST)
    assert r.returncode == 3, r.stderr
    assert b"5 source sentences, but" in r.stderr or b"lists 3 sentences, but" in r.stderr, r.stderr
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("log", ["model", "last"])
def test_train_lm_log_naming_the_model_file_is_refused(tmp_path: Path, log: str) -> None:
    model = tmp_path / "lm.pt"
    target = model if log == "model" else tmp_path / "lm.last.pt"
    r = run("train-lm", str(TINY_MOSES / "dev.fr"), str(model), "--max-steps", "1", "--log", str(target))
    assert r.returncode == 6, r.stderr
    assert b"output is the same file as the" in r.stderr and b"Traceback" not in r.stderr
    assert list(tmp_path.iterdir()) == []
