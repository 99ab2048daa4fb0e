"""The texts ``phrase-rescorer score`` reads, checked whole before the first line is scored
(``scoring.sentences``): every line decoded and counted, too-long lines refused or noted, two
texts of a pair checked line for line; a text that cannot be read twice held in memory."""

from __future__ import annotations

from collections.abc import Iterator

from ..compression import rereadable
from ..data.corpus import read_sentences
from ..data.line_limit import line_too_long
from ..moses.phrase_table import PhraseTableError


class Text:
    """A text file checked whole before it is scored: :attr:`lines` counted and every line
    decoded (a bad line raises ``PhraseTableError`` naming it). What cannot be read twice
    (standard input, a pipe such as ``<(zcat f.gz)``) is kept in memory; a regular file is read
    again, and must give the lines counted (a file changed meanwhile stops the run).

    A line of more than ``max_tokens`` tokens is refused (``data.line_limit.LineTooLong``), or
    with ``skip_long`` noted in :attr:`long` (the numbers, from 1, of such lines), not to be
    scored (``sentences.score_texts``)."""

    def __init__(self, path: str, max_tokens: int | None = None, *, skip_long: bool = False):
        self.path = path
        self._held: list[list[str]] | None = None
        self.long: list[int] = []
        if rereadable(path):
            self.lines = sum(1 for _ in self._measured(max_tokens, skip_long))
        else:
            self._held = list(self._measured(max_tokens, skip_long))
            self.lines = len(self._held)

    def _measured(self, max_tokens: int | None, skip_long: bool) -> Iterator[list[str]]:
        for line_no, tokens in enumerate(read_sentences(self.path), 1):
            if max_tokens is not None and len(tokens) > max_tokens:
                if not skip_long:
                    raise line_too_long(
                        self.path, line_no, len(tokens), max_tokens, also="give --skip-long (-inf for it)"
                    )
                self.long.append(line_no)
            yield tokens

    def __iter__(self) -> Iterator[list[str]]:
        if self._held is not None:
            yield from self._held
            return
        read = 0
        for tokens in read_sentences(self.path):
            read += 1
            if read > self.lines:
                break
            yield tokens
        if read != self.lines:
            raise PhraseTableError(
                self.path, None, f"changed while being scored ({self.lines:,} lines checked, then {read:,} read)"
            )


def check_aligned(source: Text, target: Text) -> None:
    """Refuse two texts of different lengths, naming the line where the shorter one ends."""
    if source.lines == target.lines:
        return
    short, long = (source, target) if source.lines < target.lines else (target, source)
    raise PhraseTableError(
        short.path,
        short.lines + 1,
        f"ends here, but {long.path} goes on ({long.lines:,} lines, {short.lines:,} here): "
        "the two texts must have one sentence a line, line for line",
    )
