"""The sentence-level models of an experiment may change between two starts: a decoder run's
scored n-best lists are then brought up to date without decoding again (``reranked.score_lists``),
and a reranked run is kept only while its features' models are those it was tuned with
(``reranked._finished_with``); the plain lists the run's own decoding wrote are scored without
decoding them again. No Moses is needed: the lists exist, so nothing is decoded."""

from __future__ import annotations

import gzip
import hashlib
import json
import re
from pathlib import Path

import pytest

from phrase_rescorer.experiment.reranked import (
    CSLM,
    SentenceModels,
    _finished_with,
    decoded_list,
    described_choices,
    own_choices,
    reranked,
    score_lists,
)
from phrase_rescorer.experiment.systems import BASELINE
from phrase_rescorer.model.kinds import open_model
from tests.helpers.cslm import TINY_MOSES, tiny_lm
from tests.helpers.nmt import tiny_nmt

PARTS = {"dev": (str(TINY_MOSES / "dev.en"), str(TINY_MOSES / "dev.fr")), "test": (str(TINY_MOSES / "test.en"), "")}
VALUE = re.compile(rb"(CSLM0|NMT[01])= (\S+)")
APPENDED = re.compile(rb" (?:CSLM0|NMT[01])= \S+")


def decoder_list(reference: Path) -> bytes:
    """A list as the decoder writes it: per sentence its reference and the reference less its last word."""
    lines = []
    for i, ref in enumerate(reference.read_text(encoding="utf-8").splitlines()):
        words = ref.split()
        for hyp in dict.fromkeys([" ".join(words), " ".join(words[:-1])]):
            lines.append(f"{i} ||| {hyp} ||| LM0= -10.5 WordPenalty0= -{len(hyp.split())} ||| -3.5\n")
    return "".join(lines).encode("utf-8")


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("models")
    nmt = {"nmt": tiny_nmt(tmp / "nmt.pt"), "nmt2": tiny_nmt(tmp / "nmt2.pt", steps=5)}
    return {"lm": tiny_lm(tmp / "lm.pt"), "lm2": tiny_lm(tmp / "lm2.pt", seed=2), **nmt}


def features(path: Path) -> list[dict[str, bytes]]:
    return [dict(VALUE.findall(line)) for line in gzip.decompress(path.read_bytes()).splitlines()]


def score(run: Path, lm: Path | None, *nmt: Path | None) -> list[str]:
    """score_lists on the run; what it says it did with the dev list."""
    said: list[str] = []
    models = SentenceModels(str(lm) if lm else None, tuple(str(p) for p in nmt if p))
    score_lists(
        None,  # type: ignore[arg-type]  # the lists exist: nothing is decoded
        str(run),
        models,
        PARTS["dev"],
        PARTS["test"],
        nbest=2,
        threads=1,
        fingerprints=models.fingerprints(),
        say=said.append,
    )
    assert not any("decoding" in s for s in said), said
    return [s for s in said if s.startswith("dev:")]


def test_lists_follow_the_models_without_decoding(models: dict[str, Path], tmp_path: Path) -> None:
    run = tmp_path / "run1"
    (run / "rerank").mkdir(parents=True)
    raw = {part: decoder_list(TINY_MOSES / f"{part}.fr") for part in ("dev", "test")}
    lists = {part: run / "rerank" / f"{part}.nbest.gz" for part in raw}
    for part, data in raw.items():  # scored by an earlier version: no record of the models
        lists[part].write_bytes(gzip.compress(data))

    assert score(run, models["lm"], None)[0] == "dev: the scored lists kept; features CSLM0 computed again"
    first = features(lists["dev"])
    assert all(f.keys() == {b"CSLM0"} for f in first)
    record = json.loads((run / "rerank" / "features.json").read_text())
    assert list(record) == [CSLM[0]]

    stamp = lists["dev"].stat().st_mtime_ns
    assert score(run, models["lm"], None) == []  # nothing changed: nothing done
    assert lists["dev"].stat().st_mtime_ns == stamp

    assert "features NMT0 computed" in score(run, models["lm"], models["nmt"])[0]  # added: the CSLM's values kept
    both = features(lists["dev"])
    assert [f[b"CSLM0"] for f in both] == [f[b"CSLM0"] for f in first]
    assert all(f.keys() == {b"CSLM0", b"NMT0"} for f in both)

    assert "features CSLM0 computed" in score(run, models["lm2"], models["nmt"])[0]  # replaced: computed again
    replaced = features(lists["dev"])
    assert [f[b"NMT0"] for f in replaced] == [f[b"NMT0"] for f in both]
    assert [f[b"CSLM0"] for f in replaced] != [f[b"CSLM0"] for f in both]

    assert "features none computed" in score(run, models["lm2"], None)[0]  # left out: its feature removed
    assert all(f.keys() == {b"CSLM0"} for f in features(lists["test"]))
    assert "features NMT0 computed" in score(run, None, models["nmt"])[0]
    alone = features(lists["dev"])

    # a second network: its own feature appended, the first one's values kept
    assert "features NMT1 computed" in score(run, None, models["nmt"], models["nmt2"])[0]
    two = features(lists["dev"])
    assert all(f.keys() == {b"NMT0", b"NMT1"} for f in two)
    assert [f[b"NMT0"] for f in two] == [f[b"NMT0"] for f in alone]
    assert [f[b"NMT1"] for f in two] != [f[b"NMT0"] for f in two]  # another network, other values
    (run / "rerank" / "features.json").unlink()  # unknown record: every feature of the experiment's redone
    assert "features NMT0 computed" in score(run, None, models["nmt"])[0]
    assert all(f.keys() == {b"NMT0"} for f in features(lists["dev"]))  # the stale NMT1 removed
    assert [f[b"NMT0"] for f in features(lists["dev"])] == [f[b"NMT0"] for f in alone]
    for part, data in raw.items():  # every byte of the decoder's lines kept throughout
        assert APPENDED.sub(b"", gzip.decompress(lists[part].read_bytes())) == data


