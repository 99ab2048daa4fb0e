"""The translation-network feature of n-best lists: each hypothesis' ln p(hyp </s> | source)
equals the plain computation (one hypothesis at a time, ``sequence_log_probs``) within 1e-4, for
every architecture and both directions; the list's sentences must match the source text."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from phrase_rescorer.data.batching import sequences_batch
from phrase_rescorer.model.checkpoint import load_checkpoint, save_checkpoint
from phrase_rescorer.model.cho2014 import sequence_log_probs
from phrase_rescorer.moses.nbest import NbestError, dense_features, parse_nbest_line, read_nbest
from phrase_rescorer.scoring.features import TranslationFeature, load_feature
from phrase_rescorer.scoring.nbest import append_features
from tests.helpers.rescore_data import tiny_arch_checkpoint, tiny_checkpoint

SOURCES = ["a man in a blue shirt .", "two dogs play", "a woman sits on a bench"]
HYPS = [
    [0, "un homme en chemise bleue ."],
    [0, "un homme en bleu ."],
    [0, ""],
    [1, "deux chiens jouent"],
    [1, "deux chiens jouent dans la neige ."],
    [1, "des chiens xyz-inconnu"],
    [2, "une femme est assise sur un banc"],
    [2, "une femme assise"],
]
TOLERANCE = 1e-4  # float32 sums over up to 10 tokens, computed in batches of other shapes


def _nbest(path: Path) -> Path:
    path.write_bytes(b"".join(f"{s} ||| {h} ||| LM0= -1 ||| -1\n".encode() for s, h in HYPS))
    return path


def _with_info(path: Path, **info: str) -> Path:
    ckpt = load_checkpoint(str(path))
    model = ckpt.build_model()
    save_checkpoint(
        str(path), model, ckpt.src_vocab, ckpt.tgt_vocab, info={**ckpt.info, **info}, subwords=ckpt.subwords
    )
    return path


def _plain(path: Path, inverse: bool) -> list[float]:
    ckpt = load_checkpoint(str(path))
    model = ckpt.build_model()
    out = []
    for s, h in HYPS:
        src, tgt = (h, SOURCES[s]) if inverse else (SOURCES[s], h)
        batch = sequences_batch(
            [ckpt.src_vocab.encode(ckpt.split(src, 0))], [ckpt.tgt_vocab.encode(ckpt.split(tgt, 1))]
        )
        with torch.no_grad():
            out.append(float(sequence_log_probs(model, batch.src, batch.src_len, batch.tgt, batch.tgt_len)[0]))
    return out


@pytest.mark.parametrize("arch", ["cho2014", "rnnsearch", "gnmt", "transformer"])
@pytest.mark.parametrize("direction", ["forward", "inverse"])
def test_scores_equal_the_plain_computation(tmp_path: Path, arch: str, direction: str) -> None:
    model = tmp_path / "m.pt"
    if arch == "cho2014":
        tiny_checkpoint(model)
    else:
        tiny_arch_checkpoint(model, arch=arch, **({"layers": 2} if arch in ("gnmt", "transformer") else {}))
    _with_info(model, trained_on="sentence pairs", direction=direction)
    feature = load_feature(str(model), "NMT0", SOURCES)
    assert isinstance(feature, TranslationFeature) and feature.inverse == (direction == "inverse")
    lines = [
        parse_nbest_line(raw, b"\n", i + 1, "x")
        for i, raw in enumerate(_nbest(tmp_path / "n").read_bytes().splitlines())
    ]
    got, unknown = feature.score(lines)
    want = _plain(model, direction == "inverse")
    assert np.max(np.abs(got - np.array(want))) < TOLERANCE
    assert len(set(np.round(got, 3))) > 4  # the scores tell hypotheses apart
    assert unknown >= 1  # xyz-inconnu


@pytest.mark.parametrize("direction", ["forward", "inverse"])
def test_a_subword_network_scores_the_segmented_hypothesis(tmp_path: Path, direction: str) -> None:
    """Moses' hypotheses are words: a subword network's feature is the sum of log p over the
    hypothesis' units (and </s>) given the segmented source, as the plain computation scores them."""
    model = _with_info(
        tiny_checkpoint(tmp_path / "m.pt", subwords=500), trained_on="sentence pairs", direction=direction
    )
    ckpt = load_checkpoint(str(model))
    assert ckpt.subwords is not None
    side = 0 if direction == "inverse" else 1
    assert len(ckpt.split(HYPS[0][1], side)) > len(HYPS[0][1].split())  # the words are segmented
    feature = load_feature(str(model), "NMT0", SOURCES)
    lines = [
        parse_nbest_line(raw, b"\n", i + 1, "x")
        for i, raw in enumerate(_nbest(tmp_path / "n").read_bytes().splitlines())
    ]
    got, unknown = feature.score(lines)
    assert np.max(np.abs(got - np.array(_plain(model, direction == "inverse")))) < TOLERANCE
    assert unknown == 0  # no unit is unknown: xyz-inconnu is spelt in units


