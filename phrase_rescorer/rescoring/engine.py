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
* An input without a single line is refused (``PhraseTableError``): an empty table is almost
  always the trace of an earlier step that failed, and an empty output would hide it.
* Numbers are formatted by ``moses_format.format_columns`` only.

``rescore_table`` is the one-call entry point for Python pipelines; ``TableRescorer`` is the
engine for callers that bring their own scorer or progress reporting.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import BinaryIO

import numpy as np
import torch

from .. import __version__
from ..data.vocab import tokenize_phrase
from ..devices import resolve_device
from ..model.checkpoint import Checkpoint, CheckpointError, load_checkpoint
from ..moses.numbers import SCORE_FORMATS, ScoreError, format_columns
from ..moses.phrase_table import (
    Entry,
    InputTable,
    PhraseTableError,
    with_appended,
)
from ..output import AtomicOutput, check_distinct_paths
from .scorers import SCORERS, WindowScorer, make_scorer

DTYPES = ("float32",)

#: (lines done, input position in bytes (compressed for gzip), input size or None)
ProgressCallback = Callable[[int, int, "int | None"], None]


@dataclass(frozen=True)
class RescoreOptions:
    score_format: str = "prob"  # prob (what Moses needs), logprob or neglogprob
    normalize: bool = False  # divide log p by (target tokens + 1)
    unk_feature: bool = False  # append the paper's "WP" count column, as exp(n)
    batch_size: int | None = None  # pairs per batch; None: the scorer's default
    window: int = 8192  # lines per window (sorted and batched together)
    window_cap: int = 65536  # a run of one source longer than this is split
    device: str = "auto"  # auto, cpu, cuda, cuda:N
    dtype: str = "float32"
    scorer: str = "prefix"  # a name in scorers.SCORERS

    def __post_init__(self) -> None:
        if self.score_format not in SCORE_FORMATS:
            raise ValueError(f"score format must be one of {SCORE_FORMATS}, not {self.score_format!r}")
        if self.dtype not in DTYPES:
            raise ValueError(f"dtype must be one of {DTYPES}, not {self.dtype!r}")
        if self.scorer not in SCORERS:
            raise ValueError(f"scorer must be one of {sorted(SCORERS)}, not {self.scorer!r}")
        if self.window < 1 or self.window_cap < self.window:
            raise ValueError("window must be >= 1 and window_cap >= window")
        if self.batch_size is not None and self.batch_size < 1:
            raise ValueError("batch_size must be >= 1")

    @property
    def columns(self) -> int:
        """How many columns are appended to every line."""
        return 2 if self.unk_feature else 1


@dataclass
class RescoreSummary:
    lines: int
    seconds: float  # see ``whole_run``
    columns: int  # appended per line
    signature: str  # every setting that changes the numbers
    first_unsorted_line: int | None = None  # first line out of LC_ALL=C source order
    device: str = "cpu"
    whole_run: bool = False  # seconds cover the whole run (model loading included), not only the scoring

    @property
    def pairs_per_second(self) -> float:
        return self.lines / self.seconds if self.seconds > 0 else 0.0

    def closing_line(self) -> str:
        return (
            f"rescored {self.lines:,} lines in {self.seconds:.1f} s "
            f"{'(model loading included' if self.whole_run else '(scoring only'}, "
            f"{self.pairs_per_second:,.0f} pairs/s) on {self.device}; signature: {self.signature}"
        )


def signature(checkpoint: Checkpoint, options: RescoreOptions, scorer: object, device: torch.device) -> str:
    """sacrebleu-style: every setting that changes the bytes of the output column.

    The model, the number format, normalisation, the extra column, precision and version change
    the numbers; the scorer, its batch size, the window, the CPU thread count and the device
    change only the order of float sums, and with it the last digit of a few values in ten
    thousand (README, "Reproducibility"): the same signature on the same machine gives the same
    bytes."""
    scorer_name = next((name for name, cls in SCORERS.items() if type(scorer) is cls), type(scorer).__name__)
    return "|".join(
        (
            f"model:{checkpoint.fingerprint()}",
            f"format:{options.score_format}",
            f"norm:{'tokens+eos' if options.normalize else 'none'}",
            f"wp:{'yes' if options.unk_feature else 'no'}",
            f"dtype:{options.dtype}",
            f"version:{__version__}",
            f"scorer:{scorer_name}",
            f"batch:{getattr(scorer, 'batch_size', 'n/a')}",
            f"window:{options.window}",
            f"threads:{torch.get_num_threads() if device.type == 'cpu' else 'n/a'}",
            f"device:{device}",
        )
    )


