"""Moses' own scripts on the patched moses.ini: filter-model-given-input.pl keeps the new
column, and mert-moses.pl tunes all five TranslationModel0 weights."""

from __future__ import annotations

import gzip
import subprocess
from pathlib import Path

import pytest

from tests.helpers import moses as m
from tests.helpers.paths import PYTHON, cli_env
from tests.integration.conftest import rescored_table

pytestmark = pytest.mark.moses


@pytest.fixture(scope="module")
def patched_ini(moses: Path, work: Path, lm: Path, network: Path) -> Path:
    """The baseline ini patched with ``phrase-rescorer moses-ini`` (the command line)."""
    here = work / "tuning"
    here.mkdir()
    base = m.write_ini(
        here / "moses.ini",
        f"PhraseDictionaryMemory name=TranslationModel0 num-features=4 path={m.PHRASE_TABLE} "
        "input-factor=0 output-factor=0",
        lm,
        [0.1, 0.01, 0.06, 0.04],
    )
    table = rescored_table(work, network)
    ini = here / "moses.rnn.ini"
    r = subprocess.run(
        [PYTHON, "-m", "phrase_rescorer", "moses-ini", str(base), str(ini), "--table", str(table)],
        capture_output=True,
        env=cli_env(),
    )
    assert r.returncode == 0, r.stderr.decode()
    return ini


def _tm_line(ini: Path, prefix: str) -> str:
    lines = [line for line in ini.read_text().splitlines() if line.startswith(prefix)]
    assert len(lines) == 1, ini.read_text()
    return lines[0]


def test_filter_model_given_input_keeps_the_column(moses: Path, work: Path, patched_ini: Path) -> None:
    filtered = work / "filtered"
    m.run([moses / "scripts/training/filter-model-given-input.pl", filtered, patched_ini, m.DEV_EN])
    feature = _tm_line(filtered / "moses.ini", "PhraseDictionaryMemory name=TranslationModel0")
    assert " num-features=5 " in feature
    path = Path(feature.split(" path=")[1].split()[0])
    assert path.parent == filtered
    with gzip.open(path, "rt", encoding="utf-8") as f:
        lines = f.read().splitlines()
    assert lines and all(len(line.split(" ||| ")[2].split()) == 5 for line in lines)
    with gzip.open(rescored_table(work, Path("unused")), "rt", encoding="utf-8") as f:
        rescored = set(f.read().splitlines())
    assert set(lines) <= rescored  # the filter copies lines, the column included, unchanged
    assert len(_tm_line(filtered / "moses.ini", "TranslationModel0=").split()) == 6
    # and the decoder loads the filtered system
    assert len(m.decode(moses, filtered / "moses.ini", filtered)) == 8


def test_mert_tunes_five_weights(moses: Path, work: Path, patched_ini: Path) -> None:
    mert = work / "mert-work-rnn"  # a fresh working directory, as the README says
    m.run(
        [
            moses / "scripts/training/mert-moses.pl",
            m.DEV_EN,
            m.DEV_FR,
            moses / "bin/moses",
            patched_ini,
            f"--working-dir={mert}",
            f"--mertdir={moses / 'bin'}",
            "--maximum-iterations",
            "1",
            "--nbest",
            "20",
            "--decoder-flags=-threads 1",
            "--predictable-seeds",
        ],
        cwd=work,
    )
    tuned = mert / "moses.ini"
    assert " num-features=5 " in _tm_line(tuned, "PhraseDictionaryMemory name=TranslationModel0")
    weights = [float(w) for w in _tm_line(tuned, "TranslationModel0=").split()[1:]]
    assert len(weights) == 5 and weights != [0.1, 0.01, 0.06, 0.04, 0.2]
    # the feature list mert caches in its working directory (why the README asks for a fresh one)
    features = (mert / "features.list").read_text().splitlines()
    listed = [line for line in features if line.startswith("TranslationModel0=")]
    assert len(listed) == 1 and len(listed[0].split()) == 6


@pytest.mark.parametrize(
    ("binarizer", "ftype"),
    [
        ("processPhraseTableMin", "PhraseDictionaryCompact"),  # -nscores from num-features
        ("CreateOnDiskPt 1 1 5 100 2", "PhraseDictionaryOnDisk"),
        ("CreateProbingPT --num-scores 5", "ProbingPT"),
    ],
)
def test_filtering_binarizes_with_the_fragments_binarizers(
    moses: Path, work: Path, patched_ini: Path, binarizer: str, ftype: str
) -> None:
    """The ttable-binarizer lines of moses_configs/ems-rnn-rescoring.config, as EMS passes them
    to filter-model-given-input.pl: the decoder sees the same 5 scores as from the text table."""
    filtered = work / f"filtered-{ftype}"
    name, *args = binarizer.split()
    m.run(
        [
            moses / "scripts/training/filter-model-given-input.pl",
            filtered,
            patched_ini,
            m.DEV_EN,
            "-Binarizer",
            " ".join([str(moses / "bin" / name), *args]),
        ]
    )
    assert f"{ftype} name=TranslationModel0 num-features=5 " in (filtered / "moses.ini").read_text()
    text = m.decode(moses, patched_ini, work / "tuning")
    binary = m.decode(moses, filtered / "moses.ini", filtered)
    for a, b in zip(text, binary, strict=True):
        assert a.pairs == b.pairs
        assert b.features["TranslationModel0"] == pytest.approx(a.features["TranslationModel0"], abs=1e-4)
