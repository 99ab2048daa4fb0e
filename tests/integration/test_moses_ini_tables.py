"""``moses-ini`` and the table forms Moses reads, with the real binarizers and decoders.

``moses-ini`` never exits 0 with an ini the decoder cannot load: a table in each binarized form
given to train-model.perl's PhraseDictionaryMemory line (or to a line of another binarized
type) gets the line type that loads it, and the decoder loads it with five TranslationModel0
features; anything else is refused (exit 5, one line naming the path). ``--binarize`` runs the
Moses binarizer with the table's score count and leaves only the finished table behind.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.helpers import moses as m
from tests.helpers.paths import PYTHON, cli_env
from tests.integration.conftest import rescored_table

pytestmark = pytest.mark.moses

TM = "name=TranslationModel0 num-features={n} path={path} input-factor=0 output-factor=0"
WEIGHTS = [0.1, 0.01, 0.06, 0.04]


def moses_ini(*args: str | Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [PYTHON, "-m", "phrase_rescorer", "moses-ini", *map(str, args)], capture_output=True, text=True, env=cli_env()
    )


def base_ini(here: Path, lm: Path, kind: str = "PhraseDictionaryMemory", path: Path = m.PHRASE_TABLE) -> Path:
    return m.write_ini(here / "moses.ini", f"{kind} {TM.format(n=4, path=path)}", lm, WEIGHTS)


def loads_with_five(moses: Path, ini: Path, here: Path, decoder: str = "moses") -> None:
    best = m.decode(moses, ini, here, decoder)
    assert len(best) == 8 and all(len(b.features["TranslationModel0"]) == 5 for b in best)


@pytest.fixture(scope="module")
def tables(moses: Path, work: Path, network: Path) -> dict[str, Path]:
    """The rescored table (5 scores) in every form, and the baseline's table binarized (4)."""
    here = work / "forms"
    here.mkdir()
    text = rescored_table(work, network)
    made = {
        "text": text,
        "compact": here / "pt5",
        "probing": here / "pt5.probing",
        "ondisk": here / "pt5.bin",
        "compact4": here / "pt4",
    }
    m.run([moses / "bin/processPhraseTableMin", "-in", text, "-out", made["compact"], "-nscores", 5, "-threads", 1])
    m.run([moses / "bin/CreateProbingPT", "--input-pt", text, "--output-dir", made["probing"], "--num-scores", 5])
    m.run([moses / "bin/CreateOnDiskPt", 1, 1, 5, 100, 2, text, made["ondisk"]])
    m.run(
        [
            moses / "bin/processPhraseTableMin",
            "-in",
            m.PHRASE_TABLE,
            "-out",
            made["compact4"],
            "-nscores",
            4,
            "-threads",
            1,
        ]
    )
    return made


