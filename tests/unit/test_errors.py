"""The one table of exit codes (``phrase_rescorer.errors``): the documented table is it, row for
row; every exception class of the package ends a run with the code of its kind; a program
exits with those codes; no module but ``errors`` writes an exit code as a number."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import re
import signal
from collections.abc import Iterator
from pathlib import Path

import click
import pytest

import phrase_rescorer
from phrase_rescorer import errors
from phrase_rescorer.cli.common import UserError, run_guarded
from phrase_rescorer.errors import EXIT_CODES, Terminated, exit_code
from tests.helpers.paths import REPO

#: The header row of the documented table (``| exit | meaning |``, or ``code`` / ``exit code``).
TABLE_HEADER = re.compile(r"^\|\s*(?:exit(?: code| status)?|code)\s*\|\s*meaning\s*\|\s*$", re.I | re.M)

#: Every exception class the package defines, and the exit code it ends a run with. A new class
#: must be added here with its code (the test below lists the package's classes).
EXPECTED = {
    "analysis.plots.PlotsUnavailable": 2,
    "cli.common.UserError": 2,  # the default; a command gives another where it says so
    "compression.CompressionError": 1,  # its callers turn it into the input's (3) or the output's (6) error
    "data.line_limit.LineTooLong": 3,
    "data.subwords.SubwordError": 2,
    "devices.DeviceError": 2,
    "errors.HostError": 6,
    "errors.IniError": 5,
    "errors.InputError": 3,
    "errors.ModelError": 4,
    "errors.ProgramError": 1,
    "errors.Terminated": 143,  # SIGTERM; SIGHUP 129 (test_signal_exits)
    "errors.UsageError": 2,
    "experiment.report.ReportError": 3,
    "experiment.systems.ExperimentError": 3,  # the default; each refusal gives its kind
    "hybrid.bundle_read.BundleError": 2,
    "lm.kenlm.KenLMError": 6,
    "model.averaging.AveragingError": 2,
    "model.files.CheckpointError": 4,
    "moses.binarize.BinarizeError": 5,
    "moses.configs.ConfigsNotFound": 6,
    "moses.decoder.DecoderError": 6,
    "moses.ems_script.EmsScriptError": 2,
    "moses.ini.MosesIniError": 5,
    "moses.nbest.NbestError": 3,
    "moses.score_format.ScoreError": 4,
    "moses.phrase_table.PhraseTableError": 3,
    "moses.phrase_table.PhraseTableOSError": 6,
    "moses.phrase_table.PhraseTableStreamError": 3,
    "moses.table_forms.TableFormError": 5,
    "moses.table_reader._LineTooLong": 1,  # internal: the reader turns it into a PhraseTableError
    "moses.toolkit.MosesNotFound": 2,
    "output_paths.OutputError": 6,
    "output_paths.ReaderGone": 141,
    "parallel.distributed.DistributedError": 2,
    "reranking.mert.RerankError": 6,
    "reranking.tune.HeldOutError": 6,
    "reranking.weights.WeightsError": 2,
    "rescoring.options.OptionError": 2,
    "run_lock.LockHeld": 6,
    "run_lock.NotALock": 6,
    "training.log.TrainingLogError": 3,
    "training.loop.TrainingError": 2,
    "training.loop.Interrupted": 130,  # stopped by SIGINT; by SIGTERM 143
}

#: Classes whose instance needs its arguments to say its code.
INSTANCES = {
    "errors.Terminated": lambda cls: cls(signal.SIGTERM),
    "training.loop.Interrupted": lambda cls: cls(signal.SIGINT, 7, "m.last.pt"),
    "cli.common.UserError": lambda cls: cls("refused"),
    "experiment.systems.ExperimentError": lambda cls: cls("refused"),
}


def documented_table() -> tuple[Path, str]:
    """The page that holds the exit-code table (the README, or a page of docs/), and its text."""
    pages = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    holding = [p for p in pages if p.is_file() and TABLE_HEADER.search(p.read_text(encoding="utf-8"))]
    assert len(holding) == 1, f"the exit-code table ('| exit | meaning |') should be on one page: {holding}"
    return holding[0], holding[0].read_text(encoding="utf-8")


def parse_table(text: str) -> dict[int, str]:
    header = TABLE_HEADER.search(text)
    assert header is not None, "no exit-code table"
    table = text[header.start() :]
    table = table[: table.index("\n\n")] if "\n\n" in table else table
    rows = re.findall(r"^\| (\d+) \| (.+) \|$", table, flags=re.M)
    return {int(code): meaning.replace("\\|", "|") for code, meaning in rows}


def test_the_documented_table_is_the_errors_module_s() -> None:
    page, text = documented_table()
    assert parse_table(text) == EXIT_CODES, page


def test_parse_table_reads_rows_and_escaped_bars() -> None:
    text = (
        "intro\n\n| Exit code | meaning |\n|---|---|\n| 0 | fine |\n| 141 | `\\| head` went away |\n"
        "\nafter\n| 9 | no |\n"
    )
    assert parse_table(text) == {0: "fine", 141: "`| head` went away"}


def test_signal_exits() -> None:
    assert errors.signal_exit(signal.SIGHUP) == errors.EXIT_SIGHUP == 129
    assert errors.EXIT_SIGINT == 130 and errors.EXIT_SIGPIPE == 141 and errors.EXIT_SIGTERM == 143
    assert exit_code(Terminated(signal.SIGHUP)) == 129
    assert exit_code(KeyboardInterrupt()) == 130
    assert exit_code(BrokenPipeError()) == 141
    assert exit_code(PermissionError(13, "denied")) == 6
    assert exit_code(RuntimeError("a bug")) == 1
    assert set(EXPECTED.values()) <= set(EXIT_CODES)


def _package_exceptions() -> Iterator[tuple[str, type[BaseException]]]:
    for info in pkgutil.walk_packages(phrase_rescorer.__path__, "phrase_rescorer."):
        if info.name.endswith("__main__"):
            continue
        module = importlib.import_module(info.name)
        for name, obj in vars(module).items():
            if inspect.isclass(obj) and issubclass(obj, BaseException) and obj.__module__ == info.name:
                yield f"{info.name.removeprefix('phrase_rescorer.')}.{name}", obj


def test_every_exception_class_of_the_package_has_its_code() -> None:
    found = dict(_package_exceptions())
    assert sorted(found) == sorted(EXPECTED), "a new exception class: add it and its code to EXPECTED"
    for name, cls in found.items():
        error = INSTANCES.get(name, lambda c: c.__new__(c))(cls)
        assert exit_code(error) == EXPECTED[name], name


def _run(error: BaseException, monkeypatch: pytest.MonkeyPatch) -> int:
    @click.command()
    def fails() -> None:
        raise error

    monkeypatch.setattr("sys.argv", ["prog"])
    handlers = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        with pytest.raises(SystemExit) as stopped:
            run_guarded(fails, prog_name="prog")
    finally:
        for s, handler in handlers.items():
            signal.signal(s, handler)
    return int(stopped.value.code or 0)


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (UserError("refused"), 2),
        (UserError("bad data", errors.EXIT_INPUT), 3),
        (errors.InputError("pt.txt:1: malformed"), 3),
        (errors.ModelError("m.pt: not a model"), 4),
        (errors.IniError("moses.ini:3: num-features"), 5),
        (errors.HostError("moses failed"), 6),
        (FileNotFoundError(2, "No such file or directory", "x"), 6),
        (KeyboardInterrupt(), 130),
        (Terminated(signal.SIGHUP), 129),
        (Terminated(signal.SIGTERM), 143),
        (RuntimeError("[enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: can't allocate memory"), 6),
        (MemoryError(), 6),
    ],
)
def test_a_program_exits_with_the_table_s_code(
    error: BaseException, code: int, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert _run(error, monkeypatch) == code
    err = capsys.readouterr().err
    assert err.strip().startswith("prog: error: ") and "\n" not in err.strip(), err  # click writes a newline on ^C


def test_only_an_allocation_that_failed_is_out_of_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    """torch's CPU allocator (a plain RuntimeError), CUDA's, Python's: exit 6 and one line; any
    other RuntimeError is a bug, which keeps its traceback (exit 1)."""
    cpu = RuntimeError(
        "[enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: can't allocate memory: you tried to "
        "allocate 3200160016 bytes. Error code 12 (Cannot allocate memory)"
    )
    assert errors.out_of_memory(cpu) == (
        "out of memory: DefaultCPUAllocator: can't allocate memory: you tried to allocate 3200160016 bytes. "
        "Error code 12 (Cannot allocate memory)"
    )
    cuda = RuntimeError("CUDA out of memory. Tried to allocate 2.98 GiB.\nIf reserved but unallocated ...")
    assert errors.out_of_memory(cuda) == "out of memory: CUDA out of memory. Tried to allocate 2.98 GiB."
    assert errors.out_of_memory(MemoryError()) == "out of memory"
    assert exit_code(cpu) == exit_code(cuda) == exit_code(MemoryError()) == errors.EXIT_OS
    bug = RuntimeError("mat1 and mat2 shapes cannot be multiplied (3x16 and 8x16)")
    assert errors.out_of_memory(bug) is None and exit_code(bug) == errors.EXIT_INTERNAL
    with pytest.raises(RuntimeError, match="shapes cannot be multiplied"):
        _run(bug, monkeypatch)


#: Calls that end a program or carry its exit code.
_EXIT_CALLS = {"exit", "_exit", "_fail", "UserError", "ExperimentError", "SystemExit"}


def _literal_codes(path: Path) -> list[int]:
    """The lines of every integer literal given as an exit code: to ``sys.exit``, ``ctx.exit``,
    ``SystemExit``, ``_fail``, an error's code argument, ``exit_code=``, or returned by a
    ``main``."""
    found = []
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    for node in ast.walk(tree):
        values: list[ast.expr] = []
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            if name in _EXIT_CALLS:
                values += node.args[1:] if name in {"UserError", "ExperimentError"} else node.args
                values += [k.value for k in node.keywords if k.arg == "exit_code"]
            else:
                values += [k.value for k in node.keywords if k.arg == "exit_code"]
        elif isinstance(node, ast.FunctionDef) and (node.name == "main" or node.name.endswith("_main")):
            returned = [r.value for r in ast.walk(node) if isinstance(r, ast.Return) and r.value is not None]
            values += [
                v
                for r in returned
                for v in ([r.body, r.orelse] if isinstance(r, ast.IfExp) else [r])
                if isinstance(v, ast.Constant)
            ]
        for value in values:
            for sub in ast.walk(value):
                if isinstance(sub, ast.Constant) and type(sub.value) is int:
                    found.append(sub.lineno)
    return found


def test_no_exit_code_is_written_as_a_number_outside_errors() -> None:
    files = [p for p in (REPO / "phrase_rescorer").rglob("*.py") if p.name != "errors.py"]
    files += [p for p in (REPO / "bin").iterdir() if p.is_file()] + sorted((REPO / "benchmarks").glob("*.py"))
    assert [f"{path.relative_to(REPO)}:{line}" for path in files for line in _literal_codes(path)] == []


def test_the_literal_check_sees_a_planted_literal(tmp_path: Path) -> None:
    planted = tmp_path / "planted.py"
    planted.write_text(
        "import sys\n\n\ndef main():\n    raise UserError('x', exit_code=3)\n    return 6\n"
        "\n\ndef g():\n    sys.exit(128 + 2)\n    raise ExperimentError('y', 5)\n",
        encoding="utf-8",
    )
    assert sorted(_literal_codes(planted)) == [5, 6, 10, 10, 11]
