"""The EMS fragment (moses_configs/ems-rnn-rescoring.config) in the real experiment.perl.

The experiment starts where the table exists: ``phrase-translation-table`` is given as EMS
names it, the stem ``model/phrase-table.1`` of ``model/phrase-table.1.gz``. Its rescoring line
and its ``script`` line are the fragment's own (only the placeholder paths replaced). One
``experiment.perl -exec`` run, from a fresh working directory, executes the generated
TRAINING_custom-phrase-table-pruning step (``COMMAND IN OUT`` with stems), create-config
(num-features=5, from ems-train-model), the tuning filter, MERT (one iteration) and the
evaluation: the tuned ini has five TranslationModel0 weights and the evaluation a BLEU score.
Without the fragment's ``script`` line the same run stops at tuning on num-features=4 (the
reason the line is there).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.helpers import moses as m
from tests.helpers.paths import PYTHON, REPO
from tests.helpers.rescore_data import appended_columns

pytestmark = [pytest.mark.moses, pytest.mark.slow]

FRAGMENT = REPO / "moses_configs" / "ems-rnn-rescoring.config"


def fragment_value(key: str, network: Path) -> str:
    """The fragment's value of ``key``, for this checkout and network."""
    lines = [line for line in FRAGMENT.read_text().splitlines() if line.startswith(f"{key} =")]
    assert len(lines) == 1
    value = lines[0].split("=", 1)[1].strip().strip('"')
    # the checkout's bin/ script, run by this interpreter (which has torch)
    value = value.replace("/path/to/phrase_rescorer/", f"env PYTHONPATH={REPO} {PYTHON} {REPO}/")
    return value.replace("/path/to/rnn.pt", str(network))


def fragment_binarizers() -> list[str]:
    """The fragment's (commented) ttable-binarizer lines, as values."""
    return [
        line.split("=", 1)[1].strip()
        for line in FRAGMENT.read_text().splitlines()
        if line.startswith("#ttable-binarizer =")
    ]


def config(moses: Path, work: Path, lm: Path, command: str, script: str, binarizer: str | None = None) -> str:
    binarize = f"ttable-binarizer = {binarizer}\n" if binarizer else ""
    return f"""[GENERAL]
{binarize}working-dir = {work}
moses-src-dir = {moses}
moses-script-dir = {moses}/scripts
moses-bin-dir = {moses}/bin
external-bin-dir = $moses-bin-dir
decoder = $moses-bin-dir/moses
input-extension = en
output-extension = fr
pair-extension = en-fr

[TRAINING]
script = "{script}"
alignment-symmetrization-method = grow-diag-final-and
phrase-translation-table = {work}/model/phrase-table.1
custom-phrase-table-pruning = "{command}"
[LM]
order = 3
type = 8
lm-binarizer = $moses-bin-dir/build_binary
[LM:dev]
lm = {lm}

[TUNING]
tuning-script = "$moses-script-dir/training/mert-moses.pl"
tuning-settings = "-mertdir $moses-bin-dir --maximum-iterations 1 --predictable-seeds"
nbest = 20
input = {m.DEV_EN}
reference = {m.DEV_FR}
decoder-settings = "-threads 1"

[EVALUATION]
decoder-settings = "-threads 1"
multi-bleu = "$moses-script-dir/generic/multi-bleu.perl -lc"
[EVALUATION:dev]
input = {m.DEV_EN}
tokenized-reference = {m.DEV_FR}

[REPORTING]
"""


def experiment(moses: Path, path: Path, text: str) -> str:
    path.write_text(text)
    r = m.run(
        ["perl", moses / "scripts/ems/experiment.perl", "-config", path, "-no-graph", "-sleep", "1", "-exec"],
        cwd=path.parent,
        timeout=300,
    )
    return r.stdout.decode(errors="replace")


def fresh(work: Path, name: str) -> Path:
    """A new EMS working directory holding only the baseline's phrase table, as EMS names it."""
    ems = work / name
    (ems / "model").mkdir(parents=True)
    (ems / "model" / "phrase-table.1.gz").write_bytes(m.PHRASE_TABLE.read_bytes())
    return ems


BINARIZED = {
    "text": "PhraseDictionaryMemory",
    "processphrasetablemin": "PhraseDictionaryCompact",
    "createondiskpt": "PhraseDictionaryOnDisk",
    "createprobingpt": "ProbingPT",
}


def program(binarizer: str | None) -> str:
    """``processPhraseTableMin`` for ``$moses-bin-dir/processPhraseTableMin``, text for None."""
    return (binarizer or "text").strip('"').split()[0].split("/")[-1]


@pytest.mark.parametrize("binarizer", [None, *fragment_binarizers()], ids=program)
def test_ems_runs_the_fragment_in_one_run(
    moses: Path, work: Path, lm: Path, network: Path, binarizer: str | None
) -> None:
    """With each of the fragment's binarizers too: the tuning and evaluation filters binarize the
    5-score table with the count of the ini (processPhraseTableMin) or the fragment's 5."""
    # lower case: substitute-filtered-tables.perl replaces every ini line matching /ProbingPT/,
    # a working directory named so included
    name = program(binarizer).lower()
    ems = fresh(work, f"ems-{name}")
    command = fragment_value("custom-phrase-table-pruning", network)
    script = fragment_value("script", network)
    assert "bin/ems-train-model" in script

    log = experiment(moses, work / f"ems-{name}.config", config(moses, ems, lm, command, script, binarizer))
    assert "crashed" not in log, log[-3000:]
    step = (ems / "steps/1/TRAINING_custom-phrase-table-pruning.1").read_text()
    assert f"{command} {ems}/model/phrase-table.1 {ems}/model/phrase-table-pruned.1\n" in step
    assert "sigtest" not in log  # the step switches sigtest filtering off
    appended_columns(m.PHRASE_TABLE, ems / "model/phrase-table-pruned.1.gz")  # where EMS reads it
    created = (ems / "model/moses.ini.1").read_text()
    assert f"num-features=5 path={ems}/model/phrase-table-pruned.1 " in created
    assert "passing -phrase-translation-table" in (ems / "steps/1/TRAINING_create-config.1.STDERR").read_text()
    tuned = (ems / "tuning/moses.ini.1").read_text()
    weights = re.search(r"^TranslationModel0=(.*)$", tuned, re.M)
    assert weights is not None and len(weights.group(1).split()) == 5
    filtered = (ems / "tuning/moses.filtered.ini.1").read_text()
    assert f"{BINARIZED[name]} name=TranslationModel0 num-features=5 " in filtered
    assert (ems / "evaluation/dev.multi-bleu.1").read_text().startswith("BLEU = ")


def test_ems_without_the_script_line_stops_at_tuning(moses: Path, work: Path, lm: Path, network: Path) -> None:
    """What the fragment's script line is for: train-model.perl itself writes num-features=4."""
    ems = fresh(work, "ems-plain")
    command = fragment_value("custom-phrase-table-pruning", network)
    log = experiment(
        moses, work / "ems-plain.config", config(moses, ems, lm, command, f"{moses}/scripts/training/train-model.perl")
    )
    assert f"num-features=4 path={ems}/model/phrase-table-pruned.1 " in (ems / "model/moses.ini.1").read_text()
    assert "step TUNING:tune crashed" in log
    assert "Size of scoreVector != number (5!=4)" in (ems / "steps/1/TUNING_tune.1.STDERR").read_text()
