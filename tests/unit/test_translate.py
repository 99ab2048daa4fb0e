"""``translate``: the network's own best translation of every line, in order, one line out per
line in (an empty line stays empty); several networks as one ensemble."""

from __future__ import annotations

import dataclasses
import gzip
import math
import subprocess
from pathlib import Path

import pytest
import torch

from phrase_rescorer.analysis.search import beam_search
from phrase_rescorer.analysis.stepping import Stepper
from phrase_rescorer.analysis.translate import (
    candidate_lines,
    ensemble_members,
    order_ensembles,
    translate,
    translate_nbest,
)
from phrase_rescorer.data.vocab import EOS_ID
from phrase_rescorer.errors import UsageError
from phrase_rescorer.model.checkpoint import RIGHT_TO_LEFT, load_checkpoint, save_checkpoint
from tests.helpers.cli_run import run_cli
from tests.helpers.paths import PYTHON, cli_env
from tests.helpers.rescore_data import sample_vocabularies, tiny_arch_checkpoint

SENTENCES = ["a man in a blue shirt .", "", "two dogs play in the snow"]


def test_each_line_is_the_best_beam_candidate(tmp_path: Path) -> None:
    ckpt = load_checkpoint(str(tiny_arch_checkpoint(tmp_path / "m.pt", arch="rnnsearch")))
    got = list(translate(ckpt, SENTENCES, beam_size=3, alpha=0.0, max_length=8))
    model = ckpt.build_model()
    want = []
    for s in SENTENCES:
        ids = ckpt.src_vocab.encode(s.split())
        want.append(" ".join(ckpt.tgt_vocab.decode(beam_search(model, ids, 3, 8)[0].tokens)) if ids else "")
    assert got == want and got[1] == "" and all("<unk>" not in line for line in got)


