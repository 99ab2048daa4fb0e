"""The rescoring programs as a user runs them: rescore-phrase-table, phrase-rescorer rescore /
moses-ini / moses-step, bin/moses-rescore-step; stdin/stdout, .gz, exit codes, messages."""

from __future__ import annotations

import gzip
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from phrase_rescorer.cli import cli
from tests.helpers.paths import PYTHON, REAL_INI, REPO, SAMPLE, cli_env
from tests.helpers.rescore_data import appended_columns, log_column, read_lines

pytestmark = pytest.mark.usefixtures("one_thread")

HEAD = b"".join(read_lines(SAMPLE)[:400])  # whole lines of the real sample


@pytest.fixture
def head(tmp_path: Path) -> Path:
    path = tmp_path / "head.gz"
    path.write_bytes(gzip.compress(HEAD))
    return path


def run(*args: str, stdin: bytes | None = None, program: str = "rescore-phrase-table") -> subprocess.CompletedProcess:
    env = cli_env()
    env["OMP_NUM_THREADS"] = "1"
    return subprocess.run(
        [PYTHON, str(REPO / "bin" / program), *args], input=stdin, capture_output=True, env=env, timeout=300
    )


def test_stdin_to_stdout_with_the_program(model: Path, head: Path) -> None:
    r = run("-", "-", "--model", str(model), stdin=head.read_bytes())  # gzip on stdin, by magic
    assert r.returncode == 0, r.stderr
    out = r.stdout.splitlines(keepends=True)
    assert len(out) == 400
    for line_in, line_out in zip(HEAD.splitlines(keepends=True), out, strict=True):
        fields_in, fields_out = line_in.split(b" ||| "), line_out.split(b" ||| ")
        assert fields_out[:2] == fields_in[:2] and fields_out[3:] == fields_in[3:]
        assert fields_out[2].rsplit(b" ", 1)[0] == fields_in[2]
    err = r.stderr.decode()
    assert "rescored 400 lines" in err and "pairs/s" in err
    assert "signature: model:" in err and "|format:prob|norm:none|wp:no|dtype:float32|version:" in err


def test_subcommand_gz_to_gz_matches_the_program(model: Path, head: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.gz"
    r = CliRunner().invoke(cli, ["rescore", str(head), str(out), "--model", str(model), "--batch-size", "17"])
    assert r.exit_code == 0, r.output
    assert "rescored 400 lines" in r.stderr and r.stdout == ""
    via_program = tmp_path / "p.txt"
    assert run(str(head), str(via_program), "--model", str(model)).returncode == 0
    a, b = log_column(appended_columns(head, out)), log_column(appended_columns(head, via_program))
    assert max(abs(a - b)) <= 1e-5


def test_quiet_and_options_reach_the_signature(model: Path, head: Path, tmp_path: Path) -> None:
    out = tmp_path / "o.txt"
    r = CliRunner().invoke(cli, ["-q", "rescore", str(head), str(out), "--model", str(model)])
    assert r.exit_code == 0 and r.stderr == ""
    r = CliRunner().invoke(cli, ["rescore", str(head), str(out), "--model", str(model), "-q"])
    assert r.exit_code == 0 and r.stderr == ""
    r = CliRunner().invoke(
        cli,
        [
            "rescore",
            str(head),
            str(out),
            "--model",
            str(model),
            "--normalize",
            "--unk-feature",
            "--score-format",
            "logprob",
        ],
    )
    assert r.exit_code == 0, r.output
    assert "|format:logprob|norm:tokens+eos|wp:yes|" in r.stderr
    assert all(float(v[0]) < 0 for v in appended_columns(head, out, columns=2))


def test_unsorted_input_is_scored_with_a_warning(model: Path, tmp_path: Path) -> None:
    table = tmp_path / "t.txt"
    table.write_bytes(b"b ||| la ||| 0.5\na ||| le ||| 0.5\n")
    r = CliRunner().invoke(cli, ["rescore", str(table), str(tmp_path / "o.txt"), "--model", str(model), "-q"])
    assert r.exit_code == 0
    assert f"warning: {table}:2: the input is not sorted by source phrase (LC_ALL=C)" in r.stderr
    appended_columns(table, tmp_path / "o.txt")


def test_help_says_what_moses_does_below_exp_minus_100() -> None:
    r = run("-h")
    assert r.returncode == 0
    text = " ".join(r.stdout.decode().split())
    assert "exp(-100)" in text and "floors every log score at -100" in text
    for option in ("--model", "--score-format", "--normalize", "--unk-feature", "--batch-size", "--device"):
        assert option in text


@pytest.mark.parametrize(
    ("case", "code", "message"),
    [
        ("bad-line", 3, "bad.txt:2: non-numeric score"),
        ("same-file", 6, "output is the same file as the input"),
        ("no-model", 4, "no such model file"),
        ("no-cuda", 2, "no CUDA device"),
    ],
)
def test_errors_are_one_line_with_an_exit_code(model: Path, tmp_path: Path, case: str, code: int, message: str) -> None:
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"a ||| le ||| 0.5\nb ||| la ||| 0.5 x\n")
    good = tmp_path / "good.txt"
    good.write_bytes(b"a ||| le ||| 0.5\n")
    out = tmp_path / "out.gz"
    args = {
        "bad-line": [str(bad), str(out), "--model", str(model)],
        "same-file": [str(good), str(good), "--model", str(model)],
        "no-model": [str(good), str(out), "--model", str(tmp_path / "missing.pt")],
        "no-cuda": [str(good), str(out), "--model", str(model), "--device", "cuda"],
    }[case]
    if case == "no-cuda":
        import torch

        if torch.cuda.is_available():
            pytest.skip("a CUDA device is present")
    r = run(*args)
    err = r.stderr.decode()
    assert r.returncode == code, err
    assert message in err and "Traceback" not in err
    assert not out.exists() and not list(tmp_path.glob(".*tmp*"))


