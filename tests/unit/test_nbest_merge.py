"""``reranking.merge``: Moses' n-best list joined by other systems' candidates, every candidate once,
every line with the same features; a hypothesis Moses did not produce gets 0 for the decoder's
own features (never a made-up score) and FromMoses= 0, its word penalty and LM value computed."""

from __future__ import annotations

import gzip
import json
import math
import os
import threading
from pathlib import Path

import pytest

from phrase_rescorer.moses.nbest import NbestError, NbestLine, dense_features, parse_nbest_line, read_nbest
from phrase_rescorer.reranking.merge import REACHED_INDICATOR, merge_nbest
from phrase_rescorer.reranking.nbest_features import read_matrix
from phrase_rescorer.reranking.origins import Origins, origins

MOSES = (
    "0 ||| le chat  ||| Distortion0= 0 LM0= -5.5 WordPenalty0= -2 TranslationModel0= -1 -2 ||| -3\n"
    "0 ||| le chien  ||| Distortion0= -1 LM0= -6.5 WordPenalty0= -2 TranslationModel0= -2 -3 ||| -4\n"
    "0 ||| le  chat ||| Distortion0= -2 LM0= -5.5 WordPenalty0= -2 TranslationModel0= -3 -3 ||| -5\n"
    "1 ||| il pleut  ||| Distortion0= 0 LM0= -4 WordPenalty0= -2 TranslationModel0= -1 -1 ||| -2\n"
    "2 |||  ||| Distortion0= 0 LM0= -3 WordPenalty0= 0 TranslationModel0= 0 0 ||| 0\n"
)
NET0 = "0 ||| le chien  ||| NMT0= -2 ||| -2\n0 ||| un chat noir  ||| NMT0= -3 ||| -3\n"
NET0 += "1 ||| il\tpleut ||| NMT0= -1 ||| -1\n2 ||| rien  ||| NMT0= -9 ||| -9\n"
NET1 = "0 ||| un chat noir  ||| N= -1 ||| -1\n0 ||| le chien  ||| N= -1 ||| -1\n1 ||| il pleut  ||| N= -1 ||| -1\n"
NET1 += "1 ||| il pleut fort  ||| N= -2 ||| -2\n2 |||  ||| N= 0 ||| 0\n"


def lists(tmp_path: Path) -> tuple[str, str, str]:
    paths = []
    for name, text in (("moses.nbest", MOSES), ("net0.nbest", NET0), ("net1.nbest", NET1)):
        (tmp_path / name).write_text(text)
        paths.append(str(tmp_path / name))
    return paths[0], paths[1], paths[2]


def merged(path: Path) -> list[tuple[int, str, dict[str, list[float]]]]:
    """(sentence, hypothesis words, dense features) of every line, as the one reader reads them
    (which refuses a line whose features differ from the first line's)."""
    return [
        (line.sentence, " ".join(line.tokens), dict(dense_features(line.features))) for line in read_nbest(str(path))
    ]


class StubLM:
    """log10 p = -(number of words + 1) / 2, recorded."""

    def __init__(self) -> None:
        self.asked: list[list[str]] = []

    def check(self, words: list[str]) -> None:
        if "bad" in words:
            raise ValueError("the word 'bad' is bad")

    def totals(self, sentences: list[list[str]]) -> list[float]:
        self.asked += sentences
        return [-(len(words) + 1) / 2 for words in sentences]


