"""The pictures: score scatter, t-SNE maps with labels, training curves (PNG files).

matplotlib (Agg backend, no display needed) and scikit-learn come with the optional ``plots``
extra and are imported only here, when a picture is asked for; without them the rest of the
package works and these functions raise :class:`PlotsUnavailable` saying how to install them.
Files are written to a temporary name and renamed, like every other output.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import UsageError
from ..output import AtomicOutput
from ..training.log import TrainingCurves

INSTALL_HINT = "install the plotting extra: pip install 'phrase_rescorer[plots]' (make does)"


class PlotsUnavailable(UsageError, RuntimeError):
    """matplotlib or scikit-learn is missing."""


def _pyplot() -> Any:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        raise PlotsUnavailable(f"pictures need matplotlib ({e}); {INSTALL_HINT}") from e
    return plt


def tsne(vectors: np.ndarray, seed: int = 1, perplexity: float = 30.0) -> np.ndarray:
    """A 2-D Barnes-Hut t-SNE projection (N, 2) of ``vectors`` (N, D), as in the paper's figures."""
    try:
        from sklearn.manifold import TSNE
    except ImportError as e:
        raise PlotsUnavailable(f"t-SNE needs scikit-learn ({e}); {INSTALL_HINT}") from e
    n = len(vectors)
    if n < 3:
        raise ValueError(f"t-SNE needs at least 3 points, got {n}")
    perplexity = min(perplexity, (n - 1) / 3.0)  # scikit-learn requires perplexity < n
    model = TSNE(n_components=2, perplexity=perplexity, init="pca", random_state=seed, method="barnes_hut")
    return np.asarray(model.fit_transform(np.asarray(vectors, dtype=np.float64)))


def _save(fig: Any, path: str, dpi: int) -> str:
    with AtomicOutput(path) as f:
        fig.savefig(f, format="png", dpi=dpi)
    _pyplot().close(fig)
    return path


def score_scatter(
    table_log: np.ndarray, network_logp: np.ndarray, path: str, xlabel: str, title: str, dpi: int = 100
) -> str:
    """Network log p against ln(table score), one dot per sampled phrase pair (Fig. 3)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 5))
    ax.scatter(table_log, network_logp, s=4, alpha=0.35, linewidths=0, color="tab:blue")
    ax.set_xlabel(xlabel)
    ax.set_ylabel("network log p(target | source)")
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return _save(fig, path, dpi)


def label_map(
    points: np.ndarray,
    labels: Sequence[str],
    path: str,
    title: str,
    max_labels: int = 120,
    colors: Sequence[float] | None = None,
    color_label: str | None = None,
    dpi: int = 100,
) -> str:
    """A 2-D map of ``points`` with up to ``max_labels`` non-overlapping labels.

    Labels are placed in the order given (put the most interesting points first, such as the
    most frequent words); a label that would overlap one already placed is left out.
    """
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(9, 9))
    if colors is None:
        ax.scatter(points[:, 0], points[:, 1], s=5, color="tab:gray", alpha=0.6, linewidths=0)
    else:
        dots = ax.scatter(points[:, 0], points[:, 1], s=5, c=list(colors), cmap="viridis", alpha=0.6, linewidths=0)
        fig.colorbar(dots, ax=ax, shrink=0.6, label=color_label)
    ax.set_title(title, fontsize=11)
    ax.set_xticks([])
    ax.set_yticks([])
    fig.tight_layout()
    renderer = fig.canvas.get_renderer()
    placed: list[Any] = []
    frame = ax.get_window_extent(renderer)
    for (x, y), label in zip(points, labels, strict=False):
        if len(placed) >= max_labels:
            break
        text = ax.annotate(label, (x, y), xytext=(2, 2), textcoords="offset points", fontsize=7)
        box = text.get_window_extent(renderer).expanded(1.05, 1.15)
        inside = frame.contains(box.x0, box.y0) and frame.contains(box.x1, box.y1)
        if not inside or any(box.overlaps(other) for other in placed):
            text.remove()
        else:
            placed.append(box)
    return _save(fig, path, dpi)


def moving_average(values: Sequence[float], window: int) -> np.ndarray:
    """Mean of each value and the ``window - 1`` before it (fewer at the start)."""
    v = np.asarray(values, dtype=np.float64)
    if window <= 1 or len(v) == 0:
        return v
    c = np.cumsum(np.insert(v, 0, 0.0))
    i = np.arange(1, len(v) + 1)
    lo = np.maximum(i - window, 0)
    return (c[i] - c[lo]) / (i - lo)


def training_curves(log: TrainingCurves, path: str, dpi: int = 100) -> str:
    """Training loss (raw and smoothed) and validation perplexity (with the unigram baseline)
    against the step."""
    plt = _pyplot()
    from matplotlib.ticker import LogLocator, NullFormatter, ScalarFormatter

    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    if log.loss:
        window = max(1, len(log.loss) // 20)
        left.plot(log.loss.steps, log.loss.values, lw=0.6, color="tab:blue", alpha=0.35, label="logged")
        left.plot(
            log.loss.steps,
            moving_average(log.loss.values, window),
            lw=1.6,
            color="tab:blue",
            label=f"mean of {window}" if window > 1 else None,
        )
        if window > 1:
            left.legend()
    left.set_xlabel("step")
    left.set_ylabel("training loss")
    left.set_title("training loss", fontsize=10)
    left.grid(alpha=0.3)
    if log.valid_ppl:
        right.plot(log.valid_ppl.steps, log.valid_ppl.values, "o-", ms=3, lw=1, color="tab:red", label="network")
    if log.unigram_ppl:
        right.plot(
            log.unigram_ppl.steps, log.unigram_ppl.values, "--", lw=1, color="tab:gray", label="unigram baseline"
        )
    if log.valid_ppl or log.unigram_ppl:
        right.legend()
        right.set_yscale("log")
        right.yaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
        right.yaxis.set_major_formatter(ScalarFormatter())
        right.yaxis.set_minor_formatter(NullFormatter())
    right.set_xlabel("step")
    right.set_ylabel("per-token perplexity (log scale)")
    right.set_title("validation perplexity", fontsize=10)
    right.grid(alpha=0.3, which="both")
    fig.tight_layout()
    return _save(fig, path, dpi)