@pytest.mark.parametrize(
    ("start", "form", "given", "decoder", "written"),
    [
        ("PhraseDictionaryMemory", "compact", "{}.minphr", "moses", "PhraseDictionaryCompact"),
        ("PhraseDictionaryMemory", "compact", "{}", "moses", "PhraseDictionaryCompact"),
        ("PhraseDictionaryMemory", "probing", "{}", "moses", "ProbingPT"),
        ("PhraseDictionaryMemory", "probing", "{}", "moses2", "ProbingPT"),
        ("PhraseDictionaryMemory", "ondisk", "{}", "moses", "PhraseDictionaryOnDisk"),
        ("PhraseDictionaryOnDisk", "compact", "{}.minphr", "moses", "PhraseDictionaryCompact"),
        ("ProbingPT", "ondisk", "{}", "moses", "PhraseDictionaryOnDisk"),
        ("PhraseDictionaryCompact", "text", "{}", "moses", None),  # refused: binarize it first
    ],
)
def test_each_form_gets_the_line_that_loads_it(
    moses: Path,
    work: Path,
    lm: Path,
    tables: dict[str, Path],
    start: str,
    form: str,
    given: str,
    decoder: str,
    written: str | None,
) -> None:
    here = work / f"line-{start}-{form}-{decoder}-{len(given)}"
    here.mkdir()
    base = base_ini(here, lm, start)
    table = given.format(tables[form])
    r = moses_ini(base, here / "out.ini", "--table", table)
    if written is None:
        assert r.returncode == 5 and r.stderr.count("\n") == 3, r.stderr  # the command on its own lines
        assert "is a text table; binarize it (--binarize compact)" in r.stderr
        assert not (here / "out.ini").exists()
        return
    assert r.returncode == 0, r.stderr
    line = f"{written} {TM.format(n=5, path=os.path.abspath(table))}\n"
    assert line in (here / "out.ini").read_text()
    loads_with_five(moses, here / "out.ini", here, decoder)


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("missing", "no such table (nor {t}.gz, nor {t}.minphr)"),
        ("inside-probing", "is a file inside the ProbingPT table"),
        ("inside-ondisk", "is a file inside the PhraseDictionaryOnDisk table"),
        ("compact-4-scores", "has 4 scores per line, but TranslationModel0 would get num-features=4+1=5"),
        ("not-a-table", "not a Compact phrase table made by processPhraseTableMin"),
        ("weight-nan", "a starting weight must be a finite number, not nan"),
        ("weight-inf", "a starting weight must be a finite number, not inf"),
    ],
)
def test_refused_with_one_line(work: Path, lm: Path, tables: dict[str, Path], case: str, message: str) -> None:
    here = work / f"refused-{case}"
    here.mkdir()
    base = base_ini(here, lm)
    table, extra = {
        "missing": (str(here / "nothing"), []),
        "inside-probing": (str(tables["probing"] / "config"), []),
        "inside-ondisk": (str(tables["ondisk"] / "Misc.dat"), []),
        "compact-4-scores": (str(tables["compact4"]), ["--features", "1"]),
        "not-a-table": (str(here / "x.minphr"), []),
        "weight-nan": (str(tables["text"]), ["--weight", "nan"]),
        "weight-inf": (str(tables["text"]), ["--weight", "inf"]),
    }[case]
    (here / "x.minphr").write_bytes(b"\x00" * 40)
    r = moses_ini(base, here / "out.ini", "--table", table, *extra)
    assert r.returncode == 5, r.stderr
    assert r.stderr.count("\n") == 1 and message.format(t=table) in r.stderr, r.stderr
    assert not (here / "out.ini").exists()


@pytest.mark.parametrize(
    ("kind", "made", "written", "decoder"),
    [
        ("compact", "phrase-table.rnn.minphr", "PhraseDictionaryCompact", "moses"),
        ("probing", "phrase-table.rnn.probing", "ProbingPT", "moses2"),
        ("ondisk", "phrase-table.rnn.bin", "PhraseDictionaryOnDisk", "moses"),
    ],
)
def test_binarize_in_one_step(
    moses: Path, work: Path, lm: Path, network: Path, kind: str, made: str, written: str, decoder: str
) -> None:
    here = work / f"binarize-{kind}"
    here.mkdir()
    text = here / "phrase-table.rnn.gz"
    text.write_bytes(rescored_table(work, network).read_bytes())
    base = base_ini(here, lm)
    for _ in range(2):  # the second run replaces the first one's table
        r = moses_ini(base, here / "out.ini", "--table", text, "--binarize", kind, "--moses", moses)
        assert r.returncode == 0, r.stderr
        assert sorted(p.name for p in here.iterdir()) == sorted(["moses.ini", "out.ini", text.name, made])
    path = here / ("phrase-table.rnn" if kind == "compact" else made)
    assert f"{written} {TM.format(n=5, path=path)}\n" in (here / "out.ini").read_text()
    loads_with_five(moses, here / "out.ini", here, decoder)


def test_binarize_failure_leaves_nothing(moses: Path, work: Path, lm: Path) -> None:
    """A table processPhraseTableMin cannot read (no alignment field) makes it abort: exit 5
    naming it and its error, nothing left behind."""
    here = work / "binarize-fails"
    here.mkdir()
    text = here / "pt.txt"
    text.write_text("b ||| x ||| 0.5 0.5 0.5 0.5 0.5\na ||| y ||| 0.5 0.5 0.5 0.5 0.5\n")
    r = moses_ini(base_ini(here, lm), here / "out.ini", "--table", text, "--binarize", "compact", "--moses", moses)
    assert r.returncode == 5 and r.stderr.count("\n") == 1 and "processPhraseTableMin failed on" in r.stderr, r.stderr
    assert sorted(p.name for p in here.iterdir()) == ["moses.ini", "pt.txt"]


