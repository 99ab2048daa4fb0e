"""Hypotheses a moses.ini's phrase tables cannot produce, told without decoding.

Constrained decoding (:mod:`.constrained`) costs, for every hypothesis, the collection of its
sentence's translation options again (about 0.03 s of CPU), and most of the hypotheses a network
proposes that Moses cannot produce fail for a reason that needs no search: no way of writing them
with the tables' phrase pairs.

A hypothesis of the phrase-based decoder is the concatenation, in target order, of the target
sides of translation options whose source spans cover every source word exactly once (a
hypothesis is complete only when all are covered). A span's options are the phrase pairs of the
ini's tables whose source side is the span's words, and for one word the unknown word's option
that copies it, which Moses creates where a word has no option of its own
(moses/TranslationOptionCollection.cpp, ``ProcessUnknownWord()``: ``if (!fullList ||
fullList->size() == 0 || always) ProcessUnknownWord(pos);``); here every word gets that copy, so
that no option Moses may create is missing. If no sequence of these options writes the
hypothesis word for word while covering each source word once, no derivation can, whatever the
weights, and the table limit, the distortion limit and the stacks' pruning only remove
derivations: the decoder would write no line for it. :class:`ReachCheck` searches depth first
over (target position, source words covered), cutting a branch where a source word left
uncovered has no option left to cover it; a search of more than ``NODE_BUDGET`` steps gives up
and calls the hypothesis possible (it is decoded). Every hypothesis it calls possible is decoded
as before, so the decoder's lines are the same with the check and without it (the tests check
this with the real Moses).

The check holds for the models it understands, and :func:`reach_check` gives None (every
hypothesis decoded) for any other: every feature of a type in ``PLAIN_FEATURES``, with its
phrase tables ``PhraseDictionaryMemory`` text tables of factor 0 in and out; only the ini
sections of ``_SECTIONS``, with their values there (one input factor, translation steps only,
plain text input, the phrase-based search, unknown words copied as they are); every table line
one the tables' parser takes (:mod:`.phrase_table`: an empty target phrase is refused) and none
with a word Moses reads as a non-terminal (``[X]``). A table's words are their first factor. A
sentence the decoder may read otherwise (a word with the factor separator ``|``, markup it
strips, its empty word ``*EPS*``, a non-terminal), one of more than ``LONGEST`` words, and one
with a target phrase of more than ``PHRASE_WORDS`` words are not checked: their hypotheses are
decoded.

Measured on the bundled systems' dev sets (an experiment run's joined lists, the networks' new
candidates): of 21,211 en→de hypotheses it left out 14,288, of 18,924 en→fr 11,281, none of those
Moses produced; the constrained decoding took 94 s against 178 and 105 against 185
(docs/performance.md).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence

from .ini import _content, _sections
from .ini_weights import features
from .phrase_table import PhraseTableError
from .table_reader import read_phrase_table
from .words import split_words

#: Feature types that score hypotheses without adding translation options or words.
PLAIN_FEATURES = frozenset(
    {
        "UnknownWordPenalty",
        "WordPenalty",
        "PhrasePenalty",
        "Distortion",
        "LexicalReordering",
        "KENLM",
        "SRILM",
        "IRSTLM",
        "OpSequenceModel",
        "PhraseDictionaryMemory",
    }
)
#: Steps of the depth-first search after which a hypothesis is called possible.
NODE_BUDGET = 10_000
#: Sentences and hypotheses of more words are called possible (the search recurses once a word).
LONGEST = 200

#: Target phrases of more words are looked for in no hypothesis: a sentence with one is not checked.
PHRASE_WORDS = 20
#: Moses' empty word: an input word it deletes (moses/TypeDef.h ``#define EPSILON "*EPS*"``).
EPSILON = "*EPS*"

_TRANSLATION_STEP = re.compile(r"^(\d+\s+)?T\s+\d+$")
#: The ini sections the check's model of the decoder holds with, each with the values it holds
#: for (None: any value; the others change only the search, its pruning, the weights and what is
#: reported, so they only remove derivations). An ini with any other section gets no check.
_SECTIONS: dict[str, frozenset[str] | None] = {
    "input-factors": frozenset({"0"}),
    "output-factors": frozenset({"0"}),
    "mapping": None,  # translation steps only, checked apart
    "feature": None,  # checked apart: PLAIN_FEATURES
    "weight": None,
    "threads": None,
    "v": None,
    "verbose": None,
    "distortion-limit": None,
    "stack": None,
    "beam-threshold": None,
    "cube-pruning-pop-limit": None,
    "cube-pruning-diversity": None,
    "max-phrase-length": None,
    "max-trans-opt-per-coverage": None,
    "translation-option-threshold": None,
    "early-discarding-threshold": None,
    "monotone-at-punctuation": None,
    "always-create-direct-transopt": None,
    "search-algorithm": frozenset({"0", "1"}),
    "inputtype": frozenset({"0"}),
    "xml-input": frozenset({"pass-through"}),
    "drop-unknown": frozenset({"0", "false"}),
    "mark-unknown": frozenset({"0", "false"}),
}


def _words(phrase: str) -> tuple[str, ...]:
    """A table phrase's words as the decoder outputs them: factor 0 of each."""
    return tuple(word.split("|", 1)[0] for word in split_words(phrase))


