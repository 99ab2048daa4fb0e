"""The streaming rescoring engine: a Moses table in, the same table plus the RNN column(s) out.

    InputTable -> windows of lines -> token ids -> WindowScorer -> moses_format -> AtomicOutput

* Streaming: at most one window of lines (``window`` lines, ``window_cap`` at the very most)
  is held in memory, whatever the size of the table.
* Nothing lost: every input line is written, in input order, byte for byte, with the new
  column(s) inserted at the end of its scores field (``phrase_table.with_appended``). Phrases
  are never truncated, whatever their length.
* Each distinct source phrase of a window is encoded once. Tables are grouped by source, so a
  window is closed only where the source changes, unless one source has more than
  ``window_cap`` lines in a row (then the run is split and its source encoded once per part).
* Moses sorts tables with LC_ALL=C and its binarizers need that order; an input out of that
  order is still scored in its own order, with one warning.
* A regular file is read twice: every line is checked first (``check_lines``, under 1 % of the
  scoring time), so that a bad line is refused before any is scored; standard input and pipes
  are checked as they stream.
* A phrase of more than ``max_tokens`` tokens (``--max-tokens``, ``data.line_limit``) is refused
  with the other bad lines: a network's memory grows with the length of what it reads.
* An input without a single line is refused (``PhraseTableError``): an empty table is almost
  always the trace of an earlier step that failed, and an empty output would hide it.
* Every line's scores field is checked (``moses.score_fields``): the first line's score count,
  no negative score, and no table whose last column(s) already are the ones to be added.
* Numbers are formatted by ``moses.score_format.format_lines`` only.
* Several networks (``rescore -m A -m B``): one column each, in the order given, from one read
  of the table; each in its own direction (``network_column``: an inverse network's distinct
  targets are encoded once per window). The WP count, when asked, comes once, after them all.

``rescore_table`` is the one-call entry point for Python pipelines; ``TableRescorer`` is the
engine for callers that bring their own scorer or progress reporting. Its settings, its summary
and the signature of a run are in ``options``.
"""

from __future__ import annotations

import errno
import itertools
import os
import stat
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import BinaryIO

import numpy as np
import torch

from ..compression import rereadable
from ..data.line_limit import DEFAULT_MAX_TOKENS, check_phrases
from ..data.vocab import shortlist_coverage
from ..devices import resolve_device
from ..model.checkpoint import Checkpoint, load_checkpoint, unusable_weights
from ..model.kinds import ModelFile, check_kind, path_of
from ..moses.phrase_table import Entry, PhraseTableError, PhraseTableOSError, with_appended
from ..moses.score_fields import ScoreFieldCheck, already_rescored
from ..moses.score_format import ScoreError, format_lines
from ..moses.table_kind import checked_entries
from ..moses.table_reader import InputTable
from ..output import AtomicOutput, check_distinct_paths, check_output_path
from .model_fit import fit_warning
from .network_column import NetworkColumn, WindowInputs, per_token
from .options import OptionError, ProgressCallback, RescoreOptions, RescoreSummary, added_columns, signature
from .scorers import WindowScorer, make_scorer


