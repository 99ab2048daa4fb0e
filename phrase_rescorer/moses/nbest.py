"""Moses n-best lists: reading them as a stream, their features, and appending one feature.

The decoder writes one line per hypothesis (``moses -n-best-list FILE N [distinct]``;
moses/IOWrapper.cpp, ``OutputNBest``)::

    ID ||| hypothesis ||| Name= v1 v2 Name2= w1 ... ||| total [||| more fields]

sentences in input order, each sentence's hypotheses together, best first. ``ID`` is the 0-based
input line; the hypothesis is written word by word, each followed by a space (so an empty
hypothesis leaves an empty field); feature values are log-domain; options such as
``-print-alignment-info-in-n-best`` add fields after the total. Nothing here re-tokenizes:
the hypothesis' tokens are split on spaces, as the decoder wrote them.

:func:`with_feature` keeps every byte of a line and inserts ``" NAME= value"`` at the end of the
features field; Moses' own readers (``bin/extractor``, ``scripts/nbest-rescore``) take the
features field apart on whitespace and ``Name=`` labels.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import cast

from .phrase_table import PhraseTableError
from .table_reader import InputTable

SEPARATOR = b" ||| "
#: A dense feature's name as mert-moses.pl reads it (get_order_of_scores_from_nbestlist:
#: ``elsif ($tok =~ /^([a-z][0-9a-z]*)=/i)``; a name with ``_`` is taken for a sparse feature).
_NAME = re.compile(r"^[a-z][0-9a-z]*$", re.I)


class NbestError(PhraseTableError):
    """A malformed n-best line (``str(e)`` is ``"path:line: message"``)."""


@dataclass(slots=True)
class NbestLine:
    line_no: int  # 1-based
    raw: bytes  # the line as read, without its terminator
    terminator: bytes
    sentence: int  # the ID field
    hyp_start: int  # offsets in raw
    hyp_end: int
    features_end: int

    @property
    def tokens(self) -> list[str]:
        return self.raw[self.hyp_start : self.hyp_end].decode("utf-8").split()

    @property
    def features(self) -> str:
        return self.raw[self.hyp_end + len(SEPARATOR) : self.features_end].decode("utf-8")


def parse_nbest_line(raw: bytes, terminator: bytes, line_no: int, path: str) -> NbestLine:
    first = raw.find(SEPARATOR)
    second = raw.find(SEPARATOR, first + len(SEPARATOR)) if first >= 0 else -1
    third = raw.find(SEPARATOR, second + len(SEPARATOR)) if second >= 0 else -1
    if third < 0:
        raise NbestError(path, line_no, "not an n-best line: expected 'ID ||| hypothesis ||| features ||| total'")
    sentence_field = raw[:first]
    if not sentence_field.strip().isdigit():
        raise NbestError(path, line_no, f"sentence ID {sentence_field[:40]!r} is not a number")
    end = raw.find(SEPARATOR, third + len(SEPARATOR))
    total = raw[third + len(SEPARATOR) : end if end >= 0 else len(raw)]
    try:
        raw[first + len(SEPARATOR) : third].decode("utf-8")
        if not math.isfinite(float(total)):
            raise ValueError
    except UnicodeDecodeError as e:
        raise NbestError(path, line_no, f"invalid UTF-8 at byte {first + len(SEPARATOR) + e.start}") from e
    except ValueError:
        raise NbestError(path, line_no, f"total score {total[:40]!r} is not a finite number") from None
    return NbestLine(line_no, raw, terminator, int(sentence_field), first + len(SEPARATOR), second, third)


def count_sentences(path: str) -> int:
    """The sentences of an n-best list as its IDs number them: the last ID + 1 (IDs count input
    lines from 0, each sentence once); read through without keeping the lines."""
    last = -1
    for line in read_nbest(path):
        last = line.sentence
    return last + 1


def read_nbest(path: str) -> Iterator[NbestLine]:
    """The lines of an n-best list (plain or gzip, by content; ``-`` for stdin), in order, each
    sentence's lines together (an ID seen before, after another one, is an error)."""
    seen: set[int] = set()
    current: int | None = None

    def parse(raw: bytes, terminator: bytes, line_no: int) -> NbestLine:
        return parse_nbest_line(raw, terminator, line_no, path)

    with InputTable(path, parse=parse) as lines:
        for line in cast(Iterator[NbestLine], iter(lines)):
            if line.sentence != current:
                if line.sentence in seen:
                    raise NbestError(
                        path,
                        line.line_no,
                        f"sentence {line.sentence} again after other sentences: "
                        "an n-best list keeps each sentence's hypotheses together",
                    )
                seen.add(line.sentence)
                current = line.sentence
            yield line


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
            skipping = token in drop
        elif b"=" in token:  # a sparse feature, name=value: never one of ``names``
            skipping = False
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
    """``Name= v1 v2 Name2= w1`` -> [("Name", [v1, v2]), ("Name2", [w1])]. A token ``name=value``
    with no space (a sparse feature) is its own one-value feature."""
    features: list[tuple[str, list[float]]] = []
    for token in field.split():
        if token.endswith("="):
            features.append((token[:-1], []))
            continue
        if "=" in token:
            name, _, value = token.rpartition("=")
            features.append((name, [_number(value, path, line_no)]))
            continue
        if not features:
            raise NbestError(path, line_no, f"feature value {token!r} before any feature name")
        features[-1][1].append(_number(token, path, line_no))
    return features


def _number(text: str, path: str, line_no: int | None) -> float:
    try:
        return float(text)
    except ValueError:
        raise NbestError(path, line_no, f"feature value {text!r} is not a number") from None
