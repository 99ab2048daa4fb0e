"""Several sources' beams stepped together (``search.beam_search_many``, ``translate_nbest(batch=)``)
against the plain computation, each source searched alone: the same candidates in the same
order, the same truncation, and log p and rank scores within 1e-4 (float32 products of other
shapes round differently). Every architecture, an ensemble of two, GNMT's ranking with the
coverage penalty (which must read each source's own positions, not the padding of a longer one),
sources of different lengths and so different length limits, and empty lines between."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from phrase_rescorer.analysis.search import Candidate, beam_search, beam_search_many
from phrase_rescorer.analysis.stepping import Stepper
from phrase_rescorer.analysis.translate import translate_nbest
from phrase_rescorer.model.checkpoint import load_checkpoint
from tests.helpers.rescore_data import ARCH_VARIANTS, tiny_arch_checkpoint

SOURCES = [
    "a man in a blue shirt .",
    "two dogs",
    "a woman is sitting on a bench in the park with her dog .",
    "people",
    "a little girl plays in the snow",
]


def _same(got: list[Candidate], want: list[Candidate]) -> None:
    assert [c.tokens for c in got] == [c.tokens for c in want]
    assert [c.truncated for c in got] == [c.truncated for c in want]
    for a, b in zip(got, want, strict=True):
        assert a.logp == pytest.approx(b.logp, abs=1e-4)
        assert (a.rank_score is None) == (b.rank_score is None)
        if a.rank_score is not None:
            assert a.rank_score == pytest.approx(b.rank_score, abs=1e-4)


@pytest.mark.parametrize("variant", sorted(ARCH_VARIANTS))
@torch.no_grad()
def test_sources_searched_together_find_what_each_finds_alone(tmp_path: Path, variant: str) -> None:
    ckpt = load_checkpoint(str(tiny_arch_checkpoint(tmp_path / "m.pt", **ARCH_VARIANTS[variant])))  # type: ignore[arg-type]
    model = ckpt.build_model()
    sources = [ckpt.src_vocab.encode(s.split()) for s in SOURCES]
    for options in ({}, {"alpha": 0.6, "beta": 0.2}):
        together = beam_search_many(model, sources, 4, **options)  # each source its own length limit
        assert len(together) == len(sources)
        for src_ids, got in zip(sources, together, strict=True):
            _same(got, beam_search(model, src_ids, 4, **options))


@pytest.mark.parametrize("variant", ["rnnsearch", "transformer"])
@torch.no_grad()
def test_a_short_source_left_alone_reads_only_its_own_positions(tmp_path: Path, variant: str) -> None:
    """Once the longer source's rows are gone the step reads the short source's positions only (the
    rest cut off): its log p and coverage are those of the short source stepped alone, the coverage
    still one value per position of the longest source (0 past the short one's)."""
    ckpt = load_checkpoint(str(tiny_arch_checkpoint(tmp_path / "m.pt", **ARCH_VARIANTS[variant])))  # type: ignore[arg-type]
    model = ckpt.build_model()
    long, short = (ckpt.src_vocab.encode(SOURCES[i].split()) for i in (2, 1))
    both, alone = Stepper(model, long, False, [short]), Stepper(model, short, False)
    for step in (both, alone):
        step.log_probs()
    both.advance(torch.tensor([1, 1]), torch.tensor([7, 9]))  # the short source's row, twice
    alone.advance(torch.tensor([0, 0]), torch.tensor([7, 9]))
    assert torch.allclose(both.log_probs(), alone.log_probs(), atol=1e-5)
    assert both.coverage is not None and alone.coverage is not None
    assert both.coverage.shape == (2, len(long) + 1)
    assert torch.allclose(both.coverage[:, : len(short) + 1], alone.coverage, atol=1e-6)
    assert not both.coverage[:, len(short) + 1 :].any()


@torch.no_grad()
def test_an_ensembles_beams_together_are_its_beams_alone(tmp_path: Path) -> None:
    paths = [
        tiny_arch_checkpoint(tmp_path / "r.pt", arch="rnnsearch", seed=1),
        tiny_arch_checkpoint(tmp_path / "t.pt", arch="transformer", layers=2, seed=2),
    ]
    models = [load_checkpoint(str(p)).build_model() for p in paths]
    ckpt = load_checkpoint(str(paths[0]))
    sources = [ckpt.src_vocab.encode(s.split()) for s in SOURCES]
    for src_ids, got in zip(sources, beam_search_many(models, sources, 5, max_length=9), strict=True):
        _same(got, beam_search(models, src_ids, 5, max_length=9))


@torch.no_grad()
def test_translating_in_batches_gives_each_lines_candidates_in_order(tmp_path: Path) -> None:
    """Groups of 3 over 8 lines (the last group short, empty lines inside groups and a group of
    only an empty line and one sentence): each line's distinct candidates as one at a time, the
    progress callback once per line, in order."""
    ckpt = load_checkpoint(str(tiny_arch_checkpoint(tmp_path / "m.pt", arch="rnnsearch")))
    lines = [SOURCES[0], "", SOURCES[1], SOURCES[2], "", SOURCES[3], SOURCES[4], SOURCES[0]]
    alone = list(translate_nbest(ckpt, lines, beam_size=4, max_length=8))
    seen: list[int] = []
    batched = list(translate_nbest(ckpt, lines, beam_size=4, max_length=8, batch=3, on_sentence=seen.append))
    assert seen == list(range(1, len(lines) + 1))
    assert [[t.text for t in found] for found in batched] == [[t.text for t in found] for found in alone]
    assert batched[1] == [] and batched[4] == []
    for got, want in zip(batched, alone, strict=True):
        for a, b in zip(got, want, strict=True):
            assert a.logp == pytest.approx(b.logp, abs=1e-4) and a.rank == pytest.approx(b.rank, abs=1e-4)


def test_fewer_than_one_sentence_at_a_time_is_refused(tmp_path: Path) -> None:
    ckpt = load_checkpoint(str(tiny_arch_checkpoint(tmp_path / "m.pt", arch="rnnsearch")))
    with pytest.raises(ValueError, match="at least 1"):
        list(translate_nbest(ckpt, SOURCES, batch=0))
    assert beam_search_many(ckpt.build_model(), [], 3) == []