def test_every_candidate_once_with_every_feature(tmp_path: Path) -> None:
    moses, net0, net1 = lists(tmp_path)
    warnings: list[str] = []
    summary = merge_nbest(moses, str(tmp_path / "out.nbest"), [net0, net1], on_warning=warnings.append)
    lines = merged(tmp_path / "out.nbest")
    assert [(s, h) for s, h, _ in lines] == [
        (0, "le chat"),  # Moses' lines first, in order; its repeated "le  chat" left out
        (0, "le chien"),
        (0, "un chat noir"),  # then each added list's new candidates, in order
        (1, "il pleut"),
        (1, "il pleut fort"),
        (2, ""),
        (2, "rien"),
    ]
    names = ["Distortion0", "LM0", "WordPenalty0", "TranslationModel0", "FromMoses", "FromNet0", "FromNet1"]
    assert all(list(features) == names for _, _, features in lines)  # one layout on every line
    raw = (tmp_path / "out.nbest").read_text().splitlines(keepends=True)
    moses_lines = MOSES.splitlines(keepends=True)
    assert raw[0] == moses_lines[0].replace(" ||| -3\n", " FromMoses= 1 FromNet0= 0 FromNet1= 0 ||| -3\n")
    assert raw[1] == moses_lines[1].replace(" ||| -4\n", " FromMoses= 1 FromNet0= 1 FromNet1= 1 ||| -4\n")
    assert summary.sentences == 3 and summary.moses == 4 and summary.moses_repeats == 1
    assert (summary.added, summary.shared, summary.new) == ([4, 5], [2, 3], [2, 1])
    assert summary.lines == len(lines) == 7
    assert summary.computed == ["WordPenalty0"] and summary.zeroed == ["Distortion0", "LM0", "TranslationModel0"]
    assert len(warnings) == 1 and "LM0 of the hypotheses Moses did not produce is 0" in warnings[0]


def test_moses_last_line_without_its_newline_stays_one_line(tmp_path: Path) -> None:
    """Moses' last line without a newline: a new hypothesis after it gets a line of its own (a
    newline between them, nothing else added); none after it, the output ends as the list did."""
    moses, net0, net1 = lists(tmp_path)
    Path(moses).write_text(MOSES.rstrip("\n"))
    merge_nbest(moses, str(tmp_path / "out.nbest"), [net0, net1])
    lines = merged(tmp_path / "out.nbest")
    assert [(s, h) for s, h, _ in lines][-2:] == [(2, ""), (2, "rien")]
    raw = (tmp_path / "out.nbest").read_bytes().split(b"\n")
    assert raw[-3] == MOSES.splitlines()[-1].replace(" ||| 0", " FromMoses= 1 FromNet0= 0 FromNet1= 1 ||| 0").encode()
    assert raw[-2].startswith(b"2 ||| rien  ||| ") and raw[-1] == b""
    merge_nbest(moses, str(tmp_path / "out.nbest"), [net1])  # its sentence 2: Moses' hypothesis
    assert (tmp_path / "out.nbest").read_bytes().endswith(b"TranslationModel0= 0 0 FromMoses= 1 FromNet0= 1 ||| 0")


@pytest.mark.parametrize("cut", [0, 1, 2])
def test_new_lines_end_as_moses_lines_do(tmp_path: Path, cut: int) -> None:
    """A list of CRLF lines: its own lines keep their bytes and every new line ends in CRLF too,
    also after a last line without its terminator (``cut`` bytes of it gone: a CRLF between it and
    the new line after it, or the LF after its CR); the lines read as from the LF list."""
    moses, net0, net1 = lists(tmp_path)
    crlf = MOSES.replace("\n", "\r\n").encode()
    Path(moses).write_bytes(crlf[: len(crlf) - cut])
    merge_nbest(moses, str(tmp_path / "crlf.nbest"), [net0, net1])
    Path(moses).write_text(MOSES)
    merge_nbest(moses, str(tmp_path / "lf.nbest"), [net0, net1])
    out, lf = (tmp_path / "crlf.nbest").read_bytes(), (tmp_path / "lf.nbest").read_bytes()
    assert out == lf.replace(b"\n", b"\r\n")
    assert out.count(b"\n") == out.count(b"\r\n") == out.count(b"\r") == 7
    assert merged(tmp_path / "crlf.nbest") == merged(tmp_path / "lf.nbest")


