"""Scoring from Python: a model file loaded once, then sentences scored as ``phrase-rescorer
score`` scores lines, through the same code (:func:`.sentences.scored_windows`)::

    import phrase_rescorer

    lm = phrase_rescorer.load("cslm.pt")
    lm.score("le chat est noir .")                  # ln p(sentence </s>), one float
    nmt = phrase_rescorer.load("nmt.pt", threads=2)
    nmt.score(sources, targets, normalize=True)     # ln p(target </s> | source) per word, a list
    nmt.word_scores(sources, targets)               # each pair's n + 1 terms, </s> last

A sentence is a string of space-separated tokens, as a line of the texts ``score`` reads. Any
model file loads: a CSLM (``train-lm``) scores sentences alone; a translation network
(``train-nmt``, or a phrase network of ``train``) scores each target given its source, an
inverse one (``--direction inverse``) each source given its target, exactly as ``score SRC
TGT`` does. A phrase network also rescores a Moses table (:meth:`Model.rescore_table`).

Nothing heavy is imported with this module: torch loads with the first :func:`load`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, overload

from ..data.line_limit import DEFAULT_MAX_TOKENS, line_too_long
from ..errors import UsageError

if TYPE_CHECKING:
    import torch

    from ..model.kinds import ModelKind
    from ..rescoring.options import RescoreSummary
    from .features import CSLMFeature, TranslationFeature
    from .sentences import WindowScores


def load(path: str, device: str = "cpu", threads: int | None = None) -> Model:
    """The model file ``path``, any kind, ready to score on ``device`` (``cpu``, ``cuda``,
    ``cuda:N`` or ``auto``). ``threads`` limits this process's computing threads from now on
    (``--threads``; None leaves torch's setting as it is). A missing, unreadable or foreign
    file is a ``CheckpointError`` (a ``ValueError``) naming it."""
    from ..devices import resolve_device
    from ..threads import limit_threads

    if threads is not None:
        limit_threads(threads)
    return Model.from_file(path, resolve_device(device))


class Model:
    """A loaded model file and what it scores (:func:`load`); :attr:`feature` is the n-best
    feature of the file (``scoring.features``), which ``nbest`` and ``score`` use as well."""

    def __init__(
        self, path: str, feature: CSLMFeature | TranslationFeature, kind: ModelKind, device: torch.device
    ) -> None:
        self.path, self.feature, self.kind, self.device = path, feature, kind, device

    @classmethod
    def from_file(cls, path: str, device: torch.device | str = "cpu") -> Model:
        """The model file ``path`` on ``device``, loaded as ``score`` and ``nbest`` load it."""
        import torch

        from .features import CSLMFeature, load_feature

        feature = load_feature(path, "", [], device)
        kind = ("cslm", "forward") if isinstance(feature, CSLMFeature) else feature.checkpoint.kind
        return cls(path, feature, kind, torch.device(device))

    @property
    def is_language_model(self) -> bool:
        """A CSLM: it scores sentences alone; every other model scores sentence pairs."""
        return self.kind[0] == "cslm"

    def __repr__(self) -> str:
        from ..model.kinds import describe_kind

        return f"<Model {self.path!r}: {describe_kind(self.kind)} on {self.device}>"

    # a str is also a Sequence[str]: the first overload that matches wins, as intended
    @overload
    def score(  # type: ignore[overload-overlap]
        self, sentences: str, targets: str | None = None, *, normalize: bool = False, max_tokens: int | None = ...
    ) -> float: ...

    @overload
    def score(
        self,
        sentences: Sequence[str],
        targets: Sequence[str] | None = None,
        *,
        normalize: bool = False,
        max_tokens: int | None = ...,
    ) -> list[float]: ...

    def score(
        self,
        sentences: str | Sequence[str],
        targets: str | Sequence[str] | None = None,
        *,
        normalize: bool = False,
        max_tokens: int | None = DEFAULT_MAX_TOKENS,
    ) -> float | list[float]:
        """ln p of each sentence under a CSLM (``targets`` None), or of each target given the
        source sentence of the same position in ``sentences`` under a translation network (an
        inverse network: of each source given its target), in natural log: ``score``'s line
        values. With ``normalize``, divided by each sentence's word count (its predicted tokens
        + 1 for </s>; ``--normalize``). One string in, one float out; a sequence in, a list.

        A sentence or target of more than ``max_tokens`` tokens (``score --max-tokens``: the same
        default; None: no limit) raises ``data.line_limit.LineTooLong`` (a ``ValueError``) naming
        it (``sentences[i]``, ``targets[i]``) before any is scored. A CSLM given ``targets``, a
        translation network not given them, or sequences of different lengths raise
        ``UsageError`` (a ``ValueError``)."""
        windows = self._windows(sentences, targets, False, max_tokens)
        values = [float(v) for window in windows for v in window.values(normalize)]
        return values[0] if isinstance(sentences, str) else values

    @overload
    def word_scores(  # type: ignore[overload-overlap]
        self, sentences: str, targets: str | None = None, *, max_tokens: int | None = ...
    ) -> list[float]: ...

    @overload
    def word_scores(
        self, sentences: Sequence[str], targets: Sequence[str] | None = None, *, max_tokens: int | None = ...
    ) -> list[list[float]]: ...

    def word_scores(
        self,
        sentences: str | Sequence[str],
        targets: str | Sequence[str] | None = None,
        *,
        max_tokens: int | None = DEFAULT_MAX_TOKENS,
    ) -> list[float] | list[list[float]]:
        """The terms of each :meth:`score` (``--word-scores``): the ln p of every predicted
        token (a subword network's units) and, last, of </s>, never normalised; they sum to the
        sentence's ln p within float32 rounding. A right-to-left network's in reading order.
        ``max_tokens`` as in :meth:`score`."""
        terms = [
            [float(t) for t in line]
            for window in self._windows(sentences, targets, True, max_tokens)
            for line in window.terms or []
        ]
        return terms[0] if isinstance(sentences, str) else terms

    def _windows(
        self,
        sentences: str | Sequence[str],
        targets: str | Sequence[str] | None,
        word_scores: bool,
        max_tokens: int | None,
    ) -> Iterator[WindowScores]:
        from ..moses.words import split_words
        from .sentences import scored_windows

        one = isinstance(sentences, str)
        if targets is not None and isinstance(targets, str) != one:
            raise UsageError("give sentences and targets alike: two strings, or two sequences of strings")
        sources = [sentences] if isinstance(sentences, str) else list(sentences)
        given = None if targets is None else [targets] if isinstance(targets, str) else list(targets)
        if self.is_language_model and given is not None:
            raise UsageError(f"{self.path} is a language model (CSLM): it scores sentences alone; give no targets")
        if not self.is_language_model and given is None:
            raise UsageError(
                f"{self.path} is a translation network: it scores sentence pairs; give the targets "
                "(targets[i] the translation of sentences[i])"
            )
        if given is not None and len(given) != len(sources):
            raise UsageError(
                f"{len(sources):,} sentences and {len(given):,} targets: give one target per sentence, in order"
            )
        for text in (*sources, *(given or ())):
            if not isinstance(text, str):
                raise UsageError(f"a sentence is a string of space-separated tokens, not {type(text).__name__}")
        source_tokens = [split_words(s) for s in sources]
        target_tokens = None if given is None else [split_words(t) for t in given]
        for name, side in (("sentences", source_tokens), ("targets", target_tokens or [])):
            for i, tokens in enumerate(side):
                if max_tokens is not None and len(tokens) > max_tokens:
                    raise line_too_long(f"{name}[{i}]", None, len(tokens), max_tokens, option="max_tokens")
        return scored_windows(self.feature, source_tokens, target_tokens, lambda n: f"sentences[{n - 1}]", word_scores)

    def rescore_table(self, in_path: str, out_path: str, **options: Any) -> RescoreSummary:
        """Append this phrase network's column to every line of the Moses table ``in_path``,
        writing ``out_path``: ``rescore_table`` (``rescore-phrase-table``), on this model's
        device unless ``options`` name another. Any other kind of model is refused
        (``CheckpointError``, exit 4), as ``rescore-phrase-table`` refuses it."""
        from ..rescoring.engine import rescore_table

        options.setdefault("device", str(self.device))
        return rescore_table(in_path, out_path, self.path, **options)
