"""Reranking without Moses: the feature matrix of a list, the weights file, the choice per sentence."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from phrase_rescorer.moses.nbest import NbestError
from phrase_rescorer.reranking import mert
from phrase_rescorer.reranking.choose import best_per_sentence, output_lines
from phrase_rescorer.reranking.nbest_features import read_matrix
from phrase_rescorer.reranking.weights import WeightsError, read_weights_file, vector, write_weights_file

LIST = (
    "0 ||| a b  ||| LM0= -1 TM0= -2 -3 sparse_x= 5 CSLM0= -4 ||| 0\n"
    "0 ||| a c  ||| LM0= -2 TM0= -1 -1 CSLM0= -1 ||| 0\n"
    "0 ||| a d  ||| LM0= -2 TM0= -1 -1 CSLM0= -1 ||| 0\n"
    "1 ||| e  ||| LM0= -1 TM0= 0 0 CSLM0= -3 ||| 0 ||| 0-0\n"
)


@pytest.fixture
def nbest(tmp_path: Path) -> Path:
    path = tmp_path / "l.nbest"
    path.write_text(LIST)
    return path


def test_matrix_layout_skips_sparse_features(nbest: Path) -> None:
    m = read_matrix(str(nbest))
    assert m.layout == (("LM0", 1), ("TM0", 2), ("CSLM0", 1))
    assert m.features.tolist()[0] == [-1, -2, -3, -4]
    assert m.sentences.tolist() == [0, 0, 0, 1] and m.hypotheses[3] == "e"


def test_first_of_equal_maxima(nbest: Path) -> None:
    m = read_matrix(str(nbest))
    weights = np.array([0.0, 0.0, 0.0, 1.0])  # CSLM0 alone: lines 2 and 3 tie
    assert best_per_sentence(m, weights) == ([0, 1], [1, 3])
    assert output_lines(m, weights) == ["a c", "e"]
    assert m.sentence_count == 2


def test_another_layout_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "bad"
    path.write_text(LIST + "2 ||| f  ||| LM0= -1 TM0= 0 ||| 0\n")
    with pytest.raises(NbestError, match=r":5: features LM0\(1\) TM0\(1\) differ from line 1's"):
        read_matrix(str(path))


def test_weights_file_round_trip_and_ini(nbest: Path, tmp_path: Path) -> None:
    m = read_matrix(str(nbest))
    write_weights_file(str(tmp_path / "w"), m.layout, np.array([0.5, 0.1, -0.2, 0.25]), comment="tuned")
    text = (tmp_path / "w").read_text()
    assert text.startswith("# tuned\n[weight]\nLM0= 0.5\nTM0= 0.1 -0.2\n")
    assert vector(read_weights_file(str(tmp_path / "w")), m.layout).tolist() == [0.5, 0.1, -0.2, 0.25]
    (tmp_path / "moses.ini").write_text("[feature]\nKENLM name=LM0\n\n[weight]\nLM0= 2\nTM0= 1 1\n")
    start = vector(read_weights_file(str(tmp_path / "moses.ini")), m.layout, missing=0.0)
    assert start.tolist() == [2, 1, 1, 0]  # the added feature starts at 0
    with pytest.raises(WeightsError, match="moses.ini: no weights for the feature CSLM0 of the n-best list"):
        vector(read_weights_file(str(tmp_path / "moses.ini")), m.layout)
    (tmp_path / "odd").write_text("LM0= 1\nTM0= 1\nCSLM0= 1\n")
    with pytest.raises(WeightsError, match="TM0 has 1 weights, the n-best list 2"):
        vector(read_weights_file(str(tmp_path / "odd")), m.layout)


@pytest.mark.parametrize(
    ("optimizer", "layout", "leave_out", "start", "message"),
    [
        ("pro", [("LM0", 1)], [], 1, "optimizer 'pro'"),
        ("kbmira", None, [], 1, "kbmira needs the list's layout"),
        ("mert", None, ["LM0"], 1, "leave_out: feature names of the list's layout"),
        ("mert", [("LM0", 1), ("TM0", 2)], "LM0", 3, "leave_out: feature names of the list's layout"),
        ("mert", [("LM0", 1), ("TM0", 2)], ["LM"], 3, r"leave_out \['LM'\]: not in the layout"),
        ("mert", [("LM0", 1), ("TM0", 2)], ["LM0", "TM0"], 3, "3 start weights for 3 values, 0 of them tuned"),
        ("mert", [("LM0", 1), ("TM0", 2)], ["LM0"], 2, "2 start weights for 3 values"),
    ],
)
def test_tune_refuses_its_arguments_before_it_touches_the_work_directory(
    tmp_path: Path, optimizer: str, layout: list[tuple[str, int]] | None, leave_out: list[str], start: int, message: str
) -> None:
    work = tmp_path / "tune"
    with pytest.raises(ValueError, match=message):
        mert.tune(
            None,  # type: ignore[arg-type]
            "list.gz",
            [["a"]],
            np.zeros(start),
            str(work),
            layout=layout,
            optimizer=optimizer,
            leave_out=leave_out,
        )
    assert not work.exists()