def test_a_hypothesis_moses_did_not_produce_has_its_indicator_and_no_moses_score(tmp_path: Path) -> None:
    moses, net0, net1 = lists(tmp_path)
    merge_nbest(moses, str(tmp_path / "out.nbest"), [net0, net1])
    new = {h: f for _, h, f in merged(tmp_path / "out.nbest") if f["FromMoses"] == [0.0]}
    assert sorted(new) == ["il pleut fort", "rien", "un chat noir"]
    assert new["un chat noir"] == {
        "Distortion0": [0.0],
        "LM0": [0.0],  # no LM given: 0, with FromMoses= 0
        "WordPenalty0": [-3.0],  # minus the number of words, as the decoder's
        "TranslationModel0": [0.0, 0.0],
        "FromMoses": [0.0],
        "FromNet0": [1.0],
        "FromNet1": [1.0],
    }
    assert new["il pleut fort"]["FromNet0"] == [0.0] and new["rien"]["FromNet1"] == [0.0]
    assert "N=" not in (tmp_path / "out.nbest").read_text()  # an added list's own features not carried
    totals = [line.rsplit(" ||| ", 1)[1] for line in (tmp_path / "out.nbest").read_text().splitlines()]
    assert totals == ["-3", "-4", "0", "-2", "0", "0", "0"]


def test_hypotheses_proposed_by_several_systems_are_one_line_with_each_indicator(tmp_path: Path) -> None:
    moses, net0, net1 = lists(tmp_path)
    merge_nbest(moses, str(tmp_path / "out.nbest"), [net0, net1])
    flags = {
        (s, h): (f["FromMoses"][0], f["FromNet0"][0], f["FromNet1"][0]) for s, h, f in merged(tmp_path / "out.nbest")
    }
    assert flags == {
        (0, "le chat"): (1, 0, 0),
        (0, "le chien"): (1, 1, 1),
        (0, "un chat noir"): (0, 1, 1),
        (1, "il pleut"): (1, 1, 1),  # "il\tpleut": the same words
        (1, "il pleut fort"): (0, 0, 1),
        (2, ""): (1, 0, 1),
        (2, "rien"): (0, 1, 0),
    }


class StubReach:
    """Moses' "derivation" of "un chat noir" only, or of the hypotheses ``produces`` (features
    made up for the test), recorded."""

    def __init__(
        self,
        layout: str = "Distortion0= -3 LM0= -9.25 WordPenalty0= -3 TranslationModel0= -4 -5",
        produces: tuple[str, ...] = ("un chat noir",),
    ) -> None:
        self.layout = layout
        self.produces = produces
        self.asked: list[tuple[int, list[str]]] = []

    def lines(self, hypotheses: list[tuple[int, list[str]]]) -> list[NbestLine | None]:
        self.asked += hypotheses
        return [
            parse_nbest_line(f"7 ||| un chat noir  ||| {self.layout} ||| -7.5".encode(), b"\n", 1, "decoder")
            if " ".join(words) in self.produces
            else None
            for _, words in hypotheses
        ]


