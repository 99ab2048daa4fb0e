"""``experiment --network-candidates``: the twin of every reranked system with the networks'
features (its key and row), the networks' lists decoded once per experiment, and each run's lists
joined by them with every feature (``experiment.candidates``). No Moses is needed: the run's
scored lists exist, and the new lines' LM feature is left 0 (no ``bin/query``)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from phrase_rescorer.analysis.translate import candidate_lines, translate_nbest
from phrase_rescorer.experiment.candidates import (
    CANDIDATE_BATCH,
    made_with,
    merge_lists,
    network_lists,
    takes_candidates,
    with_candidates,
)
from phrase_rescorer.experiment.reranked import SentenceModels, reranked, score_lists
from phrase_rescorer.experiment.systems import BASELINE, RNN
from phrase_rescorer.model.checkpoint import RIGHT_TO_LEFT, load_checkpoint, save_checkpoint
from tests.helpers.nmt import TINY_MOSES, tiny_nmt
from tests.helpers.rescore_data import tiny_arch_checkpoint

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
    assert record == {"model": fingerprints["NMT0"], "candidates": 3, "batch": CANDIDATE_BATCH}
    stamp = Path(networks[0]["dev"]).stat().st_mtime_ns
    said.clear()
    assert network_lists(out, models, parts, size=3, fingerprints=fingerprints, say=said.append) == networks
    assert Path(networks[0]["dev"]).stat().st_mtime_ns == stamp and "kept" in said[0]

    def merge(size: int, ensemble: bool = False, moses_nbest: int | None = None) -> list[str]:
        said.clear()
        merge_lists(
            str(run), models, networks, DEV, TEST, toolkit=None, fingerprints=fingerprints, size=size, say=said.append,
            ensemble=ensemble, moses_nbest=moses_nbest,
        )  # fmt: skip
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
    assert record == {
        "NMT0": fingerprints["NMT0"],
        "network_candidates": "3",
        "candidate_batch": str(CANDIDATE_BATCH),
        "constrained_decoding": "no",
    }

    stamp = (run / "rerank" / "candidates" / "dev.nbest.gz").stat().st_mtime_ns
    assert merge(3) == ["the lists joined by the networks' candidates kept"]  # a restart: kept
    assert (run / "rerank" / "candidates" / "dev.nbest.gz").stat().st_mtime_ns == stamp
    assert any("appending NMT0" in s for s in merge(2))  # another K: made again
    assert any("appending NMT0" in s for s in merge(2, ensemble=True))  # the option alone: made again
    record = json.loads((run / "rerank" / "candidates" / "features.json").read_text())
    assert record["ensemble"] == "yes"

    # beside Moses' first hypothesis of each sentence only: made again, recorded; the twin says so
    assert any("Moses hypotheses (the first 1 of each sentence) joined by" in s for s in merge(2, moses_nbest=1))
    for part in parts:
        lines = read(run / "rerank" / "candidates" / f"{part}.nbest.gz")
        moses = [line.split(" FromMoses= ")[0] + " ||| -3.5\n" for line in lines if " FromMoses= 1 " in line]
        first: dict[str, str] = {}  # the decoder's first line of each sentence
        for line in raw[part].decode().splitlines(keepends=True):
            first.setdefault(line.split(" ||| ")[0], line)
        assert moses == list(first.values())
    record = json.loads((run / "rerank" / "candidates" / "features.json").read_text())
    assert record["moses_nbest"] == "1" and "moses_nbest" not in made_with(2)
    assert any("appending NMT0" in s for s in merge(2))  # dropped again: made again
    twin = with_candidates(reranked(BASELINE, models.features()), moses_nbest=10)
    assert twin.label == "+ NMT, with the networks' candidates, beside Moses' 10 best" and twin.key == "nmt-candidates"


def test_an_ensemble_of_the_forward_networks_makes_one_list(tmp_path: Path) -> None:
    """--ensemble-candidates: the forward networks' ensemble translates each part into one list,
    exactly as translate -m A -m B --n-best-list FILE K --name ENS0 writes it, named by their features, kept while the
    networks and K are the same; without it, a list per network. Its twin's label and record say so."""
    a = str(tiny_arch_checkpoint(tmp_path / "a.pt", arch="rnnsearch", seed=1))
    b = str(tiny_arch_checkpoint(tmp_path / "b.pt", arch="transformer", layers=2, seed=2))
    models = SentenceModels(None, (a, b))
    fingerprints = models.fingerprints()
    source = tmp_path / "dev.en"
    source.write_text("a man in a blue shirt .\n\ntwo dogs play in the snow\n")
    parts = {"dev": str(source)}
    out = str(tmp_path / "out")
    said: list[str] = []
    lists = network_lists(out, models, parts, size=2, fingerprints=fingerprints, say=said.append, ensemble=True)
    assert lists == [{"dev": str(tmp_path / "out" / "candidates" / "NMT0+NMT1.dev.nbest.gz")}]
    sources = source.read_text().splitlines()
    networks = [load_checkpoint(a), load_checkpoint(b)]
    found = translate_nbest(networks, sources, beam_size=2, name=str(source), batch=CANDIDATE_BATCH)
    want = b"".join(b"".join(candidate_lines(i, c, 2, "ENS0")) for i, c in enumerate(found))
    assert gzip.decompress(Path(lists[0]["dev"]).read_bytes()) == want and want
    record = json.loads((tmp_path / "out" / "candidates" / "NMT0+NMT1.json").read_text())
    assert record == {"model": f"{fingerprints['NMT0']} {fingerprints['NMT1']}", "candidates": 2, "batch": 20}
    said.clear()
    assert network_lists(out, models, parts, size=2, fingerprints=fingerprints, say=said.append, ensemble=True) == lists
    assert "kept" in said[0]
    one_each = network_lists(out, models, parts, size=2, fingerprints=fingerprints, say=said.append)
    assert [Path(p["dev"]).name for p in one_each] == ["NMT0.dev.nbest.gz", "NMT1.dev.nbest.gz"]
    texts = [[line.split(" ||| ")[1] for line in read(Path(p["dev"]))] for p in [*lists, *one_each]]
    assert texts[0] != texts[1]  # not the first network's (random weights: the second's dominates here)
    twin = with_candidates(reranked(BASELINE, models.features()), ensemble=True)
    assert twin.label == "+ NMT, with the networks' ensemble's candidates" and twin.key == "nmt-candidates"
    assert made_with(2, ensemble=True) == {
        "network_candidates": "2",
        "candidate_batch": "20",
        "constrained_decoding": "yes",
        "ensemble": "yes",
    }
    assert "ensemble" not in made_with(2)  # records of lists made before the option stay as they were