def test_appended_in_order_every_byte_kept(tmp_path: Path) -> None:
    model = _with_info(tiny_arch_checkpoint(tmp_path / "m.pt", arch="rnnsearch"), trained_on="sentence pairs")
    nbest = _nbest(tmp_path / "n")
    feature = load_feature(str(model), "NMT0", SOURCES)
    second = load_feature(str(model), "NMT1", SOURCES)
    summary = append_features(str(nbest), str(tmp_path / "out"), [feature, second], sources=SOURCES, window=2)
    assert (summary.lines, summary.sentences) == (len(HYPS), 3)
    out = (tmp_path / "out").read_bytes().splitlines(keepends=True)
    for raw, line in zip(nbest.read_bytes().splitlines(keepends=True), out, strict=True):
        head, _, tail = line.partition(b" NMT0= ")
        assert head + b" |||" + tail.split(b" |||", 1)[1] == raw
    values = [dict((n, v) for n, v in dense_features(line.features)) for line in read_nbest(str(tmp_path / "out"))]
    assert list(values[0]) == ["LM0", "NMT0", "NMT1"]
    assert all(v["NMT0"] == v["NMT1"] for v in values)


@pytest.mark.parametrize("count", [2, 4])
def test_a_source_text_of_another_length_is_refused_before_any_output(tmp_path: Path, count: int) -> None:
    model = _with_info(tiny_arch_checkpoint(tmp_path / "m.pt", arch="rnnsearch"), trained_on="sentence pairs")
    sources = (SOURCES + ["one more"])[:count]
    feature = load_feature(str(model), "NMT0", sources)
    with pytest.raises(NbestError, match=f"{count} source sentences, but .* lists 3 sentences"):
        append_features(
            str(_nbest(tmp_path / "n")), str(tmp_path / "out"), [feature], sources=sources, source_path="src.txt"
        )
    assert not (tmp_path / "out").exists()


def test_a_translation_network_needs_the_source_text(tmp_path: Path) -> None:
    model = tiny_arch_checkpoint(tmp_path / "m.pt", arch="rnnsearch")
    with pytest.raises(ValueError, match="--source"):
        load_feature(str(model), "NMT0", None)
    warnings: list[str] = []
    load_feature(str(model), "NMT0", SOURCES, on_warning=warnings.append)
    assert "trained on phrase pairs" in warnings[0]


def test_a_feature_the_list_has_already_is_refused(tmp_path: Path) -> None:
    model = _with_info(tiny_arch_checkpoint(tmp_path / "m.pt", arch="rnnsearch"), trained_on="sentence pairs")
    once = tmp_path / "once"
    append_features(
        str(_nbest(tmp_path / "n")), str(once), [load_feature(str(model), "NMT0", SOURCES)], sources=SOURCES
    )
    with pytest.raises(NbestError, match="already has the feature NMT0"):
        append_features(
            str(once), str(tmp_path / "twice"), [load_feature(str(model), "NMT0", SOURCES)], sources=SOURCES
        )
    assert not (tmp_path / "twice").exists()
    append_features(str(once), str(tmp_path / "other"), [load_feature(str(model), "NMT1", SOURCES)], sources=SOURCES)