def test_constrained_decoding_gives_reached_hypotheses_moses_features_and_only_them(tmp_path: Path) -> None:
    moses, net0, net1 = lists(tmp_path)
    reach = StubReach()
    summary = merge_nbest(moses, str(tmp_path / "out.nbest"), [net0, net1], lm=StubLM(), reach=reach)
    assert reach.asked == [(0, ["un", "chat", "noir"]), (1, ["il", "pleut", "fort"]), (2, ["rien"])]  # new ones
    lines = {h: f for _, h, f in merged(tmp_path / "out.nbest")}
    assert lines["un chat noir"] == {
        "Distortion0": [-3.0],  # the decoder's own values of its derivation
        "LM0": [-9.25],
        "WordPenalty0": [-3.0],
        "TranslationModel0": [-4.0, -5.0],
        "FromMoses": [0.0],
        "FromNet0": [1.0],
        "FromNet1": [1.0],
        REACHED_INDICATOR: [1.0],
    }
    unreached = lines["il pleut fort"]
    assert unreached["Distortion0"] == [0.0] and unreached["TranslationModel0"] == [0.0, 0.0]  # never made up
    assert unreached["LM0"][0] == pytest.approx(-2.0 * math.log(10)) and unreached["WordPenalty0"] == [-3.0]
    assert unreached[REACHED_INDICATOR] == [0.0] and lines["rien"][REACHED_INDICATOR] == [0.0]
    assert [f[REACHED_INDICATOR] for f in lines.values() if f["FromMoses"] == [1.0]] == [[1.0]] * 4
    text = (tmp_path / "out.nbest").read_text()
    totals = {line.split(" ||| ")[1].strip(): line.rsplit(" ||| ", 1)[1] for line in text.splitlines()}
    assert totals["un chat noir"] == "-7.5" and totals["il pleut fort"] == "0" and totals["le chat"] == "-3"
    assert summary.reached == 1 and summary.new == [2, 1]


def test_reached_only_leaves_out_exactly_the_hypotheses_the_decoder_cannot_produce(tmp_path: Path) -> None:
    """With reached_only the output is the constrained merge without its MosesReached= 0 lines,
    every other byte the same (a produced hypothesis after a left-out one keeps its own
    derivation); the LM is not asked; without constrained decoding it is refused."""
    moses, net0, net1 = lists(tmp_path)
    produces = ("un chat noir", "rien")
    merge_nbest(moses, str(tmp_path / "all.nbest"), [net0, net1], lm=StubLM(), reach=StubReach(produces=produces))
    lm = StubLM()
    summary = merge_nbest(
        moses,
        str(tmp_path / "reached.nbest"),
        [net0, net1],
        lm=lm,
        reach=StubReach(produces=produces),
        reached_only=True,
    )
    every = (tmp_path / "all.nbest").read_text().splitlines(keepends=True)
    kept = [line for line in every if f" {REACHED_INDICATOR}= 0 " not in line]
    assert len(kept) == len(every) - 1  # "il pleut fort"
    assert (tmp_path / "reached.nbest").read_text() == "".join(kept)
    news = [h for _, h, f in merged(tmp_path / "reached.nbest") if f["FromMoses"] == [0.0]]
    assert news == ["un chat noir", "rien"]
    assert (summary.reached, summary.unreached_left_out, summary.lines) == (2, 1, len(kept))
    assert lm.asked == []
    with pytest.raises(ValueError, match="reached_only needs reach"):
        merge_nbest(moses, str(tmp_path / "out.nbest"), [net0], reached_only=True)
    assert not (tmp_path / "out.nbest").exists()


def first_distinct(text: str, n: int) -> str:
    """Moses' list ``text`` cut by hand to the first ``n`` distinct hypotheses of each sentence."""
    out: list[str] = []
    seen: dict[str, list[str]] = {}
    for line in text.splitlines(keepends=True):
        sentence, hypothesis = line.split(" ||| ")[:2]
        words = seen.setdefault(sentence, [])
        key = " ".join(hypothesis.split())
        if key not in words and len(words) < n:
            words.append(key)
            out.append(line)
    return "".join(out)


