"""Bad input, end to end: every case runs the real command line (``phrase-rescorer`` through
``run_guarded``, in this process or as a subprocess) and checks the exit code, the one-line
message (file and line where there is one) and what is left at the output path.

Expected output states:

* ``scored``: OUT is IN with one column inserted at the end of every scores field, every other
  byte identical, and each line's column equal to that line's own log p(f|e) computed pair by
  pair with ``sequence_log_probs`` (so lines are neither lost, reordered nor truncated);
* ``absent``: nothing at OUT and no temporary file beside it;
* ``unchanged``: the file that was at OUT before the run (written by the case) is byte for byte
  what it was, and no temporary is left.

A full disk is ``test_disk_full.py``'s.
"""

from __future__ import annotations

import gzip
import os
import re
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import torch

from phrase_rescorer.errors import EXIT_CODES
from phrase_rescorer.model.checkpoint import load_checkpoint
from phrase_rescorer.rescoring.engine import rescore_table
from tests.helpers.cli_run import left_behind, run_cli, subprocess_env
from tests.helpers.paths import PYTHON, SAMPLE
from tests.helpers.rescore_data import appended_columns, log_column, read_lines, reference_log_probs

pytestmark = pytest.mark.usefixtures("one_thread")

REL = 1e-5  # log-space tolerance against the pair-by-pair reference (see test_scoring.py)
SORTED = b"".join(read_lines(SAMPLE)[:60])  # real lines (5 fields), in the table's sorted order
SORTED_2K = b"".join(read_lines(SAMPLE)[:2000])  # 250 KB, 90 KB gzipped
FIRST, SECOND = read_lines(SAMPLE)[:2]
S4 = b"0.5 0.25 0.5 0.125"  # as many scores as the sample's lines
LONG_SOURCE = " ".join(["the"] * 10_000).encode()
LONG_TARGET = " ".join(["la", "maison", "bleue", "&#124;"] * 2_500).encode()


# --- the table of cases -----------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    id: str
    table: bytes = SORTED  # written to IN
    code: int = 0
    message: str = ""  # regex searched in stderr; {in} {out} {model} {dir} are filled in
    output: str = "scored"  # scored | absent | unchanged (see the module docstring)
    in_name: str = "in.txt"
    out_name: str = "out.txt"
    args: tuple[str, ...] = ("-q", "rescore", "{in}", "{out}", "--model", "{model}")
    setup: Callable[[Path, Path], None] | None = None  # (directory, tiny model): extra files
    subprocess: bool = False  # run `python -m phrase_rescorer` instead of in this process
    stdin: bytes | None = None  # (subprocess only)


def _gzip_cut(data: bytes) -> bytes:
    return gzip.compress(data)[:-30]


def _gzip_flipped(data: bytes, where: int) -> bytes:
    packed = bytearray(gzip.compress(data))
    packed[where] ^= 0xFF
    return bytes(packed)


def _model_variant(change: Callable[[dict], object]) -> Callable[[Path, Path], None]:
    """A setup writing DIR/other.pt: the tiny model's payload changed by ``change``."""

    def setup(directory: Path, model: Path) -> None:
        payload = torch.load(model, weights_only=True)
        change(payload)
        torch.save(payload, directory / "other.pt")

    return setup


def _nan_weights(payload: dict) -> None:
    weight = next(k for k in payload["state_dict"] if k.endswith("weight"))
    payload["state_dict"][weight].fill_(float("nan"))


def _model_bytes(cut: Callable[[bytes], bytes]) -> Callable[[Path, Path], None]:
    def setup(directory: Path, model: Path) -> None:
        (directory / "other.pt").write_bytes(cut(model.read_bytes()))

    return setup


def _rescored_input(directory: Path, model: Path) -> None:
    rescore_table(str(directory / "in.txt"), str(directory / "first.txt"), str(model))
    os.replace(directory / "first.txt", directory / "in.txt")


def _model_copy(link: bool) -> Callable[[Path, Path], None]:
    def setup(directory: Path, model: Path) -> None:
        shutil.copyfile(model, directory / "other.pt")
        if link:
            (directory / "link.pt").symlink_to(directory / "other.pt")

    return setup


def _old_output(directory: Path, model: Path) -> None:
    (directory / "out.txt").write_bytes(b"an earlier run's output\n")


