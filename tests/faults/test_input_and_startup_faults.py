"""Bad input and bad environments, end to end: closed standard streams, Ctrl-C during
start-up, output paths refused before the model is loaded, unreadable input, input without
newlines, blank phrases and other compression formats. Each case runs the real program and
checks the exit code and the one-line message."""

from __future__ import annotations

import lzma
import os
import select
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from phrase_rescorer.cli import main
from phrase_rescorer.moses.phrase_table import PhraseTableError, parse_line
from phrase_rescorer.moses.words import split_words
from tests.helpers.nmt import TINY_MOSES
from tests.helpers.paths import PYTHON, SAMPLE, cli_env, sigint_as_at_a_terminal
from tests.helpers.rescore_data import read_lines

LINES = read_lines(SAMPLE)[:200]


def run(args: list[str], timeout: float = 300, extra_env: dict[str, str] | None = None, **kwargs) -> tuple[int, str]:  # type: ignore[no-untyped-def]
    env = cli_env()
    env["OMP_NUM_THREADS"] = "1"
    env.update(extra_env or {})
    kwargs.setdefault("stdout", subprocess.DEVNULL)
    r = subprocess.run(
        [PYTHON, "-m", "phrase_rescorer", "-q", *args], stderr=subprocess.PIPE, env=env, timeout=timeout, **kwargs
    )
    return r.returncode, r.stderr.decode()


@pytest.fixture(scope="module")
def model(small_model: Path) -> Path:
    return small_model  # tests/conftest.py


@pytest.fixture
def table(tmp_path: Path) -> Path:
    path = tmp_path / "in.txt"
    path.write_bytes(b"".join(LINES))
    return path


# --- 8. closed streams, Ctrl-C during start-up ---------------------------------------------------


def test_closed_stdout(model: Path, table: Path) -> None:
    code, err = run(["rescore", str(table), "-", "--model", str(model)], preexec_fn=lambda: os.close(1))
    assert (code, err.strip()) == (6, "phrase-rescorer: error: -: standard output is closed")


def test_closed_stdin(model: Path, tmp_path: Path) -> None:
    code, err = run(["rescore", "-", str(tmp_path / "out.txt"), "--model", str(model)], preexec_fn=lambda: os.close(0))
    assert (code, err.strip()) == (6, "phrase-rescorer: error: -: cannot read: standard input is closed")
    assert os.listdir(tmp_path) == []


def program_started(pid: int) -> bool:
    """The program's own first line has run: it blocks SIGINT while the modules load (SigBlk),
    then catches SIGTERM (SigCgt). Before that the interpreter is starting, and a Ctrl-C is
    Python's own business."""
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines())
    blocked, caught = int(fields["SigBlk"], 16), int(fields["SigCgt"], 16)
    return bool(blocked >> (signal.SIGINT - 1) & 1 or caught >> (signal.SIGTERM - 1) & 1)


@pytest.mark.parametrize("after", [0.0, 0.3, 1.0, 2.0, 4.0])
def test_ctrl_c_at_any_moment_of_start_up(model: Path, tmp_path: Path, after: float) -> None:
    """SIGINT ``after`` seconds after the program's first line (importing torch, loading the
    model, or waiting for input on stdin, which is never closed): exit 130, the one-line
    message, nothing at OUT."""
    env = cli_env()
    env["OMP_NUM_THREADS"] = "1"
    out = tmp_path / "out.txt"
    proc = subprocess.Popen(
        [PYTHON, "-m", "phrase_rescorer", "-q", "rescore", "-", str(out), "--model", str(model)],
        stdin=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        preexec_fn=sigint_as_at_a_terminal,
    )
    while not program_started(proc.pid):
        assert proc.poll() is None
        select.select([], [], [], 0.001)
    select.select([], [], [], after)  # the moment of the Ctrl-C
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err.decode()
    assert err.decode().strip() == "phrase-rescorer: error: interrupted; no output was left behind"
    assert os.listdir(tmp_path) == []


_AUDIT = """
import os, signal, sys
def _audit(event, args):
    if event == "import" and args[0] == "phrase_rescorer.signals" and not os.path.exists(os.environ["MARK"]):
        with open(os.environ["MARK"], "w") as f:
            f.write(repr(sorted(signal.pthread_sigmask(signal.SIG_BLOCK, []))))
sys.addaudithook(_audit)
"""


