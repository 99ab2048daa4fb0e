"""moses.reachable: the hypotheses no derivation of a moses.ini's phrase tables writes, against a
plain enumeration of every derivation's words on small systems, and the models it declines."""

from __future__ import annotations

import gzip
import itertools
import random
from pathlib import Path

import pytest

from phrase_rescorer.moses import reachable
from phrase_rescorer.moses.reachable import reach_check

INI = """[input-factors]
0

[mapping]
0 T 0

[distortion-limit]
6

[feature]
UnknownWordPenalty
WordPenalty
PhrasePenalty
PhraseDictionaryMemory name=TranslationModel0 num-features=1 path={table} input-factor=0 output-factor=0
Distortion
KENLM name=LM0 factor=0 path={table} order=3
{extra}
[weight]
UnknownWordPenalty0= 1
WordPenalty0= -1
PhrasePenalty0= 0.2
TranslationModel0= 0.2
Distortion0= 0.3
LM0= 0.5
"""


def system(tmp_path: Path, pairs: list[tuple[str, str]], extra: str = "", name: str = "moses.ini") -> str:
    table = tmp_path / "phrase-table.gz"
    with gzip.open(table, "wt", encoding="utf-8") as f:
        f.writelines(f"{source} ||| {target} ||| 0.5\n" for source, target in pairs)
    ini = tmp_path / name
    ini.write_text(INI.format(table=table, extra=extra))
    return str(ini)


def written(source: list[str], pairs: list[tuple[str, str]]) -> set[tuple[str, ...]]:
    """Every word sequence a derivation writes: the source split into spans in every way, each span
    translated by one of its phrase pairs (a single word also by its copy), the spans' targets in
    every order."""
    options: dict[tuple[int, int], list[tuple[str, ...]]] = {}
    for a in range(len(source)):
        for b in range(a + 1, len(source) + 1):
            found = [tuple(t.split()) for s, t in pairs if s.split() == source[a:b]]
            options[(a, b)] = found + ([(source[a],)] if b == a + 1 else [])
    out: set[tuple[str, ...]] = set()

    def splits(start: int) -> list[list[tuple[int, int]]]:
        if start == len(source):
            return [[]]
        return [[(start, end), *rest] for end in range(start + 1, len(source) + 1) for rest in splits(end)]

    for spans in splits(0):
        for order in itertools.permutations(spans):
            for choice in itertools.product(*(options[span] for span in order)):
                out.add(tuple(word for target in choice for word in target))
    return out


PAIRS = [
    ("the cat", "le chat"),
    ("the", "le"),
    ("the", "la"),
    ("cat", "chat"),
    ("sleeps", "dort"),
    ("cat sleeps", "chat dort"),
    ("the cat sleeps", "le chat dort bien"),
    ("sleeps", "dort bien"),
]


def test_the_search_calls_possible_exactly_what_some_derivation_writes(tmp_path: Path) -> None:
    """Every word sequence of up to 4 words over the system's target words and the source words
    (copies), against the plain enumeration of every derivation: the check's answer is its
    membership, both ways."""
    ini = system(tmp_path, PAIRS)
    source = "the cat sleeps"
    can = written(source.split(), PAIRS)
    vocabulary = sorted({w for _, t in PAIRS for w in t.split()} | set(source.split()) | {"chien"})
    hypotheses = [list(h) for n in range(1, 5) for h in itertools.product(vocabulary, repeat=n)]
    check = reach_check(ini, [source], [(0, h) for h in hypotheses])
    assert check is not None
    answers = {tuple(h): check.possible(0, h) for h in hypotheses}
    assert {h for h, yes in answers.items() if yes} == {h for h in answers if h in can}
    assert answers[("chat", "dort", "le")] and answers[("dort", "bien", "la", "cat")]  # reordered, a copy
    assert not answers[("le", "le", "chat", "dort")] and not answers[("le", "chat")] and not answers[("chat",)]


def test_random_systems_against_the_enumeration(tmp_path: Path) -> None:
    rng = random.Random(7)
    for trial in range(40):
        source = [rng.choice("abcd") for _ in range(rng.randint(1, 4))]
        pairs = []
        for a in range(len(source)):
            for b in range(a + 1, min(len(source), a + 2) + 1):
                for _ in range(rng.randint(0, 2)):
                    pairs.append((" ".join(source[a:b]), " ".join(rng.choice("xyz") for _ in range(rng.randint(1, 2)))))
        directory = tmp_path / str(trial)
        directory.mkdir()
        ini = system(directory, pairs)
        can = written(source, pairs)
        vocabulary = sorted({w for _, t in pairs for w in t.split()} | set(source))
        hypotheses = [list(h) for n in range(1, 5) for h in itertools.product(vocabulary, repeat=n)]
        check = reach_check(ini, [" ".join(source)], [(0, h) for h in hypotheses])
        assert check is not None
        for h in hypotheses:
            assert check.possible(0, h) == (tuple(h) in can), (source, pairs, h)


