"""The Moses number convention: the one place that turns a log-probability into a table column.

Moses reads every dense score x of a phrase table as a 32-bit float and uses max(ln x, -100) as
the feature (LoaderStandard.cpp, TransformScore / FloorScore). So, for the decoder to see the
feature log p(target|source), the column must hold the probability exp(log p(target|source)): the default
``prob`` format. A raw log-probability would be a negative number, whose log is NaN inside the
decoder, silently.

Formats:

``prob``        exp(log p), written with 9 significant digits. Values of log p below -100 are
                written as exp(-100) = 3.72e-44: Moses floors every log score at -100, so the
                decoder sees -100 either way, and the column is never 0, ``inf`` or ``nan``.
``logprob``     log p itself, for consumers other than the Moses decoder.
``neglogprob``  -log p (a cost).

Precision: 9 significant digits represent every float32 exactly and a double to 1e-9 relative,
so the text adds no error of its own; Moses' float32 parsing then moves the feature by at most
6e-8 absolute (1e-6 relative for any |log p| above 0.06).

A count n (the paper's out-of-vocabulary "WP" feature) is written as exp(n), so that Moses sees n;
Moses itself writes 2.718 for a count of 1. Counts above ``COUNT_CAP`` = 88 are written as
exp(88) = 1.65e38: Moses parses the column as a 32-bit float, whose largest value is 3.4e38 =
exp(88.72), so a larger exp(n) would load as ``inf`` (and make the decoder's total scores NaN);
beyond n = 709, exp(n) does not even fit a double. Checked with the real decoder: a column of
exp(88) shows as 88 in its n-best list, one of exp(89.5) as ``inf``. Only pairs with more than 88
out-of-shortlist tokens reach the cap; the decoder sees 88 for them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from ..errors import ModelError

SCORE_FORMATS = ("prob", "logprob", "neglogprob")

#: Moses floors every log score at this value (LOWEST_SCORE in moses/TypeDef.h).
MOSES_LOG_FLOOR = -100.0
#: The largest count written as exp(n): exp(88) still fits a float32 (max 3.4e38 = exp(88.72)).
COUNT_CAP = 88


class ScoreError(ModelError):
    """A score that cannot be written (NaN or infinite log-probability)."""


def score_value(logp: float, fmt: str = "prob") -> float:
    """The number to write for a log-probability in the given format."""
    if not math.isfinite(logp) or logp > 1e-6:
        raise ScoreError(f"log-probability {logp!r} is not a finite value <= 0")
    logp = min(logp, 0.0)
    if fmt == "prob":
        return math.exp(max(logp, MOSES_LOG_FLOOR))
    if fmt == "logprob":
        return logp
    if fmt == "neglogprob":
        return -logp
    raise ValueError(f"unknown score format {fmt!r}; expected one of {SCORE_FORMATS}")


def format_number(x: float) -> str:
    """9 significant digits, plain or exponent notation, as Moses and sscanf read them."""
    return f"{x:.9g}"


def count_value(n: int) -> float:
    """exp(n): the column for a count feature, so that Moses' ln gives back n (n capped at
    ``COUNT_CAP``, so that the column stays a finite float32)."""
    return math.exp(min(n, COUNT_CAP))


def format_lines(
    columns: Sequence[Sequence[float]], fmt: str = "prob", unk_counts: Sequence[int] | None = None
) -> list[bytes]:
    """The appended text of each line for several networks' columns (``columns[k][i]``: network
    k's log p on line i), in that order, then exp(n) when counts are given."""
    texts = [[format_number(score_value(lp, fmt)) for lp in column] for column in columns]
    if unk_counts is not None:
        texts.append([format_number(count_value(n)) for n in unk_counts])
    return [" ".join(values).encode() for values in zip(*texts, strict=True)]


def feature_from_column(text: str) -> float:
    """What the Moses decoder makes of a column value: max(ln(float32(x)), -100).

    Used by tests and by ``moses-ini`` checks to reason about what the decoder will see.
    """
    import numpy as np

    x = float(np.float32(float(text)))
    if x <= 0.0:
        return MOSES_LOG_FLOOR if x == 0.0 else math.nan
    return max(math.log(x), MOSES_LOG_FLOOR)
