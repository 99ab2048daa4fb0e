"""The decoder's distinct n-best list (``moses.decoder.decode_nbest``), one run for ``translate-hybrid``
and the experiment: the command line, the list written as a temporary and renamed with a log file,
and a failure's message (its last stderr line; with a log, the log named and its end quoted). The
experiment's run (``experiment.moses_runs.decode_nbest``) refuses a failure as its own error, exit 6;
its 1-best decoding (``experiment.moses_runs.decode``) writes the run's n-best list in the same
decoder run where asked, as a temporary renamed once the output is complete.

The decoder is a stand-in (``bin/moses``, a shell script) that records its arguments, writes a
line on stderr, and writes the list, or fails, as the test asks."""

from __future__ import annotations

from pathlib import Path

import pytest

from phrase_rescorer.errors import EXIT_OS
from phrase_rescorer.experiment import moses_runs
from phrase_rescorer.experiment.systems import ExperimentError
from phrase_rescorer.moses.decoder import DecoderError, decode_nbest, decoder_argv
from phrase_rescorer.moses.toolkit import MosesToolkit

LIST = "0 ||| a b ||| LM0= -1 ||| -1\n"


def stand_in(tmp_path: Path, fails: bool) -> MosesToolkit:
    """A Moses whose decoder records its arguments in ``args``, then fails (exit 3) or writes its
    1-best line and ``LIST`` to the file after -n-best-list (none with ``NO_LIST`` set), then exits
    with ``EXIT_AFTER`` (default 0)."""
    (tmp_path / "moses" / "bin").mkdir(parents=True)
    decoder = tmp_path / "moses" / "bin" / "moses"
    decoder.write_text(
        "#!/bin/sh\n"
        f'echo "$@" > "{tmp_path}/args"\n'
        'echo "Loading table" >&2; echo "line two" >&2\n'
        + ("exit 3\n" if fails else "")
        + "echo 'a b '\n"  # its 1-best output, one line for the one source line
        + 'while [ $# -gt 0 ] && [ "$1" != -n-best-list ]; do shift; done\n'
        + (f'[ $# -gt 0 ] && [ -z "$NO_LIST" ] && printf \'{LIST.strip()}\\n\' > "$2"\n')
        + 'exit "${EXIT_AFTER:-0}"\n'
    )
    decoder.chmod(0o755)
    return MosesToolkit(str(tmp_path / "moses"))


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    (tmp_path / "moses.ini").write_text("[feature]\n")
    (tmp_path / "in.txt").write_text("a b\n")
    return {"ini": tmp_path / "moses.ini", "source": tmp_path / "in.txt", "out": tmp_path / "out.nbest"}


def test_the_command_line(tmp_path: Path, files) -> None:
    toolkit = stand_in(tmp_path, fails=False)
    decode_nbest(toolkit, str(files["ini"]), str(files["source"]), str(files["out"]), 7, threads=2)
    assert (tmp_path / "args").read_text().split() == [
        *decoder_argv(toolkit, str(files["ini"]), str(files["source"]), 2)[1:],
        "-n-best-list",
        str(files["out"]),
        "7",
        "distinct",
    ]
    assert decoder_argv(toolkit, "m.ini", "in", 2) == [
        toolkit.decoder, "-f", str(Path("m.ini").absolute()), "-input-file", str(Path("in").absolute()), "-threads", "2"
    ]  # fmt: skip
    assert files["out"].read_text() == LIST


def test_with_a_log_the_list_is_renamed_once_complete(tmp_path: Path, files) -> None:
    toolkit = stand_in(tmp_path, fails=False)
    log = tmp_path / "out.nbest.log"
    decode_nbest(toolkit, str(files["ini"]), str(files["source"]), str(files["out"]), 7, log=str(log))
    assert (tmp_path / "args").read_text().split()[-3:] == [f"{files['out']}.partial", "7", "distinct"]
    assert files["out"].read_text() == LIST
    assert not Path(f"{files['out']}.partial").exists()
    assert log.read_text() == "Loading table\nline two\n"