@pytest.mark.shared
@pytest.mark.slow
def test_moses_ini_command_on_the_real_ini(model: Path, head: Path, tmp_path: Path) -> None:
    rescored = tmp_path / "rescored.gz"
    assert CliRunner().invoke(cli, ["-q", "rescore", str(head), str(rescored), "--model", str(model)]).exit_code == 0
    out = tmp_path / "moses.ini"
    r = CliRunner().invoke(cli, ["moses-ini", str(REAL_INI), str(out), "--table", str(rescored)])
    assert r.exit_code == 0, r.output
    assert "TranslationModel0 (PhraseDictionaryMemory): num-features 4 -> 5" in r.stderr
    text = out.read_text()
    assert f"num-features=5 path={rescored} " in text
    assert "TranslationModel0= 0.0912844 0.00190324 0.0646386 0.0407692 0.02\n" in text
    r = run("moses-ini", str(REAL_INI), "-", "--table", str(rescored), "--features", "2", program="phrase-rescorer")
    assert r.returncode == 5 and "would get num-features=4+2=6" in r.stderr.decode()
    r = run("moses-ini", str(REAL_INI), "-", "--table", str(rescored), program="phrase-rescorer")
    assert r.returncode == 0 and r.stdout.decode() == text


def _train_model_dir(root: Path, columns: int = 4) -> Path:
    """A train-model.perl model/ directory: phrase-table.gz and a moses.ini pointing at it."""
    model_dir = root / "model"
    model_dir.mkdir()
    (model_dir / "phrase-table.gz").write_bytes(gzip.compress(HEAD))
    (model_dir / "moses.ini").write_text(
        "[feature]\nUnknownWordPenalty\nWordPenalty\nPhrasePenalty\n"
        f"PhraseDictionaryMemory name=TranslationModel0 num-features={columns} "
        f"path={model_dir}/phrase-table.gz input-factor=0 output-factor=0\nDistortion\n"
        "[weight]\nUnknownWordPenalty0= 1\nWordPenalty0= -1\nPhrasePenalty0= 0.2\n"
        f"TranslationModel0= {' '.join(['0.2'] * columns)}\nDistortion0= 0.3\n"
    )
    return model_dir


@pytest.mark.slow
def test_moses_step_program_rescores_a_model_directory(model: Path, tmp_path: Path) -> None:
    model_dir = _train_model_dir(tmp_path)
    (tmp_path / "mert-work-rnn").mkdir()  # an earlier tuning run: must not be reused
    r = run(
        str(model_dir),
        "--network",
        str(model),
        "--unk-feature",
        "--dev-source",
        "dev.en",
        "-threads",
        "2",
        program="moses-rescore-step",
    )
    assert r.returncode == 0, r.stderr
    values = appended_columns(model_dir / "phrase-table.gz", model_dir / "phrase-table.rnn.gz", columns=2)
    assert len(values) == 400
    ini = (model_dir / "moses.rnn.ini").read_text()
    assert f"num-features=6 path={model_dir}/phrase-table.rnn.gz " in ini
    assert "TranslationModel0= 0.2 0.2 0.2 0.2 0.02 0.02\n" in ini
    command = r.stdout.decode()
    assert "mert-moses.pl" in command and "dev.en" in command and "DEV.REF" in command
    assert f"{model_dir}/moses.rnn.ini" in command and "/bin/moses" in command
    assert f"--working-dir={tmp_path}/mert-work-rnn.2" in command
    assert "'--decoder-flags=-threads 2'" in command  # the step's own thread count, not a fixed one
    assert "replace DEV.REF by your tuning set" in r.stderr.decode()


