"""``experiment --network-candidates``: the twin of every reranked system with the networks'
features (its key and row), the networks' lists decoded once per experiment, and each run's lists
joined by them with every feature (``experiment.candidates``). No Moses is needed: the run's
scored lists exist, and the new lines' LM feature is left 0 (no ``bin/query``)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from phrase_rescorer.experiment.candidates import merge_lists, network_lists, takes_candidates, with_candidates
from phrase_rescorer.experiment.reranked import SentenceModels, reranked, score_lists
from phrase_rescorer.experiment.systems import BASELINE, RNN
from tests.helpers.nmt import TINY_MOSES, tiny_nmt

DEV = (str(TINY_MOSES / "dev.en"), str(TINY_MOSES / "dev.fr"))
TEST = (str(TINY_MOSES / "test.en"), str(TINY_MOSES / "test.fr"))


def test_every_row_with_the_networks_features_gets_a_twin() -> None:
    models = SentenceModels("lm.pt", ("forward.pt", "inverse.pt"))
    combinations = models.combinations()
    twins = [
        with_candidates(reranked(system, features))
        for features in combinations
        if takes_candidates(features)
        for system in (BASELINE, RNN)
    ]
    assert [(t.key, t.label, t.reranks) for t in twins] == [
        ("nmt-candidates", "+ NMT, with the networks' candidates", "baseline"),
        ("nmt-rnn-candidates", "+ RNN + NMT, with the networks' candidates", "rnn"),
        ("cslm-nmt-candidates", "+ CSLM + NMT, with the networks' candidates", "baseline"),
        ("cslm-nmt-rnn-candidates", "+ CSLM + RNN + NMT, with the networks' candidates", "rnn"),
    ]
    assert not takes_candidates(combinations[0])  # + CSLM alone: no twin


def decoder_list(reference: Path) -> bytes:
    """A list as the decoder writes it: per sentence its reference and the reference less its last word."""
    lines = []
    for i, ref in enumerate(reference.read_text(encoding="utf-8").splitlines()):
        words = ref.split()
        for hyp in dict.fromkeys([" ".join(words), " ".join(words[:-1])]):
            lines.append(f"{i} ||| {hyp} ||| LM0= -10.5 WordPenalty0= -{len(hyp.split())} ||| -3.5\n")
    return "".join(lines).encode("utf-8")


def read(path: Path) -> list[str]:
    return gzip.decompress(path.read_bytes()).decode("utf-8").splitlines()


def test_the_runs_lists_joined_by_the_networks_candidates(tmp_path: Path) -> None:
    models = SentenceModels(None, (str(tiny_nmt(tmp_path / "nmt.pt")),))
    fingerprints = models.fingerprints()
    run = tmp_path / "out" / "systems" / "baseline" / "run1"
    (run / "rerank").mkdir(parents=True)
    (run / "moses.ini").write_text((TINY_MOSES / "moses.ini").read_text())
    raw = {part: decoder_list(TINY_MOSES / f"{part}.fr") for part in ("dev", "test")}
    for part, data in raw.items():
        (run / "rerank" / f"{part}.nbest.gz").write_bytes(gzip.compress(data))
    said: list[str] = []
    score_lists(None, str(run), models, DEV, TEST, nbest=2, threads=1, fingerprints=fingerprints, say=said.append)  # type: ignore[arg-type]

    # the network's lists: decoded once per experiment, in its directory, kept while it is the same
    parts = {"dev": DEV[0], "test": TEST[0]}
    out = str(tmp_path / "out")
    networks = network_lists(out, models, parts, size=3, fingerprints=fingerprints, say=said.append)
    assert networks == [{p: str(tmp_path / "out" / "candidates" / f"NMT0.{p}.nbest.gz") for p in parts}]
    own = {p: read(Path(networks[0][p])) for p in parts}
    sentences = {p: len((TINY_MOSES / f"{p}.en").read_text().splitlines()) for p in parts}
    for part, lines in own.items():
        ids = [int(line.split(" ||| ")[0]) for line in lines]
        assert sorted(set(ids)) == list(range(sentences[part])) and max(ids.count(i) for i in ids) <= 3
    record = json.loads((tmp_path / "out" / "candidates" / "NMT0.json").read_text())
    assert record == {"model": fingerprints["NMT0"], "candidates": 3}
    stamp = Path(networks[0]["dev"]).stat().st_mtime_ns
    said.clear()
    assert network_lists(out, models, parts, size=3, fingerprints=fingerprints, say=said.append) == networks
    assert Path(networks[0]["dev"]).stat().st_mtime_ns == stamp and "kept" in said[0]

    def merge(size: int) -> list[str]:
        said.clear()
        merge_lists(
            str(run), models, networks, DEV, TEST, toolkit=None, fingerprints=fingerprints, size=size, say=said.append
        )
        return said

    merge(3)
    merged = {p: read(run / "rerank" / "candidates" / f"{p}.nbest.gz") for p in parts}
    for part, lines in merged.items():
        assert all(" FromMoses= " in line and " FromNet0= " in line and " NMT0= " in line for line in lines)
        moses = [line for line in lines if " FromMoses= 1 " in line]
        # Moses' own lines, byte for byte, before the indicators and the feature
        assert "".join(line.split(" FromMoses= ")[0] + " ||| -3.5\n" for line in moses).encode() == raw[part]
        new = {(line.split(" ||| ")[0], line.split(" ||| ")[1].strip()) for line in lines if " FromMoses= 0 " in line}
        proposed = {(line.split(" ||| ")[0], line.split(" ||| ")[1].strip()) for line in own[part]}
        assert new and new <= proposed
        assert all(" FromNet0= 1 " in line for line in lines if " FromMoses= 0 " in line)
    record = json.loads((run / "rerank" / "candidates" / "features.json").read_text())
    assert record == {"NMT0": fingerprints["NMT0"], "network_candidates": "3", "constrained_decoding": "no"}

    stamp = (run / "rerank" / "candidates" / "dev.nbest.gz").stat().st_mtime_ns
    assert merge(3) == ["the lists joined by the networks' candidates kept"]  # a restart: kept
    assert (run / "rerank" / "candidates" / "dev.nbest.gz").stat().st_mtime_ns == stamp
    assert any("appending NMT0" in s for s in merge(2))  # another K: made again
