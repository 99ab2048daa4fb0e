"""The words of a sentence, an n-best hypothesis or a table phrase, as Moses splits them.

Moses splits every text it reads into words at spaces and tabs alone (moses/Util.h,
``inline std::vector<std::string> Tokenize(const std::string& str, const std::string& delimiters
= " \\t")``): its input sentences, the phrases of its tables, the training corpora of its
scripts; and it writes its n-best hypotheses as words joined by single spaces. Every other
character is part of a word, Unicode whitespace too: the no-break space (U+00A0) that French
typography puts before ``:``, the thin space (U+2009), the ideographic space (U+3000), the
vertical tab and form feed, U+001C..U+001F, U+0085, the line and paragraph separators (U+2028,
U+2029). Python's ``str.split()`` would split at all of these: no reader of words uses it.

Every command splits its texts into words with :func:`split_words` (``nbest``, ``score``,
training, reranking's MBR, the analyses), so that a text is the same words, and gets the same
score, whichever command reads it.
"""

from __future__ import annotations

#: The characters that separate words (moses/Util.h ``Tokenize``'s default delimiters).
WORD_SEPARATORS = " \t"


def split_words(text: str) -> list[str]:
    """The words of ``text``, split at spaces and tabs as Moses splits them (runs of them, and
    those at either end, separate nothing); every other character stays inside its word."""
    if "\t" in text:
        text = text.replace("\t", " ")
    words = text.split(" ")
    if "" in words:
        words = [w for w in words if w]
    return words