def test_networks_of_both_orders_make_a_list_per_orders_ensemble(tmp_path: Path) -> None:
    """--ensemble-candidates with a right-to-left network among left-to-right ones: a list per
    target order, in the order of each order's first network, named by its networks' features:
    the two left-to-right networks' ensemble's (ENS0, as translate -m A -m B writes it) and the
    right-to-left one's own (its feature, as a network's list). The twin says so."""
    a = str(tiny_arch_checkpoint(tmp_path / "a.pt", arch="rnnsearch", seed=1))
    b = str(tiny_arch_checkpoint(tmp_path / "b.pt", arch="rnnsearch", seed=2))
    loaded = load_checkpoint(str(tiny_arch_checkpoint(tmp_path / "c.pt", arch="rnnsearch", seed=3)))
    r = str(tmp_path / "r.pt")
    save_checkpoint(r, loaded.build_model(), loaded.src_vocab, loaded.tgt_vocab,
                    info={**loaded.info, "target_order": RIGHT_TO_LEFT})  # fmt: skip
    models = SentenceModels(None, (a, r, b))
    source = tmp_path / "dev.en"
    source.write_text("a man in a blue shirt .\n\ntwo dogs play in the snow\n")
    out = str(tmp_path / "out")
    lists = network_lists(
        out, models, {"dev": str(source)}, size=2, fingerprints=models.fingerprints(), say=print, ensemble=True
    )
    assert [Path(p["dev"]).name for p in lists] == ["NMT0+NMT2.dev.nbest.gz", "NMT1.dev.nbest.gz"]
    sources = source.read_text().splitlines()
    for found, (networks, feature) in zip(lists, (([a, b], "ENS0"), ([r], "NMT1")), strict=True):
        beams = translate_nbest([load_checkpoint(n) for n in networks], sources, beam_size=2, name=str(source))
        want = b"".join(b"".join(candidate_lines(i, c, 2, feature)) for i, c in enumerate(beams))
        assert gzip.decompress(Path(found["dev"]).read_bytes()) == want and want
    twin = with_candidates(reranked(BASELINE, models.features()), ensemble=True, orders=len(lists))
    assert twin.label == "+ NMT, with each target order's ensemble's candidates" and twin.key == "nmt-candidates"
