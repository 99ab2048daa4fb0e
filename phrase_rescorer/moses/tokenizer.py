"""Moses text as people type and read it: to the phrase table's form and back.

A Moses phrase table holds its phrases as the corpus preparation left them. The Moses script
``scripts/tokenizer/tokenizer.perl -l LANG`` splits off punctuation and clitics (``don't`` ->
``don 't``, ``l'homme`` -> ``l' homme``) and escapes the characters that mean something to the
decoder::

    $text =~ s/\\&/\\&amp;/g;   # escape escape
    $text =~ s/\\|/\\&#124;/g;  # factor separator
    $text =~ s/\\</\\&lt;/g;    # xml        (and > " ' [ ] likewise)

and ``scripts/tokenizer/lowercase.perl`` (``print lc($_);``) often lowercases the result. So
``Don't`` is ``don &apos;t`` in the bundled en-fr table, and a phrase typed as it reads is
unknown to the table and to the network until it is put into that form.

* :func:`table_form`: typed text -> the table's form, with sacremoses' ``MosesTokenizer`` (the
  Python port of tokenizer.perl) at tokenizer.perl's defaults (escaping on, no ``-a``
  aggressive hyphen splitting), then lowercased as lowercase.perl does, when asked;
* :func:`unescape`: a table phrase -> its tokens as people write them (detokenizer.perl's
  un-escaping: ``don &apos;t`` -> ``don 't``);
* :func:`detokenize`: a table phrase -> running text, as ``detokenizer.perl -l LANG`` gives it
  (sacremoses' ``MosesDetokenizer``: ``vêtu d&apos; un t-shirt`` -> ``vêtu d'un t-shirt``);
* :func:`is_lowercased`: whether a vocabulary comes from a lowercased table.

Only text typed by a person or printed for one goes through here: phrase-table tokens are never
re-tokenized, and files written for Moses keep the table's bytes. sacremoses is imported on first
use (the import takes a second or two), so rescoring never loads it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from .words import split_words

#: The escapes of tokenizer.perl (and detokenizer.perl's legacy ones), for spotting typed text
#: that is already in the table's form.
_ESCAPE = re.compile(r"&(amp|#124|lt|gt|apos|quot|#91|#93|bar|bra|ket);")

#: A language code as the Moses scripts take it (-l en, -l fr, -l tdt ...).
LANGUAGE_CODE = re.compile(r"[a-z]{2,3}")

#: At most this share of a lowercased table's frequent tokens may hold an uppercase letter
#: (none should: the tolerance only absorbs a stray character that lc() and str.lower() treat
#: differently). A cased table has thousands: names, acronyms, sentence starts.
_UPPERCASE_TOLERANCE = 0.001


def check_language(code: str) -> str:
    """``code`` if it looks like a language code (``en``, ``fr``), else ``ValueError``."""
    if not LANGUAGE_CODE.fullmatch(code):
        raise ValueError(f"{code!r} is not a language code: two or three lowercase letters, e.g. en, fr, de")
    return code


@lru_cache(maxsize=8)
def _tokenizer(lang: str) -> Any:
    from sacremoses import MosesTokenizer

    # A language without a list of non-breaking prefixes ("Mr.", "e.g.") gets the English one,
    # in sacremoses as in tokenizer.perl.
    return MosesTokenizer(lang)


@lru_cache(maxsize=8)
def _detokenizer(lang: str) -> Any:
    from sacremoses import MosesDetokenizer

    return MosesDetokenizer(lang)


def table_form(text: str, lang: str, lowercase: bool) -> str:
    """``tokenizer`` as tokenizer.perl -l ``lang`` (then lowercase.perl if ``lowercase``) writes it:
    space-separated, escaped tokens. Whitespace alone gives ""."""
    tokens = _tokenizer(lang).tokenize(text, aggressive_dash_splits=False, escape=True, return_str=True)
    return tokens.lower() if lowercase else tokens


def has_escapes(text: str) -> bool:
    """Whether ``tokenizer`` holds a Moses escape (``&apos;``, ``&amp;`` ...): then it was probably
    copied from a table, and tokenizing it would escape its ampersands once more."""
    return _ESCAPE.search(text) is not None


def unescape(phrase: str) -> str:
    """A table phrase with its escapes undone (detokenizer.perl's order: ``&amp;`` last), its
    tokens kept apart."""
    if "&" not in phrase:
        return phrase
    return str(_detokenizer("en").unescape_xml(phrase))


def detokenize(phrase: str, lang: str) -> str:
    """A table phrase (or a tokenized sentence) as running text in ``lang``: unescaped, and
    its tokens joined as detokenizer.perl -l ``lang`` joins them."""
    return str(_detokenizer(lang).detokenize(split_words(phrase), return_str=True, unescape=True))


def is_lowercased(tokens: Iterable[str]) -> bool:
    """Whether a table's frequent ``tokens`` (a shortlist) are lowercase, as lowercase.perl
    leaves them."""
    total = upper = 0
    for t in tokens:
        total += 1
        upper += t != t.lower()
    return upper <= _UPPERCASE_TOLERANCE * total


@dataclass(frozen=True)
class Display:
    """How table phrases are shown to people: unescaped (``escaped=True``: as in the table), and
    detokenized in the side's language when one is set."""

    escaped: bool = False
    source_lang: str | None = None  # detokenize source phrases in this language
    target_lang: str | None = None  # detokenize target phrases in this language

    def source(self, phrase: str) -> str:
        return self._show(phrase, self.source_lang)

    def target(self, phrase: str) -> str:
        return self._show(phrase, self.target_lang)

    def _show(self, phrase: str, lang: str | None) -> str:
        if self.escaped:
            return phrase
        return detokenize(phrase, lang) if lang else unescape(phrase)


#: The table's own form, byte for byte.
AS_IN_TABLE = Display(escaped=True)