def test_a_search_past_its_budget_calls_the_hypothesis_possible(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ini = system(tmp_path, PAIRS)
    hypothesis = ["le", "le", "chat", "dort"]
    assert not reach_check(ini, ["the cat sleeps"], [(0, hypothesis)]).possible(0, hypothesis)  # type: ignore[union-attr]
    monkeypatch.setattr(reachable, "NODE_BUDGET", 1)
    assert reach_check(ini, ["the cat sleeps"], [(0, hypothesis)]).possible(0, hypothesis)  # type: ignore[union-attr]


def test_factors_and_sentences_not_asked_about_are_possible(tmp_path: Path) -> None:
    ini = system(tmp_path, PAIRS)
    check = reach_check(ini, ["the|DT cat sleeps", "the cat"], [(0, ["zzz"]), (1, ["zzz"])])
    assert check is not None
    assert check.possible(0, ["zzz"])  # Moses reads the source's factors: not checked
    assert not check.possible(1, ["zzz"])
    assert check.possible(2, ["zzz"])


def test_factored_table_words_are_written_as_their_first_factor(tmp_path: Path) -> None:
    ini = system(tmp_path, [("the|DT cat|NN", "le|DET chat|N")])
    check = reach_check(ini, ["the cat"], [(0, ["le", "chat"]), (0, ["le|DET", "chat|N"])])
    assert check is not None and check.possible(0, ["le", "chat"]) and not check.possible(0, ["le|DET", "chat|N"])


@pytest.mark.parametrize(
    "extra",
    [
        "PhraseDictionaryCompact name=TranslationModel1 num-features=4 path=/nowhere input-factor=0 output-factor=0\n",
        "Generation name=Generation0 num-features=2 path=/nowhere input-factor=0 output-factor=1\n",
        "[xml-input]\nexclusive\n",
        "[drop-unknown]\n1\n",
        "[drop-unknown]\n",
        "[factor-delimiter]\n@\n",
        "[feature-overwrite]\nTranslationModel0 path=/other.gz\n",
        "[feature-add]\nPhraseDictionaryMemory name=TranslationModel1 num-features=1 path=/other.gz\n",
        "[search-algorithm]\n3\n",
        "[print-passthrough]\ntrue\n",
        "[mark-unknown]\ntrue\n",
        "[inputtype]\n1\n",
        "[placeholder-factor]\n1\n",
    ],
)
def test_models_it_does_not_understand_get_no_check(tmp_path: Path, extra: str) -> None:
    assert reach_check(system(tmp_path, PAIRS), ["the cat"], [(0, ["x"])]) is not None
    assert reach_check(system(tmp_path, PAIRS, extra, "other.ini"), ["the cat"], [(0, ["x"])]) is None


def test_a_table_line_the_parser_refuses_gets_no_check(tmp_path: Path) -> None:
    assert reach_check(system(tmp_path, [*PAIRS, ("sleeps", "")]), ["the cat"], [(0, ["x"])]) is None


def test_other_mappings_factors_and_missing_tables_get_no_check(tmp_path: Path) -> None:
    ini = Path(system(tmp_path, PAIRS))
    text = ini.read_text()
    for changed in (
        text.replace("0 T 0", "0 T 0\n0 G 1"),
        text.replace("[input-factors]\n0", "[input-factors]\n0\n1"),
        text.replace("output-factor=0", "output-factor=0,1"),
        text.replace(str(tmp_path / "phrase-table.gz"), str(tmp_path / "missing.gz"), 1),
    ):
        ini.write_text(changed)
        assert reach_check(str(ini), ["the cat"], [(0, ["x"])]) is None
    assert reach_check(str(tmp_path / "no.ini"), ["the cat"], [(0, ["x"])]) is None


@pytest.mark.parametrize(
    "extra",
    [
        "[xml-input]\npass-through\n",
        "[drop-unknown]\n0\n",
        "[search-algorithm]\n1\n",
        "[threads]\n2\n[v]\n0\n[stack]\n500\n[always-create-direct-transopt]\ntrue\n",
    ],
)
def test_settings_that_only_search_keep_the_check(tmp_path: Path, extra: str) -> None:
    assert reach_check(system(tmp_path, PAIRS, extra), ["the cat"], [(0, ["x"])]) is not None


@pytest.mark.parametrize("source", ["<seg id=1> the cat </seg>", "the *EPS* cat", "the [X] cat", "the|DT cat"])
def test_sentences_the_decoder_may_read_otherwise_are_not_checked(tmp_path: Path, source: str) -> None:
    check = reach_check(system(tmp_path, PAIRS), [source, "the cat"], [(0, ["zzz"]), (1, ["zzz"])])
    assert check is not None and check.possible(0, ["zzz"]) and not check.possible(1, ["zzz"])


@pytest.mark.parametrize("pair", [("the cat", "le chat [X]"), ("the [X]", "le"), ("cat", "[X][Y] chat")])
def test_a_table_with_non_terminals_gets_no_check(tmp_path: Path, pair: tuple[str, str]) -> None:
    assert reach_check(system(tmp_path, [*PAIRS, pair]), ["the cat"], [(0, ["x"])]) is None


def test_a_sentence_with_a_longer_target_phrase_than_looked_for_is_not_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ini = system(tmp_path, PAIRS)
    monkeypatch.setattr(reachable, "PHRASE_WORDS", 2)  # "le chat dort bien" is longer
    check = reach_check(ini, ["the cat sleeps", "the cat"], [(0, ["zzz"]), (1, ["zzz"])])
    assert check is not None and check.possible(0, ["zzz"]) and not check.possible(1, ["zzz"])