def test_the_command_writes_one_line_per_line(tmp_path: Path) -> None:
    model = tiny_arch_checkpoint(tmp_path / "m.pt", arch="rnnsearch")
    (tmp_path / "in.en").write_text("".join(s + "\n" for s in SENTENCES))
    r = subprocess.run(
        [
            PYTHON,
            "-m",
            "phrase_rescorer",
            "translate",
            str(tmp_path / "in.en"),
            str(tmp_path / "out.gz"),
            "-m",
            str(model),
            "--max-length",
            "6",
        ],
        capture_output=True,
        env=cli_env(),
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    assert len(gzip.decompress((tmp_path / "out.gz").read_bytes()).decode().splitlines()) == len(SENTENCES)


def _plain_ensemble_logp(models: list[torch.nn.Module], src_ids: list[int], tokens: tuple[int, ...]) -> float:
    """log p of ``tokens </s>`` under the ensemble, the plain way: each network stepped alone along
    the tokens, and at each step log of the mean of their probabilities of the next token."""
    steppers = [Stepper(model, src_ids, allow_unk=False) for model in models]  # type: ignore[arg-type]
    total = 0.0
    for token in (*tokens, EOS_ID):
        p = [math.exp(float(step.log_probs()[0, token])) for step in steppers]
        total += math.log(sum(p) / len(p))
        for step in steppers:
            step.advance(torch.zeros(1, dtype=torch.long), torch.tensor([token]))
    return total


@torch.no_grad()
def test_an_ensembles_log_p_is_the_log_of_its_networks_averaged_probabilities(tmp_path: Path) -> None:
    """An rnnsearch network and a transformer of the same vocabularies: every candidate of the
    ensemble's beam has the log p of the networks' per-step probabilities averaged (1e-4, float32)."""
    paths = [
        tiny_arch_checkpoint(tmp_path / "r.pt", arch="rnnsearch", seed=1),
        tiny_arch_checkpoint(tmp_path / "t.pt", arch="transformer", layers=2, seed=2),
    ]
    models = [load_checkpoint(str(p)).build_model() for p in paths]
    ckpt = load_checkpoint(str(paths[0]))
    for sentence in SENTENCES[::2]:
        ids = ckpt.src_vocab.encode(sentence.split())
        found = beam_search(models, ids, 4, 8)
        assert len(found) == 4
        for candidate in found:
            assert candidate.logp == pytest.approx(_plain_ensemble_logp(models, ids, candidate.tokens), abs=1e-4)


@torch.no_grad()
def test_one_network_as_a_sequence_or_twice_translates_as_it_alone(tmp_path: Path) -> None:
    ckpt = load_checkpoint(str(tiny_arch_checkpoint(tmp_path / "m.pt", arch="rnnsearch")))
    alone = list(translate_nbest(ckpt, SENTENCES, beam_size=3, max_length=8))
    assert list(translate_nbest([ckpt], SENTENCES, beam_size=3, max_length=8)) == alone
    twice = list(translate_nbest([ckpt, ckpt], SENTENCES, beam_size=3, max_length=8))
    assert [[t.text for t in found] for found in twice] == [[t.text for t in found] for found in alone]
    for got, want in zip(twice, alone, strict=True):
        for a, b in zip(got, want, strict=True):
            assert a.logp == pytest.approx(b.logp, abs=1e-4)


def test_an_ensemble_of_networks_that_read_or_write_differently_is_refused(tmp_path: Path) -> None:
    ckpt = load_checkpoint(str(tiny_arch_checkpoint(tmp_path / "m.pt", arch="rnnsearch")))
    backwards = dataclasses.replace(ckpt, info={**ckpt.info, "target_order": RIGHT_TO_LEFT}, path="rl.pt")
    with pytest.raises(UsageError, match=r"^rl\.pt: .*target order differ"):
        ensemble_members([ckpt, backwards])
    other, _ = sample_vocabularies(300)
    with pytest.raises(UsageError, match="source vocabulary differ"):
        ensemble_members([ckpt, dataclasses.replace(ckpt, src_vocab=other, path="v.pt")])
    assert ensemble_members(ckpt) == [ckpt] and ensemble_members([ckpt, ckpt]) == [ckpt, ckpt]


def test_networks_of_both_orders_make_an_ensemble_per_order_in_the_order_of_their_first(tmp_path: Path) -> None:
    """order_ensembles: the indices grouped by target order, the group of the first network first;
    a group whose networks read differently is refused as ensemble_members refuses it."""
    ckpt = load_checkpoint(str(tiny_arch_checkpoint(tmp_path / "m.pt", arch="rnnsearch")))
    backwards = dataclasses.replace(ckpt, info={**ckpt.info, "target_order": RIGHT_TO_LEFT}, path="rl.pt")
    assert order_ensembles([ckpt, backwards, ckpt, backwards, backwards]) == [[0, 2], [1, 3, 4]]
    assert order_ensembles([backwards, ckpt, ckpt]) == [[0], [1, 2]]
    assert order_ensembles([ckpt, ckpt]) == [[0, 1]] and order_ensembles([ckpt]) == [[0]]
    other, _ = sample_vocabularies(300)
    stranger = dataclasses.replace(backwards, src_vocab=other, path="v.pt")
    with pytest.raises(
        UsageError, match=r"^v\.pt: cannot translate in one ensemble with rl\.pt: its source vocabulary"
    ):
        order_ensembles([ckpt, backwards, ckpt, stranger])


def test_the_command_translates_with_an_ensemble_and_refuses_a_mixed_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    a = tiny_arch_checkpoint(tmp_path / "a.pt", arch="rnnsearch", seed=1)
    b = tiny_arch_checkpoint(tmp_path / "b.pt", arch="transformer", layers=2, seed=2)
    (tmp_path / "in.en").write_text("".join(s + "\n" for s in SENTENCES))
    out = tmp_path / "out.fr"
    args = ["translate", str(tmp_path / "in.en"), str(out), "-m", str(a), "-m", str(b), "--max-length", "6"]
    code, err = run_cli([*args, "-n-best-list", str(tmp_path / "n.best"), "2"], monkeypatch, capsys)
    assert code == 0, err
    assert "the ensemble of" in err
    models = [load_checkpoint(str(p)) for p in (a, b)]
    want = list(translate(models, SENTENCES, max_length=6))
    assert out.read_text().splitlines() == want
    loaded = load_checkpoint(str(a))
    save_checkpoint(
        str(tmp_path / "rl.pt"),
        loaded.build_model(),
        loaded.src_vocab,
        loaded.tgt_vocab,
        info={"target_order": RIGHT_TO_LEFT},
    )
    out.unlink()
    code, err = run_cli(
        ["translate", str(tmp_path / "in.en"), str(out), "-m", str(a), "-m", str(tmp_path / "rl.pt")],
        monkeypatch,
        capsys,
    )
    assert code == 2 and "rl.pt: cannot translate in one ensemble" in err and "target order" in err
    assert not out.exists()


def test_the_command_searches_groups_of_sentences_as_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """--batch-sentences 2: the lines and n-best list of the library's search in groups of 2 (equal to
    one at a time within float32 rounding: tests/unit/test_batched_search.py); 0 refused (exit 2)."""
    model = tiny_arch_checkpoint(tmp_path / "m.pt", arch="rnnsearch")
    source = tmp_path / "in.en"
    source.write_text("".join(s + "\n" for s in SENTENCES))
    out, listed = tmp_path / "out.fr", tmp_path / "n.best"
    args = ["translate", str(source), str(out), "-m", str(model), "--max-length", "6", "--batch-sentences"]
    code, err = run_cli([*args, "2", "-n-best-list", str(listed), "3"], monkeypatch, capsys)
    assert code == 0, err
    found = list(translate_nbest(load_checkpoint(str(model)), SENTENCES, max_length=6, batch=2))
    assert out.read_text().splitlines() == [f[0].text if f else "" for f in found]
    assert listed.read_bytes() == b"".join(b"".join(candidate_lines(i, f, 3, "NMT0")) for i, f in enumerate(found))
    out.unlink()
    code, err = run_cli([*args, "0"], monkeypatch, capsys)
    assert code == 2 and "--batch-sentences" in err and not out.exists()