def test_lists_the_runs_decoding_wrote_are_scored_without_decoding(models: dict[str, Path], tmp_path: Path) -> None:
    run = tmp_path / "run1"
    (run / "rerank").mkdir(parents=True)
    raw = {part: decoder_list(TINY_MOSES / f"{part}.fr") for part in ("dev", "test")}
    for part, data in raw.items():  # as the run's 1-best decoding leaves them
        Path(decoded_list(str(run), part, 2)).write_bytes(data)
    assert score(run, models["lm"], None) == ["dev: appending CSLM0"]  # score() asserts no decoding
    for part, data in raw.items():
        assert APPENDED.sub(b"", gzip.decompress((run / "rerank" / f"{part}.nbest.gz").read_bytes())) == data
        assert not Path(decoded_list(str(run), part, 2)).exists()


def test_a_reranked_run_is_kept_while_its_models_are_the_same(tmp_path: Path) -> None:
    result = tmp_path / "result.json"
    assert not _finished_with(str(result), {"CSLM0": "a"}, "mert")
    done = {"features": ["CSLM0"], "models": {"CSLM0": "a"}, "heldout_folds": 2}
    result.write_text(json.dumps(done))
    assert _finished_with(str(result), {"CSLM0": "a"}, "mert")  # no optimizer recorded: mert's
    assert not _finished_with(str(result), {"CSLM0": "a"}, "kbmira")
    assert not _finished_with(str(result), {"CSLM0": "b"}, "mert")
    result.write_text(json.dumps({**done, "optimizer": "kbmira"}))
    assert _finished_with(str(result), {"CSLM0": "a"}, "kbmira")
    assert not _finished_with(str(result), {"CSLM0": "a"}, "mert")  # another optimizer: tuned again
    result.write_text(json.dumps({k: v for k, v in done.items() if k != "heldout_folds"}))
    assert not _finished_with(str(result), {"CSLM0": "a"}, "mert")  # written before held-out dev BLEU
    result.write_text(json.dumps({"features": ["CSLM0"]}))  # written before models were recorded
    assert not _finished_with(str(result), {"CSLM0": "a"}, "mert")
    result.write_text("{not json")
    assert not _finished_with(str(result), {"CSLM0": "a"}, "mert")


def test_several_networks_make_one_nmt_row() -> None:
    models = SentenceModels("lm.pt", ("forward.pt", "inverse.pt"))
    assert [f[0] for f in models.features()] == ["CSLM0", "NMT0", "NMT1"]
    rows = [reranked(BASELINE, features) for features in models.combinations()]
    assert [(r.key, r.label) for r in rows] == [("cslm", "+ CSLM"), ("nmt", "+ NMT"), ("cslm-nmt", "+ CSLM + NMT")]
    names = [[f[0] for f in c] for c in models.combinations()]
    assert names == [["CSLM0"], ["NMT0", "NMT1"], ["CSLM0", "NMT0", "NMT1"]]


def test_a_model_read_is_fingerprinted_by_the_bytes_read(tmp_path: Path) -> None:
    """A network replaced on disk (a training still writing it) after the experiment read it: the
    lists are recorded as made with what was read, so that a restart redoes them."""
    first = tiny_nmt(tmp_path / "nmt.pt", steps=2)
    read_bytes = first.read_bytes()
    opened = open_model(str(first))
    tiny_nmt(tmp_path / "other.pt", steps=3).replace(first)  # renamed over it, as a training writes
    assert first.read_bytes() != read_bytes
    want = hashlib.sha256(read_bytes).hexdigest()
    assert opened.sha256 == want
    assert SentenceModels(nmt=(opened,)).fingerprints() == {"NMT0": want}


@pytest.mark.parametrize(
    ("choices", "names", "expected"),
    [
        # each set cut to the list's features, in the order given
        ([["TranslationModel0", "FromMoses"], ["Distortion0"]], ["LM0", "Distortion0", "TranslationModel0", "NMT0"],
         [["TranslationModel0"], ["Distortion0"]]),
        # a set the list has nothing of, one naming every feature, one the same as an earlier: dropped
        ([["FromMoses"], ["LM0", "NMT0"], ["NMT0"], ["NMT0", "FromNet0"]], ["LM0", "NMT0"], [["NMT0"]]),
        ([], ["LM0"], []),
    ],
)  # fmt: skip
def test_each_reranked_run_tries_the_sets_its_list_has(
    choices: list[list[str]], names: list[str], expected: list[list[str]]
) -> None:
    assert own_choices(choices, names) == expected


def test_a_run_records_its_sets_in_order_each_sorted() -> None:
    """The order of names within a set changes nothing (no retuning), that of the sets the tie-break."""
    assert described_choices([["TranslationModel0", "Distortion0"], ["FromMoses"]]) == (
        "Distortion0 TranslationModel0 | FromMoses"
    )
    assert described_choices([["FromMoses"], ["Distortion0", "TranslationModel0"]]) == (
        "FromMoses | Distortion0 TranslationModel0"
    )