def _ini(features: int, columns: int) -> Callable[[Path, Path], None]:
    """moses.ini whose TranslationModel0 says ``features`` for a table pt.txt with 4 scores, and
    a rescored table with ``columns`` scores."""

    def setup(directory: Path, model: Path) -> None:
        (directory / "pt.txt").write_bytes(b"a ||| b ||| 0.5 0.4 0.3 0.2 ||| 0-0 ||| 1 1 1\n")
        scores = " ".join(["0.5"] * columns).encode()
        (directory / "rescored.txt").write_bytes(b"a ||| b ||| %s ||| 0-0 ||| 1 1 1\n" % scores)
        (directory / "moses.ini").write_text(
            "[feature]\nWordPenalty\n"
            f"PhraseDictionaryMemory name=TranslationModel0 num-features={features} "
            f"path={directory}/pt.txt input-factor=0 output-factor=0\n"
            f"[weight]\nWordPenalty0= -1\nTranslationModel0= {' '.join(['0.2'] * features)}\n"
        )

    return setup


INI_ARGS = ("-q", "moses-ini", "{dir}/moses.ini", "{out}", "--table", "{dir}/rescored.txt")


def _ini_table(table: str, extra: tuple[str, ...] = ()) -> tuple[str, ...]:
    """moses-ini's arguments with --table TABLE (in the case's directory) and ``extra``."""
    return (*INI_ARGS[:-1], "{dir}/" + table, *extra)


def _ini_and(files: dict[str, bytes]) -> Callable[[Path, Path], None]:
    """The setup of ``_ini(4, 5)``, and ``files`` (relative paths) written beside it."""

    def setup(directory: Path, model: Path) -> None:
        _ini(4, 5)(directory, model)
        for name, data in files.items():
            (directory / name).parent.mkdir(parents=True, exist_ok=True)
            (directory / name).write_bytes(data)

    return setup


OTHER_MODEL = ("-q", "rescore", "{in}", "{out}", "--model", "{dir}/other.pt")
LINE2 = r"{in}:2: "

