"""A bundle's hybrid system (``bundle``) translating a chunk of lines (:class:`HybridSystem`; a whole
text, chunk by chunk: ``text.translate_file``) through the same functions as the step-by-step
pipeline, so that each line gets the same output:

1. the decoder's distinct n-best list of the chunk (``moses.decoder.decode_nbest``, the bundle's
   moses.ini);
2. with candidate networks, each network's beam as an n-best list, or one list of their ensemble's
   beam (of each target order's ensemble's: ``Candidates.beams``) (``analysis.translate``:
   ``translate_nbest``, ``candidate_lines``), merged into the decoder's (``reranking.merge``, the
   n-gram LM through Moses' ``bin/query`` for the new lines' LM feature, and with a bundle tuned
   on such lists, Moses' own features by constrained decoding: ``moses.constrained``);
3. the feature networks' values appended (``scoring.nbest.append_features``);
4. each sentence's best hypothesis under the bundle's weights (``reranking.choose``).

The chunk's lists live in a temporary directory, removed when the chunk is done, and number the
chunk's sentences from 0: every step reads a sentence's lines alone (the candidate networks a group
of sentences together, ``Candidates.batch``, and a chunk holds whole groups: its size rounded up to
a multiple), so a line's output does not depend on the chunk it falls in. A line of a list that a
step refuses (a malformed line, a hypothesis over ``max_tokens``) is named as the input line of its
sentence (``IN:LINE: the decoder's n-best list of this line: ...``), with the step's exit code.
Memory holds one chunk.
The networks are loaded once, and the LM's ``query`` runs once, for all chunks; the decoder runs
once per chunk, twice with constrained decoding (it loads its tables each time: binarized tables
load in seconds). A decoder's
list that does not number exactly the chunk's sentences (a sentence left out would shift every
later output line) is refused (``DecoderError``, exit 6) before any line of the chunk is written.

An empty line is decoded as the decoder decodes it: its list holds one empty hypothesis (all
features 0), the networks' lists one empty candidate (``candidate_lines``), and its output line
is empty.
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
from collections.abc import Callable, Sequence
from typing import BinaryIO

import torch

from ..analysis.translate import candidate_lines, translate_nbest
from ..lm.kenlm import KenLMSentences
from ..model.checkpoint import Checkpoint, load_checkpoint
from ..model.files import CheckpointError
from ..moses.constrained import ConstrainedDecoder
from ..moses.decoder import DecoderError, decode_nbest
from ..moses.nbest import count_sentences
from ..moses.phrase_table import PhraseTableError
from ..moses.toolkit import MosesToolkit
from ..moses.words import split_words
from ..reranking.choose import output_lines
from ..reranking.merge import merge_nbest
from ..reranking.nbest_features import read_matrix
from ..reranking.origins import Origins, origins
from ..reranking.weights import Weights, read_weights_file, vector
from ..scoring.features import CSLMFeature, TranslationFeature, load_features
from ..scoring.nbest import append_features
from .bundle import check_weights
from .system import Bundle, Candidates
from .text import check_lengths

#: The name of the candidates' own feature in their lists (merge-nbest drops it).
CANDIDATE_FEATURE = "NMT0"
#: A chunk's list of the candidate networks' ensemble (``candidates{I}.nbest``: network I's;
#: ``ensemble{I}.nbest``: the I-th target order's ensemble's).
ENSEMBLE_LIST = "ensemble.nbest"


class HybridSystem:
    """A bundle's system, its networks loaded: :meth:`translate` a chunk of lines. Use as a
    context manager (the LM's ``query`` process)."""

    def __init__(
        self,
        bundle: Bundle,
        toolkit: MosesToolkit,
        *,
        threads: int = 1,
        device: torch.device | str = "cpu",
        max_tokens: int | None = None,
        on_warning: Callable[[str], None] | None = None,
    ) -> None:
        self.bundle, self.toolkit, self.threads, self.device = bundle, toolkit, threads, device
        self.max_tokens, self.on_warning = max_tokens, on_warning
        self.weights: Weights = read_weights_file(bundle.weights_path)
        check_weights(self.weights, bundle.layout)
        self._sources: list[str] = []
        paths = [path for _, path in bundle.models]
        names = [name for name, _ in bundle.models]
        self.features: list[CSLMFeature | TranslationFeature] = load_features(
            paths, names, self._sources, device, on_warning
        )
        networks = bundle.candidates.networks if bundle.candidates is not None else ()
        self.candidates: list[Checkpoint] = [
            load_checkpoint(path, "phrase-rescorer bundle --candidates") for path in networks
        ]
        self.origins: Origins | None = None  # where the chosen lines of merged lists came from, so far
        self._stack = contextlib.ExitStack()
        self.lm: KenLMSentences | None = None
        if bundle.ngram_lm is not None and bundle.candidates is not None:
            self.lm = self._stack.enter_context(KenLMSentences(toolkit.path("bin/query"), bundle.ngram_lm))

    def __enter__(self) -> HybridSystem:
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()

    def translate(self, lines: Sequence[str], name: str = "input", first_line: int = 1) -> list[str]:
        """The system's translation of each of ``lines`` (tokenized text), in order; ``name`` and
        ``first_line`` (the number of ``lines[0]`` in it) name the input in messages."""
        words = [split_words(line) for line in lines]
        check_lengths(words, self.max_tokens, name, first_line)
        sources = [" ".join(tokens) for tokens in words]
        self._sources[:] = sources  # the translation features read the chunk's sources
        with tempfile.TemporaryDirectory(prefix="translate-hybrid-") as work:
            source = os.path.join(work, "source")
            with open(source, "w", encoding="utf-8", newline="\n") as f:
                f.write("".join(line + "\n" for line in lines))
            listed = os.path.join(work, "moses.nbest")
            what = f"{name} lines {first_line}-{first_line + len(lines) - 1}"
            decode_nbest(
                self.toolkit, self.bundle.ini, source, listed, self.bundle.nbest, threads=self.threads, what=what
            )
            try:
                _check_count(count_sentences(listed), len(lines), what, "the decoder's n-best list has")
                if self.candidates:
                    listed = self._merged(work, listed, sources, name, first_line)
                if self.features:
                    scored = os.path.join(work, "scored.nbest")
                    append_features(
                        listed,
                        scored,
                        self.features,
                        sources=sources,
                        source_path=name,
                        max_tokens=self.max_tokens,
                        on_warning=self.on_warning,
                    )
                    listed = scored
                matrix = read_matrix(listed)
            except (PhraseTableError, CheckpointError) as e:
                raise _in_input(e, work, name, first_line, len(lines)) from None
        weights = vector(self.weights, matrix.layout, source=self.weights.path)
        chosen = output_lines(matrix, weights, source=self.weights.path)
        _check_count(len(chosen), len(lines), what, "the reranked lists give")
        found = origins(matrix, chosen)
        if found is not None:
            self.origins = found if self.origins is None else self.origins + found
        return chosen

    def _merged(self, work: str, moses_list: str, sources: list[str], name: str, first_line: int) -> str:
        """The decoder's list with the candidate networks' beams merged in (``merge-nbest``)."""
        settings = self.bundle.candidates
        assert settings is not None
        added = []
        beams: list[Checkpoint | list[Checkpoint]] = [
            [self.candidates[i] for i in group] if settings.ensemble else self.candidates[group[0]]
            for group in settings.beams
        ]
        for i, networks in enumerate(beams):
            path = os.path.join(work, _beam_list(settings, i))
            with open(path, "wb") as out:
                _write_candidates(out, networks, sources, settings, self.device, name, first_line)
            added.append(path)
        merged = os.path.join(work, "merged.nbest")
        reach = None
        if settings.constrained:
            reach = ConstrainedDecoder(self.toolkit, self.bundle.ini, sources, threads=self.threads)
        merge_nbest(
            moses_list,
            merged,
            added,
            lm=self.lm,
            lm_feature=self.bundle.lm_feature,
            reach=reach,
            reached_only=settings.reached_only,
            moses_nbest=settings.moses_nbest,
        )
        return merged


def _write_candidates(
    out: BinaryIO,
    networks: Checkpoint | Sequence[Checkpoint],
    sources: list[str],
    settings: Candidates,
    device: torch.device | str,
    name: str,
    first_line: int,
) -> None:
    """The candidates of the network, or of the ensemble of ``networks``, of ``sources`` (from
    line ``first_line`` of ``name``) as ``translate --n-best-list`` writes them."""
    found_all = translate_nbest(
        networks,
        sources,
        beam_size=settings.beam_size,
        alpha=settings.length_alpha,
        max_length=settings.max_length,
        device=device,
        name=name,
        first_line=first_line,
        batch=settings.batch,
    )
    for sentence, found in enumerate(found_all):
        out.write(b"".join(candidate_lines(sentence, found, settings.nbest, CANDIDATE_FEATURE)))


#: What each of a chunk's lists is, in a message (``candidates{I}.nbest``: see :func:`_list_name`).
_LISTS = {
    "moses.nbest": "the decoder's n-best list",
    ENSEMBLE_LIST: "the candidate networks' ensemble's list",
    "merged.nbest": "the n-best list with the candidates merged in",
    "scored.nbest": "the n-best list with the networks' features",
}


def _beam_list(settings: Candidates, i: int) -> str:
    """The name of a chunk's I-th list of candidates: network I's, the ensemble's, or the I-th
    order's ensemble's."""
    if not settings.ensemble:
        return f"candidates{i}.nbest"
    return ENSEMBLE_LIST if settings.lists == 1 else f"ensemble{i}.nbest"


def _list_name(path: str) -> str:
    base = os.path.basename(path)
    for prefix, what in (("candidates", "candidate network {}'s list"), ("ensemble", "the ensemble {}'s list")):
        if base.startswith(prefix) and base.endswith(".nbest") and base[len(prefix) : -len(".nbest")].isdigit():
            return what.format(base[len(prefix) : -len(".nbest")])
    return _LISTS.get(base, "a list")


def _sentence_of(path: str, line_no: int) -> int | None:
    """The sentence ID of line ``line_no`` of the list ``path`` (None: no such line, or no number)."""
    with open(path, "rb") as f:
        for number, raw in enumerate(f, 1):
            if number == line_no:
                field = raw.split(b"|||", 1)[0].strip()
                return int(field) if field.isdigit() else None
    return None


def _in_input(
    e: PhraseTableError | CheckpointError, work: str, name: str, first_line: int, count: int
) -> PhraseTableError | CheckpointError:
    """The refusal ``e`` of a line of one of a chunk's lists (in ``work``, deleted with it) as a
    refusal of the input ``name``, of the same type (the same exit code): the line of the sentence
    the list's line belongs to (the chunk's ``first_line`` + its sentence ID), else the chunk's
    ``count`` lines; the chunk's lists named in the message by what they are. A network's refusal
    (``CheckpointError``) names a list's line as ``LIST:LINE`` in its message: that becomes
    ``name:LINE`` too."""
    if isinstance(e, CheckpointError):

        def line_of(m: re.Match[str]) -> str:
            sentence = _sentence_of(m.group(1), int(m.group(2)))
            if sentence is None or sentence >= count:
                return f"{name} lines {first_line}-{first_line + count - 1} ({_list_name(m.group(1))})"
            return f"{name}:{first_line + sentence}"

        return type(e)(re.sub("(" + re.escape(work) + r"/[^\s:]+):(\d+)", line_of, str(e)))
    message = re.sub(re.escape(work) + r"/[^\s:]+", lambda m: _list_name(m.group(0)), e.message)
    if os.path.dirname(e.path) != work:
        return type(e)(e.path, e.line_no, message)
    what = _list_name(e.path)
    sentence = None if e.line_no is None else _sentence_of(e.path, e.line_no)
    if sentence is None or sentence >= count:
        return type(e)(name, None, f"lines {first_line}-{first_line + count - 1}, {what}: {message}")
    return type(e)(name, first_line + sentence, f"{what} of this line: {message}")


def _check_count(sentences: int, lines: int, what: str, found: str) -> None:
    """Refuse a chunk's list or output of another number of sentences than the chunk's ``lines``
    (``what``: the input and the chunk's lines; ``found``: what has ``sentences``): a decoder that
    left sentences out of its list would shift every later line (``DecoderError``, exit 6)."""
    if sentences != lines:
        raise DecoderError(
            f"{what}: {found} {sentences:,} sentence(s) for the chunk's {lines:,} lines: the decoder's output is "
            "incomplete; no line of the chunk is written"
        )
