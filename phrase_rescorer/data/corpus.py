"""Tokenized text files and parallel corpora: the sentences of a file, and the unique sentence
pairs of two line-aligned files (the training data of the sentence-level networks).

A sentence is one line of tokenized text, its tokens separated by spaces and tabs exactly as
the decoder and KenLM split them. Files are read through the same stream as phrase tables
(``moses.table_reader.InputTable``): any compression recognised by content, ``-`` for stdin,
CRLF endings, the line-length cap, and errors that name the file and line.

A parallel corpus is two files with one sentence per line, line i of the one the translation of
line i of the other (what Moses' ``train-model.perl --corpus`` reads). Files with different line
counts are refused, naming the line where one ends. A line pair with an empty side cannot train
a translation and is skipped (and counted), as Moses' ``clean-corpus-n.perl`` drops it.
Duplicate pairs are kept once, as the phrase pairs are (``pairs.PairBuilder``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import cast

from ..moses.phrase_table import PhraseTableError
from ..moses.table_reader import InputTable
from ..moses.words import split_words
from .pairs import PairBuilder, PairSet


def _decode(path: str) -> Callable[[bytes, bytes, int], list[str]]:
    def parse(raw: bytes, terminator: bytes, line_no: int) -> list[str]:
        try:
            return split_words(raw.decode("utf-8"))
        except UnicodeDecodeError as e:
            raise PhraseTableError(path, line_no, f"invalid UTF-8 at byte {e.start}") from e

    return parse


def read_sentences(path: str) -> Iterator[list[str]]:
    """The token lists of a text file (plain or compressed, by content; ``-`` for stdin), in
    order. Errors name the file and line (:class:`PhraseTableError`)."""
    with InputTable(path, parse=_decode(path)) as text:
        yield from cast(Iterator[list[str]], iter(text))


def read_lines(path: str) -> list[str]:
    """The lines of a UTF-8 text file (plain or compressed, by content; ``-`` for stdin) without
    their ends (``\\n`` or ``\\r\\n``), every other character kept: split at newlines only, as
    Moses writes and counts lines (``str.splitlines`` would also split at U+2028, U+0085, form
    feeds). Errors name the file and line (:class:`PhraseTableError`)."""
    return list(iter_lines(path))


def iter_lines(path: str) -> Iterator[str]:
    """:func:`read_lines`' lines, one at a time, as the file streams."""

    def parse(raw: bytes, terminator: bytes, line_no: int) -> str:
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise PhraseTableError(path, line_no, f"invalid UTF-8 at byte {e.start}") from e

    with InputTable(path, parse=parse) as text:
        yield from cast(Iterator[str], iter(text))


@dataclass
class CorpusPairs:
    """The unique sentence pairs of a parallel corpus, and what reading it found."""

    pairs: PairSet
    lines: int  # line pairs read
    empty: int  # line pairs skipped for an empty side


def chunks(lines: Iterable[str], size: int) -> Iterator[list[str]]:
    """``lines`` in lists of ``size`` (the last one shorter)."""
    chunk: list[str] = []
    for line in lines:
        chunk.append(line)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def load_sentence_pairs(src_path: str, tgt_path: str, on_progress: Callable[[int], None] | None = None) -> CorpusPairs:
    """The unique (source, target) sentence pairs of two line-aligned files.

    ``on_progress(lines)`` is called every 65,536 line pairs. Raises :class:`PhraseTableError`
    naming the file and line for a bad line or for files of different lengths.
    """
    if src_path == "-" and tgt_path == "-":
        raise PhraseTableError(src_path, None, "only one of the two corpus files can be standard input")
    builder = PairBuilder()
    lines = empty = 0
    sources, targets = read_sentences(src_path), read_sentences(tgt_path)
    for s_toks in sources:
        t_toks = next(targets, None)
        if t_toks is None:
            raise PhraseTableError(
                tgt_path,
                lines + 1,
                f"ends here, but {src_path} goes on: the two "
                "files of a parallel corpus must have the same number of lines",
            )
        lines += 1
        if not s_toks or not t_toks:
            empty += 1
        else:
            builder.add(s_toks, t_toks)
        if on_progress is not None and lines % 65536 == 0:
            on_progress(lines)
    if next(targets, None) is not None:
        raise PhraseTableError(
            src_path,
            lines + 1,
            f"ends here, but {tgt_path} goes on: the two files of a parallel corpus must have the same number of lines",
        )
    if on_progress is not None:
        on_progress(lines)
    return CorpusPairs(builder.build(lines), lines, empty)