CASES = [
    # --- compression: told by content, not by name
    Case(
        "truncated gzip",
        _gzip_cut(SORTED_2K),
        3,
        r"{in}:\d+: truncated or corrupt gzip stream",
        "absent",
        in_name="in.gz",
    ),
    # decodes into damaged lines until one is refused, or until the checksum at the end
    Case(
        "corrupt gzip (a byte flipped mid-stream)",
        _gzip_flipped(SORTED_2K, 45_000),
        3,
        r"{in}:\d+: ",
        "absent",
        in_name="in.gz",
    ),
    # every line reads and scores, then the CRC-32 at the end does not match: nothing is written
    Case(
        "corrupt gzip (CRC-32 flipped)",
        _gzip_flipped(SORTED_2K, -8),
        3,
        r"{in}:2001: truncated or corrupt gzip stream: CRC check failed",
        "absent",
        in_name="in.gz",
    ),
    Case(
        "gzip followed by garbage",
        gzip.compress(SORTED) + b"garbage",
        3,
        r"{in}:61: truncated or corrupt gzip stream: Not a gzipped file",
        "absent",
        in_name="in.gz",
    ),
    Case("plain text named .gz", SORTED, in_name="in.gz", out_name="out.gz"),
    Case("gzip named .txt", gzip.compress(SORTED), in_name="in.txt"),
    Case(
        "concatenated gzip members (cat a.gz b.gz)",
        gzip.compress(SORTED[:3000]) + gzip.compress(SORTED[3000:]),
        in_name="in.gz",
    ),
    Case(
        "gzip on stdin, plain on stdout",
        b"",
        0,
        "",
        "scored",
        subprocess=True,
        args=("-q", "rescore", "-", "-", "--model", "{model}"),
        stdin=gzip.compress(SORTED),
    ),
    # --- encodings and line ends
    Case("invalid UTF-8 in a phrase", FIRST + b"\xff\xfe ||| la ||| 0.5\n", 3, LINE2 + "invalid UTF-8", "absent"),
    Case("invalid UTF-8 after the scores (kept as bytes)", FIRST + b"b ||| la ||| " + S4 + b" ||| 0-0 ||| \xff\xfe\n"),
    Case("CRLF line ends (kept)", SORTED.replace(b"\n", b"\r\n")),
    Case("mixed CRLF and LF", FIRST.replace(b"\n", b"\r\n") + SECOND),
    Case("last line without a newline", SORTED.rstrip(b"\n")),
    Case("UTF-8 byte-order mark (kept, part of the first phrase)", b"\xef\xbb\xbf" + FIRST),
    # --- malformed lines
    Case("fewer than 3 fields", FIRST + b"b ||| la\n", 3, LINE2 + "expected 3 to 7 fields.*found 2", "absent"),
    Case(
        "more than 7 fields",
        FIRST + b"b ||| la ||| 1 ||| 2 ||| 3 ||| 4 ||| 5 ||| 6\n",
        3,
        LINE2 + "expected 3 to 7 fields.*found 8",
        "absent",
    ),
    Case("empty line", FIRST + b"\n" + SECOND, 3, LINE2 + "expected 3 to 7 fields.*found 1", "absent"),
    Case("empty source phrase", FIRST + b" ||| la ||| 0.5\n", 3, LINE2 + "empty source phrase", "absent"),
    Case("empty target phrase", FIRST + b"b |||   ||| 0.5\n", 3, LINE2 + "empty target phrase", "absent"),
    Case("separator without spaces", FIRST + b"b|||la|||0.5\n", 3, LINE2 + "field separator is not", "absent"),
    Case("non-numeric score", FIRST + b"b ||| la ||| 0.5 x ||| 0-0\n", 3, LINE2 + "non-numeric score 'x'", "absent"),
    Case("nan score", FIRST + b"b ||| la ||| nan\n", 3, LINE2 + "non-numeric score 'nan'", "absent"),
    Case(
        "a line with another score count than the first",
        FIRST + b"b ||| la ||| 0.5 0.5 0.5\n",
        3,
        LINE2 + "3 scores, but line 1 has 4: every line of a Moses table carries the same number",
        "absent",
    ),
    Case(
        "negative score (a log-domain table)",
        FIRST + b"b ||| la ||| 0.5 -2.3 0.5 1e-5\n",
        3,
        LINE2 + "negative score -2.3: Moses takes the log of every score",
        "absent",
    ),
    Case("zero and minus zero scores (kept)", FIRST + b"b ||| la ||| 0 -0 0.0 -0e-3\n"),
    Case(
        "a table rescored already (its last column is the new one)",
        code=3,
        output="absent",
        setup=_rescored_input,
        message=r"{in}: already rescored: on lines 1-60 the last 1 score\(s\) are exactly",
    ),
    Case("missing scores field", FIRST + b"b ||| la ||| \n", 3, LINE2 + "missing scores field", "absent"),
    Case(
        "bad line on stdin",
        FIRST + b"b ||| la\n",
        3,
        r"-:2: expected 3 to 7 fields",
        "absent",
        subprocess=True,
        args=("-q", "rescore", "-", "{out}", "--model", "{model}"),
        stdin=FIRST + b"b ||| la\n",
    ),
    Case(
        "failed run keeps an earlier output",
        FIRST + b"b ||| la\n",
        3,
        LINE2 + "expected 3",
        "unchanged",
        setup=_old_output,
    ),
    Case(
        "inspect: truncated gzip (figures would be short)",
        _gzip_cut(SORTED_2K),
        3,
        r"{in}:2000: truncated or corrupt gzip stream",
        "absent",
        in_name="in.gz",
        args=("-q", "inspect", "{in}"),
    ),
    Case(
        "inspect: missing file",
        code=6,
        output="absent",
        args=("-q", "inspect", "{dir}/none.gz"),
        message=r"{dir}/none.gz: cannot read: No such file or directory",
    ),
    # --- unusual but valid tables
    Case(
        "10,000-token phrases (scored, not skipped, where --max-tokens allows them)",
        FIRST + LONG_SOURCE + b" ||| la ||| " + S4 + b" ||| 0-0\n" + b"the ||| " + LONG_TARGET + b" ||| " + S4 + b"\n",
        args=("-q", "rescore", "{in}", "{out}", "--model", "{model}", "--max-tokens", "10000"),
    ),
    Case(
        "10,000-token phrase over the default --max-tokens (refused before scoring)",
        FIRST + LONG_SOURCE + b" ||| la ||| " + S4 + b" ||| 0-0\n",
        3,
        r"{in}:2: 10,000 tokens, more than --max-tokens 1,000",
        "absent",
    ),
    Case("duplicate lines", FIRST + FIRST + FIRST + SECOND),
    Case(
        "unsorted table (input order, one warning)",
        SORTED[len(FIRST) + len(SECOND) :] + FIRST + SECOND,
        0,
        r"warning: {in}:59: the input is not sorted by source phrase \(LC_ALL=C\); lines are scored and written "
        r"in input order, but Moses' binarizers .* need a sorted table: sort it with LC_ALL=C sort before binarizing",
    ),
    Case("empty input file", b"", 3, r"{in}: empty phrase table: no lines to rescore", "absent"),
    Case("empty gzip stream", gzip.compress(b""), 3, r"{in}: empty phrase table", "absent", in_name="in.gz"),
    # --- the model file
    Case(
        "model of another format version",
        code=4,
        output="absent",
        args=OTHER_MODEL,
        setup=_model_variant(lambda p: p.update(format_version=99)),
        message=r"{dir}/other.pt: model file format version 99 .* reads format versions 1, 2",
    ),
    Case(
        "truncated model (first 5000 bytes)",
        code=4,
        output="absent",
        args=OTHER_MODEL,
        setup=_model_bytes(lambda b: b[:5000]),
        message=r"{dir}/other.pt: not a readable .*truncated or corrupt",
    ),
    Case(
        "truncated model (last 100 bytes cut)",
        code=4,
        output="absent",
        args=OTHER_MODEL,
        setup=_model_bytes(lambda b: b[:-100]),
        message=r"{dir}/other.pt: not a readable .*truncated or corrupt",
    ),
    Case(
        "empty model file",
        code=4,
        output="absent",
        args=OTHER_MODEL,
        setup=_model_bytes(lambda b: b""),
        message=r"{dir}/other.pt: not a readable phrase_rescorer model",
    ),
    Case(
        "a text file as the model",
        code=4,
        output="absent",
        args=OTHER_MODEL,
        setup=_model_bytes(lambda b: b"the cat sat on the mat\nhello\n"),
        message=r"{dir}/other.pt: not a readable phrase_rescorer model",
    ),
    Case(
        "a few bytes of junk as the model",
        code=4,
        output="absent",
        args=OTHER_MODEL,
        setup=_model_bytes(lambda b: b"junk\n"),
        message=r"{dir}/other.pt: not a readable phrase_rescorer model",
    ),
    Case(
        "a torch file that is not a model",
        code=4,
        output="absent",
        args=OTHER_MODEL,
        setup=_model_variant(lambda p: p.update(format="something else")),
        message=r"{dir}/other.pt: not a phrase_rescorer model file",
    ),
    Case("missing model file", code=4, output="absent", args=OTHER_MODEL, message=r"{dir}/other.pt: no such model"),
    Case(
        "model with NaN weights (fails while scoring)",
        code=4,
        output="absent",
        args=OTHER_MODEL,
        setup=_model_variant(_nan_weights),
        message=r"the network gave log p = nan for {in}:1; .*unusable",
    ),
    # --- moses.ini
    Case(
        "moses.ini num-features does not match its table",
        code=5,
        output="absent",
        args=INI_ARGS,
        out_name="moses.rnn.ini",
        setup=_ini(3, 4),
        message=r"{dir}/moses.ini:3: TranslationModel0 has num-features=3 but its table .* has 4 scores",
    ),
    Case(
        "moses-ini given the table that was not rescored",
        code=5,
        output="absent",
        args=INI_ARGS,
        out_name="moses.rnn.ini",
        setup=_ini(4, 4),
        message=r"{dir}/rescored.txt has 4 scores per line, not more than the 4 that TranslationModel0 already has",
    ),
    Case(
        "moses-ini --features 1 for a table with 2 more columns",
        code=5,
        output="absent",
        args=(*INI_ARGS, "--features", "1"),
        out_name="moses.rnn.ini",
        setup=_ini(4, 6),
        message=r"has 6 scores per line, but TranslationModel0 would get num-features=4\+1=5",
    ),
    Case(
        "moses-ini --table that does not exist",
        code=5,
        output="absent",
        args=_ini_table("nothing"),
        out_name="moses.rnn.ini",
        setup=_ini(4, 5),
        message=r"{dir}/nothing: no such table \(nor",
    ),
    Case(
        "moses-ini --table a file inside a ProbingPT directory",
        code=5,
        output="absent",
        args=_ini_table("pt.probing/config"),
        out_name="moses.rnn.ini",
        setup=_ini_and({"pt.probing/config": b"num_scores\t5\n", "pt.probing/probing_hash.dat": b"x"}),
        message=r"pt.probing/config is a file inside the ProbingPT table {dir}/pt.probing: give the directory",
    ),
    Case(
        "moses-ini --table a directory that is no table",
        code=5,
        output="absent",
        args=_ini_table("sub"),
        out_name="moses.rnn.ini",
        setup=_ini_and({"sub/file": b"x"}),
        message=r"{dir}/sub is a directory but not a binarized phrase table",
    ),
    Case(
        "moses-ini --table a .minphr that is not one",
        code=5,
        output="absent",
        args=_ini_table("pt.minphr"),
        out_name="moses.rnn.ini",
        setup=_ini_and({"pt.minphr": b"\x00" * 40}),
        message=r"{dir}/pt.minphr: not a Compact phrase table made by processPhraseTableMin",
    ),
    Case(
        "moses-ini --weight nan",
        code=5,
        output="absent",
        args=(*INI_ARGS, "--weight", "nan"),
        out_name="moses.rnn.ini",
        setup=_ini(4, 5),
        message=r"a starting weight must be a finite number, not nan",
    ),
    Case(
        "moses-ini --weight inf",
        code=5,
        output="absent",
        args=(*INI_ARGS, "--weight", "-inf"),
        out_name="moses.rnn.ini",
        setup=_ini(4, 5),
        message=r"a starting weight must be a finite number, not -inf",
    ),
    # --- paths
    Case(
        "output in a missing directory",
        code=6,
        output="absent",
        out_name="missing/out.gz",
        message=r"{out}: output directory does not exist",
    ),
    Case(
        "moses.ini output in a missing directory",
        code=6,
        output="absent",
        args=INI_ARGS,
        out_name="missing/moses.rnn.ini",
        setup=_ini(4, 5),
        message=r"{out}: output directory does not exist",
    ),
    Case(
        "output is a directory",
        code=6,
        output="unchanged",
        out_name="sub",
        setup=lambda d, m: (d / "sub").mkdir(),
        message=r"{out}: output path is a directory",
    ),
    Case(
        "missing input file",
        code=6,
        output="absent",
        args=("-q", "rescore", "{dir}/none.gz", "{out}", "--model", "{model}"),
        message=r"{dir}/none.gz: cannot read: No such file or directory",
    ),
    Case(
        "output path equal to the input path (refused)",
        code=6,
        output="unchanged",
        out_name="in.txt",
        message=r"{out}: output is the same file as the input",
    ),
    Case(
        "output path equal to the model file (refused)",
        code=6,
        output="unchanged",
        out_name="other.pt",
        args=OTHER_MODEL,
        setup=_model_copy(link=False),
        message=r"{out}: output is the same file as the model file",
    ),
    Case(
        "output path a symbolic link to the model file (refused)",
        code=6,
        output="unchanged",
        out_name="link.pt",
        args=OTHER_MODEL,
        setup=_model_copy(link=True),
        message=r"{out}: output is the same file as the model file",
    ),
    Case(
        "output path naming the input by another spelling",
        code=6,
        output="unchanged",
        out_name="in.txt",
        args=("-q", "rescore", "{in}", "{dir}/./sub/../in.txt", "--model", "{model}"),
        setup=lambda d, m: (d / "sub").mkdir(),
        message=r"output is the same file as the input",
    ),
]