def _plain(phrase: str) -> bool:
    """Whether a phrase is already its words joined by single spaces (no factors)."""
    return "|" not in phrase and "\t" not in phrase and "  " not in phrase and phrase == phrase.strip(" ")


def _bracketed(phrase: str) -> bool:
    """Whether a phrase holds a word Moses reads as a non-terminal or a rule's left-hand side
    (moses/Phrase.cpp ``CreateFromString``: a word of two or more characters in ``[`` ``]``)."""
    return "[" in phrase and any(len(w) >= 2 and w[0] == "[" and w[-1] == "]" for w in split_words(phrase))


def _unchecked(words: list[str]) -> bool:
    """Whether the decoder may read a source sentence as other words than its own: factors,
    markup it strips (``<seg>``, ``<dlt/>``), its empty word, a non-terminal."""
    return (
        len(words) > LONGEST or any("|" in w or "<" in w or w == EPSILON for w in words) or _bracketed(" ".join(words))
    )


def _tables(ini: str) -> list[str] | None:
    """The text tables of the ini's phrase dictionaries, or None where the check does not apply
    (module docstring)."""
    try:
        with open(ini, encoding="utf-8", errors="replace", newline="") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    sections = _sections(lines)
    values: dict[str, list[str]] = {section: [] for section in sections if section is not None}
    for line, section in zip(lines, sections, strict=True):
        body = _content(line).strip()
        if section is not None and body and not body.startswith("["):
            values[section].append(body)
    for section, given in values.items():
        if section not in _SECTIONS:
            return None
        plain = _SECTIONS[section]
        if plain is not None and (not given or not all(v.lower() in plain for v in given)):
            return None
    if not all(_TRANSLATION_STEP.match(step) for step in values.get("mapping", [])):
        return None
    tables = []
    for feature in features(lines):
        if feature.type not in PLAIN_FEATURES:
            return None
        if feature.type == "PhraseDictionaryMemory":
            path = feature.args.get("path")
            factors = (feature.args.get("input-factor", "0"), feature.args.get("output-factor", "0"))
            if path is None or factors != ("0", "0") or not os.path.isfile(path):
                return None
            tables.append(path)
    return tables or None


