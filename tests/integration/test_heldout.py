"""Held-out dev BLEU (``reranking.heldout``): the folds' lists keep every byte but the renumbered
sentence ID, and with the real Moses each sentence's hypothesis is chosen by weights that never
saw its reference. The Moses part is skipped, with the reason, when no Moses is found ($MOSES,
else ../shared/tools/moses)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest

from phrase_rescorer.data.corpus import read_lines
from phrase_rescorer.moses.toolkit import find_moses
from phrase_rescorer.reranking.heldout import FOLDS, fold_matrix, heldout_lines, write_folds
from phrase_rescorer.reranking.nbest_features import read_matrix
from tests.helpers.cslm import TINY_MOSES
from tests.helpers.moses import moses_root

LIST = (
    "0 ||| a b  ||| LM0= -1 TM0= -2 -3 ||| 0\n"
    "0 ||| a c  ||| LM0= -2 TM0= -1 -1 ||| 0\n"
    "1 ||| e  ||| LM0= -1 TM0= 0 0 ||| 0 ||| 0-0\n"
    "2 ||| f g ||| LM0= -3 TM0= 0 1 ||| -2\n"
    "3 ||| h ||| LM0= -4 TM0= 1 1 ||| -1\n"
    "3 ||| i ||| LM0= -5 TM0= 1 2 ||| -1\n"
    "4 ||| j ||| LM0= -6 TM0= 2 2 ||| -3\n"
)


def test_the_folds_keep_every_byte_but_the_renumbered_id(tmp_path: Path) -> None:
    path = tmp_path / "l.nbest"
    path.write_text(LIST)
    paths = write_folds(str(path), str(tmp_path / "work"))
    assert len(paths) == FOLDS == 2
    lines = LIST.splitlines(keepends=True)
    even = [ln for ln in lines if int(ln.split(" ")[0]) % 2 == 0]
    odd = [ln for ln in lines if int(ln.split(" ")[0]) % 2 == 1]
    renumber = lambda ln: str(int(ln.split(" ", 1)[0]) // 2) + " " + ln.split(" ", 1)[1]  # noqa: E731
    assert Path(paths[0]).read_text() == "".join(map(renumber, even))
    assert Path(paths[1]).read_text() == "".join(map(renumber, odd))
    whole = read_matrix(str(path))
    for k, fold_path in enumerate(paths):  # the matrix of a fold is that of its list
        fold, written = fold_matrix(whole, k), read_matrix(fold_path)
        assert fold.layout == written.layout and fold.hypotheses == written.hypotheses
        assert np.array_equal(fold.features, written.features) and np.array_equal(fold.sentences, written.sentences)


@pytest.fixture(scope="module")
def dev_list(tmp_path_factory: pytest.TempPathFactory) -> Path:
    moses = moses_root(("bin/moses", "bin/extractor", "bin/mert", "bin/kbmira"))
    tmp = tmp_path_factory.mktemp("heldout")
    ini = tmp / "moses.ini"
    ini.write_text((TINY_MOSES / "moses.ini").read_text().replace("@MODEL_DIR@", str(TINY_MOSES)))
    nbest = tmp / "dev.nbest"
    argv = [str(moses / "bin" / "moses"), "-f", str(ini), "-input-file", str(TINY_MOSES / "dev.en")]
    subprocess.run([*argv, "-n-best-list", str(nbest), "50", "distinct"], check=True, capture_output=True)
    return nbest


@pytest.mark.slow
@pytest.mark.moses
@pytest.mark.parametrize("optimizer", ["mert", "kbmira"])
def test_each_sentence_is_chosen_without_its_reference(dev_list: Path, tmp_path: Path, optimizer: str) -> None:
    """Another reference for the odd sentences: their choices stay (the weights that chose them
    were tuned on the even ones); the lines are the dev set's, each one of its sentence's."""
    toolkit = find_moses(str(moses_root()), needs=("bin/extractor", "bin/mert", "bin/kbmira"))
    matrix = read_matrix(str(dev_list))
    refs = read_lines(str(TINY_MOSES / "dev.fr"))
    start = np.ones(matrix.features.shape[1])

    def held(references: list[str], name: str) -> list[str]:
        lines = heldout_lines(
            toolkit, str(dev_list), matrix, references, start, str(tmp_path / name), seed=1, optimizer=optimizer
        )
        assert lines is not None
        return lines

    first = held(refs, "a")
    assert len(first) == len(refs) == matrix.sentence_count
    for sentence, line in enumerate(first):
        assert line in [h for h, s in zip(matrix.hypotheses, matrix.sentences, strict=True) if s == sentence]
    odd_changed = [ref if i % 2 == 0 else "a b c" for i, ref in enumerate(refs)]
    second = held(odd_changed, "b")
    assert second[1::2] == first[1::2]
    one = read_matrix(str(dev_list))
    one.sentences = np.zeros_like(one.sentences)  # a list of one sentence has no held-out half
    assert heldout_lines(toolkit, str(dev_list), one, refs[:1], start, str(tmp_path / "c"), seed=1) is None