class TableRescorer:
    """Stream tables through a scorer; one instance can rescore many tables.

    ``on_progress(lines, position, size)`` is called after every window; ``on_warning(text)``
    at most once per table (input not sorted by source).
    """

    def __init__(
        self,
        checkpoint: Checkpoint,
        options: RescoreOptions | None = None,
        *,
        scorer: WindowScorer | None = None,
        on_progress: ProgressCallback | None = None,
        on_warning: Callable[[str], None] | None = None,
    ):
        self.checkpoint = checkpoint
        self.options = options = options or RescoreOptions()
        self.device = resolve_device(options.device)
        if scorer is None:
            model = checkpoint.build_model(self.device)
            scorer = make_scorer(options.scorer, model, self.device, options.batch_size)
        self.scorer = scorer
        self.on_progress = on_progress
        self.on_warning = on_warning
        self.signature = signature(checkpoint, options, scorer, self.device)
        self._unsorted_at: int | None = None
        self._previous_key: bytes | None = None
        self._in_path = ""

    def rescore(self, in_path: str, out_path: str) -> RescoreSummary:
        check_distinct_paths(in_path, out_path)
        with InputTable(in_path) as table, AtomicOutput(out_path) as out:
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
        self._unsorted_at = None
        self._previous_key = None if previous_source is None else previous_source.encode() + b" |||"
        self._in_path = in_path
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
            columns=self.options.columns,
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
        for entry in table:
            self._check_order(entry)
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

    def _rescore_window(self, window: list[Entry], in_path: str) -> bytes:
        ckpt, opts = self.checkpoint, self.options
        src_vocab, tgt_vocab = ckpt.src_vocab, ckpt.tgt_vocab
        position: dict[str, int] = {}
        sources: list[list[int]] = []
        source_unknown: list[int] = []
        source_index = np.empty(len(window), dtype=np.int64)
        targets: list[list[int]] = []
        target_unknown: list[int] = []
        for i, entry in enumerate(window):
            j = position.get(entry.source)
            if j is None:
                j = position[entry.source] = len(sources)
                tokens = tokenize_phrase(entry.source)
                sources.append(src_vocab.encode(tokens))
                source_unknown.append(src_vocab.count_unknown(tokens) if opts.unk_feature else 0)
            source_index[i] = j
            tokens = tokenize_phrase(entry.target)
            targets.append(tgt_vocab.encode(tokens))
            if opts.unk_feature:
                target_unknown.append(tgt_vocab.count_unknown(tokens))
        logps = np.asarray(self.scorer.score(sources, targets, source_index), dtype=np.float64)
        if logps.shape != (len(window),):
            raise ValueError(f"scorer returned {logps.shape} scores for {len(window)} lines")
        if opts.normalize:
            logps = logps / np.fromiter((len(t) + 1 for t in targets), dtype=np.float64, count=len(targets))
        unk = None
        if opts.unk_feature:
            unk = [source_unknown[int(j)] + n for j, n in zip(source_index, target_unknown, strict=True)]
        try:
            columns = format_columns(logps.tolist(), opts.score_format, unk)
        except ScoreError:
            bad = int(np.flatnonzero(~np.isfinite(logps) | (logps > 1e-6))[0])
            raise CheckpointError(
                f"{ckpt.path or 'model'}: the network gave log p = {float(logps[bad])!r} for "
                f"{in_path}:{window[bad].line_no}; its weights are unusable (diverged training?)"
            ) from None
        return b"".join(with_appended(e, c) for e, c in zip(window, columns, strict=True))


def rescore_table(
    in_path: str,
    out_path: str,
    model_path: str,
    *,
    on_progress: ProgressCallback | None = None,
    on_warning: Callable[[str], None] | None = None,
    **options,
) -> RescoreSummary:
    """Rescore ``in_path`` (a Moses table, .gz or ``-``) into ``out_path`` with the network at
    ``model_path``. ``options`` are the fields of :class:`RescoreOptions`. Example::

        summary = rescore_table("model/phrase-table.gz", "model/phrase-table.rnn.gz", "rnn.pt")
        print(summary.closing_line())
    """
    started = time.perf_counter()
    engine = TableRescorer(
        load_checkpoint(model_path),
        RescoreOptions(**options),
        on_progress=on_progress,
        on_warning=on_warning,
    )
    summary = engine.rescore(in_path, out_path)
    return replace(summary, seconds=time.perf_counter() - started, whole_run=True)
