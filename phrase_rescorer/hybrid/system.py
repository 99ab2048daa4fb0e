"""What a tuned hybrid system is, as its bundle (``bundle``) records it: the candidate networks'
settings (:class:`Candidates`), the bundle as read (:class:`Bundle`), the features of the system's
reranked lists in order (:func:`system_layout`), and the versions of ``bundle.json``'s format,
each setting's the oldest whose readers run it as it was tuned (:attr:`Candidates.version`; what
each version adds: ``bundle``'s docstring).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass

from ..moses.nbest import Layout
from ..reranking.merge import MOSES_INDICATOR, REACHED_INDICATOR, added_indicator
from . import recorded_files

#: What ``bundle.json`` says it is, and the versions of its format this code writes and reads.
FORMAT = "phrase-rescorer hybrid bundle"
VERSION = 1
REACHED_ONLY_VERSION = 2
ENSEMBLE_VERSION = 3
MOSES_NBEST_VERSION = 4
ORDERS_VERSION = 5
BATCH_VERSION = 6
READ_VERSIONS = (VERSION, REACHED_ONLY_VERSION, ENSEMBLE_VERSION, MOSES_NBEST_VERSION, ORDERS_VERSION, BATCH_VERSION)
RECORD = "bundle.json"
#: The copies' names in the directory.
INI_COPY = "moses.ini"
WEIGHTS_COPY = "rerank.weights"


@dataclass(frozen=True)
class Candidates:
    """The networks whose beams join the decoder's list (``translate --n-best-list``, ``merge-nbest``)."""

    networks: tuple[str, ...]
    nbest: int
    beam_size: int
    length_alpha: float
    max_length: int | None
    constrained: bool = False  # new candidates decoded by Moses constrained to them (``MosesReached``)
    reached_only: bool = False  # ... and those it cannot produce left out (``merge-nbest --reached-only``)
    ensemble: bool = False  # the networks translate as one ensemble: one beam, one list (``FromNet0``)
    moses_nbest: int | None = None  # the decoder's first N hypotheses of a sentence joined (None: all)
    # with ``ensemble``: the networks (their indices) of each ensemble, one per target order, when
    # they write in both orders (``analysis.translate.order_ensembles``; None: one ensemble of all)
    groups: tuple[tuple[int, ...], ...] | None = None
    # the sentences whose beams were stepped together (``translate --batch-sentences``: groups of N
    # lines from the first, a line's candidates equal to one at a time within float32 rounding)
    batch: int = 1

    @property
    def beams(self) -> tuple[tuple[int, ...], ...]:
        """The networks (their indices) of each list that joins the decoder's, in order: one network
        each, or an ensemble's."""
        if not self.ensemble:
            return tuple((i,) for i in range(len(self.networks)))
        return self.groups if self.groups is not None else (tuple(range(len(self.networks))),)

    @property
    def lists(self) -> int:
        """How many lists join the decoder's: one per network, one per ensemble."""
        return len(self.beams)

    @property
    def version(self) -> int:
        """The oldest format version whose readers run these candidates as they were tuned."""
        if self.batch != 1:
            return BATCH_VERSION
        if self.groups is not None:
            return ORDERS_VERSION
        if self.moses_nbest is not None:
            return MOSES_NBEST_VERSION
        return ENSEMBLE_VERSION if self.ensemble else REACHED_ONLY_VERSION if self.reached_only else VERSION


@dataclass(frozen=True)
class Bundle:
    directory: str
    nbest: int  # the decoder's n-best size (distinct)
    decoder_layout: Layout
    models: tuple[tuple[str, str], ...]  # (feature name, network file), in order
    candidates: Candidates | None
    ngram_lm: str | None
    lm_feature: str

    @property
    def ini(self) -> str:
        return os.path.join(self.directory, INI_COPY)

    @property
    def weights_path(self) -> str:
        return os.path.join(self.directory, WEIGHTS_COPY)

    @property
    def search_group(self) -> int:
        """The input lines whose candidates are searched together (``Candidates.batch``; 1 without
        candidates): a chunk of whole groups translates each line as the whole text does."""
        return self.candidates.batch if self.candidates is not None else 1

    @property
    def layout(self) -> Layout:
        return system_layout(self.decoder_layout, self.candidates, [name for name, _ in self.models])

    def paths(self) -> list[tuple[str, str]]:
        """(what it is, path) of every file the bundle records, ``bundle.json`` first: the files
        an output must not overwrite (``output_paths.check_not_an_input``)."""
        record = os.path.join(self.directory, RECORD)
        with open(record, encoding="utf-8") as f:
            entries = recorded_files.entries(json.load(f))
        return [("bundle's record", record)] + [
            ("bundle's file", os.path.join(self.directory, entry["path"])) for entry in entries
        ]


def system_layout(decoder: Layout, candidates: Candidates | None, names: Sequence[str]) -> Layout:
    """The features of the system's reranked lists, in order (``bundle``'s docstring)."""
    indicators = [] if candidates is None else [MOSES_INDICATOR, *map(added_indicator, range(candidates.lists))]
    if candidates is not None and candidates.constrained:
        indicators.append(REACHED_INDICATOR)
    return (*decoder, *((name, 1) for name in indicators), *((name, 1) for name in names))
