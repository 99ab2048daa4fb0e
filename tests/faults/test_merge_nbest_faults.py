"""``merge-nbest`` refusing what would give a wrong list: an added list of other sentences (an ID
beyond Moses', with its file and line; fewer sentences), standard input given twice, an LM
without its feature in the list or without Moses' query, and an output naming an input. Each
refusal is one line with the documented exit code; nothing is written, the inputs keep every
byte."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.cli_run import left_behind, run_cli

MOSES = (
    "0 ||| un homme .  ||| LM0= -10.5 WordPenalty0= -3 TranslationModel0= -1 -2.5 ||| -3.7\n"
    "0 ||| un chien .  ||| LM0= -12 WordPenalty0= -3 TranslationModel0= -1.5 -2 ||| -3.9\n"
    "1 ||| une femme  ||| LM0= -8 WordPenalty0= -2 TranslationModel0= -1 -1 ||| -2\n"
)
NET = "0 ||| un homme  ||| NMT0= -1 ||| -1\n1 ||| une dame  ||| NMT0= -2 ||| -2\n"


@pytest.fixture
def inputs(tmp_path: Path) -> tuple[Path, Path]:
    (tmp_path / "moses.nbest").write_text(MOSES)
    (tmp_path / "net.nbest").write_text(NET)
    return tmp_path / "moses.nbest", tmp_path / "net.nbest"


def refused(args: list[str], code: int, message: str, tmp_path: Path, monkeypatch, capsys) -> str:
    before = {p: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()}
    got, err = run_cli(["merge-nbest", *args], monkeypatch, capsys)
    assert got == code and message in err, err
    assert len(err.strip().splitlines()) == 1
    assert {p: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()} == before  # nothing written or changed
    assert not left_behind(tmp_path)
    return err


def test_an_added_sentence_moses_did_not_translate_is_refused_with_its_line(
    inputs: tuple[Path, Path], tmp_path: Path, monkeypatch, capsys
) -> None:
    moses, net = inputs
    net.write_text(NET + "2 ||| encore  ||| NMT0= -3 ||| -3\n")
    args = [str(moses), str(tmp_path / "out.nbest"), "--add", str(net)]
    err = refused(args, 3, f"{net}:3: sentence ID 2, but Moses' list has 2 sentences", tmp_path, monkeypatch, capsys)
    assert "merge the lists of one input" in err
    net.write_text(NET.splitlines(keepends=True)[0])
    refused(args, 3, f"{net}: lists sentences 0 to 0, but Moses' list has 2", tmp_path, monkeypatch, capsys)


def test_options_that_cannot_work_are_refused_first(
    inputs: tuple[Path, Path], tmp_path: Path, monkeypatch, capsys
) -> None:
    moses, net = inputs
    out = str(tmp_path / "out.nbest")
    refused(["-", out, "--add", "-"], 2, "'-' (stdin) given for more than one list", tmp_path, monkeypatch, capsys)
    args = [str(moses), out, "--add", str(net)]
    refused([*args, "--moses", str(tmp_path)], 2, "--moses without --lm", tmp_path, monkeypatch, capsys)
    refused([*args, "--reached-only"], 2, "--reached-only needs --ini and --source", tmp_path, monkeypatch, capsys)
    (tmp_path / "lm.arpa").write_text("\\data\\\n")
    no_query = [*args, "--lm", str(tmp_path / "lm.arpa"), "--moses", str(tmp_path)]
    refused(no_query, 2, "bin/query is missing", tmp_path, monkeypatch, capsys)
    refused([*args, "--lm", str(tmp_path / "no.arpa")], 6, "no.arpa", tmp_path, monkeypatch, capsys)
    refused([*args, "--lm-feature", "LM_0"], 2, "--lm-feature: feature name 'LM_0'", tmp_path, monkeypatch, capsys)
    refused([str(moses), str(net), "--add", str(net)], 6, "output is the same file as", tmp_path, monkeypatch, capsys)
    lm = str(tmp_path / "lm.arpa")
    over_lm = [str(moses), lm, "--add", str(net), "--lm", lm]
    refused(over_lm, 6, "output is the same file as the language model", tmp_path, monkeypatch, capsys)


def test_an_lm_whose_feature_is_not_in_the_list_is_refused(
    inputs: tuple[Path, Path], tmp_path: Path, monkeypatch, capsys
) -> None:
    moses, net = inputs
    query = tmp_path / "moses" / "bin" / "query"  # found, never asked
    query.parent.mkdir(parents=True)
    query.write_text("#!/bin/sh\nexit 1\n")
    query.chmod(0o755)
    (tmp_path / "lm.arpa").write_text("\\data\\\n")
    args = [str(moses), str(tmp_path / "out.nbest"), "--add", str(net), "--lm", str(tmp_path / "lm.arpa")]
    args += ["--moses", str(tmp_path / "moses"), "--lm-feature", "LM1"]
    refused(args, 3, f"{moses}:1: the LM feature LM1: no such feature", tmp_path, monkeypatch, capsys)
