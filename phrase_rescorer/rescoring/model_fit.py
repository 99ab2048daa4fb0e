"""Does the network fit the table? A warning when a table looks foreign to its model.

A network trained on another language pair, or on the same pair with the sides swapped, scores
any table without complaint, and the decoder then gets a feature that is noise. Training
records two figures of its held-out pairs in the model file (``info``): ``best_valid.mean_logp``,
the mean log p(target|source) per pair, and ``valid_coverage``, the fraction of their source and target
tokens in the shortlists. The first window of a table is measured the same way; the run warns
once when either figure is far off:

* coverage below ``MIN_COVERAGE`` (0.5), or more than ``COVERAGE_DROP`` (0.25) below the
  held-out coverage;
* mean log p more than ``max(LOGP_DROP_NATS, LOGP_DROP_FRACTION * |held-out mean|)`` below the
  held-out mean (10 nats, or half the held-out mean when that is larger: tables also hold the
  training pairs, which the network scores above held-out ones, so a real table is rarely below).

Model files written before these figures were recorded are not checked.
"""

from __future__ import annotations

from typing import Any

MIN_COVERAGE = 0.5
COVERAGE_DROP = 0.25
LOGP_DROP_NATS = 10.0
LOGP_DROP_FRACTION = 0.5


def fit_warning(info: dict[str, Any], coverage: float | None, mean_logp: float, what: str) -> str | None:
    """The warning for a window (``what`` says where it is) whose ``coverage`` and ``mean_logp``
    are far from the held-out figures in ``info``; None when they are close or not recorded."""
    best = info.get("best_valid") or {}
    heldout_logp = best.get("mean_logp")
    heldout_coverage = info.get("valid_coverage")
    problems = []
    if (
        coverage is not None
        and heldout_coverage is not None
        and (coverage < MIN_COVERAGE or coverage < heldout_coverage - COVERAGE_DROP)
    ):
        problems.append(
            f"only {coverage:.1%} of its tokens are in the network's shortlists "
            f"(held-out pairs: {heldout_coverage:.1%})"
        )
    if heldout_logp is not None and mean_logp < heldout_logp - max(
        LOGP_DROP_NATS, LOGP_DROP_FRACTION * abs(heldout_logp)
    ):
        problems.append(
            f"its mean log p(target|source) is {mean_logp:.2f} nats per pair (held-out pairs: {heldout_logp:.2f})"
        )
    if not problems:
        return None
    return (
        f"{what}: the network does not seem to fit this table: {'; '.join(problems)}. Was it trained "
        "on this language pair, with the same source and target sides (and tokenization)?"
    )
