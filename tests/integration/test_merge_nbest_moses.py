"""``merge-nbest`` with the real Moses on tests/data/tiny-moses: the word penalty and LM value it
computes for a hypothesis are the decoder's own for the same words (KenLM through Moses'
bin/query), and the merged lists are tuned by Moses' kbmira and reranked. Skipped, with the
reason, when no Moses is found ($MOSES, else ../shared/tools/moses)."""

from __future__ import annotations

from pathlib import Path

import pytest

from phrase_rescorer.lm.kenlm import KenLMSentences
from phrase_rescorer.moses.nbest import dense_features, read_nbest
from phrase_rescorer.reranking.merge import new_features
from tests.helpers.cslm import TINY_MOSES
from tests.helpers.moses import moses_root, tiny_lists, tune_then_rerank
from tests.helpers.moses import phrase_rescorer as run

NEEDS = ("bin/moses", "bin/query", "bin/extractor", "bin/kbmira")
LM = TINY_MOSES / "lm.fr.3gram.arpa.gz"


@pytest.fixture(scope="module")
def lists(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return tiny_lists(moses_root(NEEDS), tmp_path_factory.mktemp("merge"), 20)


def test_the_computed_word_penalty_and_lm_value_are_the_decoders(lists: dict[str, Path]) -> None:
    """Every hypothesis the decoder wrote: its WordPenalty0 and LM0 computed from its words alone
    (as merge-nbest computes them for a hypothesis the decoder did not produce) equal the
    decoder's, within the 6 digits it prints."""
    lines = list(read_nbest(str(lists["test"])))
    with KenLMSentences(str(lists["moses"] / "bin" / "query"), str(LM)) as lm:
        totals = lm.totals([line.tokens for line in lines])
    assert len(lines) > 50
    for line, total in zip(lines, totals, strict=True):
        want = dict(dense_features(line.features))
        got = dict(new_features(line.layout, line.tokens, "LM0", total))
        assert got["WordPenalty0"] == want["WordPenalty0"]
        assert got["LM0"][0] == pytest.approx(want["LM0"][0], rel=1e-5, abs=1e-4), line.raw
        assert got["TranslationModel0"] == [0.0] * 4 and got["Distortion0"] == [0.0]


@pytest.mark.slow
def test_merged_lists_are_tuned_by_kbmira_and_reranked(lists: dict[str, Path], tmp_path: Path) -> None:
    """The references as a second system's candidates: merged (the LM through Moses' query),
    tuned by Moses' extractor and kbmira with the indicators among the features, reranked."""
    merged = {}
    for part in ("dev", "test"):
        refs = (TINY_MOSES / f"{part}.fr").read_text().splitlines()
        added = tmp_path / f"{part}.refs.nbest"
        added.write_text("".join(f"{i} ||| {ref}  ||| REF0= 0 ||| 0\n" for i, ref in enumerate(refs)))
        merged[part] = tmp_path / f"{part}.merged.nbest.gz"
        args = [
            str(lists[part]),
            str(merged[part]),
            "--add",
            str(added),
            "--lm",
            str(LM),
            "--moses",
            str(lists["moses"]),
        ]
        r = run("merge-nbest", *args)
        assert r.returncode == 0, r.stderr
        assert b"new lines' LM0, WordPenalty0 computed, Distortion0, PhrasePenalty0, TranslationModel0 0" in r.stderr
    weights, out = tmp_path / "rerank.weights", tmp_path / "test.reranked"
    tune_then_rerank(lists, merged["dev"], merged["test"], weights, out, "--optimizer", "kbmira")
    assert "\nFromMoses= " in weights.read_text() and "\nFromNet0= " in weights.read_text()
    assert len(out.read_text().splitlines()) == len((TINY_MOSES / "test.en").read_text().splitlines())


def test_an_lm_query_cannot_read_is_refused_with_querys_reason(lists: dict[str, Path], tmp_path: Path) -> None:
    (tmp_path / "bad.arpa").write_text("not an LM\n")
    (tmp_path / "net.nbest").write_text("".join(f"{i} ||| x  ||| N= 0 ||| 0\n" for i in range(8)))
    out = tmp_path / "out.nbest"
    args = [str(lists["test"]), str(out), "--add", str(tmp_path / "net.nbest"), "--lm", str(tmp_path / "bad.arpa")]
    r = run("merge-nbest", *args, "--moses", str(lists["moses"]))
    assert r.returncode == 6 and b"bad.arpa failed: exit 1: first non-empty line was" in r.stderr, r.stderr
    assert not out.exists()


def test_constrained_decoding_gives_the_decoders_own_line_of_a_hypothesis_it_listed(
    lists: dict[str, Path], tmp_path: Path
) -> None:
    """Each sentence's 4th to 20th hypotheses of the decoder's 20-best, as another system's
    candidates merged into its 3-best with --ini: each reached by constrained decoding (words the
    decoder copies from the source included) with the features and total of the decoder's own
    line, within the 6 digits it prints; a hypothesis the model cannot produce (a word no phrase
    pair writes) gets MosesReached= 0 and no decoder score, and is left out with --reached-only."""
    lines = list(read_nbest(str(lists["test"])))
    rank: dict[int, int] = {}
    three, rest = [], {}
    for line in lines:
        rank[line.sentence] = rank.get(line.sentence, 0) + 1
        if rank[line.sentence] <= 3:
            three.append(line.raw + b"\n")
        else:
            rest[(line.sentence, " ".join(line.tokens))] = line
    moses_list, added, out = tmp_path / "test.3.nbest", tmp_path / "net.nbest", tmp_path / "merged.nbest"
    moses_list.write_bytes(b"".join(three))
    unreachable = "un homme zzzunseen ."
    candidates = [f"{s} ||| {words}  ||| N= 0 ||| 0\n" for s, words in rest]
    added.write_text("".join(candidates) + f"{max(rank)} ||| {unreachable} ||| N= 0 ||| 0\n")
    assert any("snowmobiles" in words for _, words in rest)  # a word the decoder copies from the source
    args = [str(moses_list), str(out), "--add", str(added), "--ini", str(lists["ini"])]
    r = run("merge-nbest", *args, "--source", str(TINY_MOSES / "test.en"), "--moses", str(lists["moses"]))
    assert r.returncode == 0, r.stderr
    assert f"{len(rest):,} of {len(rest) + 1:,} produced by constrained decoding".encode() in r.stderr, r.stderr
    merged = [line for line in read_nbest(str(out)) if dict(dense_features(line.features))["FromMoses"] == [0.0]]
    assert len(merged) == len(rest) + 1
    for line in merged:
        got = dict(dense_features(line.features))
        if " ".join(line.tokens) == unreachable:
            assert got["MosesReached"] == [0.0] and got["TranslationModel0"] == [0.0] * 4 and line.total == 0
            continue
        want = rest[(line.sentence, " ".join(line.tokens))]
        assert got.pop("MosesReached") == [1.0] and got.pop("FromNet0") == [1.0] and got.pop("FromMoses") == [0.0]
        expected = dict(dense_features(want.features))
        assert list(got) == list(expected)
        for name, values in expected.items():
            assert got[name] == pytest.approx(values, rel=1e-5, abs=2e-5), (name, line.raw)
        assert line.total == pytest.approx(want.total, rel=1e-5, abs=2e-5)
    # --reached-only: the same list without the line of the hypothesis the model cannot produce
    only = tmp_path / "reached.nbest"
    r = run("merge-nbest", *args[:1], str(only), *args[2:], "--reached-only", "--source", str(TINY_MOSES / "test.en"),
            "--moses", str(lists["moses"]))  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert b"1 left out (--reached-only)" in r.stderr, r.stderr
    every = out.read_bytes().splitlines(keepends=True)
    assert only.read_bytes() == b"".join(line for line in every if unreachable.encode() not in line)
    assert len(every) == len(only.read_bytes().splitlines()) + 1


def test_the_reach_check_leaves_out_only_hypotheses_the_decoder_cannot_produce(lists: dict[str, Path]) -> None:
    """Each sentence's 10 best of the decoder's list, reversed, cut short, with a word repeated,
    rotated, and the next sentence's best, decoded constrained with the reach check (the default)
    and without it: the same decoder line (words, features, total) or none for every hypothesis;
    the check left some out, each one the decoder could not produce either."""
    from phrase_rescorer.moses.constrained import ConstrainedDecoder, decodable
    from phrase_rescorer.moses.reachable import reach_check
    from phrase_rescorer.moses.toolkit import MosesToolkit

    sources = (TINY_MOSES / "test.en").read_text(encoding="utf-8").splitlines()
    best: dict[int, list[list[str]]] = {}
    for line in read_nbest(str(lists["test"])):
        best.setdefault(line.sentence, []).append(line.tokens)
    hypotheses: list[tuple[int, list[str]]] = []
    for s, found in best.items():
        for words in found[:10]:
            hypotheses += [(s, words), (s, words[::-1]), (s, words[:-1]), (s, words + words[-1:])]
            hypotheses.append((s, words[1:] + words[:1]))
        hypotheses.append((s, best[(s + 1) % len(best)][0]))
    unique = list({(s, " ".join(w)): (s, w) for s, w in hypotheses}.values())
    toolkit, ini = MosesToolkit(str(lists["moses"])), str(lists["ini"])
    plain = ConstrainedDecoder(toolkit, ini, sources, check=False).lines(unique)
    said: list[str] = []
    checked = ConstrainedDecoder(toolkit, ini, sources, on_progress=said.append).lines(unique)

    def seen(line: object) -> object:
        return None if line is None else (line.tokens, line.features, line.total)  # type: ignore[attr-defined]

    assert [seen(line) for line in checked] == [seen(line) for line in plain]
    check = reach_check(ini, sources, unique)
    assert check is not None
    left_out = [i for i, (s, words) in enumerate(unique) if decodable(words) and not check.possible(s, words)]
    assert left_out and all(plain[i] is None for i in left_out)
    assert sum(line is not None for line in plain) > len(best) * 10 // 2
    assert f"({len(left_out):,} more that no derivation of its phrase tables writes left out)" in said[0], said


def test_a_decoder_that_fails_fails_the_call_when_the_check_leaves_out_every_hypothesis(
    lists: dict[str, Path], tmp_path: Path
) -> None:
    """The check leaves out the one hypothesis (a word no phrase pair writes), and the decoder
    still reads the ini: one whose LM is missing fails the call, as without the check."""
    from phrase_rescorer.moses.constrained import ConstrainedDecoder
    from phrase_rescorer.moses.decoder import DecoderError
    from phrase_rescorer.moses.reachable import reach_check
    from phrase_rescorer.moses.toolkit import MosesToolkit

    sources = (TINY_MOSES / "test.en").read_text(encoding="utf-8").splitlines()
    hypothesis = [(0, ["zzzunseen"])]
    broken = tmp_path / "moses.ini"
    broken.write_text(lists["ini"].read_text().replace(str(LM), str(tmp_path / "missing.arpa.gz")))
    assert str(tmp_path / "missing.arpa.gz") in broken.read_text()
    check = reach_check(str(broken), sources, hypothesis)
    assert check is not None and not check.possible(*hypothesis[0])
    toolkit = MosesToolkit(str(lists["moses"]))
    assert ConstrainedDecoder(toolkit, str(lists["ini"]), sources).lines(hypothesis) == [None]
    for check_first in (True, False):
        with pytest.raises(DecoderError):
            ConstrainedDecoder(toolkit, str(broken), sources, check=check_first).lines(hypothesis)