@pytest.mark.parametrize("n", [1, 2, 3])
@pytest.mark.parametrize("constrained", [False, True])
def test_moses_nbest_merges_as_beside_a_list_of_moses_first_n(tmp_path: Path, n: int, constrained: bool) -> None:
    """With moses_nbest N the output is, byte for byte, the merge beside Moses' first N distinct
    hypotheses of each sentence: a candidate among the rest is new (its indicator FromMoses= 0,
    Moses' features by constrained decoding where given, else 0), the rest's repeats repeats."""
    _, net0, net1 = lists(tmp_path)
    longer = MOSES.splitlines(keepends=True)  # sentence 0 with a repeat of its second and a third
    longer[3:3] = [
        "0 ||| le  chien ||| Distortion0= -3 LM0= -6.5 WordPenalty0= -2 TranslationModel0= -3 -3 ||| -6\n",
        "0 ||| un chien ||| Distortion0= -1 LM0= -7 WordPenalty0= -2 TranslationModel0= -3 -4 ||| -7\n",
    ]
    moses = str(tmp_path / "longer.nbest")
    Path(moses).write_text("".join(longer))
    (tmp_path / "first.nbest").write_text(first_distinct("".join(longer), n))
    given = {"lm": StubLM(), "reach": StubReach(produces=("le chien", "un chat noir"))} if constrained else {}
    expected = merge_nbest(str(tmp_path / "first.nbest"), str(tmp_path / "by_hand.nbest"), [net0, net1], **given)
    given = {"lm": StubLM(), "reach": StubReach(produces=("le chien", "un chat noir"))} if constrained else {}
    summary = merge_nbest(moses, str(tmp_path / "cut.nbest"), [net0, net1], moses_nbest=n, **given)
    assert (tmp_path / "cut.nbest").read_bytes() == (tmp_path / "by_hand.nbest").read_bytes()
    assert (summary.moses, summary.new, summary.lines) == (expected.moses, expected.new, expected.lines)
    assert summary.moses_cut == {1: 2, 2: 1, 3: 0}[n] and summary.moses_repeats == 2
    if n == 1:  # "le chien", Moses' second, proposed by both networks: a new line of both
        chien = {h: f for _, h, f in merged(tmp_path / "cut.nbest")}["le chien"]
        assert (chien["FromMoses"], chien["FromNet0"], chien["FromNet1"]) == ([0.0], [1.0], [1.0])
        assert (chien[REACHED_INDICATOR] == [1.0]) if constrained else (chien["Distortion0"] == [0.0])
    with pytest.raises(ValueError, match="moses_nbest must be at least 1"):
        merge_nbest(moses, str(tmp_path / "none.nbest"), [net0], moses_nbest=0)
    assert not (tmp_path / "none.nbest").exists()


def test_constrained_decoding_with_other_features_than_the_list_is_refused(tmp_path: Path) -> None:
    moses, net0, _ = lists(tmp_path)
    with pytest.raises(NbestError, match="in constrained decoding differ from the list's"):
        merge_nbest(moses, str(tmp_path / "out.nbest"), [net0], reach=StubReach("Distortion0= -3 LM0= -9"))
    assert not (tmp_path / "out.nbest").exists()
    marked = "".join(line.rsplit(" ||| ", 1)[0] + " MosesReached= 1 ||| 0\n" for line in MOSES.splitlines())
    (tmp_path / "reached.nbest").write_text(marked)
    with pytest.raises(NbestError, match="already has the feature MosesReached"):
        merge_nbest(str(tmp_path / "reached.nbest"), str(tmp_path / "out.nbest"), [net0], reach=StubReach())


def test_the_lm_gives_new_hypotheses_moses_lm_value(tmp_path: Path) -> None:
    moses, net0, net1 = lists(tmp_path)
    lm = StubLM()
    summary = merge_nbest(moses, str(tmp_path / "out.gz"), [net0, net1], lm=lm)
    with gzip.open(tmp_path / "out.gz", "rb") as f:
        (tmp_path / "out.nbest").write_bytes(f.read())
    lines = merged(tmp_path / "out.nbest")
    assert lm.asked == [["un", "chat", "noir"], ["il", "pleut", "fort"], ["rien"]]  # new hypotheses only
    for _, hyp, features in lines:
        if features["FromMoses"] == [0.0]:
            want = -(len(hyp.split()) + 1) / 2 * math.log(10)  # ln 10 x log10 p, as Moses' LM feature
            assert features["LM0"][0] == pytest.approx(want, abs=1e-6)
    assert [f["LM0"] for _, _, f in lines if f["FromMoses"] == [1.0]] == [[-5.5], [-6.5], [-4.0], [-3.0]]
    assert summary.computed == ["LM0", "WordPenalty0"]


