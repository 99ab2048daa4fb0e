"""The EMS fragment (moses_configs/ems-rnn-rescoring.config) in the real experiment.perl.

The experiment starts where the table exists: ``phrase-translation-table`` is given as EMS
names it, the stem ``model/phrase-table.1`` of ``model/phrase-table.1.gz``. Its rescoring line
is the fragment's own (only the two placeholder paths replaced). Run 1 executes the generated
TRAINING_custom-phrase-table-pruning step (``COMMAND IN OUT`` with stems), then create-config,
and tuning stops on create-config's num-features=4, as the fragment says. The moses.ini is
patched with moses-ini as the fragment says, given as TRAINING:config, and run 2 tunes (MERT,
one iteration) and evaluates with five TranslationModel0 weights.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tests.helpers import moses as m
from tests.helpers.paths import PYTHON, REPO, cli_env
from tests.helpers.rescore_data import appended_columns

pytestmark = [pytest.mark.moses, pytest.mark.slow]

FRAGMENT = REPO / "moses_configs" / "ems-rnn-rescoring.config"


def fragment_command(network: Path) -> str:
    """The fragment's custom-phrase-table-pruning value, for this checkout and network."""
    lines = [line for line in FRAGMENT.read_text().splitlines() if line.startswith("custom-phrase-table-pruning")]
    assert len(lines) == 1
    value = lines[0].split("=", 1)[1].strip().strip('"')
    # the checkout's bin/ script, run by this interpreter (which has torch)
    value = value.replace("/path/to/phrase_rescorer/", f"env PYTHONPATH={REPO} {PYTHON} {REPO}/")
    return value.replace("/path/to/rnn.pt", str(network))


def config(moses: Path, work: Path, lm: Path, command: str, extra_training: str = "") -> str:
    return f"""[GENERAL]
working-dir = {work}
moses-src-dir = {moses}
moses-script-dir = {moses}/scripts
moses-bin-dir = {moses}/bin
external-bin-dir = $moses-bin-dir
decoder = $moses-bin-dir/moses
input-extension = en
output-extension = fr
pair-extension = en-fr

[TRAINING]
script = $moses-script-dir/training/train-model.perl
alignment-symmetrization-method = grow-diag-final-and
phrase-translation-table = {work}/model/phrase-table.1
custom-phrase-table-pruning = "{command}"
{extra_training}
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
    r = m.run(["perl", moses / "scripts/ems/experiment.perl", "-config", path, "-no-graph", "-sleep", "1", "-exec"],
              cwd=path.parent, timeout=300)
    return r.stdout.decode(errors="replace")


def test_ems_runs_the_fragment(moses: Path, work: Path, lm: Path, network: Path) -> None:
    ems = work / "ems"
    (ems / "model").mkdir(parents=True)
    (ems / "model" / "phrase-table.1.gz").write_bytes(m.PHRASE_TABLE.read_bytes())
    command = fragment_command(network)

    # Run 1: the rescoring step with EMS's stems; tuning then stops on num-features=4.
    log = experiment(moses, work / "ems.config", config(moses, ems, lm, command))
    step = (ems / "steps/1/TRAINING_custom-phrase-table-pruning.1").read_text()
    assert f"{command} {ems}/model/phrase-table.1 {ems}/model/phrase-table-pruned.1\n" in step
    assert (ems / "steps/1/TRAINING_custom-phrase-table-pruning.1.DONE").exists()
    assert "TRAINING:custom-phrase-table-pruning crashed" not in log
    assert "sigtest" not in log  # the step switches sigtest filtering off
    appended_columns(m.PHRASE_TABLE, ems / "model/phrase-table-pruned.1.gz")  # where EMS reads it
    created = (ems / "model/moses.ini.1").read_text()
    assert f"num-features=4 path={ems}/model/phrase-table-pruned.1 " in created
    assert "step TUNING:tune crashed" in log
    assert "Size of scoreVector != number (5!=4)" in (ems / "steps/1/TUNING_tune.1.STDERR").read_text()

    # The fragment's fix: patch the ini, give it as TRAINING:config, run again.
    patched = ems / "model/moses.rnn.ini.1"
    r = subprocess.run([PYTHON, "-m", "phrase_rescorer", "moses-ini", str(ems / "model/moses.ini.1"), str(patched),
                        "--table", f"{ems}/model/phrase-table-pruned.1"], capture_output=True, env=cli_env())
    assert r.returncode == 0, r.stderr.decode()
    log = experiment(moses, work / "ems.config", config(moses, ems, lm, command, f"config = {patched}\n"))
    assert "crashed" not in log, log[-3000:]
    tuned = (ems / "tuning/moses.ini.2").read_text()
    weights = re.search(r"^TranslationModel0=(.*)$", tuned, re.M)
    assert weights is not None and len(weights.group(1).split()) == 5
    assert "num-features=5" in (ems / "tuning/moses.filtered.ini.2").read_text()
    assert (ems / "evaluation/dev.multi-bleu.2").read_text().startswith("BLEU = ")