class ReachCheck:
    """Whether a hypothesis of a sentence can be produced by the options of its source words
    (module docstring): ``options[s]`` maps each target phrase of the hypotheses asked about to
    the source spans (bit masks of the sentence's word positions) it translates."""

    def __init__(self, lengths: dict[int, int], options: dict[int, dict[tuple[str, ...], set[int]]]) -> None:
        self.lengths = lengths
        self.options = options

    def possible(self, sentence: int, words: Sequence[str]) -> bool:
        """False only where no derivation of the sentence's options writes ``words`` (one of the
        hypotheses :func:`reach_check` was given)."""
        if sentence not in self.options or len(words) > LONGEST:
            return True  # not checked
        options, length = self.options[sentence], self.lengths[sentence]
        n, full = len(words), (1 << length) - 1
        edges: list[list[tuple[int, int]]] = [[] for _ in range(n)]
        last = [-1] * length  # the last target position an option covering the source word starts at
        for i in range(n):
            for k in range(1, n - i + 1):
                for span in options.get(tuple(words[i : i + k]), ()):
                    edges[i].append((k, span))
                    for p in range(length):
                        if span >> p & 1 and last[p] < i:
                            last[p] = i
        # dead[i]: the source words that no option starting at a target position >= i covers
        dead = [sum(1 << p for p, at in enumerate(last) if at < i) for i in range(n + 1)]
        failed: set[tuple[int, int]] = set()
        budget = NODE_BUDGET

        def search(i: int, covered: int) -> bool | None:
            nonlocal budget
            if (i, covered) in failed:
                return False
            budget -= 1
            if budget < 0:
                return None
            if i == n:
                return covered == full
            for k, span in edges[i]:
                if covered & span:
                    continue
                now = covered | span
                if full & ~now & dead[i + k]:
                    continue
                found = search(i + k, now)
                if found is None or found:
                    return found
            failed.add((i, covered))
            return False

        return search(0, 0) is not False


def reach_check(ini: str, sources: Sequence[str], hypotheses: Iterable[tuple[int, Sequence[str]]]) -> ReachCheck | None:
    """The check of ``hypotheses`` ((sentence, words), the sentence an index into ``sources``,
    the text Moses translates) under the moses.ini ``ini``, its tables read once for them; None
    where it does not apply (module docstring)."""
    tables = _tables(ini)
    if tables is None:
        return None
    pieces: dict[int, set[tuple[str, ...]]] = {}  # each sentence's hypotheses' word n-grams
    for s, hypothesis in hypotheses:
        ngrams = pieces.setdefault(s, set())
        if len(hypothesis) <= LONGEST:
            ngrams.update(
                tuple(hypothesis[a:b])
                for a in range(len(hypothesis))
                for b in range(a + 1, min(len(hypothesis), a + PHRASE_WORDS) + 1)
            )
    words = {s: split_words(sources[s]) for s in pieces}
    words = {s: w for s, w in words.items() if not _unchecked(w)}
    spans: dict[str, list[tuple[int, int]]] = {}  # source phrase -> (sentence, span)
    for s, w in words.items():
        for a in range(len(w)):
            for b in range(a + 1, len(w) + 1):
                spans.setdefault(" ".join(w[a:b]), []).append((s, (1 << b) - (1 << a)))
    options: dict[int, dict[tuple[str, ...], set[int]]] = {s: {} for s in words}
    for s, w in words.items():  # the unknown word's copy, at every position
        for p, word in enumerate(w):
            options[s].setdefault((word,), set()).add(1 << p)
    try:
        for table in tables:
            for entry in read_phrase_table(table, check_scores=False):
                if _bracketed(entry.source) or _bracketed(entry.target):
                    return None  # a rule's words, which Moses reads otherwise
                source = entry.source if _plain(entry.source) else " ".join(_words(entry.source))
                matched = spans.get(source)
                if not matched:
                    continue
                target = tuple(entry.target.split(" ")) if _plain(entry.target) else _words(entry.target)
                for sentence, span in matched:
                    if len(target) > PHRASE_WORDS:
                        options.pop(sentence, None)  # longer than the pieces looked for: not checked
                    elif sentence in options and target in pieces[sentence]:
                        options[sentence].setdefault(target, set()).add(span)
    except PhraseTableError:  # a line the one parser refuses (an empty target phrase): left to the decoder
        return None
    return ReachCheck({s: len(words[s]) for s in options}, options)