def test_streamed_lists_give_the_same_output(tmp_path: Path) -> None:
    """A list read once (a pipe) is merged as it streams, sentence by sentence."""
    moses, net0, net1 = lists(tmp_path)
    merge_nbest(moses, str(tmp_path / "a.nbest"), [net0, net1])
    fifo = tmp_path / "net1.fifo"
    os.mkfifo(fifo)
    feeder = threading.Thread(target=lambda: fifo.write_text(NET1), daemon=True)
    feeder.start()
    merge_nbest(moses, str(tmp_path / "b.nbest"), [net0, str(fifo)])
    feeder.join()
    assert (tmp_path / "a.nbest").read_bytes() == (tmp_path / "b.nbest").read_bytes()


@pytest.mark.parametrize(
    ("net", "where", "message"),
    [
        (NET0 + "3 ||| plus  ||| NMT0= -1 ||| -1\n", ":5:", "sentence ID 3, but Moses' list has 3 sentences"),
        ("0 ||| le  ||| NMT0= -1 ||| -1\n1 ||| il  ||| NMT0= -1 ||| -1\n", ":", "lists sentences 0 to 1, but Moses'"),
        ("", ":", "lists no sentence, but Moses' list has 3"),
    ],
)
@pytest.mark.parametrize("streamed", [False, True])
def test_an_added_list_of_other_sentences_is_refused(
    tmp_path: Path, net: str, where: str, message: str, streamed: bool
) -> None:
    moses, net0, _ = lists(tmp_path)
    (tmp_path / "net0.nbest").write_text(net)
    added = net0
    if streamed:
        os.mkfifo(tmp_path / "net.fifo")
        feeder = threading.Thread(target=lambda: (tmp_path / "net.fifo").write_text(net), daemon=True)
        feeder.start()
        added = str(tmp_path / "net.fifo")
    with pytest.raises(NbestError, match=message) as e:
        merge_nbest(moses, str(tmp_path / "out.nbest"), [added])
    if streamed:
        feeder.join()
    assert str(e.value).startswith(added + where)
    assert not (tmp_path / "out.nbest").exists()


def test_an_lm_feature_that_is_not_there_and_an_indicator_that_is_are_refused(tmp_path: Path) -> None:
    moses, net0, _ = lists(tmp_path)
    with pytest.raises(NbestError, match="the LM feature LM1: no such feature") as e:
        merge_nbest(moses, str(tmp_path / "out.nbest"), [net0], lm=StubLM(), lm_feature="LM1")
    assert str(e.value).startswith(moses + ":1:")
    (tmp_path / "m.nbest").write_text(
        "".join(line.rsplit(" ||| ", 1)[0] + " FromNet0= 1 ||| 0\n" for line in MOSES.splitlines())
    )
    with pytest.raises(NbestError, match="already has the feature FromNet0"):
        merge_nbest(str(tmp_path / "m.nbest"), str(tmp_path / "out.nbest"), [net0])
    assert not (tmp_path / "out.nbest").exists()


def test_words_the_lm_would_read_otherwise_are_refused_with_their_line(tmp_path: Path) -> None:
    moses, _, _ = lists(tmp_path)
    net = "0 ||| le chat  ||| N= 0 ||| 0\n0 ||| bad  ||| N= 0 ||| 0\n1 ||| x  ||| N= 0 ||| 0\n2 ||| y  ||| N= 0 ||| 0\n"
    (tmp_path / "net.nbest").write_text(net)
    with pytest.raises(NbestError, match="the word 'bad' is bad") as e:
        merge_nbest(moses, str(tmp_path / "out.nbest"), [str(tmp_path / "net.nbest")], lm=StubLM())
    assert str(e.value).startswith(str(tmp_path / "net.nbest") + ":2:")


