"""BLEU as sacrebleu computes it, on tokenized and on detokenized text, with per-sentence statistics.

Two scores per output file:

* **tokenized**: the decoder's output as it is (Moses-tokenized, escaped) against the tokenized
  reference, split on spaces only (sacrebleu ``tokenize='none'``): the number
  ``multi-bleu.perl`` prints and MERT optimises.
* **detokenized**: the output detokenized with sacremoses' ``MosesDetokenizer`` for the target
  language (which also unescapes ``&apos;`` and the like) against a raw reference, scored with
  sacrebleu's standard ``13a`` tokenization: the number papers report. Without a raw reference
  the tokenized reference is detokenized the same way (the JSON says which).

Significance tests need BLEU of many resampled corpora: :func:`sentence_stats` gives the
sufficient statistics of every sentence (hypothesis length, reference length, matched and total
n-grams for n = 1..4, as sacrebleu counts them) and :func:`bleu_from_stats` turns summed
statistics into BLEU with numpy, for one corpus or a whole batch of them at once, exactly as
sacrebleu's corpus BLEU (``smooth:exp``) does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from sacrebleu.metrics import BLEU

from ..data import corpus
from ..moses import tokenizer

MAX_ORDER = 4
#: Columns of a statistics row: hyp_len, ref_len, correct_1..4, total_1..4 (sacrebleu's order).
STATS = 2 + 2 * MAX_ORDER


@dataclass
class BleuScore:
    score: float
    signature: str
    stats: np.ndarray  # (sentences, STATS) int64

    def to_json(self) -> dict:
        return {"bleu": round(self.score, 4), "signature": self.signature}


def detokenize(lines: Sequence[str], lang: str) -> list[str]:
    """Moses-tokenized, escaped lines as running text (sacremoses' ``MosesDetokenizer``)."""
    return [tokenizer.detokenize(line, lang) for line in lines]


def _metric(tokenize: str, lowercase: bool, effective_order: bool = False) -> BLEU:
    # force: tokenized text is scored as such on purpose (without it sacrebleu warns that the
    # lines "end in a tokenized period")
    return BLEU(tokenize=tokenize, lowercase=lowercase, effective_order=effective_order, force=tokenize == "none")


def sentence_stats(
    hyps: Sequence[str], refs: Sequence[str], *, tokenize: str = "none", lowercase: bool = False
) -> np.ndarray:
    """Per-sentence sufficient statistics, shape (sentences, 10)."""
    if len(hyps) != len(refs):
        raise ValueError(f"{len(hyps)} hypotheses but {len(refs)} references")
    # sacrebleu's public API gives a sentence's statistics through ``sentence_score`` (its
    # ``sys_len``, ``ref_len``, ``counts`` and ``totals``: the row sacrebleu itself sums for
    # corpus BLEU); effective_order only changes the sentence's own score, not these counts, and
    # silences sacrebleu's advice to use it at sentence level. The public API cannot pool them:
    # ``corpus_score`` takes strings, so BLEU of thousands of resampled corpora, or of the
    # sentences of several MERT runs pooled (what ``experiment``'s significance tests need), would
    # re-tokenize every sentence each time; :func:`bleu_from_stats` sums these rows instead.
    metric = _metric(tokenize, lowercase, effective_order=True)
    rows = []
    for hyp, ref in zip(hyps, refs, strict=True):
        s = metric.sentence_score(hyp, [ref])
        rows.append([s.sys_len, s.ref_len, *s.counts, *s.totals])
    return np.asarray(rows, dtype=np.int64).reshape(len(hyps), STATS)


def bleu_from_stats(totals: np.ndarray) -> np.ndarray:
    """Corpus BLEU (0-100) from summed statistics; ``totals`` has shape (..., 10).

    sacrebleu's ``compute_bleu`` with ``smooth_method='exp'``: a precision with no match is
    100 / (2^k · total) where k counts the orders without a match so far; no match at all,
    or an order without n-grams, gives 0; brevity penalty exp(1 - ref/hyp) when hyp < ref.
    """
    t = np.asarray(totals, dtype=np.float64)
    hyp_len, ref_len = t[..., 0], t[..., 1]
    correct, total = t[..., 2 : 2 + MAX_ORDER], t[..., 2 + MAX_ORDER :]
    zero = correct == 0
    smooth = np.power(2.0, np.cumsum(zero, axis=-1))
    with np.errstate(divide="ignore", invalid="ignore"):
        precision = np.where(zero, 1.0 / (smooth * total), correct / total)
        log_mean = np.log(precision).mean(axis=-1)
        bp = np.where(hyp_len < ref_len, np.exp(1.0 - ref_len / hyp_len), 1.0)
    valid = (total > 0).all(axis=-1) & (~zero).any(axis=-1) & (hyp_len > 0)
    return np.where(valid, 100.0 * bp * np.exp(np.where(valid, log_mean, 0.0)), 0.0)


def score(hyps: Sequence[str], refs: Sequence[str], *, tokenize: str, lowercase: bool) -> BleuScore:
    """sacrebleu's corpus BLEU and signature, with the per-sentence statistics."""
    stats = sentence_stats(hyps, refs, tokenize=tokenize, lowercase=lowercase)
    metric = _metric(tokenize, lowercase)
    corpus = metric.corpus_score(list(hyps), [list(refs)])
    return BleuScore(float(corpus.score), str(metric.get_signature()), stats)


def tokenized_bleu(hyps: Sequence[str], refs: Sequence[str], *, lowercase: bool = False) -> BleuScore:
    """Moses-tokenized output against the tokenized reference, split on spaces only."""
    return score(hyps, refs, tokenize="none", lowercase=lowercase)


def detokenized_bleu(hyps: Sequence[str], raw_refs: Sequence[str], lang: str, *, lowercase: bool = False) -> BleuScore:
    """Detokenized output against a raw reference, sacrebleu's standard 13a tokenization."""
    return score(detokenize(hyps, lang), raw_refs, tokenize="13a", lowercase=lowercase)


def read_lines(path: str) -> list[str]:
    """The lines of a text file without their ends (``data.corpus.read_lines``: compressed by
    content, UTF-8 checked, errors naming the file and line, split at newlines only)."""
    return corpus.read_lines(path)
