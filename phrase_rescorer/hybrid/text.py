"""A text through a hybrid system (``translate.HybridSystem``): the form its lines take in and out
(:class:`TextForm`: tokenized and lowercased for the system, detokenized after), its chunks
(``data.corpus.chunks``), the checks made before any decoding (:func:`check_lengths`, and
:func:`check_input`, which reads a regular input file through once so that a line the system
refuses, invalid UTF-8 or too many tokens, is refused before any chunk is decoded), and the file
translated chunk by chunk (:func:`translate_file`: one output line per input line, in order,
flushed after each chunk; a chunk holds whole groups of the sentences whose beams the candidate
networks search together, ``Candidates.batch``, so that a line's output does not depend on the
chunk it falls in). With ``tokenize``, each line is first put in the table's form
(``moses.tokenizer``: tokenizer.perl, lowercased with ``lowercase``); with ``detokenize`` each
output line is made running text (detokenizer.perl).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import BinaryIO, Protocol

from ..compression import rereadable
from ..data.corpus import chunks, iter_lines
from ..data.line_limit import line_too_long
from ..moses.tokenizer import detokenize as detokenized
from ..moses.tokenizer import table_form
from ..moses.words import split_words
from .system import Bundle

#: Lines decoded together by default.
DEFAULT_CHUNK_LINES = 500


@dataclass(frozen=True)
class TextForm:
    """How input lines reach the system and output lines leave it: tokenized for ``tokenize``'s
    language (lowercased with ``lowercase``), detokenized for ``detokenize``'s (None: as they are)."""

    tokenize: str | None = None
    lowercase: bool = False
    detokenize: str | None = None

    def source(self, line: str) -> str:
        return line if self.tokenize is None else table_form(line, self.tokenize, self.lowercase)

    def output(self, line: str) -> str:
        return line if self.detokenize is None else detokenized(line, self.detokenize)


class ChunkTranslator(Protocol):
    """What :func:`translate_file` drives: a system that translates a chunk of lines (tokenized
    text; ``name`` and ``first_line`` name them in messages), with its bundle."""

    bundle: Bundle

    def translate(self, lines: Sequence[str], name: str = "input", first_line: int = 1) -> list[str]: ...


def check_lengths(words: Sequence[list[str]], max_tokens: int | None, name: str, first_line: int) -> None:
    """Refuse a line of more than ``max_tokens`` tokens (``words``: lines ``first_line``, ... of
    ``name``), as nbest --source and translate refuse it (``LineTooLong``, exit 3)."""
    if max_tokens is not None:
        for i, tokens in enumerate(words):
            if len(tokens) > max_tokens:
                raise line_too_long(name, first_line + i, len(tokens), max_tokens)


def check_input(in_path: str, form: TextForm = TextForm(), max_tokens: int | None = None) -> None:
    """Read a regular file ``in_path`` through once, refusing its first line that
    ``HybridSystem.translate`` would refuse (invalid UTF-8, more than ``max_tokens`` tokens
    in ``form``'s source form), with the same message: before any line is decoded. Standard
    input and pipes, read once, are left to :func:`translate_file`, which checks each chunk as it
    streams."""
    if not rereadable(in_path):
        return
    for line_no, line in enumerate(iter_lines(in_path), 1):
        check_lengths([split_words(form.source(line))], max_tokens, in_path, line_no)


@dataclass
class HybridSummary:
    lines: int = 0
    chunks: int = 0


def translate_file(
    system: ChunkTranslator,
    in_path: str,
    out: BinaryIO,
    *,
    chunk_lines: int = DEFAULT_CHUNK_LINES,
    form: TextForm = TextForm(),
    on_progress: Callable[[int], None] | None = None,
) -> HybridSummary:
    """Translate every line of ``in_path`` (``-``: stdin; compressed by content) with ``system``,
    ``chunk_lines`` at a time (rounded up to whole groups of the sentences its candidate networks
    search together), writing one line per input line to ``out`` in order, flushed after each chunk."""
    summary = HybridSummary()
    group = system.bundle.search_group
    chunk_lines = -(-chunk_lines // group) * group  # whole groups of the sentences searched together
    for chunk in chunks(iter_lines(in_path), chunk_lines):
        lines = system.translate([form.source(line) for line in chunk], in_path, summary.lines + 1)
        out.write("".join(form.output(line) + "\n" for line in lines).encode("utf-8"))
        out.flush()
        summary.lines += len(chunk)
        summary.chunks += 1
        if on_progress is not None:
            on_progress(summary.lines)
    return summary
