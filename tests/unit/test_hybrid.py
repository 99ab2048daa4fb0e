"""The hybrid system's pieces without Moses: the features of its lists in order, the features'
default names (as ``nbest`` gives them), the chunks of its input, the text forms."""

from __future__ import annotations

import io
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from phrase_rescorer.data.corpus import chunks
from phrase_rescorer.hybrid.system import Bundle, Candidates, system_layout
from phrase_rescorer.hybrid.text import TextForm, translate_file
from phrase_rescorer.scoring.features import default_names

DECODER = (("Distortion0", 1), ("LM0", 1), ("TranslationModel0", 4))


def test_the_lists_features_in_order() -> None:
    """The decoder's, then merge-nbest's indicators, then nbest's features, as the steps append them."""
    two = Candidates(("a.pt", "b.pt"), 3, 4, 0.6, None)
    assert system_layout(DECODER, two, ["CSLM0", "NMT0"]) == (
        *DECODER,
        ("FromMoses", 1),
        ("FromNet0", 1),
        ("FromNet1", 1),
        ("CSLM0", 1),
        ("NMT0", 1),
    )
    assert system_layout(DECODER, None, []) == DECODER
    # an ensemble's one list, one indicator; the format version its readers need
    ensemble = Candidates(("a.pt", "b.pt"), 3, 4, 0.6, None, ensemble=True)
    assert system_layout(DECODER, ensemble, ["NMT0"]) == (*DECODER, ("FromMoses", 1), ("FromNet0", 1), ("NMT0", 1))
    reached = Candidates(("a.pt",), 3, 4, 0.6, None, True, True)
    both = Candidates(("a.pt", "b.pt"), 3, 4, 0.6, None, True, True, ensemble=True)
    assert (two.version, ensemble.version, reached.version, both.version) == (1, 3, 2, 3)
    first = [Candidates(("a.pt", "b.pt"), 3, 4, 0.6, None, True, True, ensemble, moses_nbest=5) for ensemble in (0, 1)]
    assert [c.version for c in first] == [4, 4]  # an earlier reader would join the candidates to the whole list
    # an ensemble per target order (networks 0 and 2 write left to right, 1 right to left): a list and an
    # indicator each, in the order of each order's first network; version 5 (an earlier reader runs one ensemble)
    orders = Candidates(("a.pt", "r.pt", "b.pt"), 3, 4, 0.6, None, ensemble=True, groups=((0, 2), (1,)))
    assert orders.beams == ((0, 2), (1,)) and orders.lists == 2 and orders.version == 5
    assert system_layout(DECODER, orders, []) == (*DECODER, ("FromMoses", 1), ("FromNet0", 1), ("FromNet1", 1))
    assert ensemble.beams == ((0, 1),) and two.beams == ((0,), (1,))
    # beams of several sentences searched together: version 6 (an earlier reader searches one at a time)
    assert Candidates(("a.pt",), 3, 4, 0.6, None, batch=20).version == 6


def test_default_names_count_each_kind_on_its_own() -> None:
    assert default_names(["NMT", "CSLM", "NMT", "CSLM"]) == ["NMT0", "CSLM0", "NMT1", "CSLM1"]
    assert default_names([]) == []


def test_chunks_keep_every_line_in_order() -> None:
    lines = [str(i) for i in range(8)]
    assert list(chunks(lines, 3)) == [["0", "1", "2"], ["3", "4", "5"], ["6", "7"]]
    assert list(chunks(lines, 8)) == [lines]
    assert list(chunks([], 3)) == []


def test_text_forms() -> None:
    assert TextForm().source("Don't stop.") == "Don't stop."
    assert TextForm(tokenize="en", lowercase=True).source("Don't stop.") == "don &apos;t stop ."
    assert TextForm(detokenize="fr").output("l&apos; homme .") == "l'homme."


def test_a_chunk_holds_whole_groups_of_the_sentences_searched_together(tmp_path: Path) -> None:
    """translate_file's chunks are rounded up to a multiple of the candidates' batch, so that every
    group of sentences searched together (counted from the first line) is in one chunk: 7 lines in
    chunks of 3 with a batch of 2 go as 4 + 3; without candidates, or a batch of 1, as given."""
    source = tmp_path / "in.en"
    source.write_text("".join(f"line {i}\n" for i in range(7)))
    for candidates, want in (
        (Candidates(("a.pt",), 3, 4, 0.6, None, batch=2), [(1, 4), (5, 3)]),
        (Candidates(("a.pt",), 3, 4, 0.6, None), [(1, 3), (4, 3), (7, 1)]),
        (None, [(1, 3), (4, 3), (7, 1)]),
    ):
        seen: list[tuple[int, int]] = []

        def translate(lines: list[str], name: str, first_line: int, seen: list[Any] = seen) -> list[str]:
            seen.append((first_line, len(lines)))
            return lines

        bundle = Bundle(str(tmp_path), 10, (), (), candidates, None, "LM0")
        assert bundle.search_group == (1 if candidates is None else candidates.batch)
        system: Any = SimpleNamespace(bundle=bundle, translate=translate)
        out = io.BytesIO()
        summary = translate_file(system, str(source), out, chunk_lines=3)
        assert seen == want and summary.lines == 7 and out.getvalue() == source.read_bytes()


def test_the_candidates_are_searched_in_the_bundles_groups(monkeypatch: Any) -> None:
    """The chunk's candidate networks search its sentences in groups of the bundle's batch, their
    lines numbered from the chunk's first, as translate --batch-sentences does."""
    from phrase_rescorer.hybrid import translate as hybrid_translate

    asked: dict[str, Any] = {}

    def fake(networks: Any, sources: list[str], **options: Any) -> list[list[Any]]:
        asked.update(options)
        return [[] for _ in sources]

    monkeypatch.setattr(hybrid_translate, "translate_nbest", fake)
    out = io.BytesIO()
    settings = Candidates(("a.pt",), 3, 4, 0.6, None, batch=7)
    hybrid_translate._write_candidates(out, [], ["a b", "c"], settings, "cpu", "in.en", 21)
    assert asked["batch"] == 7 and asked["first_line"] == 21 and out.getvalue().count(b"\n") == 2
