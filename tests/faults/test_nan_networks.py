"""A network whose weights give NaN (a diverged training, or a crafted file): every command that
scores with it ends with exit 4 and one line naming the model file and the input line, before
writing anything (as rescore-phrase-table: tests/faults/test_bad_input.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.cli_run import run_cli
from tests.helpers.cslm import tiny_lm
from tests.helpers.nan_networks import nan_copy
from tests.helpers.nmt import TINY_MOSES, tiny_nmt


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("nan-models")
    return {
        "nmt": nan_copy(tiny_nmt(d / "nmt.pt", steps=2), d / "nmt.nan.pt"),
        "cslm": nan_copy(tiny_lm(d / "lm.pt", steps=2), d / "lm.nan.pt"),
    }


@pytest.fixture
def inputs(tmp_path: Path) -> tuple[Path, Path]:
    source = tmp_path / "src.en"
    source.write_text("".join((TINY_MOSES / "dev.en").read_text().splitlines(keepends=True)[:2]))
    nbest = tmp_path / "list.nbest"
    nbest.write_text("0 ||| la maison ||| LM0= -3 ||| -1\n1 ||| le chat ||| LM0= -3 ||| -1\n")
    return source, nbest


@pytest.mark.parametrize("kind", ["nmt", "cslm"])
def test_nbest_with_nan_weights_is_exit_4_one_line(
    kind: str,
    models: dict[str, Path],
    inputs: tuple[Path, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    source, nbest = inputs
    out = tmp_path / "out.nbest"
    args = ["nbest", str(nbest), str(out), "-m", str(models[kind]), "--source", str(source)]
    code, err = run_cli(args, monkeypatch, capsys)
    assert code == 4, err
    assert err.strip() == (
        f"phrase-rescorer: error: {models[kind]}: the network gave log p = nan for {nbest}:1; "
        "its weights are unusable (diverged training?)"
    )
    assert not out.exists()


def test_translate_with_nan_weights_is_exit_4_one_line(
    models: dict[str, Path],
    inputs: tuple[Path, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    source, _ = inputs
    out = tmp_path / "out.fr"
    code, err = run_cli(["translate", str(source), str(out), "-m", str(models["nmt"])], monkeypatch, capsys)
    assert code == 4, err
    assert err.strip() == (
        f"phrase-rescorer: error: {models['nmt']}: the network gave log p = nan for {source}:1; "
        "its weights are unusable (diverged training?)"
    )
    assert not out.exists()


@pytest.mark.parametrize("kind", ["nmt", "cslm"])
@pytest.mark.parametrize("summary", [False, True])
def test_score_with_nan_weights_is_exit_4_one_line(
    kind: str,
    summary: bool,
    models: dict[str, Path],
    inputs: tuple[Path, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Line scores and the one-figure summary alike: no "nan" written with exit 0."""
    source, _ = inputs
    target = tmp_path / "tgt.fr"
    target.write_text("la maison\nle chat\n")
    out = tmp_path / "out.scores"
    texts = [str(source), str(target)] if kind == "nmt" else [str(target)]
    args = ["score", *texts, "-m", str(models[kind]), "-o", str(out), *(["--summary", "perplexity"] if summary else [])]
    code, err = run_cli(args, monkeypatch, capsys)
    assert code == 4, err
    assert err.strip().splitlines()[-1] == (
        f"phrase-rescorer: error: {models[kind]}: the network gave log p = nan for {texts[0]}:1; "
        "its weights are unusable (diverged training?)"
    )
    assert not out.exists()
