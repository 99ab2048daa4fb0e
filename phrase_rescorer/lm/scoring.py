"""log p(sentence) under the CSLM, for many sentences at once, each distinct context once.

A sentence ``w_1 .. w_m`` scores ``sum_t log p(w_t | context_t) + log p(</s> | context_{m+1})``
(natural log), the contexts padded with ``<s>`` (``text.ngrams``). The hypotheses of one n-best
list share most of their n-grams, and a softmax row gives every word of a context at once, so
:func:`sentence_log_probs` computes the network once per *distinct context* of the batch and
reads each (context, word) from that row. Words outside the shortlist score p(<unk>), the
class the network was trained to give them (the paper's shortlist; the ``unknown`` counts let a
caller report how often that happened).

Exactness: the result equals scoring each n-gram on its own (``plain_sentence_log_probs``)
within float32 rounding of the network's output: the same rows, computed in batches of other
sizes (tests bound the difference by 1e-4 per sentence).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from ..data.vocab import UNK_ID, Vocabulary
from .network import CSLM
from .text import ngrams, sentence_ids, text_ngrams

#: Distinct contexts per network call: the output rows are batch x vocabulary floats.
ROWS_PER_CALL = 1024


def _unique_rows(contexts: np.ndarray, vocab_size: int) -> tuple[np.ndarray, np.ndarray]:
    """(distinct rows, index of each input row among them)."""
    width = contexts.shape[1]
    bits = max(1, int(vocab_size - 1).bit_length())
    if bits * width <= 63:  # one int64 key per row: much faster than np.unique(axis=0)
        keys = np.zeros(len(contexts), dtype=np.int64)
        for column in range(width):
            keys = (keys << bits) | contexts[:, column]
        _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
        return contexts[first], inverse.reshape(-1)
    rows, inverse = np.unique(contexts, axis=0, return_inverse=True)
    return rows, inverse.reshape(-1)


@torch.no_grad()
def _ngram_log_probs(
    model: CSLM, vocab: Vocabulary, sentences: Sequence[Sequence[str]], device: torch.device | str
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(log p of every n-gram of the sentences, in order, float64; each sentence's n-gram count
    (its words + 1, for </s>); the n-grams' target ids)."""
    ids = [sentence_ids(vocab, tokens) for tokens in sentences]
    lengths = np.fromiter((len(i) for i in ids), dtype=np.int64, count=len(ids))
    contexts, targets = ngrams(model.config.order, ids)
    logp = np.zeros(len(targets), dtype=np.float64)
    if len(targets):
        rows, inverse = _unique_rows(contexts, model.config.vocab_size)
        row_targets = torch.from_numpy(targets)
        order = np.argsort(inverse, kind="stable")  # n-grams grouped by their distinct context
        starts = np.append(np.arange(0, len(rows), ROWS_PER_CALL), len(rows))
        bounds = np.searchsorted(inverse[order], starts)
        for chunk, start in enumerate(range(0, len(rows), ROWS_PER_CALL)):
            batch = torch.from_numpy(rows[start : start + ROWS_PER_CALL]).to(device)
            table = model.log_probs(batch).float().cpu()
            members = order[bounds[chunk] : bounds[chunk + 1]]
            local = torch.from_numpy(inverse[members] - start)
            logp[members] = table[local, row_targets[members]].double().numpy()
    return logp, lengths, targets


def sentence_log_probs(
    model: CSLM, vocab: Vocabulary, sentences: Sequence[Sequence[str]], device: torch.device | str = "cpu"
) -> tuple[np.ndarray, np.ndarray]:
    """(log p of each sentence + </s> as float64, count of its words outside the shortlist)."""
    logp, lengths, targets = _ngram_log_probs(model, vocab, sentences, device)
    owner = np.repeat(np.arange(len(lengths)), lengths)
    totals = np.bincount(owner, weights=logp, minlength=len(lengths))
    unknown = np.bincount(owner, weights=(targets == UNK_ID), minlength=len(lengths)).astype(np.int64)
    return totals, unknown


def sentence_token_log_probs(
    model: CSLM, vocab: Vocabulary, sentences: Sequence[Sequence[str]], device: torch.device | str = "cpu"
) -> list[np.ndarray]:
    """Each sentence's log p of every word and </s> (float64, its words + 1 values): the terms
    that :func:`sentence_log_probs` sums, from the same computation."""
    logp, lengths, _ = _ngram_log_probs(model, vocab, sentences, device)
    return np.split(logp, np.cumsum(lengths)[:-1]) if len(lengths) else []


@torch.no_grad()
def plain_sentence_log_probs(model: CSLM, vocab: Vocabulary, tokens: Sequence[str]) -> float:
    """The plain computation, one n-gram at a time (for checking)."""
    contexts, targets = text_ngrams(model.config.order, vocab, [tokens])
    total = 0.0
    for context, target in zip(contexts, targets, strict=True):
        row = model.log_probs(torch.from_numpy(context[None, :]))
        total += float(row[0, int(target)])
    return total
