"""The networks' own candidates for the reranker: ``translate --n-best-list`` (each sentence's
distinct beam candidates as a Moses n-best list, the network's log p as NMT0), ``merge-nbest``
(joined to Moses' list), then ``nbest``, ``rerank-tune`` and ``rerank`` on the merged list as on
any other (Moses' optimiser replaced by ``helpers.rerank_data``'s stand-in; tests/integration
runs the real one)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from phrase_rescorer.analysis.search import beam_search
from phrase_rescorer.model.checkpoint import load_checkpoint
from phrase_rescorer.moses.nbest import dense_features, read_nbest
from tests.helpers.cli_run import left_behind, run_cli
from tests.helpers.rerank_data import REFS, stand_in_optimizer, write_dev
from tests.helpers.rescore_data import tiny_arch_checkpoint

SENTENCES = ["a man in a blue shirt .", "two dogs play in the snow", "", "a dog ."]


@pytest.fixture(scope="module")
def network(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_arch_checkpoint(tmp_path_factory.mktemp("net") / "m.pt", arch="rnnsearch")


def test_translate_writes_the_beams_distinct_candidates_as_an_nbest_list(
    network: Path, tmp_path: Path, monkeypatch, capsys
) -> None:
    (tmp_path / "in.en").write_text("".join(s + "\n" for s in SENTENCES))
    args = ["translate", str(tmp_path / "in.en"), str(tmp_path / "out.fr"), "-m", str(network), "--max-length", "6"]
    code, err = run_cli(
        [*args, "--beam-size", "4", "-n-best-list", str(tmp_path / "nmt.nbest.gz"), "3"], monkeypatch, capsys
    )
    assert code == 0, err
    lines = list(read_nbest(str(tmp_path / "nmt.nbest.gz")))
    ckpt = load_checkpoint(str(network))
    model = ckpt.build_model()
    for sentence, text in enumerate(SENTENCES):
        got = [line for line in lines if line.sentence == sentence]
        ids = ckpt.src_vocab.encode(text.split())
        if not ids:  # an empty line: its empty translation, once
            assert [(line.tokens, line.features) for line in got] == [([], "NMT0= 0")]
            continue
        want: dict[str, float] = {}
        for c in beam_search(model, ids, 4, 6, alpha=0.6):
            want.setdefault(" ".join(ckpt.tgt_vocab.decode(c.tokens)), c.logp)
        assert [" ".join(line.tokens) for line in got] == list(want)[:3]  # the beam's ranking, distinct
        assert [dense_features(line.features) for line in got] == [
            [("NMT0", [pytest.approx(v, abs=1e-5)])] for v in list(want.values())[:3]
        ]
    firsts = [next(line for line in lines if line.sentence == i) for i in range(len(SENTENCES))]
    assert (tmp_path / "out.fr").read_text().splitlines() == [" ".join(line.tokens) for line in firsts]
    # nbest gives the same pairs the same log p (the list without the empty sentence, renumbered)
    (tmp_path / "src.en").write_text("".join(s + "\n" for s in SENTENCES if s))
    kept = [line for line in lines if line.sentence != 2]
    (tmp_path / "words.nbest").write_bytes(
        b"".join(
            b"%d" % (line.sentence - (line.sentence > 2)) + line.raw[line.raw.index(b" ") :] + b"\n" for line in kept
        )
    )
    args = ["nbest", str(tmp_path / "words.nbest"), str(tmp_path / "scored.nbest"), "-m", str(network)]
    code, err = run_cli([*args, "--name", "NMT9", "--source", str(tmp_path / "src.en")], monkeypatch, capsys)
    assert code == 0, err
    for line in read_nbest(str(tmp_path / "scored.nbest")):
        values = dict(dense_features(line.features))
        assert values["NMT9"][0] == pytest.approx(values["NMT0"][0], abs=1e-4)


def test_translate_refuses_more_candidates_than_the_beam_holds(
    network: Path, tmp_path: Path, monkeypatch, capsys
) -> None:
    (tmp_path / "in.en").write_text("a dog .\n")
    args = ["translate", str(tmp_path / "in.en"), str(tmp_path / "out.fr"), "-m", str(network), "--beam-size", "4"]
    code, err = run_cli([*args, "--n-best-list", str(tmp_path / "n.nbest"), "5"], monkeypatch, capsys)
    assert code == 2 and "give --beam-size 5 or more" in err
    code, err = run_cli([*args[:2], "-", *args[3:], "--n-best-list", "-", "4"], monkeypatch, capsys)
    assert code == 2 and "both '-'" in err
    code, err = run_cli([*args[:2], "-", *args[3:], "--n-best-list", "/dev/stdout", "4"], monkeypatch, capsys)
    assert code == 6 and "/dev/stdout: output goes to the same place as the output '-'" in err
    code, err = run_cli(
        [*args, "--n-best-list", str(tmp_path / "n.nbest"), "4", "--name", "NMT_0"], monkeypatch, capsys
    )
    assert code == 2 and "--name: feature name 'NMT_0'" in err
    assert not (tmp_path / "out.fr").exists() and not (tmp_path / "n.nbest").exists()


def test_merged_lists_are_scored_tuned_and_reranked_as_any_list(
    network: Path, tmp_path: Path, monkeypatch, capsys
) -> None:
    paths = write_dev(tmp_path)
    # the network's candidates: the reference of sentences 0 and 3 (Moses has them too), new words elsewhere
    net = []
    for i, ref in enumerate(REFS):
        net.append(f"{i} ||| {ref}  ||| NMT0= -1 ||| -1\n")
        net.append(f"{i} ||| {ref} encore  ||| NMT0= -2 ||| -2\n")
    (tmp_path / "net.nbest").write_text("".join(net))
    merged = tmp_path / "merged.nbest.gz"
    args = ["merge-nbest", "-", str(merged), "--add", str(tmp_path / "net.nbest")]
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(paths["dev.nbest"].open("rb")))
    code, err = run_cli(args, monkeypatch, capsys)
    assert code == 0, err
    assert "-: 6 sentences, 18 Moses hypotheses; " in err and "12 candidates, 6 in Moses' list, 6 new; 24 lines" in err
    lines = list(read_nbest(str(merged)))
    assert len(lines) == 24 and len({(line.sentence, tuple(line.tokens)) for line in lines}) == 24
    scored = tmp_path / "scored.nbest"
    args = ["nbest", str(merged), str(scored), "-m", str(network), "--source", str(paths["dev.en"])]
    code, err = run_cli(args, monkeypatch, capsys)
    assert code == 0, err
    names = [name for name, _ in next(read_nbest(str(scored))).layout]
    assert names == ["LM0", "WordPenalty0", "TranslationModel0", "CSLM0", "FromMoses", "FromNet0", "NMT0"]
    stand_in_optimizer(monkeypatch)
    for name in ("extractor", "kbmira"):  # found, never run
        program = tmp_path / "moses" / "bin" / name
        program.parent.mkdir(parents=True, exist_ok=True)
        program.write_text("#!/bin/sh\nexit 1\n")
        program.chmod(0o755)
    weights = tmp_path / "w.txt"
    args = ["rerank-tune", str(scored), str(paths["dev.fr"]), str(weights), "--init", str(paths["moses.ini"])]
    code, err = run_cli([*args, "--moses", str(tmp_path / "moses"), "--optimizer", "kbmira"], monkeypatch, capsys)
    assert code == 0, err
    assert "\nFromMoses= 0\nFromNet0= 0\nNMT0= 3\n" in weights.read_text()
    assert "chosen on dev: " in err and " new (merged without constrained decoding)" in err  # where chosen
    code, err = run_cli(["rerank", str(scored), str(weights), str(tmp_path / "best.fr")], monkeypatch, capsys)
    assert code == 0, err
    best = (tmp_path / "best.fr").read_text().splitlines()
    assert len(best) == len(REFS)
    moses_own = {(line.sentence, tuple(line.tokens)) for line in lines if b" FromMoses= 1 " in line.raw}
    from_moses = sum((i, tuple(hyp.split())) in moses_own for i, hyp in enumerate(best))
    assert f"chosen: {from_moses} from Moses' list" in err
    assert not left_behind(tmp_path)
