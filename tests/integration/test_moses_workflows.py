"""The two Moses paths docs/moses.md shows, run with the real Moses toolkit on the bundled sample:

* train-model.perl's own step 9 writes a 5-score moses.ini when told the table's score count
  (``-phrase-translation-table PATH:0:5``);
* filter-model-given-input.pl filters the baseline for a test set, only the filtered table is
  rescored and patched, substitute-weights.perl brings in tuned weights, and the decoder runs
  with the 5th feature.
"""

from __future__ import annotations

import gzip
import subprocess
from pathlib import Path

import pytest

from phrase_rescorer.moses.ini import check_moses_ini
from tests.helpers.moses import moses_root
from tests.helpers.paths import PYTHON, REPO, SAMPLE, SAMPLE_INI, cli_env
from tests.helpers.rescore_data import appended_columns, tiny_checkpoint

pytestmark = pytest.mark.moses

TEST_SENTENCES = "a man in a blue shirt is looking at a table .\ntwo dogs are running on the grass .\n"


def run(args: list[str], cwd: Path) -> str:
    r = subprocess.run(
        args, cwd=cwd, capture_output=True, text=True, timeout=300, env={**cli_env(), "OMP_NUM_THREADS": "1"}
    )
    assert r.returncode == 0, f"{args[:2]}: {r.stderr[-3000:]}"
    return r.stdout


def test_train_model_step_9_writes_a_5_score_ini(tmp_path: Path) -> None:
    moses = moses_root()
    table = tmp_path / "phrase-table.rnn.gz"
    table.write_bytes(gzip.compress(b"a ||| un ||| 0.5 0.5 0.5 0.5 0.25 ||| 0-0 ||| 1 1 1\n"))
    lm = tmp_path / "lm.fr.blm"
    lm.write_text("step 9 only checks that the language model file exists\n")
    run(
        [
            "perl",
            str(moses / "scripts/training/train-model.perl"),
            "-root-dir",
            "work",
            "-corpus",
            "corpus/train",
            "-f",
            "en",
            "-e",
            "fr",
            "-first-step",
            "9",
            "-last-step",
            "9",
            "-reordering",
            "msd-bidirectional-fe",
            "-lm",
            f"0:5:{lm}:8",
            "-phrase-translation-table",
            f"{table}:0:5",
            "-external-bin-dir",
            str(moses / "bin"),
        ],
        cwd=tmp_path,
    )
    ini = (tmp_path / "work/model/moses.ini").read_text()
    assert f"PhraseDictionaryMemory name=TranslationModel0 num-features=5 path={table} " in ini
    assert "TranslationModel0= 0.2 0.2 0.2 0.2 0.2\n" in ini
    assert check_moses_ini(ini).num_features == 5  # and its table has 5 scores: the ini matches it


def test_rescore_only_the_table_filtered_for_a_test_set(tmp_path: Path) -> None:
    moses = moses_root()
    scripts = moses / "scripts"
    # The sample system without the two files the sample does not ship (reordering table, LM).
    base = tmp_path / "moses.ini"
    base.write_text(
        "".join(
            line.replace("@MODEL_DIR@/phrase-table.gz", str(SAMPLE))
            for line in SAMPLE_INI.read_text().splitlines(keepends=True)
            if not line.startswith(("LexicalReordering", "KENLM", "LM0="))
        )
    )
    (tmp_path / "test.en").write_text(TEST_SENTENCES)
    run(["perl", str(scripts / "training/filter-model-given-input.pl"), "filtered", str(base), "test.en"], tmp_path)
    filtered = tmp_path / "filtered" / "phrase-table.0-0.1.1.gz"
    kept = len(gzip.decompress(filtered.read_bytes()).splitlines())
    assert 0 < kept < 1000  # of the sample's 29,260 lines

    model = tiny_checkpoint(tmp_path / "rnn.pt")
    rescored = tmp_path / "filtered" / "phrase-table.0-0.1.1.rnn.gz"
    run([PYTHON, str(REPO / "bin/rescore-phrase-table"), str(filtered), str(rescored), "-m", str(model)], tmp_path)
    assert len(appended_columns(filtered, rescored)) == kept
    run(
        [
            PYTHON,
            str(REPO / "bin/phrase-rescorer"),
            "moses-ini",
            "filtered/moses.ini",
            "filtered/moses.rnn.ini",
            "--table",
            str(rescored),
        ],
        tmp_path,
    )
    # Weights tuned on the dev set (here: made up) replace the starting ones.
    patched = (tmp_path / "filtered/moses.rnn.ini").read_text()
    tuned = tmp_path / "tuned.ini"
    tuned.write_text(
        patched.replace(
            "TranslationModel0= 0.0912844 0.00190324 0.0646386 0.0407692 ",
            "TranslationModel0= 0.09 0.002 0.06 0.04 0.0123 #",
        )
    )
    final = tmp_path / "filtered/moses.rnn.tuned.ini"
    run(
        [
            "perl",
            str(scripts / "ems/support/substitute-weights.perl"),
            "filtered/moses.rnn.ini",
            str(tuned),
            str(final),
        ],
        tmp_path,
    )
    assert "TranslationModel0= 0.09 0.002 0.06 0.04 0.0123" in final.read_text()

    run([str(moses / "bin/moses"), "-f", str(final), "-input-file", "test.en", "-n-best-list", "nbest", "1"], tmp_path)
    nbest = (tmp_path / "nbest").read_text().splitlines()
    assert len(nbest) == 2
    for line in nbest:
        scores = line.split(" ||| ")[2].split("TranslationModel0= ")[1].split()
        assert len(scores) >= 5 and float(scores[4]) < 0  # the 5th feature: the sum of log p_RNN