class TableRescorer:
    """Stream tables through one or more networks' scorers; one instance can rescore many tables.

    ``checkpoint`` is one network or a sequence of them: one column each, in that order, in
    each network's direction (``network_column``), then the WP count (``unk_feature``: words
    outside the first network's shortlists). ``scorer`` (one per network) replaces the ones
    built from the options. ``on_progress(lines, position, size)`` is called after every window;
    ``on_warning(text)`` at most once per table and warning (input not sorted by source, a
    network foreign to the table).
    """

    def __init__(
        self,
        checkpoint: Checkpoint | Sequence[Checkpoint],
        options: RescoreOptions | None = None,
        *,
        scorer: WindowScorer | Sequence[WindowScorer] | None = None,
        on_progress: ProgressCallback | None = None,
        on_warning: Callable[[str], None] | None = None,
    ):
        checkpoints = [checkpoint] if isinstance(checkpoint, Checkpoint) else list(checkpoint)
        if not checkpoints:
            raise OptionError("no network to rescore with")
        scorers = [scorer] if scorer is None or isinstance(scorer, WindowScorer) else list(scorer)
        if scorer is not None and len(scorers) != len(checkpoints):
            raise OptionError(f"{len(scorers)} scorers for {len(checkpoints)} networks")
        self.options = options = options or RescoreOptions()
        self.device = resolve_device(options.device)
        self.networks: list[NetworkColumn] = []
        for ckpt, given in zip(checkpoints, scorers if scorer is not None else [None] * len(checkpoints), strict=True):
            if options.dtype != "float32" and ckpt.arch is not None:
                raise OptionError(
                    f"{ckpt.path or 'model'}: --dtype {options.dtype} is for the cho2014 network's "
                    f"prefix scorer only; this is a {ckpt.arch.name} network: score it in float32"
                )
            if given is None:
                given = make_scorer(
                    options.scorer,
                    ckpt.build_model(self.device),
                    self.device,
                    options.batch_size,
                    getattr(torch, options.dtype),
                )
            self.networks.append(NetworkColumn(ckpt, given))
        self.checkpoint, self.scorer = checkpoints[0], self.networks[0].scorer  # the first network's
        self.on_progress = on_progress
        self.on_warning = on_warning
        self.signature = signature(checkpoints, options, self.scorer, self.device)
        self._unsorted_at: int | None = None
        self._previous_key: bytes | None = None
        self._in_path = ""
        self._fit_checked = False
        self._fields = ScoreFieldCheck("")
        self._first_window = True

    @property
    def columns(self) -> int:
        """How many columns are appended to every line."""
        return added_columns(len(self.networks), self.options)

    def rescore(self, in_path: str, out_path: str) -> RescoreSummary:
        for network in self.networks:
            check_distinct_paths(in_path, out_path, model=network.checkpoint.path)
        if rereadable(in_path):  # a bad line refused before the first is scored
            check_lines(in_path, self.options.max_tokens)
        with InputTable(in_path) as table, AtomicOutput(out_path, on_warning=self.on_warning) as out:
            summary = self.rescore_stream(table, out, in_path)
            if summary.lines == 0:  # most likely an earlier step that failed: never pass it on silently
                raise PhraseTableError(in_path, None, "empty phrase table: no lines to rescore")
            return summary

    def rescore_stream(
        self, table: InputTable, out: BinaryIO, in_path: str, previous_source: str | None = None
    ) -> RescoreSummary:
        """Rescore the entries of an opened ``table`` into ``out``. ``table`` may be one part of
        a larger table (``sharding.TablePart``, starting where a window starts);
        ``previous_source`` is then the source phrase of the line before its first (for the
        order check)."""
        started = time.perf_counter()
        self._fit_checked = False
        self._unsorted_at = None
        self._previous_key = None if previous_source is None else previous_source.encode() + b" |||"
        self._in_path = in_path
        self._fields = ScoreFieldCheck(in_path)
        self._first_window = True
        lines = 0
        size = table.size()
        for window in self._windows(table):
            out.write(self._rescore_window(window, in_path))
            lines += len(window)
            if self.on_progress is not None:
                self.on_progress(lines, table.position(), size)
        return RescoreSummary(
            lines=lines,
            seconds=time.perf_counter() - started,
            columns=self.columns,
            signature=self.signature,
            first_unsorted_line=self._unsorted_at,
            device=str(self.device),
        )

    # --- windows -------------------------------------------------------------------------------

    def _windows(self, table: InputTable):
        """Lists of entries: ``window`` lines, extended to the end of the current source's run
        (at most ``window_cap`` lines)."""
        size, cap = self.options.window, self.options.window_cap
        window: list[Entry] = []
        check_fields = self._fields
        limit = self.options.max_tokens
        for entry in checked_entries(table, self._in_path):
            self._check_order(entry)
            check_fields(entry)
            check_phrases(self._in_path, entry, limit)
            if len(window) >= size and (entry.source != window[-1].source or len(window) >= cap):
                yield window
                window = []
            window.append(entry)
        if window:
            yield window

    def _check_order(self, entry: Entry) -> None:
        """Warn once if sources are not in LC_ALL=C order (as ``sort`` orders whole lines)."""
        if self._unsorted_at is not None:
            return
        key = entry.source.encode() + b" |||"
        if self._previous_key is not None and key < self._previous_key:
            self._unsorted_at = entry.line_no
            if self.on_warning is not None:
                self.on_warning(
                    f"{self._in_path}:{entry.line_no}: the input is not sorted by source phrase (LC_ALL=C); "
                    "lines are scored and written in input order, but Moses' binarizers "
                    "(processPhraseTableMin, CreateOnDiskPt) need a sorted table: "
                    "sort it with LC_ALL=C sort before binarizing"
                )
        self._previous_key = key

    # --- one window ----------------------------------------------------------------------------

    def _check_fit(
        self, window: list[Entry], network: NetworkColumn, inputs: WindowInputs, logps: np.ndarray, in_path: str
    ) -> None:
        """Warn (once per table and network) when the first window looks foreign to the network
        (``model_fit``)."""
        if self.on_warning is None:
            return
        coverage = shortlist_coverage(_flat([inputs.reads[j] for j in inputs.index]), _flat(inputs.predicts))
        where = f"{in_path}:{window[0].line_no}-{window[-1].line_no}"
        warning = fit_warning(network.checkpoint.info, coverage, float(logps.mean()), where)
        if warning is not None:
            self.on_warning(warning)

    def _rescore_window(self, window: list[Entry], in_path: str) -> bytes:
        opts = self.options
        columns: list[list[float]] = []
        unk = None
        for k, network in enumerate(self.networks):
            inputs = network.inputs(window, count_unknown=opts.unk_feature and k == 0)
            logps = network.log_probs(inputs)
            if not self._fit_checked:
                self._check_fit(window, network, inputs, logps, in_path)
            if opts.normalize:
                logps = per_token(logps, inputs)
            unk = inputs.unknown if k == 0 else unk
            columns.append(logps.tolist())
        self._fit_checked = True
        try:
            text = format_lines(columns, opts.score_format, unk)
        except ScoreError:
            k, bad = next(
                (k, i)
                for k, column in enumerate(columns)
                for i, lp in enumerate(column)
                if not (np.isfinite(lp) and lp <= 1e-6)
            )
            ckpt = self.networks[k].checkpoint
            raise unusable_weights(ckpt.path, columns[k][bad], f"{in_path}:{window[bad].line_no}") from None
        if self._first_window:
            self._first_window = False
            if already_rescored(window, text):
                which = "this network" if len(self.networks) == 1 else "these networks"
                raise PhraseTableError(
                    in_path,
                    None,
                    f"already rescored: on lines {window[0].line_no}-{window[-1].line_no} the "
                    f"last {len(text[0].split())} score(s) are exactly the column(s) {which} "
                    "would add; rescore the original table, not this one",
                )
        return b"".join(with_appended(e, c) for e, c in zip(window, text, strict=True))


