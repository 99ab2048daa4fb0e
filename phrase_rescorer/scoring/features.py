"""The features a model file gives an n-best list, whatever network it holds.

* A CSLM (``train-lm``): ``ln p(hypothesis </s>)``, each distinct n-gram context of a window
  computed once (``lm.scoring``). Words outside its shortlist score p(<unk>).
* A translation network trained on sentence pairs (``train-nmt``, any architecture):
  ``ln p(hypothesis </s> | source sentence)``; with an inverse network (``train-nmt --direction
  inverse``) ``ln p(source </s> | hypothesis)``. The window is handed to the phrase scorers
  (``rescoring.scorers``) as pairs: the distinct sources of the window are encoded once (a
  sentence's hypotheses share their source) and, with the default ``prefix`` scorer, the
  hypotheses' common prefixes are decoded once. Words outside the shortlists score p(<unk>),
  as the phrase column does; a subword network knows every word.

Beside the models' features, :class:`WordPenaltyFeature` gives a list that lacks one (a network's
n-best list, ``translate --n-best-list``) Moses' word penalty: minus the hypothesis' words.

A phrase network (``train``) reads phrases, not sentences; it is accepted here, with a warning
that says so, since its probabilities of whole sentences are still defined.

``score`` (``scoring.sentences``) scores the lines of plain texts through these same objects, so
that a sentence gets the same number there; for it each feature also gives a line's word count
(``predictions``: the predicted tokens + </s>) and the terms of its sum (``token_scores``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

import numpy as np
import torch

from ..data.corpus import read_sentences
from ..data.line_limit import within_limit
from ..lm.lm_file import LMFile, load_lm
from ..lm.scoring import sentence_log_probs, sentence_token_log_probs
from ..model.checkpoint import Checkpoint, load_checkpoint
from ..model.kinds import ModelFile, open_model, phrase_network_warning
from ..rescoring.scorers import ReferenceScorer, make_scorer


class Hypothesis(Protocol):
    """What a feature reads of a line: its sentence ID (the line of the source text) and its
    tokens (an n-best list's ``moses.nbest.NbestLine``, or a line of a text to score)."""

    @property
    def sentence(self) -> int: ...

    @property
    def tokens(self) -> list[str]: ...


class CSLMFeature:
    """ln p(hypothesis </s>) under a CSLM."""

    def __init__(self, lm: LMFile, name: str, device: torch.device | str = "cpu"):
        self.name, self.path, self.device = name, lm.path or "", device
        self.lm, self.model = lm, lm.build(torch.device(device))

    def score(self, lines: Sequence[Hypothesis]) -> tuple[np.ndarray, int]:
        totals, unknowns = sentence_log_probs(self.model, self.lm.vocab, [line.tokens for line in lines], self.device)
        return totals, int(unknowns.sum())

    def predictions(self, lines: Sequence[Hypothesis]) -> np.ndarray:
        """The log-probabilities each line's value sums: its words + 1 (</s>)."""
        return np.fromiter((len(line.tokens) + 1 for line in lines), dtype=np.int64, count=len(lines))

    def token_scores(self, lines: Sequence[Hypothesis]) -> list[np.ndarray]:
        """Each line's terms of :meth:`score`: ln p of every word and of </s>."""
        return sentence_token_log_probs(self.model, self.lm.vocab, [line.tokens for line in lines], self.device)


class TranslationFeature:
    """ln p(hypothesis </s> | source) under a translation network (or the inverse direction)."""

    def __init__(
        self,
        checkpoint: Checkpoint,
        name: str,
        sources: Sequence[str],
        device: torch.device | str = "cpu",
        scorer: str = "prefix",
    ):
        self.name, self.path = name, checkpoint.path or ""
        self.checkpoint, self.sources = checkpoint, sources
        self.inverse, self.device = checkpoint.inverse, device
        self.model = checkpoint.build_model(device)
        self.scorer = make_scorer(scorer, self.model, device)

    def _pairs(self, lines: Sequence[Hypothesis]) -> tuple[list[list[str]], list[list[str]], np.ndarray, int]:
        """(the network's distinct source token lists, every line's target token list, each
        line's source among them, the hypotheses' words outside the shortlist)."""
        ckpt = self.checkpoint
        hyps = [" ".join(line.tokens) for line in lines]
        if self.inverse:  # the network reads each hypothesis and predicts the sentence's source
            src_texts, tgt_texts = hyps, [self.sources[line.sentence] for line in lines]
            distinct, index = src_texts, np.arange(len(lines), dtype=np.int64)
        else:
            position: dict[int, int] = {}
            index = np.fromiter(
                (position.setdefault(line.sentence, len(position)) for line in lines), dtype=np.int64, count=len(lines)
            )
            distinct, tgt_texts = [self.sources[s] for s in position], hyps
        src_tokens = [ckpt.split(text, 0) for text in distinct]
        tgt_tokens = [ckpt.split(text, 1) for text in tgt_texts]
        # the hypotheses' words outside the shortlist (the closing line counts them against the hypotheses' words)
        hyp_vocab, hyp_tokens = (ckpt.src_vocab, src_tokens) if self.inverse else (ckpt.tgt_vocab, tgt_tokens)
        unknown = sum(hyp_vocab.count_unknown(t) for t in hyp_tokens)
        return src_tokens, tgt_tokens, index, unknown

    def _ids(self, lines: Sequence[Hypothesis]) -> tuple[list[list[int]], list[list[int]], np.ndarray, int]:
        src_tokens, tgt_tokens, index, unknown = self._pairs(lines)
        src_vocab, tgt_vocab = self.checkpoint.src_vocab, self.checkpoint.tgt_vocab
        return [src_vocab.encode(t) for t in src_tokens], [tgt_vocab.encode(t) for t in tgt_tokens], index, unknown

    def score(self, lines: Sequence[Hypothesis]) -> tuple[np.ndarray, int]:
        sources, targets, index, unknown = self._ids(lines)
        return np.asarray(self.scorer.score(sources, targets, index), dtype=np.float64), unknown

    def predictions(self, lines: Sequence[Hypothesis]) -> np.ndarray:
        """The log-probabilities each line's value sums: the network's target tokens (subword
        units for a subword network) + 1 (</s>)."""
        _, targets, _, _ = self._pairs(lines)
        return np.fromiter((len(t) + 1 for t in targets), dtype=np.int64, count=len(targets))

    def token_scores(self, lines: Sequence[Hypothesis]) -> list[np.ndarray]:
        """Each line's terms of :meth:`score`: ln p of every target token and of </s>, through
        ``sequence_token_log_probs`` (they sum to the line's value within float32 rounding); a
        right-to-left network's tokens in reading order, </s> last."""
        sources, targets, index, _ = self._ids(lines)
        terms = ReferenceScorer(self.model, self.device).token_scores(sources, targets, index)
        if self.checkpoint.right_to_left:
            terms = [np.concatenate([t[-2::-1], t[-1:]]) for t in terms]
        return terms


class WordPenaltyFeature:
    """Minus the hypothesis' words (tokens between spaces), as Moses' ``WordPenalty0`` counts them
    in its n-best lists; no model is read."""

    def __init__(self, name: str = "WordPenalty0"):
        self.name, self.path = name, ""

    def score(self, lines: Sequence[Hypothesis]) -> tuple[np.ndarray, int]:
        return np.fromiter((-len(line.tokens) for line in lines), dtype=np.float64, count=len(lines)), 0


def read_source_text(path: str, max_tokens: int | None = None) -> list[str]:
    """The sentences of a source text, as the n-best features read them (tokens joined by one
    space); a line of more than ``max_tokens`` tokens is refused (``data.line_limit``)."""
    return [" ".join(tokens) for tokens in within_limit(path, read_sentences(path), max_tokens)]


def load_feature(
    path: str,
    name: str,
    sources: Sequence[str] | None,
    device: torch.device | str = "cpu",
    on_warning: Callable[[str], None] | None = None,
) -> CSLMFeature | TranslationFeature:
    """The feature of the model file ``path``, read once: a CSLM, or a translation network (which
    needs ``sources``; ValueError without them). Unreadable files raise ``CheckpointError``."""
    opened = open_model(path)
    if opened.kind[0] == "cslm":
        return CSLMFeature(load_lm(opened), name, device)
    checkpoint = load_checkpoint(opened)
    if sources is None:
        raise ValueError(
            f"{path} is a translation network: it scores a hypothesis given its source "
            "sentence; give the source text with --source FILE"
        )
    warning = phrase_network_warning(path, checkpoint.info, "its sentence probabilities are those of a phrase model")
    if warning is not None and on_warning is not None:
        on_warning(warning)
    return TranslationFeature(checkpoint, name, sources, device)


#: A feature's kind in its default name (``nbest`` without ``--name``): ``CSLM0``, ``NMT0``, ...
CSLM_KIND, TRANSLATION_KIND = "CSLM", "NMT"


def model_kind(path: str | ModelFile) -> str:
    """:data:`CSLM_KIND` for a CSLM's model file, :data:`TRANSLATION_KIND` for any other network's
    (read unless given read, not built; unreadable files raise ``CheckpointError``)."""
    return CSLM_KIND if open_model(path).kind[0] == "cslm" else TRANSLATION_KIND


def default_names(kinds: Sequence[str]) -> list[str]:
    """The features' names when none is given, in order: ``CSLM0``, ``CSLM1``, ... for the CSLMs
    and ``NMT0``, ``NMT1``, ... for the translation networks, each kind counted on its own."""
    counts: dict[str, int] = {}
    names = []
    for kind in kinds:
        names.append(f"{kind}{counts.get(kind, 0)}")
        counts[kind] = counts.get(kind, 0) + 1
    return names


def load_features(
    paths: Sequence[str],
    names: Sequence[str],
    sources: Sequence[str] | None,
    device: torch.device | str = "cpu",
    on_warning: Callable[[str], None] | None = None,
) -> list[CSLMFeature | TranslationFeature]:
    """The features of the model files ``paths`` (:func:`load_feature`), named ``names`` (one per
    path), or by :func:`default_names` when ``names`` is empty."""
    features = [
        load_feature(path, names[i] if names else "", sources, device, on_warning) for i, path in enumerate(paths)
    ]
    if not names:
        kinds = [CSLM_KIND if isinstance(f, CSLMFeature) else TRANSLATION_KIND for f in features]
        for feature, name in zip(features, default_names(kinds), strict=True):
            feature.name = name
    return features
