"""The CSLM: n-grams with sentence boundaries, the model file, training, and the batched scorer
against the plain one-n-gram-at-a-time computation."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from phrase_rescorer.lm.lm_file import load_lm, save_lm
from phrase_rescorer.lm.network import CSLM, PRESETS, LMConfig
from phrase_rescorer.lm.scoring import plain_sentence_log_probs, sentence_log_probs
from phrase_rescorer.lm.text import BOS_ID, EOS_ID, build_vocabulary, ngrams, sentence_ids
from phrase_rescorer.model.files import CheckpointError
from phrase_rescorer.training.run_files import companion_path
from tests.helpers.cslm import TEXTS, tiny_lm


def last_path(path: str) -> str:
    return companion_path(path, ".last.pt")


#: Batched and plain scores differ by float32 rounding of the same rows only.
TOLERANCE = 1e-4


@pytest.fixture(scope="module")
def lm(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_lm(tmp_path_factory.mktemp("cslm") / "lm.pt")


def test_ngrams_pad_with_bos_and_predict_eos() -> None:
    vocab = build_vocabulary([["a", "b", "a"]], 10)
    ids = sentence_ids(vocab, ["a", "b", "zz"])
    contexts, targets = ngrams(3, [ids])
    a, b = vocab.id("a"), vocab.id("b")
    assert targets.tolist() == [a, b, 1, EOS_ID]  # zz is <unk>
    assert contexts.tolist() == [[BOS_ID, BOS_ID], [BOS_ID, a], [a, b], [b, 1]]
    empty_contexts, empty_targets = ngrams(3, [sentence_ids(vocab, [])])
    assert empty_targets.tolist() == [EOS_ID] and empty_contexts.tolist() == [[BOS_ID, BOS_ID]]


def test_paper_sizes() -> None:
    paper = PRESETS["paper"]
    assert (paper.order, paper.embed_dim, paper.hidden, paper.init_range) == (7, 512, (1536, 1024), 0.01)
    net = CSLM(LMConfig(vocab_size=50, embed_dim=4, hidden=(6, 5)))
    assert all(p.abs().max() <= 0.01 for p in net.parameters())
    assert net(torch.zeros(3, 6, dtype=torch.long)).shape == (3, 50)


def test_batched_scores_equal_the_plain_computation(lm: Path) -> None:
    f = load_lm(str(lm))
    model = f.build()
    sentences = [line.split() for text in TEXTS for line in text.read_text().splitlines()]
    sentences += [[], ["mot-inconnu", "un"], sentences[0] * 3]
    totals, unknown = sentence_log_probs(model, f.vocab, sentences)
    plain = np.array([plain_sentence_log_probs(model, f.vocab, s) for s in sentences])
    assert np.abs(totals - plain).max() < TOLERANCE
    assert unknown[-2] >= 1 and unknown[len(sentences) - 3] == 0
    # a wrong context in the batched path would show: perturb one sentence's order
    swapped, _ = sentence_log_probs(model, f.vocab, [list(reversed(sentences[0]))])
    assert abs(swapped[0] - plain[0]) > 10 * TOLERANCE


def test_training_lowers_the_held_out_perplexity(tmp_path: Path, lm: Path) -> None:
    before = tiny_lm(tmp_path / "none.pt", steps=1)
    assert load_lm(str(lm)).info["valid"]["ppl"] < 0.5 * load_lm(str(before)).info["valid"]["ppl"]


def test_resume_continues_the_same_run(tmp_path: Path) -> None:
    straight = tiny_lm(tmp_path / "straight.pt", steps=30)
    resumed = tmp_path / "resumed.pt"
    tiny_lm(resumed, steps=12)
    torch.manual_seed(1234)  # a resumed run restores the RNG state (dropout) from its file
    tiny_lm(resumed, steps=30, resume=True)
    a, b = load_lm(last_path(str(straight))), load_lm(last_path(str(resumed)))
    for name in a.state_dict:
        assert torch.equal(a.state_dict[name], b.state_dict[name]), name


def test_a_state_saved_on_a_gpu_resumes_on_the_cpu(tmp_path: Path) -> None:
    """A run saved on CUDA holds the GPU's RNG states (a list of tensors); resuming it anywhere
    reads them without asking a tensor for its truth."""
    path = tiny_lm(tmp_path / "lm.pt", steps=12)
    last = load_lm(last_path(str(path)))
    assert last.training_state is not None
    last.training_state["cuda_rng"] = [torch.zeros(16, dtype=torch.uint8)]  # as torch.cuda.get_rng_state_all gives
    save_lm(last_path(str(path)), last.build(), last.vocab, last.info, last.training_state)
    tiny_lm(path, steps=20, resume=True)
    assert load_lm(last_path(str(path))).info["steps"] == 20


def test_a_tampered_model_file_is_refused_before_building(tmp_path: Path, lm: Path) -> None:
    payload = torch.load(lm, weights_only=True)
    payload["config"]["hidden"] = [3000]
    torch.save(payload, tmp_path / "bad.pt")
    with pytest.raises(CheckpointError, match="inconsistent model file: layers.0.weight has shape"):
        load_lm(str(tmp_path / "bad.pt"))
    with pytest.raises(CheckpointError, match="not a phrase_rescorer model file"):
        torch.save({"x": 1}, tmp_path / "other.pt")
        load_lm(str(tmp_path / "other.pt"))


def test_model_file_round_trip(tmp_path: Path, lm: Path) -> None:
    f = load_lm(str(lm))
    save_lm(str(tmp_path / "copy.pt"), f.build(), f.vocab, f.info)
    g = load_lm(str(tmp_path / "copy.pt"))
    assert g.config == f.config and g.vocab == f.vocab and g.language == "fr"
