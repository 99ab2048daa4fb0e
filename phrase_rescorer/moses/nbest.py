"""Moses n-best lists: reading them as a stream, their features, and appending one feature.

The decoder writes one line per hypothesis (``moses -n-best-list FILE N [distinct]``;
moses/IOWrapper.cpp, ``OutputNBest``)::

    ID ||| hypothesis ||| Name= v1 v2 Name2= w1 ... ||| total [||| more fields]

sentences in input order, each sentence's hypotheses together, best first. ``ID`` is the 0-based
input line; the hypothesis is written word by word, each followed by a space (so an empty
hypothesis leaves an empty field); feature values are log-domain; options such as
``-print-alignment-info-in-n-best`` add fields after the total. Nothing here re-tokenizes:
the hypothesis' tokens are split at spaces and tabs (``words.split_words``), as the decoder wrote them.

:func:`with_feature` keeps every byte of a line and inserts ``" NAME= value"`` at the end of the
features field; Moses' own readers (``bin/extractor``, ``scripts/nbest-rescore``) take the
features field apart on spaces and ``Name=`` labels.

Every line is checked as it is read (:func:`parse_nbest_line`, :func:`parse_features`, the one
parser of the features field): IDs numbered 0, 1, 2, ... as the decoder writes them (a line for
every input sentence, an empty one too), each sentence's lines together; every value a finite
number; each dense feature named once per line, and the same dense features, with as many values
each, on every line (the first line's, as Moses' extractor and mert-moses.pl take them);
a sparse feature (a name with ``_``) one value after its name, as the decoder writes it
(``name_x= value``). Anything Moses' extractor would read otherwise than this parser (a
``name=value`` token, a value with no feature) is refused with its file and line: the two must
agree on every column, or tuning and reranking weigh other features than they name.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import cast

from .phrase_table import PhraseTableError
from .table_reader import InputTable
from .words import split_words

SEPARATOR = b" ||| "
#: A dense feature's name as mert-moses.pl reads it (get_order_of_scores_from_nbestlist:
#: ``elsif ($tok =~ /^([a-z][0-9a-z]*)=/i)``; a name with ``_`` is taken for a sparse feature).
_NAME = re.compile(r"^[a-z][0-9a-z]*$", re.I)
#: Whitespace other than the space, which Moses' extractor does not split on.
_OTHER_SPACE = re.compile(r"[^\S ]")


class NbestError(PhraseTableError):
    """A malformed n-best line (``str(e)`` is ``"path:line: message"``)."""


#: The dense features of a line: (name, number of values), in order.
Layout = tuple[tuple[str, int], ...]


@dataclass(slots=True)
class Features:
    """A features field taken apart: the dense features and their values, the sparse ones."""

    layout: Layout
    values: list[float]  # the dense values, in layout order
    sparse: list[tuple[str, float]]


def parse_features(field: str, path: str = "", line_no: int | None = None) -> Features:
    """The one parser of an n-best features field, reading it as Moses' extractor does
    (mert/Data.cpp, ``Data::InitFeatureMap`` and ``Data::AddFeatures``)::

        if (!EndsWith(substr, "=")) {                          a value of the current feature
        } else if (substr.find("_") != string::npos) {         a sparse feature's name: the
          getNextPound(buf, substr);                           next token is its one value
        } else {                                               a dense feature's name
          tmp_name = substr.substr(0, substr.size() - 1);

    and refusing, with the file and line, what the two would read differently or what weighs
    nothing sensible: a token ``name=value`` (extractor takes it for a value of the feature
    before it, shifting every later column), a value that is not a finite number, a value before
    any name or after a sparse feature's one value, a dense feature named twice or with no value.
    """
    names: list[str] = []
    counts: list[int] = []
    values: list[float] = []
    sparse: list[tuple[str, float]] = []
    current = False  # values now belong to the last dense feature
    odd = _OTHER_SPACE.search(field)
    if odd:
        raise NbestError(
            path,
            line_no,
            f"U+{ord(odd.group()):04X} in the features field: Moses' extractor separates its tokens "
            "by spaces only (mert/Util.cpp, getNextPound), and would read this one as part of a value",
        )
    tokens = field.split()  # on spaces alone: no other whitespace is left
    i = 0
    while i < len(tokens):
        token = tokens[i]
        i += 1
        if token.endswith("="):
            name = token[:-1]
            if names and counts[-1] == 0 and current:
                raise NbestError(path, line_no, f"feature {names[-1]} has no value")
            if "_" in name:
                if i == len(tokens) or tokens[i].endswith("="):
                    raise NbestError(path, line_no, f"sparse feature {name} has no value")
                sparse.append((name, _number(tokens[i], path, line_no)))
                i += 1
                current = False
                continue
            if not name:
                raise NbestError(path, line_no, "'=' without a feature name")
            if name in names:
                raise NbestError(
                    path,
                    line_no,
                    f"feature {name} twice in the features field: each feature is named once "
                    "(its weights could not tell the two apart)",
                )
            names.append(name)
            counts.append(0)
            current = True
        elif "=" in token:
            raise NbestError(
                path,
                line_no,
                f"feature token {token[:60]!r}: Moses writes a feature as 'name= value', with a space "
                "after '=' (its extractor would take this token for a value of the feature before "
                "it and shift every later column)",
            )
        elif not current:
            where = f"after the sparse feature {sparse[-1][0]}'s value" if sparse else "before any feature name"
            raise NbestError(path, line_no, f"feature value {token[:40]!r} {where}")
        else:
            values.append(_number(token, path, line_no))
            counts[-1] += 1
    if names and counts[-1] == 0 and current:
        raise NbestError(path, line_no, f"feature {names[-1]} has no value")
    return Features(tuple(zip(names, counts, strict=True)), values, sparse)


def _number(text: str, path: str, line_no: int | None) -> float:
    """A finite decimal number: what ``float`` reads, less ``1_0`` and non-ASCII digits (which the
    C ``atof`` of Moses' tools reads otherwise) and ``nan``/``inf`` (not finite)."""
    try:
        value = float(text)
    except ValueError:
        value = None
    if value is None or "_" in text or not text.isascii():
        raise NbestError(path, line_no, f"feature value {text[:40]!r} is not a number")
    if not math.isfinite(value):
        raise NbestError(path, line_no, f"feature value {text[:40]!r} is not a finite number")
    return value


@dataclass(slots=True)
class NbestLine:
    line_no: int  # 1-based
    raw: bytes  # the line as read, without its terminator
    terminator: bytes
    sentence: int  # the ID field
    hyp_start: int  # offsets in raw
    hyp_end: int
    features_end: int
    layout: Layout  # the dense features (``parse_features``)
    values: list[float]  # their values

    @property
    def tokens(self) -> list[str]:
        return split_words(self.raw[self.hyp_start : self.hyp_end].decode("utf-8"))

    @property
    def features(self) -> str:
        return self.raw[self.hyp_end + len(SEPARATOR) : self.features_end].decode("utf-8")

    @property
    def total(self) -> float:
        """The decoder's score of the hypothesis (the field after the features)."""
        rest = self.raw[self.features_end + len(SEPARATOR) :]
        end = rest.find(SEPARATOR)
        return float(rest if end < 0 else rest[:end])


def parse_nbest_line(raw: bytes, terminator: bytes, line_no: int, path: str) -> NbestLine:
    first = raw.find(SEPARATOR)
    second = raw.find(SEPARATOR, first + len(SEPARATOR)) if first >= 0 else -1
    third = raw.find(SEPARATOR, second + len(SEPARATOR)) if second >= 0 else -1
    if third < 0:
        raise NbestError(path, line_no, "not an n-best line: expected 'ID ||| hypothesis ||| features ||| total'")
    sentence_field = raw[:first].strip()
    if not sentence_field.isdigit():
        raise NbestError(path, line_no, f"sentence ID {raw[:first][:40].decode('utf-8', 'replace')!r} is not a number")
    end = raw.find(SEPARATOR, third + len(SEPARATOR))
    total = raw[third + len(SEPARATOR) : end if end >= 0 else len(raw)]
    at = first + len(SEPARATOR)
    try:
        raw[at:second].decode("utf-8")
        at = second + len(SEPARATOR)
        field = raw[at:third].decode("utf-8")
        if not math.isfinite(float(total)):
            raise ValueError
    except UnicodeDecodeError as e:
        raise NbestError(path, line_no, f"invalid UTF-8 at byte {at + e.start}") from e
    except ValueError:
        raise NbestError(path, line_no, f"total score {total[:40]!r} is not a finite number") from None
    features = parse_features(field, path, line_no)
    return NbestLine(
        line_no,
        raw,
        terminator,
        int(sentence_field),
        first + len(SEPARATOR),
        second,
        third,
        features.layout,
        features.values,
    )


def count_sentences(path: str, check: Callable[[NbestLine], None] | None = None) -> int:
    """The sentences of an n-best list: the last ID + 1 (:func:`read_nbest` checks that the IDs
    count them); read through without keeping the lines, each given to ``check`` when given."""
    last = -1
    for line in read_nbest(path):
        if check is not None:
            check(line)
        last = line.sentence
    return last + 1


def read_nbest(path: str) -> Iterator[NbestLine]:
    """The lines of an n-best list (plain or compressed, by content; ``-`` for stdin), in order,
    each checked (module docstring): the sentences numbered 0, 1, 2, ... with each one's lines
    together, and every line with the first line's dense features."""
    current = -1
    first: NbestLine | None = None

    def parse(raw: bytes, terminator: bytes, line_no: int) -> NbestLine:
        return parse_nbest_line(raw, terminator, line_no, path)

    with InputTable(path, parse=parse) as lines:
        for line in cast(Iterator[NbestLine], iter(lines)):
            if line.sentence != current:
                if line.sentence != current + 1:
                    if line.sentence <= current:
                        why = f"sentence {line.sentence} again after other sentences: an n-best list keeps "
                        why += "each sentence's hypotheses together"
                    else:
                        where = f"after {current}" if current >= 0 else "on the first line"
                        why = (
                            f"sentence ID {line.sentence} {where}: the decoder numbers a list's sentences "
                            "0, 1, 2, ... (its input lines), with lines for every sentence, an empty one too"
                        )
                    raise NbestError(path, line.line_no, why)
                current = line.sentence
            if first is None:
                first = line
                if not line.layout:
                    raise NbestError(path, line.line_no, "no dense feature in the features field")
            elif line.layout != first.layout:
                raise NbestError(
                    path,
                    line.line_no,
                    f"features {show_layout(line.layout)} differ from line {first.line_no}'s "
                    f"{show_layout(first.layout)}: every line of a list has the same features "
                    "(Moses' extractor takes the first line's)",
                )
            else:
                line.layout = first.layout  # one tuple for the whole list
            yield line


def show_layout(layout: Layout) -> str:
    """``LM0(1) TM0(4)``: the features and their numbers of values."""
    return " ".join(f"{name}({count})" for name, count in layout)


def format_value(value: float) -> bytes:
    """A feature value as Moses writes them, with enough digits to keep 1e-4 of a log p."""
    if not math.isfinite(value):
        raise ValueError(f"feature value {value} is not finite")
    text = f"{value:.6f}".rstrip("0").rstrip(".")
    return (text if text not in ("-0", "") else "0").encode()


def with_feature(line: NbestLine, name: str, value: float) -> bytes:
    """The line with ``" NAME= value"`` at the end of its features field, and its terminator."""
    return with_features(line, [(name, value)])


def with_features(line: NbestLine, features: list[tuple[str, float]]) -> bytes:
    """The line with ``" NAME= value"`` for each feature, in order, at the end of its features
    field, and its terminator."""
    head = line.raw[: line.features_end]
    space = b"" if head.endswith(b" ") else b" "
    added = b" ".join(b"".join((name.encode(), b"= ", format_value(value))) for name, value in features)
    return b"".join((head, space, added, line.raw[line.features_end :], line.terminator))


def without_features(line: NbestLine, names: list[str]) -> bytes:
    """The line (and its terminator) with the dense features ``names`` and their values removed
    from its features field (the others kept in order, one space apart); the other fields
    unchanged."""
    field = line.raw[line.hyp_end + len(SEPARATOR) : line.features_end]
    drop = {name.encode() + b"=" for name in names}
    kept: list[bytes] = []
    skipping = False
    for token in field.split(b" "):
        if token.endswith(b"="):
            skipping = token in drop  # a sparse feature's name (name_x=) is never one of ``names``
        if not skipping and token:
            kept.append(token)
    return b"".join(
        (line.raw[: line.hyp_end + len(SEPARATOR)], b" ".join(kept), line.raw[line.features_end :], line.terminator)
    )


def check_feature_name(name: str) -> str:
    """A dense feature's name as Moses' tuning scripts read it (``LM0``, ``CSLM0``)."""
    if _NAME.match(name) is None:
        raise ValueError(
            f"feature name {name!r}: a letter then letters and digits, as Moses' dense features (e.g. CSLM0)"
        )
    return name


def dense_features(field: str, path: str = "", line_no: int | None = None) -> list[tuple[str, list[float]]]:
    """``Name= v1 v2 Name2= w1`` -> [("Name", [v1, v2]), ("Name2", [w1])]: the dense features of a
    features field (:func:`parse_features`; sparse features left out)."""
    parsed = parse_features(field, path, line_no)
    out: list[tuple[str, list[float]]] = []
    start = 0
    for name, count in parsed.layout:
        out.append((name, parsed.values[start : start + count]))
        start += count
    return out


def nbest_line(sentence: int, words: list[str], features: list[tuple[str, list[float]]], total: float) -> bytes:
    """A new n-best line as the decoder writes one (moses/IOWrapper.cpp, ``OutputNBest``: each
    word followed by a space, then `` ||| ``; each feature ``Name=`` then its values), with its
    newline: ``ID ||| w1 w2  ||| Name= v1 v2 Name2= w1 ||| total``."""
    hypothesis = "".join(word + " " for word in words).encode("utf-8")
    field = b" ".join(
        b" ".join((name.encode() + b"=", *(format_value(v) for v in values))) for name, values in features
    )
    return b"".join(
        (str(sentence).encode(), SEPARATOR, hypothesis, SEPARATOR, field, SEPARATOR, format_value(total), b"\n")
    )