@pytest.mark.slow
def test_moses_step_checks_the_ini_before_scoring(model: Path, tmp_path: Path) -> None:
    model_dir = _train_model_dir(tmp_path, columns=3)  # the table has 4 scores
    r = run(str(model_dir), "--network", str(model), program="moses-rescore-step")
    assert r.returncode == 5 and "num-features=3 but its table" in r.stderr.decode()
    assert not (model_dir / "phrase-table.rnn.gz").exists()
    shutil.rmtree(model_dir)
    r = run(str(tmp_path), "--network", str(model), program="moses-rescore-step")
    assert r.returncode == 5 and "no moses.ini here" in r.stderr.decode()


@pytest.mark.slow
def test_gz_in_xz_out_round_trips(model: Path, head: Path, tmp_path: Path) -> None:
    import lzma

    plain, xz = tmp_path / "out.txt", tmp_path / "out.xz"
    assert run(str(head), str(plain), "--model", str(model), "-q").returncode == 0
    r = run(str(head), str(xz), "--model", str(model), "-q")
    assert r.returncode == 0, r.stderr
    assert lzma.decompress(xz.read_bytes()) == plain.read_bytes()  # xz, as the name says
    table_xz = tmp_path / "in.xz"  # and xz is an input, read by its content
    table_xz.write_bytes(lzma.compress(HEAD))
    again = tmp_path / "again.zst"
    r = run(str(table_xz), str(again), "--model", str(model), "-q")
    assert r.returncode == 0, r.stderr
    assert again.read_bytes()[:4] == b"\x28\xb5\x2f\xfd"
    import zstandard

    assert zstandard.ZstdDecompressor().decompressobj().decompress(again.read_bytes()) == plain.read_bytes()


@pytest.mark.parametrize("name", ["in.xz", "in.bz2", "in.zst"])
def test_a_truncated_compressed_input_is_exit_3(model: Path, tmp_path: Path, name: str) -> None:
    import bz2
    import lzma

    import zstandard

    pack = {"in.xz": lzma.compress, "in.bz2": bz2.compress, "in.zst": zstandard.ZstdCompressor().compress}[name]
    packed = pack(HEAD)
    table = tmp_path / name
    table.write_bytes(packed[: len(packed) * 2 // 3])
    r = run(str(table), str(tmp_path / "out.gz"), "--model", str(model))
    err = r.stderr.decode()
    assert r.returncode == 3, err
    assert err.startswith(f"rescore-phrase-table: error: {table}:") and "truncated or corrupt" in err
    assert err.count("\n") == 1 and sorted(p.name for p in tmp_path.iterdir()) == [name]


def test_a_compressed_name_not_written_is_refused_before_any_work(model: Path, head: Path, tmp_path: Path) -> None:
    r = run(str(head), str(tmp_path / "out.lzma"), "--model", str(model))
    assert r.returncode == 6 and ".lzma names legacy lzma (write .xz), which is not written" in r.stderr.decode()
    assert not (tmp_path / "out.lzma").exists()


@pytest.mark.slow
def test_moses_step_on_its_own_patched_ini_is_refused(model: Path, tmp_path: Path) -> None:
    """The second column would be the first one again: refused, naming the table (exit 3)."""
    model_dir = _train_model_dir(tmp_path)
    assert run(str(model_dir), "-m", str(model), "-q", program="moses-rescore-step").returncode == 0
    before = (model_dir / "phrase-table.rnn.gz").read_bytes()
    r = run(
        str(model_dir), "-m", str(model), "-q", "--ini", str(model_dir / "moses.rnn.ini"), program="moses-rescore-step"
    )
    assert r.returncode == 3
    assert r.stderr.decode().strip() == (
        f"moses-rescore-step: error: {model_dir}/phrase-table.rnn.gz: already rescored: on lines 1-400 the last "
        "1 score(s) are exactly the column(s) this network would add; rescore the original table, not this one"
    )
    assert (model_dir / "phrase-table.rnn.gz").read_bytes() == before
