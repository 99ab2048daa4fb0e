"""Tokenized text for the CSLM: sentences, the shortlist, and n-grams with sentence boundaries.

A sentence is one line of tokenized text (the text a Moses user built the n-gram LM from), its
tokens separated by spaces and tabs exactly as the decoder and KenLM split them. The n-grams of
a sentence ``w_1 .. w_m`` are those of an n-gram LM: ``w_1 .. w_m </s>`` are predicted, each from
the n - 1 words before it, with ``<s>`` standing for the words before the sentence (KenLM pads
with one ``<s>`` and backs off; a fixed-width network pads with as many as it needs).

The shortlist holds ``<pad> <unk> </s> <s>`` and the most frequent words of the training text
(ties by UTF-8 bytes, as the phrase vocabularies are ordered), so the same text always gives the
same ids.
"""

from __future__ import annotations

import zlib
from collections import Counter
from collections.abc import Iterable, Sequence

import numpy as np

from ..data.vocab import SPECIALS, UNK_ID, Vocabulary

BOS = "<s>"
BOS_ID = len(SPECIALS)  # 3: right after <pad> <unk> </s>
EOS_ID = SPECIALS.index("</s>")
LM_SPECIALS = (*SPECIALS, BOS)


def split_held_out(sentences: Sequence[list[str]], percent: int = 1) -> tuple[list[list[str]], list[list[str]]]:
    """(training, held-out) sentences: ``percent`` % held out, chosen by a hash of the sentence,
    so the same text always gives the same split (and a repeated sentence goes to one side)."""
    train: list[list[str]] = []
    held: list[list[str]] = []
    for tokens in sentences:
        (held if zlib.crc32(" ".join(tokens).encode("utf-8")) % 100 < percent else train).append(list(tokens))
    return train, held


def build_vocabulary(sentences: Iterable[Sequence[str]], size: int) -> Vocabulary:
    """The ``size`` - 4 most frequent words of ``sentences`` after the four special symbols."""
    if size <= len(LM_SPECIALS):
        raise ValueError(f"the shortlist must hold more than its {len(LM_SPECIALS)} special symbols")
    counts: Counter[str] = Counter()
    for tokens in sentences:
        counts.update(tokens)
    for special in LM_SPECIALS:
        counts.pop(special, None)
    order = sorted(counts, key=lambda w: (-counts[w], w.encode("utf-8")))
    return Vocabulary([*LM_SPECIALS, *order[: size - len(LM_SPECIALS)]])


def check_vocabulary(vocab: Vocabulary) -> None:
    if tuple(vocab.tokens[: len(LM_SPECIALS)]) != LM_SPECIALS:
        raise ValueError(f"a CSLM shortlist starts with {LM_SPECIALS}")


def sentence_ids(vocab: Vocabulary, tokens: Sequence[str]) -> np.ndarray:
    """The ids the network predicts for one sentence: its words then ``</s>`` (int64)."""
    ids = np.empty(len(tokens) + 1, dtype=np.int64)
    ids[:-1] = vocab.encode(tokens)
    ids[-1] = EOS_ID
    return ids


def ngrams(order: int, sentences: Iterable[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """(contexts [N, order - 1], targets [N]) of every predicted token of ``sentences`` (each an
    array from :func:`sentence_ids`), in order, as int64."""
    width = order - 1
    contexts: list[np.ndarray] = []
    targets: list[np.ndarray] = []
    for ids in sentences:
        padded = np.concatenate([np.full(width, BOS_ID, dtype=np.int64), ids[:-1]])
        # row t: padded[t : t + width] = the width tokens before ids[t]
        windows = np.lib.stride_tricks.sliding_window_view(padded, width)
        contexts.append(windows[: len(ids)])
        targets.append(ids)
    if not targets:
        return np.zeros((0, width), dtype=np.int64), np.zeros(0, dtype=np.int64)
    return np.concatenate(contexts), np.concatenate(targets)


def text_ngrams(order: int, vocab: Vocabulary, sentences: Iterable[Sequence[str]]) -> tuple[np.ndarray, np.ndarray]:
    """:func:`ngrams` of tokenized sentences, each encoded with ``vocab`` by :func:`sentence_ids`."""
    return ngrams(order, (sentence_ids(vocab, tokens) for tokens in sentences))


def oov_mask(targets: np.ndarray) -> np.ndarray:
    """True where the predicted token is outside the shortlist (``<unk>``)."""
    return targets == UNK_ID