def test_a_failure_quotes_stderr_or_the_log(tmp_path: Path, files) -> None:
    toolkit = stand_in(tmp_path, fails=True)
    args = (toolkit, str(files["ini"]), str(files["source"]), str(files["out"]), 7)
    with pytest.raises(DecoderError) as caught:
        decode_nbest(*args, what="IN lines 1-1")
    assert str(caught.value) == "moses failed (exit 3) on IN lines 1-1: line two"
    assert caught.value.exit_code == EXIT_OS
    log = tmp_path / "out.nbest.log"
    with pytest.raises(DecoderError) as caught:
        decode_nbest(*args, log=str(log))
    assert str(caught.value) == f"moses failed (exit 3) on {files['source']}; see {log}:\nLoading table\nline two\n"
    assert not files["out"].exists()


def test_the_experiment_keeps_its_log_and_its_error(tmp_path: Path, files) -> None:
    toolkit = stand_in(tmp_path, fails=False)
    moses_runs.decode_nbest(toolkit, str(files["ini"]), str(files["source"]), str(files["out"]), 7, threads=2)
    assert files["out"].read_text() == LIST and not Path(f"{files['out']}.partial").exists()
    assert Path(f"{files['out']}.log").read_text() == "Loading table\nline two\n"
    files["out"].unlink()
    toolkit = stand_in(tmp_path / "failing", fails=True)
    with pytest.raises(ExperimentError) as caught:
        moses_runs.decode_nbest(toolkit, str(files["ini"]), str(files["source"]), str(files["out"]), 7)
    log = f"{files['out']}.log"
    assert str(caught.value) == f"moses failed (exit 3) on {files['source']}; see {log}:\nLoading table\nline two\n"
    assert caught.value.exit_code == EXIT_OS
    assert not files["out"].exists()


def test_the_experiment_writes_the_list_with_the_1best_output(tmp_path: Path, files) -> None:
    toolkit = stand_in(tmp_path, fails=False)
    best = tmp_path / "test.1best"
    args = (toolkit, str(files["ini"]), str(files["source"]), str(best))
    assert moses_runs.decode(*args, threads=2, nbest=(str(files["out"]), 7)) == ["a b"]
    assert (tmp_path / "args").read_text().split() == [
        *decoder_argv(toolkit, str(files["ini"]), str(files["source"]), 2)[1:],
        "-n-best-list",
        f"{files['out']}.partial",
        "7",
        "distinct",
    ]
    assert files["out"].read_text() == LIST and not Path(f"{files['out']}.partial").exists()
    assert best.read_text() == "a b \n"  # as the decoder wrote it
    files["out"].unlink()
    assert moses_runs.decode(*args) == ["a b"]  # without a list: the plain command line
    assert (tmp_path / "args").read_text().split() == decoder_argv(toolkit, *args[1:3], 1)[1:]
    assert not files["out"].exists()


def test_the_experiment_refuses_a_decoding_without_its_list(tmp_path: Path, files, monkeypatch) -> None:
    toolkit = stand_in(tmp_path, fails=False)
    monkeypatch.setenv("NO_LIST", "1")
    best = tmp_path / "test.1best"
    with pytest.raises(ExperimentError) as caught:
        moses_runs.decode(toolkit, str(files["ini"]), str(files["source"]), str(best), nbest=(str(files["out"]), 7))
    assert str(caught.value) == f"moses wrote no n-best list for {files['source']}; see {best}.log"
    assert caught.value.exit_code == EXIT_OS
    assert not best.exists() and not files["out"].exists()


def test_a_failed_decoding_leaves_no_list(tmp_path: Path, files, monkeypatch) -> None:
    toolkit = stand_in(tmp_path, fails=False)
    monkeypatch.setenv("EXIT_AFTER", "4")  # the list written, then the decoder fails
    best = tmp_path / "test.1best"
    with pytest.raises(ExperimentError) as caught:
        moses_runs.decode(toolkit, str(files["ini"]), str(files["source"]), str(best), nbest=(str(files["out"]), 7))
    assert str(caught.value).startswith(f"moses failed (exit 4) on {files['source']}; see {best}.log")
    assert (tmp_path / "args").read_text().split()[-3:] == [f"{files['out']}.partial", "7", "distinct"]
    assert not best.exists() and not files["out"].exists() and not Path(f"{files['out']}.partial").exists()
