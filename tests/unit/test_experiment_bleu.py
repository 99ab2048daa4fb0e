"""BLEU of the experiment: values computed independently (multi-bleu.perl, the sacrebleu CLI on
detokenizer.perl output), and the numpy BLEU against sacrebleu's own corpus BLEU."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from sacrebleu.metrics import BLEU

from phrase_rescorer.experiment import bleu
from tests.helpers.paths import REPO, SHARED

DATA = REPO / "tests" / "data" / "bleu"


def lines(name: str) -> list[str]:
    return bleu.read_lines(str(DATA / name))


def test_tokenized_bleu_matches_multi_bleu_perl() -> None:
    # multi-bleu.perl prints 57.71 (tests/data/bleu/README.md); the sacrebleu CLI 57.7082
    s = bleu.tokenized_bleu(lines("hyp.tok.fr"), lines("ref.tok.fr"))
    assert round(s.score, 2) == 57.71
    assert s.score == pytest.approx(57.7082, abs=5e-5)
    assert s.signature == "nrefs:1|case:mixed|eff:no|tok:none|smooth:exp|version:" + s.signature.rsplit(":", 1)[1]
    assert s.stats.shape == (20, bleu.STATS)
    assert s.stats[:, 0].sum() == 293 and s.stats[:, 1].sum() == 295  # hyp_len, ref_len as multi-bleu


def test_detokenized_bleu_matches_sacrebleu_cli_on_detokenizer_perl_output() -> None:
    # sacrebleu CLI on Moses' detokenizer.perl output against a raw reference: 56.6840
    hyps = lines("hyp.tok.fr")
    assert bleu.detokenize(hyps, "fr") == lines("hyp.detok-perl.fr")  # sacremoses == detokenizer.perl here
    s = bleu.detokenized_bleu(hyps, lines("ref.detok-perl.fr"), "fr")
    assert s.score == pytest.approx(56.6840, abs=5e-5)
    assert "tok:13a" in s.signature


def test_detokenize_unescapes() -> None:
    assert bleu.detokenize(["un homme d&apos; affaires &amp; co ."], "fr") == ["un homme d'affaires & co."]


def test_numpy_bleu_equals_sacrebleu_on_random_corpora() -> None:
    rng = np.random.default_rng(3)
    words = ["a", "b", "c", "d", "e", "f", "g", "h"]
    for trial in range(30):
        n = int(rng.integers(1, 12))
        hyps = [" ".join(rng.choice(words, int(rng.integers(0, 9)))) for _ in range(n)]
        refs = [" ".join(rng.choice(words, int(rng.integers(1, 9)))) for _ in range(n)]
        expected = BLEU(tokenize="none").corpus_score(hyps, [refs]).score
        stats = bleu.sentence_stats(hyps, refs)
        assert float(bleu.bleu_from_stats(stats.sum(axis=0))) == pytest.approx(expected, abs=1e-9), trial


def test_numpy_bleu_batches() -> None:
    stats = bleu.sentence_stats(lines("hyp.tok.fr"), lines("ref.tok.fr"))
    batch = np.stack([stats[:10].sum(0), stats[10:].sum(0), stats.sum(0)])
    got = bleu.bleu_from_stats(batch)
    for value, part in zip(got, (slice(0, 10), slice(10, 20), slice(0, 20)), strict=True):
        expected = BLEU(tokenize="none").corpus_score(lines("hyp.tok.fr")[part], [lines("ref.tok.fr")[part]]).score
        assert value == pytest.approx(expected, abs=1e-9)


def test_lengths_must_match() -> None:
    with pytest.raises(ValueError, match="2 hypotheses but 1 references"):
        bleu.sentence_stats(["a", "b"], ["a"])


@pytest.mark.shared
def test_bundled_baseline_test_bleu() -> None:
    # ../shared/data/moses-en-fr/README.txt: multi-bleu.perl (tok, lc): BLEU = 58.32
    base = SHARED / "data" / "moses-en-fr"
    hyps = bleu.read_lines(str(base / "baseline" / "test_2016_flickr.tuned.1best.tok.lc.fr"))
    refs = bleu.read_lines(str(base / "corpus" / "test_2016_flickr.tok.lc.fr"))
    assert round(bleu.tokenized_bleu(hyps, refs).score, 2) == 58.32


def test_read_lines_splits_at_newlines_only(tmp_path: Path) -> None:
    """A translation holding U+2028, U+0085 or a form feed is one line, as Moses counts it."""
    path = tmp_path / "out.txt"
    path.write_text("a\u2028b\nc\x85d\x0ce\r\n\nlast", encoding="utf-8", newline="")
    assert bleu.read_lines(str(path)) == ["a\u2028b", "c\x85d\x0ce", "", "last"]
    path.write_text("x\n", encoding="utf-8")
    assert bleu.read_lines(str(path)) == ["x"]
