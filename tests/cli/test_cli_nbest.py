"""``phrase-rescorer nbest`` and ``train-lm`` as a user runs them: every byte kept, compressed
files and pipes, and one clear line with the documented exit code for what is refused."""

from __future__ import annotations

import gzip
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
    ],
)
def test_refusals(lm: Path, tmp_path: Path, model: Path, args: list[str], code: int, message: bytes) -> None:
    (tmp_path / "in.nbest").write_bytes(NBEST)
    args = [str(model) if a == "MODEL_IS_PHRASE_NET" else a for a in args]
    r = run("nbest", str(tmp_path / "in.nbest"), str(tmp_path / "out"), "-m", str(lm), *args)
    assert r.returncode == code, r.stderr
    assert message in r.stderr and b"Traceback" not in r.stderr


def test_output_onto_its_input_is_refused(lm: Path, tmp_path: Path) -> None:
    (tmp_path / "in.nbest").write_bytes(NBEST)
    r = run("nbest", str(tmp_path / "in.nbest"), str(tmp_path / "in.nbest"), "-m", str(lm))
    assert r.returncode == 6 and (tmp_path / "in.nbest").read_bytes() == NBEST


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


def test_train_lm_refuses_a_device_it_cannot_use(tmp_path: Path) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present (tests/cli/test_cuda.py trains on it)")
    r = run("train-lm", str(TINY_MOSES / "dev.fr"), str(tmp_path / "lm.pt"), "--device", "cuda")
    assert r.returncode == 2 and b"no CUDA device" in r.stderr and b"Traceback" not in r.stderr
    assert list(tmp_path.iterdir()) == []
