"""BLEU of held-out pairs at validation (``train-nmt --valid-bleu N``): the translations are the
text ``translate --beam-size 1`` writes from the same network (word, right-to-left and subword
networks, recurrent and transformer), the score is the tokenized BLEU ``experiment`` computes
of that text, and a run's log holds the figure of each validation, which the saved network
gives again."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import torch

from phrase_rescorer.analysis.translate import translate
from phrase_rescorer.data.corpus import load_sentence_pairs
from phrase_rescorer.data.pairs import PairBuilder
from phrase_rescorer.experiment.bleu import tokenized_bleu
from phrase_rescorer.model.checkpoint import RIGHT_TO_LEFT, load_checkpoint, save_checkpoint
from phrase_rescorer.training.heldout_bleu import HeldOutBleu
from tests.helpers.nmt import SIZES, TINY_MOSES
from tests.helpers.paths import PYTHON, cli_env
from tests.helpers.rescore_data import tiny_arch_checkpoint, tiny_checkpoint


def _sentences(side: str, n: int) -> list[str]:
    return (TINY_MOSES / f"train.{side}").read_text(encoding="utf-8").splitlines()[:n]


def _network(path: Path, kind: str) -> Path:
    if kind == "subwords":
        return tiny_checkpoint(path, subwords=500)
    tiny_arch_checkpoint(path, arch="transformer" if kind == "transformer" else "rnnsearch", layers=2)
    if kind == "right-to-left":
        ckpt = load_checkpoint(str(path))
        info = {"trained_on": "sentence pairs", "target_order": RIGHT_TO_LEFT}
        save_checkpoint(str(path), ckpt.build_model(), ckpt.src_vocab, ckpt.tgt_vocab, info=info)
    return path


@pytest.mark.usefixtures("one_thread")
@pytest.mark.parametrize("kind", ["words", "right-to-left", "subwords", "transformer"])
def test_the_translations_are_translates_with_a_beam_of_one_and_the_score_experiments(
    tmp_path: Path, kind: str
) -> None:
    ckpt = load_checkpoint(str(_network(tmp_path / "net.pt", kind)))
    sources, references = _sentences("en", 12), _sentences("fr", 12)
    builder = PairBuilder()
    for source, reference in zip(sources, references, strict=True):  # as prepare_data encodes them
        builder.add(ckpt.split(source, 0), ckpt.split(reference, 1))
    pairs = builder.build(len(sources))
    encoded = pairs.encode(ckpt.src_vocab, ckpt.tgt_vocab)
    order = [2, 0, 5, 7, 11]
    target_units = None if ckpt.subwords is None else ckpt.subwords[1]
    scorer = HeldOutBleu(
        encoded, order, [references[i] for i in order], ckpt.tgt_vocab, target_units, ckpt.right_to_left
    )
    model = ckpt.build_model()
    model.eval()
    got = scorer.translations(model)
    want = list(translate(ckpt, [sources[i] for i in order], beam_size=1))
    assert got == want
    assert any(len(set(text.split())) > 1 for text in got)  # orders and joins that can differ
    assert scorer.score(model) == tokenized_bleu(want, [references[i] for i in order]).score


def test_references_and_sources_must_pair_up(tmp_path: Path) -> None:
    ckpt = load_checkpoint(str(_network(tmp_path / "net.pt", "words")))
    builder = PairBuilder()
    builder.add(["a"], ["b"])
    with pytest.raises(ValueError, match="1 held-out pairs but 2 references"):
        encoded = builder.build(1).encode(ckpt.src_vocab, ckpt.tgt_vocab)
        HeldOutBleu(encoded, [0], ["b", "c"], ckpt.tgt_vocab, None, False)


def _train(tmp_path: Path, *options: str) -> subprocess.CompletedProcess[str]:
    argv = [PYTHON, "-m", "phrase_rescorer", "train-nmt", str(TINY_MOSES / "train.en"), str(TINY_MOSES / "train.fr")]
    argv += [str(tmp_path / "nmt.pt"), "--max-steps", "40", "--valid-every", "20", *SIZES, "--valid-fraction", "0.05"]
    argv += ["--threads", "1", "--seed", "3", "--dropout", "0.3", *options]
    trained = subprocess.run(argv, capture_output=True, text=True, env=cli_env(), timeout=300)
    assert trained.returncode == 0, trained.stderr
    return trained


def _validations(tmp_path: Path) -> list[dict]:
    events = [json.loads(line) for line in (tmp_path / "nmt.log").read_text().splitlines()]
    return [e for e in events if e["event"] == "valid"]


@pytest.mark.usefixtures("one_thread")
@pytest.mark.parametrize("options", [[], ["--direction", "inverse", "--right-to-left"]], ids=["forward", "inverse-r2l"])
def test_a_run_logs_each_validations_bleu_and_the_saved_network_gives_it_again(
    tmp_path: Path, options: list[str]
) -> None:
    trained = _train(tmp_path, "--valid-bleu", "20", *options)
    validations = _validations(tmp_path)
    assert [v["step"] for v in validations] == [20, 40]
    assert all(v["valid_bleu_pairs"] == 20 for v in validations)
    assert f"greedy BLEU {validations[-1]['valid_bleu']:.2f} (20 pairs)" in trained.stderr
    # The last validation's weights are the ones the resumable file holds: the first 20 held-out
    # pairs, read the way the network reads them, translated by them, give the logged BLEU again.
    corpus = load_sentence_pairs(str(TINY_MOSES / "train.en"), str(TINY_MOSES / "train.fr"))
    held = [i for i, out in enumerate(corpus.pairs.heldout_mask(0.05)) if out][:20]
    read, written = (1, 0) if "inverse" in options else (0, 1)
    sources = [" ".join(corpus.pairs.pair(i)[read]) for i in held]
    references = [" ".join(corpus.pairs.pair(i)[written]) for i in held]
    translations = list(translate(load_checkpoint(str(tmp_path / "nmt.last.pt")), sources, beam_size=1))
    bleu = round(tokenized_bleu(translations, references).score, 4)
    assert validations[-1]["valid_bleu"] == bleu
    assert bleu > 0  # some words in common: a figure that wrong references or order would change


@pytest.mark.usefixtures("one_thread")
def test_without_the_option_a_run_logs_no_bleu_and_trains_the_same_weights(tmp_path: Path) -> None:
    (tmp_path / "with").mkdir()
    (tmp_path / "without").mkdir()
    _train(tmp_path / "with", "--valid-bleu", "4")
    trained = _train(tmp_path / "without")
    assert all("valid_bleu" not in v for v in _validations(tmp_path / "without"))
    assert "greedy BLEU" not in trained.stderr
    # Translating at a validation draws no random numbers and leaves the network as it was.
    with_bleu = load_checkpoint(str(tmp_path / "with" / "nmt.last.pt")).state_dict
    without = load_checkpoint(str(tmp_path / "without" / "nmt.last.pt")).state_dict
    assert with_bleu.keys() == without.keys()
    assert all(torch.equal(with_bleu[k], without[k]) for k in with_bleu)