@pytest.mark.parametrize(("form", "outcome"), [("compact", "segfault"), ("probing", "Is a directory")])
def test_why_the_line_type_matters(
    moses: Path, work: Path, lm: Path, tables: dict[str, Path], form: str, outcome: str
) -> None:
    """What the decoder does with a PhraseDictionaryMemory line on a binarized table (the ini
    moses-ini used to write): it segfaults on a .minphr, throws on a ProbingPT directory."""
    here = work / f"wrong-line-{form}"
    here.mkdir()
    path = Path(f"{tables[form]}.minphr") if form == "compact" else tables[form]
    ini = m.write_ini(here / "moses.ini", f"PhraseDictionaryMemory {TM.format(n=5, path=path)}", lm, [*WEIGHTS, 0.02])
    r = subprocess.run([str(moses / "bin/moses"), "-f", str(ini)], input=b"two girls\n", capture_output=True)
    if outcome == "segfault":
        assert r.returncode == -11, (r.returncode, r.stderr[-500:])
    else:
        assert r.returncode != 0 and b"Is a directory" in r.stderr, r.stderr[-500:]


def _recompressed(text: Path, here: Path, name: str) -> Path:
    """The rescored table's lines under ``name``, compressed as the name says (``.gz.bz2``
    style names are not used: each file holds one format), or gzip under a name without .gz."""
    import bz2
    import gzip
    import lzma

    import zstandard

    data = gzip.decompress(text.read_bytes())
    compress = {
        ".bz2": bz2.compress,
        ".xz": lzma.compress,
        ".zst": zstandard.ZstdCompressor().compress,
        ".gz": gzip.compress,
        ".txt": gzip.compress,  # gzip content under a name Moses reads raw
    }[Path(name).suffix]
    (here / name).write_bytes(compress(data))
    return here / name


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("pt.bz2", "a text table compressed with bzip2, which Moses does not load"),
        ("pt.xz", "a text table compressed with xz, which Moses does not load"),
        ("pt.zst", "a text table compressed with zstd, which Moses does not load"),
        ("pt.txt", "a gzip table whose name does not end in .gz"),
    ],
)
def test_tables_moses_cannot_decompress_are_refused(
    moses: Path, work: Path, lm: Path, tables: dict[str, Path], name: str, message: str
) -> None:
    """moses-ini refuses (exit 5, one line) a text table Moses decompresses never or by chance:
    it decompresses gzip only, by the name (moses/InputFileStream.cpp). The real decoder given
    the zstd table by hand fails: what the refusal spares the user."""
    here = work / f"compressed-{name}"
    here.mkdir()
    table = _recompressed(tables["text"], here, name)
    r = moses_ini(base_ini(here, lm), here / "out.ini", "--table", table)
    assert r.returncode == 5 and r.stderr.count("\n") == 1 and message in r.stderr, r.stderr
    assert not (here / "out.ini").exists()
    if name == "pt.zst":
        by_hand = m.write_ini(
            here / "by-hand.ini", f"PhraseDictionaryMemory {TM.format(n=5, path=table)}", lm, [*WEIGHTS, 0.2]
        )
        with pytest.raises(AssertionError, match="OutOfTokens|Unsupported compact rule table format"):
            m.decode(moses, by_hand, here)


def test_a_gzip_table_still_loads(moses: Path, work: Path, lm: Path, tables: dict[str, Path]) -> None:
    here = work / "compressed-gz"
    here.mkdir()
    table = _recompressed(tables["text"], here, "pt.gz")
    r = moses_ini(base_ini(here, lm), here / "out.ini", "--table", table)
    assert r.returncode == 0, r.stderr
    loads_with_five(moses, here / "out.ini", here)
