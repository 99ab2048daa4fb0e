"""The longest line a network reads in ``score``, ``nbest`` and ``translate`` (``--max-tokens``),
the longest phrase of a table ``rescore-phrase-table`` and ``moses-step`` score (the same option:
:func:`check_phrases`), and in the Python API's ``Model.score`` (``max_tokens``).

A network's memory grows with the length of the lines it reads, and a line far longer than any
sentence (a noisy corpus's concatenated document, a file without newlines) would otherwise end
the run half-way with an allocation failure. A Transformer's self-attention holds heads x n x n
float32 weights per layer for a line of n tokens: 3.2 GB for a 20,000-token line with 2 heads,
32 MB at the default limit of 1,000 tokens with 8 heads. A recurrent network's encoder states
and attention weights grow as n, a CSLM's n-grams as n; around a long line the batch is cut
short (``rescoring.scorer_base.length_batches``, ``rescoring.stacked_scorer.source_groups``), so
that the limit bounds the memory of a batch too. The same limit holds for every network and
every command, so that whether an input is accepted does not depend on the model.

Every line the network would read is checked against the limit before the first is scored (a
stream that cannot be read twice, as it arrives): one longer than the limit ends the run with one
line naming its file and line, its token count and the limit (:class:`LineTooLong`, exit 3).
Tokens are counted as written: the line's space-separated words (a subword network reads some
words as several units; the default leaves room for that, a real sentence rarely has 100 words).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from ..moses.phrase_table import Entry, PhraseTableError
from ..moses.words import split_words

#: The default ``--max-tokens``: far above any real sentence, far below what exhausts a machine.
DEFAULT_MAX_TOKENS = 1000


class LineTooLong(PhraseTableError):
    """A line of more tokens than ``--max-tokens`` (exit 3, naming the file and line)."""


def line_too_long(
    path: str, line_no: int | None, tokens: int, limit: int, *, also: str = "", option: str = "--max-tokens"
) -> LineTooLong:
    """The refusal of line ``line_no`` of ``path`` (None: ``path`` names the line itself), of
    ``tokens`` tokens; ``also``: another way out the command offers (``"give --skip-long (-inf
    for it)"``); ``option``: the limit's name where it is not ``--max-tokens`` (the Python API's
    ``max_tokens``)."""
    ways = f"raise {option}, or {also}" if also else f"or raise {option}"
    why = f"{tokens:,} tokens, more than {option} {limit:,} (memory grows with a line's length)"
    return LineTooLong(path, line_no, f"{why}: split or drop the line, {ways}")


def within_limit(path: str, sentences: Iterable[list[str]], limit: int | None) -> Iterator[list[str]]:
    """The token lists ``sentences`` (the lines of ``path``, in order), the first of more than
    ``limit`` tokens refused (:class:`LineTooLong`); ``limit`` None: no limit."""
    for line_no, tokens in enumerate(sentences, 1):
        if limit is not None and len(tokens) > limit:
            raise line_too_long(path, line_no, len(tokens), limit)
        yield tokens


def check_phrases(path: str, entry: Entry, limit: int | None) -> None:
    """Refuse the table line ``entry`` of ``path`` whose source or target phrase has more than
    ``limit`` tokens (:class:`LineTooLong`); ``limit`` None: no limit. Cheap for the phrases of
    a real table: only one of more than ``2 x limit - 1`` characters is split into its words."""
    if limit is None:
        return
    for phrase in (entry.source, entry.target):
        if (len(phrase) + 1) // 2 > limit:  # n tokens take at least 2n - 1 characters
            tokens = len(split_words(phrase))
            if tokens > limit:
                raise line_too_long(path, entry.line_no, tokens, limit)