def test_stop_signals_are_blocked_from_the_package_s_first_line(tmp_path: Path) -> None:
    """When the first module of the package after its ``__init__`` is imported, SIGINT, SIGTERM
    and SIGHUP are already blocked: what is left unprotected is Python's own start-up."""
    (tmp_path / "sitecustomize.py").write_text(_AUDIT)
    env = cli_env()
    env.update(PYTHONPATH=f"{tmp_path}{os.pathsep}{env['PYTHONPATH']}", MARK=str(tmp_path / "mask"))
    r = subprocess.run([PYTHON, "-m", "phrase_rescorer", "--version"], capture_output=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr.decode()
    blocked = (tmp_path / "mask").read_text()
    assert blocked == repr(sorted([signal.SIGINT, signal.SIGTERM, signal.SIGHUP])), blocked


def test_a_library_user_s_signals_are_left_alone(tmp_path: Path) -> None:
    r = subprocess.run(
        [PYTHON, "-c", "import phrase_rescorer, signal; print(sorted(signal.pthread_sigmask(signal.SIG_BLOCK, [])))"],
        capture_output=True,
        env=cli_env(),
        timeout=120,
    )
    assert r.stdout.decode().strip() == "[]", r.stderr.decode()


# --- 9. paths checked before the model is loaded -------------------------------------------------


@pytest.mark.parametrize(
    ("out", "message"),
    [
        ("", "'': empty output path"),
        ("absent/", "absent/: output path ends with '/': it names a directory, not a file"),
        ("in.txt", "in.txt: output is the same file as the input 'in.txt'"),
        ("absent/out.txt", "absent/out.txt: output directory does not exist"),
    ],
)
def test_output_path_refused_before_the_model_is_read(table: Path, out: str, message: str) -> None:
    """The model does not exist: a path problem reported first shows that it was checked first."""
    code, err = run(["rescore", "in.txt", out, "--model", "missing.pt"], cwd=table.parent)
    assert (code, err.strip()) == (6, f"phrase-rescorer: error: {message}")
    assert os.listdir(table.parent) == ["in.txt"]


def test_fifo_input_keeps_its_writer_s_data(model: Path, tmp_path: Path) -> None:
    """A named FIFO as IN (250 KB: more than a pipe holds): the path check must not open it,
    or the writer is released, its data lost with the check's reader, and the run waits forever."""
    source = tmp_path / "in.txt"
    source.write_bytes(b"".join(read_lines(SAMPLE)[:2000]))
    assert run(["rescore", str(source), str(tmp_path / "want.txt"), "--model", str(model)]) == (0, "")
    fifo = tmp_path / "in.fifo"
    os.mkfifo(fifo)
    writer = subprocess.Popen(["sh", "-c", 'exec cat "$0" > "$1"', str(source), str(fifo)])
    try:
        code, err = run(["rescore", str(fifo), str(tmp_path / "out.txt"), "--model", str(model)], timeout=120)
    except subprocess.TimeoutExpired:
        pytest.fail("the run waited forever for the FIFO's writer")
    finally:
        writer.kill()
        writer.wait()
    assert (code, err) == (0, "")
    assert (tmp_path / "out.txt").read_bytes() == (tmp_path / "want.txt").read_bytes()


@pytest.mark.parametrize("out", ["in.txt", "link.txt"])
def test_train_refuses_to_write_its_model_over_its_table(table: Path, out: str) -> None:
    """MODEL_OUT naming TABLE (also through a link): refused before reading, not after hours."""
    (table.parent / "link.txt").symlink_to("in.txt")
    code, err = run(["train", "in.txt", out, "--max-steps", "1"], cwd=table.parent)
    assert (code, err.strip()) == (6, f"phrase-rescorer: error: {out}: output is the same file as the input 'in.txt'")
    assert table.read_bytes() == b"".join(LINES)


@pytest.mark.parametrize("log", ["rnn.pt", "rnn.last.pt"])
def test_train_refuses_a_log_that_is_its_model_file(table: Path, log: str) -> None:
    """--log naming the model file (or its saved state): the model would replace the log."""
    code, err = run(["train", "in.txt", "rnn.pt", "--max-steps", "1", "--log", log], cwd=table.parent)
    what = "model file 'rnn.pt'" if log == "rnn.pt" else "saved state 'rnn.last.pt'"
    assert (code, err.strip()) == (6, f"phrase-rescorer: error: {log}: output is the same file as the {what}")
    assert os.listdir(table.parent) == ["in.txt"]


@pytest.mark.parametrize(("stream", "name"), [("stdout", "standard output"), ("stderr", "standard error")])
@pytest.mark.parametrize("output", ["rnn.log", "rnn.pt"])
def test_train_refuses_an_output_its_own_stream_is_redirected_to(
    table: Path, stream: str, name: str, output: str
) -> None:
    """`train ... rnn.pt > rnn.log`: the JSON-lines log (or the model) and the progress lines
    would write over each other; refused before any work, the file left as the shell made it."""
    target = table.parent / output
    target.write_bytes(b"")
    env = cli_env()
    env["OMP_NUM_THREADS"] = "1"
    with open(target, "ab") as f:
        streams = {"stdout": f, "stderr": subprocess.PIPE}
        if stream == "stderr":
            streams = {"stdout": subprocess.DEVNULL, "stderr": f}
        r = subprocess.run(
            [PYTHON, "-m", "phrase_rescorer", "-q", "train", "in.txt", "rnn.pt", "--max-steps", "1"],
            cwd=table.parent,
            env=env,
            timeout=300,
            **streams,
        )
    message = f"phrase-rescorer: error: {output}: this command's {name} is redirected to this file; "
    message += "redirect it elsewhere\n"
    err = target.read_bytes().decode() if stream == "stderr" else r.stderr.decode()
    assert (r.returncode, err) == (6, message)
    assert target.read_bytes() == (message.encode() if stream == "stderr" else b"")
    assert sorted(os.listdir(table.parent)) == sorted(["in.txt", output])


@pytest.mark.parametrize(
    ("command", "option"),
    [
        ("train", ["--cell", "reset_after"]),
        ("train-nmt", ["--summary", "last"]),
        ("train", ["--cell=reset_before"]),
        ("train-nmt", ["--cell-type", "lstm"]),
        ("train", ["--attention-from", "bottom"]),
    ],
)
def test_the_transformer_refuses_the_gru_variant_and_the_summary(table: Path, command: str, option: list[str]) -> None:
    """--cell and --summary shape only the recurrent networks: given with --arch transformer
    (even at their defaults) they are refused like --cell-type, not ignored."""
    data = [table.name] if command == "train" else [str(TINY_MOSES / "dev.en"), str(TINY_MOSES / "dev.fr")]
    code, err = run([command, *data, "m.pt", "--arch", "transformer", *option, "--max-steps", "1"], cwd=table.parent)
    name = option[0].split("=")[0]  # the option as the user gave it, not its Python name (cell_type)
    assert (code, err.strip()) == (
        2,
        f"phrase-rescorer: error: the transformer takes none of the recurrent options ({name}); "
        "its options are --layers, --heads, --dropout and --embed-dropout",
    )
    assert os.listdir(table.parent) == ["in.txt"]


def test_plot_log_refuses_to_draw_over_its_log(tmp_path: Path) -> None:
    log = tmp_path / "rnn.log"
    log.write_text('{"event": "start"}\n')
    code, err = run(["plot-log", "rnn.log", "-o", "./rnn.log"], cwd=tmp_path)
    assert (code, err.strip()) == (
        6,
        "phrase-rescorer: error: ./rnn.log: output is the same file as the input 'rnn.log'",
    )
    assert log.read_text() == '{"event": "start"}\n'


def test_missing_input_refused_before_the_model_is_read(tmp_path: Path) -> None:
    code, err = run(["rescore", "absent.txt", "out.txt", "--model", "missing.pt"], cwd=tmp_path)
    assert (code, err.strip()) == (6, "phrase-rescorer: error: absent.txt: cannot read: No such file or directory")


@pytest.mark.parametrize(
    ("args", "what"),
    [
        (["moses-ini", "-", "out.ini", "--table", "pt.gz"], "IN.ini '-': must be a file"),
        (["moses-step", "-", "--model", "m.pt"], "MODEL_DIR '-': must be a directory"),
        (["plot-log", "-", "-o", "curves.png"], "LOG '-': must be a file"),
        (["plot-experiment", "-"], "OUT_DIR '-': must be a directory"),
        (["average", "avg.pt", "in.ini", "-"], "IN... '-': must be a file"),
        (["score", "in.ini", "-m", "-"], "--model '-': must be a file"),
        (["nbest", "in.ini", "out.nbest", "-m", "-"], "--model '-': must be a file"),
        (["translate", "in.ini", "out.txt", "-m", "-"], "--model '-': must be a file"),
        (["rescore", "in.ini", "out.txt", "-m", "-"], "--model '-': must be a file"),
    ],
)
def test_standard_input_where_a_file_is_read_is_a_usage_error(tmp_path: Path, args: list[str], what: str) -> None:
    """moses-ini reads IN.ini by its path: '-' is refused as such, not as a missing file '-'."""
    (tmp_path / "in.ini").write_text("[feature]\n")
    with open(tmp_path / "in.ini", "rb") as given:
        code, err = run(args, cwd=tmp_path, stdin=given)
    assert (code, err.strip()) == (2, f"phrase-rescorer: error: {what}, not standard input; give its path")
    assert os.listdir(tmp_path) == ["in.ini"]


@pytest.mark.parametrize(
    "args",
    [
        ["train", str(SAMPLE)],
        ["train-nmt", str(TINY_MOSES / "dev.en"), str(TINY_MOSES / "dev.fr")],
        ["train-lm", str(TINY_MOSES / "dev.fr")],
    ],
    ids=["train", "train-nmt", "train-lm"],
)
def test_standard_output_as_a_training_s_model_out_is_a_usage_error(tmp_path: Path, args: list[str]) -> None:
    """MODEL_OUT '-' would send the network down a pipe and leave -.last.pt, -.log behind."""
    code, err = run([*args, "-", "--max-steps", "1"], cwd=tmp_path)
    assert (code, err.strip()) == (
        2,
        "phrase-rescorer: error: MODEL_OUT '-': must be a file, not standard output; give its path",
    )
    assert os.listdir(tmp_path) == []


def test_unreadable_input_is_exit_6_not_a_usage_error(
    model: Path, table: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A file the user may not read (simulated: this test may run as root, who reads all):
    the library's error (6), not the command line's "not readable" usage error (2)."""
    real_open = os.open

    def denied(path, *args, **kwargs):  # type: ignore[no-untyped-def]
        if str(path) == str(table):
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(os, "access", lambda path, mode, **kw: str(path) != str(table))
    monkeypatch.setattr(os, "open", denied)
    monkeypatch.setattr(
        sys,
        "argv",
        ["phrase-rescorer", "-q", "rescore", str(table), str(table.with_name("o.txt")), "--model", str(model)],
    )
    with pytest.raises(SystemExit) as caught:
        main()
    assert caught.value.code == 6
    assert capsys.readouterr().err.strip() == f"phrase-rescorer: error: {table}: cannot read: Permission denied"


# --- 6. lines without end ------------------------------------------------------------------------


def test_endless_line_is_refused(model: Path, tmp_path: Path) -> None:
    """/dev/zero has no newline and no end: refused at the line-length limit (64 MiB), in
    linear time (it was read forever)."""
    code, err = run(["rescore", "/dev/zero", str(tmp_path / "out.txt"), "--model", str(model)], timeout=120)
    assert code == 3, err
    assert err.strip() == (
        "phrase-rescorer: error: /dev/zero:1: line longer than 67,108,864 bytes (a binary file, "
        "or no newlines?); PHRASE_RESCORER_MAX_LINE_BYTES sets the limit"
    )
    assert os.listdir(tmp_path) == []


def test_line_length_limit_is_adjustable(model: Path, table: Path) -> None:
    limit = max(len(line) for line in LINES[:2]) - 1
    code, err = run(
        ["rescore", str(table), str(table.with_name("out.txt")), "--model", str(model)],
        extra_env={"PHRASE_RESCORER_MAX_LINE_BYTES": str(limit)},
    )
    first_long = next(i for i, line in enumerate(LINES, 1) if len(line) - 1 > limit)
    assert code == 3
    assert f"in.txt:{first_long}: line longer than {limit:,} bytes" in err


# --- 7. one definition of an empty phrase ---------------------------------------------------------


@pytest.mark.parametrize("line", [b"\t ||| la ||| 1\n", b"a ||| \t ||| 1\n", b"a ||| \t  \t ||| 1\n"])
def test_blank_phrase_refused(model: Path, tmp_path: Path, line: bytes) -> None:
    table = tmp_path / "in.txt"
    table.write_bytes(LINES[0] + line)
    code, err = run(["rescore", str(table), str(tmp_path / "out.txt"), "--model", str(model)])
    side = "source" if line.startswith(b"\t") else "target"
    assert (code, err.strip()) == (3, f"phrase-rescorer: error: {table}:2: empty {side} phrase")


@given(st.text(alphabet=" \ta", max_size=6), st.text(alphabet=" \tb", max_size=6))
def test_refused_as_empty_exactly_when_the_tokenizer_finds_no_token(source: str, target: str) -> None:
    raw = f"{source} ||| {target} ||| 1".encode()
    try:
        parsed = parse_line(raw, "t", 1)
    except PhraseTableError as e:
        if "empty" in e.message:
            assert split_words(source) == [] or split_words(target) == []
        return
    assert split_words(parsed[0]) != [] and split_words(parsed[1]) != []


# --- 12. other compression formats ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "compress"),
    [
        ("compress (.Z)", lambda data: b"\x1f\x9d\x90" + data),  # compress(1)'s magic is what is recognised
        ("legacy lzma (.lzma)", lambda data: lzma.compress(data, format=lzma.FORMAT_ALONE)),
        ("zip", lambda data: b"PK\x03\x04" + data),
        ("lz4", lambda data: b"\x04\x22\x4d\x18" + data),
    ],
)
def test_other_compression_is_named(model: Path, tmp_path: Path, name: str, compress) -> None:  # type: ignore[no-untyped-def]
    table = tmp_path / "in.gz"
    table.write_bytes(compress(b"".join(LINES)))
    code, err = run(["rescore", str(table), str(tmp_path / "out.gz"), "--model", str(model)])
    assert code == 3
    assert err.startswith(
        f"phrase-rescorer: error: {table}: {name}-compressed input: gzip, bzip2, xz, zstd and plain text are read"
    )
    assert os.listdir(tmp_path) == ["in.gz"]


def test_plain_table_starting_like_bzip2_is_read(model: Path, tmp_path: Path) -> None:
    table = tmp_path / "in.txt"
    table.write_bytes(b"BZh ||| la ||| 0.5\n")
    code, err = run(["rescore", str(table), str(tmp_path / "out.txt"), "--model", str(model)])
    assert code == 0, err


@pytest.mark.parametrize(
    ("command", "kind"), [("train", "sentence"), ("train-nmt", "phrase"), ("train-lm", "phrase"), ("train", "cslm")]
)
def test_resume_from_another_commands_state_is_refused_before_reading_the_data(
    trained_model: Path, tmp_path: Path, command: str, kind: str
) -> None:
    """The saved state's kind is checked with the outputs: the data are FIFOs no one writes, so
    a refusal that came after reading them would hang, not exit 4."""
    from phrase_rescorer.errors import EXIT_MODEL
    from tests.helpers.cslm import tiny_lm
    from tests.helpers.nmt import tiny_nmt

    made = {"phrase": lambda p: trained_model, "sentence": tiny_nmt, "cslm": tiny_lm}[kind](tmp_path / "made.pt")
    (tmp_path / "net.last.pt").write_bytes(Path(made).read_bytes())
    data = [tmp_path / "a", tmp_path / "b"]
    for fifo in data:
        os.mkfifo(fifo)
    inputs = [str(data[0])] if command != "train-nmt" else [str(p) for p in data]
    r = subprocess.run(
        [PYTHON, "-m", "phrase_rescorer", command, *inputs, str(tmp_path / "net.pt"), "--resume"],
        capture_output=True,
        env=cli_env(),
        timeout=120,
    )
    assert r.returncode == EXIT_MODEL, r.stderr
    assert f"{tmp_path / 'net.last.pt'}: a".encode() in r.stderr, r.stderr
    assert f"phrase-rescorer {command} --resume takes".encode() in r.stderr, r.stderr