def test_kenlm_refuses_words_its_query_would_split() -> None:
    """KenLM's query splits words at \\v, \\f and \\r too (util/file_piece.cc, kSpaces); Moses does not."""
    from phrase_rescorer.lm.kenlm import KenLMSentences

    KenLMSentences.check(["le", "chat\u00a0noir"])  # a no-break space is inside a word for both
    for odd in ("\v", "\f", "\r"):
        with pytest.raises(ValueError, match="at which KenLM's query splits words"):
            KenLMSentences.check(["le", f"chat{odd}noir"])


def test_origins_count_the_chosen_hypotheses_by_where_they_come_from(tmp_path: Path) -> None:
    moses, net0, net1 = lists(tmp_path)
    merge_nbest(moses, str(tmp_path / "reached.nbest"), [net0, net1], lm=StubLM(), reach=StubReach())
    matrix = read_matrix(str(tmp_path / "reached.nbest"))
    # sentence 0: a new hypothesis Moses produced; 1: Moses' own, a network's too; 2: one Moses cannot produce
    chosen = origins(matrix, ["un  chat noir", "il pleut", "rien"])
    assert chosen == Origins(moses=1, moses_and_network=1, new=2, reached=1)
    assert chosen.summary() == (
        "1 from Moses' list (1 of them a network's too), 2 new: 1 produced by Moses constrained, 1 it cannot produce"
    )
    assert chosen.to_json() == {"moses": 1, "moses_and_network": 1, "new": 2, "new_reached": 1}
    assert all(type(n) is int for n in chosen.to_json().values())  # plain ints: json.dumps writes them
    assert json.loads(json.dumps(chosen.to_json())) == chosen.to_json()
    assert origins(matrix, ["le chat", "il pleut fort", ""]) == Origins(2, 1, 1, 0)  # "": Moses' and NET1's
    with pytest.raises(ValueError, match="sentence 0 lists no hypothesis 'le chien noir'"):
        origins(matrix, ["le chien noir", "il pleut", ""])
    with pytest.raises(ValueError, match="2 chosen lines for the 3 sentences"):
        origins(matrix, ["le chat", "il pleut"])
    merge_nbest(moses, str(tmp_path / "zeros.nbest"), [net0, net1])  # without constrained decoding
    zeros = origins(read_matrix(str(tmp_path / "zeros.nbest")), ["le chien", "il pleut fort", "rien"])
    assert zeros == Origins(1, 1, 2, None)
    assert zeros.summary().endswith("2 new (merged without constrained decoding)")
    assert origins(read_matrix(moses), ["le chat", "il pleut", ""]) is None  # not a merged list
    assert chosen + Origins(2, 1, 1, 0) == Origins(3, 2, 3, 1)  # two chunks' counts together
    assert (chosen + zeros).reached is None


def test_origins_tell_hypotheses_apart_as_merge_does(tmp_path: Path) -> None:
    """Words split at spaces and tabs only (``words.split_words``): a no-break space is inside a
    word, so Moses' "a b" and a network's "a<U+00A0>b" are two hypotheses, as merge keeps them."""
    listed = tmp_path / "merged.nbest"
    listed.write_text(
        "0 ||| il dit : oui  ||| F= -1 FromMoses= 1 FromNet0= 0 ||| 0\n"
        "0 ||| il dit\u00a0: oui  ||| F= -2 FromMoses= 0 FromNet0= 1 ||| 0\n",
        encoding="utf-8",
    )
    matrix = read_matrix(str(listed))
    assert [matrix.column(name) for name in ("F", "FromMoses", "FromNet0", "MosesReached")] == [0, 1, 2, None]
    assert origins(matrix, ["il dit\u00a0: oui"]) == Origins(moses=0, moses_and_network=0, new=1, reached=None)
    assert origins(matrix, ["il  dit : oui"]) == Origins(moses=1, moses_and_network=0, new=0, reached=None)
