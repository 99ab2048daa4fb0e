"""What a rescoring run is asked and what it reports: ``RescoreOptions`` (checked when made),
``RescoreSummary`` (the closing line) and ``signature``, the sacrebleu-style list of every
setting that changes the output's bytes."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from .. import __version__
from ..data.line_limit import DEFAULT_MAX_TOKENS
from ..errors import UsageError
from ..model.checkpoint import Checkpoint
from ..moses.score_format import SCORE_FORMATS
from .scorers import SCORERS

DTYPES = ("float32", "bfloat16")  # bfloat16: the prefix scorer only, approximate
#: Lines per window, and how many times that a window may grow to end at a source phrase's end.
DEFAULT_WINDOW, WINDOW_EXTENSION = 8192, 8

#: (lines done, input position in bytes (compressed for gzip), input size or None)
ProgressCallback = Callable[[int, int, "int | None"], None]


class OptionError(UsageError):
    """A setting this run cannot take (a usage error: exit 2 on the command line)."""


@dataclass(frozen=True)
class RescoreOptions:
    score_format: str = "prob"  # prob (what Moses needs), logprob or neglogprob
    normalize: bool = False  # divide log p by (target tokens + 1)
    unk_feature: bool = False  # append the paper's "WP" count column, as exp(n), after the networks' columns
    batch_size: int | None = None  # pairs per batch; None: the scorer's default
    window: int = DEFAULT_WINDOW  # lines per window (sorted and batched together)
    window_cap: int = WINDOW_EXTENSION * DEFAULT_WINDOW  # a run of one source longer than this is split
    device: str = "auto"  # auto, cpu, cuda, cuda:N
    dtype: str = "float32"
    scorer: str = "prefix"  # a name in scorers.SCORERS
    max_tokens: int | None = DEFAULT_MAX_TOKENS  # the longest phrase scored (data.line_limit); None: no limit

    def __post_init__(self) -> None:
        if self.score_format not in SCORE_FORMATS:
            raise ValueError(f"score format must be one of {SCORE_FORMATS}, not {self.score_format!r}")
        if self.dtype not in DTYPES:
            raise ValueError(f"dtype must be one of {DTYPES}, not {self.dtype!r}")
        if self.dtype != "float32" and self.scorer != "prefix":
            raise OptionError(f"dtype {self.dtype} works with the prefix scorer only, not {self.scorer!r}")
        if self.scorer not in SCORERS:
            raise ValueError(f"scorer must be one of {sorted(SCORERS)}, not {self.scorer!r}")
        if self.window < 1 or self.window_cap < self.window:
            raise ValueError("window must be >= 1 and window_cap >= window")
        if self.batch_size is not None and self.batch_size < 1:
            raise ValueError("batch_size must be >= 1")
        if self.max_tokens is not None and self.max_tokens < 1:
            raise ValueError("max_tokens must be >= 1 (None: no limit)")

    @property
    def columns(self) -> int:
        """How many columns are appended to every line by one network."""
        return added_columns(1, self)


def added_columns(networks: int, options: RescoreOptions) -> int:
    """How many columns are appended to every line: one per network, and the WP count."""
    return networks + (1 if options.unk_feature else 0)


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


def signature(
    checkpoints: Checkpoint | Sequence[Checkpoint], options: RescoreOptions, scorer: object, device: torch.device
) -> str:
    """sacrebleu-style: every setting that changes the bytes of the output column(s).

    The networks (each column's, in order) and their directions, the number format,
    normalisation, the extra column, precision and version change the numbers; the scorer, its
    batch size, the window, the CPU thread count and the device change only the order of float
    sums, and with it the last digit of a few values in ten thousand (docs/reproducibility.md):
    the same signature on the same machine gives the same bytes."""
    networks = [checkpoints] if isinstance(checkpoints, Checkpoint) else list(checkpoints)
    scorer_name = next((name for name, cls in SCORERS.items() if type(scorer) is cls), type(scorer).__name__)
    return "|".join(
        (
            f"model:{'+'.join(c.fingerprint() for c in networks)}",
            f"direction:{'+'.join(c.direction for c in networks)}",
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