def check_lines(in_path: str, max_tokens: int | None = DEFAULT_MAX_TOKENS) -> int:
    """Read every line of the table at ``in_path`` as rescoring reads it (``checked_entries``,
    ``ScoreFieldCheck``: the line, its fields, its score count; ``data.line_limit.check_phrases``:
    no phrase of more than ``max_tokens`` tokens) without scoring it, and return their number; an
    empty table is refused. About 230,000 lines/s on one core: 4 s of the
    bundled 839,351-line table, against 437 s to score it."""
    check = ScoreFieldCheck(in_path)
    lines = 0
    with InputTable(in_path) as table:
        for entry in checked_entries(table, in_path):
            check(entry)
            check_phrases(in_path, entry, max_tokens)
            lines += 1
    if lines == 0:
        raise PhraseTableError(in_path, None, "empty phrase table: no lines to rescore")
    return lines


def load_checkpoints(model_path: str | ModelFile | Sequence[str | ModelFile]) -> list[Checkpoint]:
    """The network(s) of a run, loaded in the order given (each file read unless given read,
    ``kinds.open_model``): phrase networks (of either direction), a translation network
    (train-nmt) or a CSLM refused with what it is for."""
    paths = [model_path] if isinstance(model_path, str | ModelFile) else model_path
    return [load_checkpoint(check_kind(p, "rescore-phrase-table --model", ("phrase",))) for p in paths]


def _flat(id_lists: list[list[int]]) -> np.ndarray:
    return np.fromiter(itertools.chain.from_iterable(id_lists), dtype=np.int64)


def check_paths(
    in_path: str, out_path: str, model_path: str | ModelFile | Sequence[str | ModelFile] | None = None
) -> None:
    """Refuse, before the model is loaded, an input that cannot be opened and an output that
    cannot be written or is the input or a model file itself (``PhraseTableOSError``,
    ``OutputError``)."""
    for model in [model_path] if model_path is None or isinstance(model_path, str | ModelFile) else model_path:
        check_distinct_paths(in_path, out_path, model=path_of(model) if model is not None else None)
    check_output_path(out_path)
    if in_path == "-":
        if sys.stdin is None:
            raise PhraseTableOSError(in_path, None, "cannot read: standard input is closed")
        return
    try:
        if stat.S_ISFIFO(os.stat(in_path).st_mode):
            # never opened here: opening and closing it would release a waiting writer, whose
            # data would then be lost, and the real open would wait for another forever
            if not os.access(in_path, os.R_OK):
                raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), in_path)
            return
        # without reading a byte or waiting for anything
        os.close(os.open(in_path, os.O_RDONLY | os.O_NONBLOCK))
        if os.path.isdir(in_path):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), in_path)
    except OSError as exc:
        raise PhraseTableOSError(in_path, None, f"cannot read: {exc.strerror or exc}") from exc


def rescore_table(
    in_path: str,
    out_path: str,
    model_path: str | ModelFile | Sequence[str | ModelFile],
    *,
    on_progress: ProgressCallback | None = None,
    on_warning: Callable[[str], None] | None = None,
    **options,
) -> RescoreSummary:
    """Rescore ``in_path`` (a Moses table, .gz or ``-``) into ``out_path`` with the network at
    ``model_path`` (or the networks, one column each, in order; each file read unless given
    read, ``kinds.open_model``). ``options`` are the fields of
    :class:`RescoreOptions`. Example::

        summary = rescore_table("model/phrase-table.gz", "model/phrase-table.rnn.gz", "rnn.pt")
        print(summary.closing_line())
    """
    check_paths(in_path, out_path, model_path)
    started = time.perf_counter()
    engine = TableRescorer(
        load_checkpoints(model_path), RescoreOptions(**options), on_progress=on_progress, on_warning=on_warning
    )
    summary = engine.rescore(in_path, out_path)
    return replace(summary, seconds=time.perf_counter() - started, whole_run=True)