def _fill(text: str, paths: dict[str, str], escape: bool) -> str:
    for key, value in paths.items():
        text = text.replace("{" + key + "}", re.escape(value) if escape else value)
    return text


def snapshot(path: Path) -> bytes | list[str] | None:
    """What is at ``path``: a file's bytes, a directory's listing, or None."""
    if path.is_dir():
        return sorted(os.listdir(path))
    return path.read_bytes() if path.exists() else None


def check_scored(in_path: Path, out_path: Path, model: Path) -> None:
    """OUT = IN + one column, byte for byte, each column the line's own reference log p
    (floored at -100, as the prob column is)."""
    got = log_column(appended_columns(in_path, out_path))
    assert np.all(np.isfinite(got)) and np.all(got <= 0)
    ref = reference_log_probs(load_checkpoint(str(model)), in_path)
    # the prob column holds exp(-100) for anything lower (Moses floors every log score there)
    want = np.maximum(np.array([ref[i + 1] for i in range(len(got))]), -100.0)
    assert np.all(np.abs(got - want) <= REL * np.maximum(1.0, np.abs(want)))


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input(
    case: Case, model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    in_path, out_path = tmp_path / case.in_name, tmp_path / case.out_name
    in_path.write_bytes(case.table)
    if case.setup is not None:
        case.setup(tmp_path, model)
    before = snapshot(out_path)
    paths = {"in": str(in_path), "out": str(out_path), "model": str(model), "dir": str(tmp_path)}
    args = [_fill(a, paths, escape=False) for a in case.args]
    stdout = b""
    if case.subprocess:
        r = subprocess.run(
            [PYTHON, "-m", "phrase_rescorer", *args],
            input=case.stdin or b"",
            capture_output=True,
            env=subprocess_env(),
            timeout=300,
        )
        code, err, stdout = r.returncode, r.stderr.decode(), r.stdout
    else:
        code, err = run_cli(args, monkeypatch, capsys)
    assert code == case.code, err
    assert "Traceback" not in err
    if case.message:
        assert re.search(_fill(case.message, paths, escape=True), err), err
    if case.code != 0:  # the error is one line: PROGRAM: error: message
        errors = [line for line in err.splitlines() if "error:" in line]
        assert len(errors) == 1 and errors[0].startswith("phrase-rescorer: error: "), err
    elif not case.message:
        assert err == "", err
    if case.output == "scored":
        if args[3] == "-":  # stdout
            out_path.write_bytes(stdout)
        if args[2] == "-":
            in_path.write_bytes(case.stdin or b"")
        check_scored(in_path, out_path, model)
    elif case.output == "absent":
        assert not out_path.exists()
    else:
        assert case.output == "unchanged" and before is not None and snapshot(out_path) == before
    assert left_behind(tmp_path) == []


def test_every_case_is_listed_once() -> None:
    ids = [c.id for c in CASES]
    assert len(ids) == len(set(ids)) >= 20


def test_scores_of_an_unsorted_table_are_in_input_order(model: Path, tmp_path: Path, monkeypatch, capsys) -> None:
    """The same lines sorted and shuffled: every line gets the score it has in the sorted run."""
    lines = read_lines(SAMPLE)[:300]
    shuffled = [lines[i] for i in np.random.default_rng(5).permutation(len(lines))]
    (tmp_path / "sorted.txt").write_bytes(b"".join(lines))
    (tmp_path / "shuffled.txt").write_bytes(b"".join(shuffled))
    scores = {}
    for name in ("sorted", "shuffled"):
        code, err = run_cli(
            ["-q", "rescore", str(tmp_path / f"{name}.txt"), str(tmp_path / f"{name}.out"), "--model", str(model)],
            monkeypatch,
            capsys,
        )
        assert code == 0
        assert (err.count("not sorted") == 1) == (name == "shuffled"), err
        values = appended_columns(tmp_path / f"{name}.txt", tmp_path / f"{name}.out")
        scores[name] = {
            line: float(v[0]) for line, v in zip(lines if name == "sorted" else shuffled, values, strict=True)
        }
    for line, value in scores["shuffled"].items():
        assert abs(np.log(value) - np.log(scores["sorted"][line])) <= REL * max(1.0, abs(np.log(value)))


def test_the_exit_code_table_covers_every_code_these_cases_see() -> None:
    """The table of exit codes (``errors.EXIT_CODES``, which the documented table is, row for row:
    tests/unit/test_errors.py) covers every code these cases see."""
    assert {c.code for c in CASES} | {130, 143} <= set(EXIT_CODES)
