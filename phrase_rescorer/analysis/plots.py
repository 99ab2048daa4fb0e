"""The pictures: score scatter, t-SNE maps with labels, training curves, an experiment's BLEU
(PNG, PDF or SVG files, as the name's suffix says).

matplotlib (Agg backend, no display needed) and scikit-learn come with the optional ``plots``
extra and are imported only here, when a picture is asked for; without them the rest of the
package works and these functions raise :class:`PlotsUnavailable` saying how to install them.
Files are written to a temporary name and renamed, like every other output.

A picture replaces only a picture (``picture_outputs.check_picture_output``, which each command
also runs before any work).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import UsageError
from ..output import AtomicOutput
from ..training.log import Series, TrainingCurves
from .picture_outputs import check_picture_output

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
    picture = check_picture_output(path)
    with AtomicOutput(path, compress=False) as f:
        fig.savefig(f, format=picture, dpi=dpi)
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


@dataclass
class Curve:
    """One line of a panel: its label, points and matplotlib format."""

    label: str | None
    x: list[float]
    y: list[float]
    style: str = "-"
    color: str = "tab:blue"
    width: float = 1.0
    alpha: float = 1.0


@dataclass
class Panel:
    """What one panel of a figure draws: curves, horizontal lines (label, y), a note when empty."""

    title: str
    xlabel: str
    ylabel: str
    curves: list[Curve] = field(default_factory=list)
    hlines: list[tuple[str, float]] = field(default_factory=list)
    log_y: bool = False
    note: str | None = None


def _timed(series: Series) -> tuple[list[float], list[float]]:
    """The points of a series that carry a time (minutes, value)."""
    kept = [(m, v) for m, v in zip(series.minutes, series.values, strict=True) if math.isfinite(m)]
    return [m for m, _ in kept], [v for _, v in kept]


def training_panels(log: TrainingCurves) -> list[Panel]:
    """The panels of ``plot-log``: the training loss and the held-out perplexity, each against the
    step and against the minutes of training (the log's ``elapsed``); the unigram baseline (train,
    train-nmt) and KenLM's perplexity (train-lm --kenlm) beside the network's; and where the run
    logged it (train-nmt --valid-bleu), the held-out pairs' greedy BLEU, a third row."""
    per = "word" if log.kind == "text" else "sentence pair"
    panels: list[Panel] = []
    for axis, xlabel in (("step", "step"), ("minutes", "minutes of training")):

        def points(series: Series, axis: str = axis) -> tuple[list[float], list[float]]:
            return (series.steps, series.values) if axis == "step" else _timed(series)

        smoothed = f", label-smoothed {log.label_smoothing:g}" if log.label_smoothing else ""
        loss = Panel(f"training loss by {axis}{smoothed}", xlabel, f"training loss (-ln p per {per})")
        if log.loss:
            x, y = points(log.loss)
            window = max(1, len(y) // 20)
            dots = "o-" if len(y) <= 30 else "-"  # a short run's few points stay visible
            loss.curves.append(Curve("logged", x, y, style=dots, width=0.6, alpha=0.35 if window > 1 else 1.0))
            if window > 1:
                loss.curves.append(Curve(f"mean of {window}", x, list(moving_average(y, window)), width=1.6))
        else:
            loss.note = "no training-loss records in this log"
        ppl = Panel(f"held-out perplexity by {axis}", xlabel, "per-token perplexity (log scale)", log_y=True)
        if log.valid_ppl:
            x, y = points(log.valid_ppl)
            ppl.curves.append(Curve("network", x, y, style="o-", color="tab:red"))
        if log.unigram_ppl:
            x, y = points(log.unigram_ppl)
            ppl.curves.append(Curve("unigram baseline", x, y, style="--", color="tab:gray"))
        if log.kenlm_ppl is not None:
            ppl.hlines.append(("KenLM", log.kenlm_ppl))
        if not ppl.curves and not ppl.hlines:
            ppl.note = "no held-out perplexity in this log"
        panels += [loss, ppl]
        if log.valid_bleu:
            bleu = Panel(f"held-out BLEU by {axis} (greedy)", xlabel, "tokenized BLEU")
            x, y = points(log.valid_bleu)
            bleu.curves.append(Curve("network", x, y, style="o-", color="tab:blue"))
            panels.append(bleu)
    rows = len(panels) // 2  # losses on the top row, perplexities below, BLEU last
    return [panels[i + j * rows] for i in range(rows) for j in range(2)]


def training_curves(log: TrainingCurves, path: str, dpi: int = 100) -> str:
    """``plot-log``'s picture (:func:`training_panels`), two panels a row."""
    plt = _pyplot()
    from matplotlib.ticker import LogLocator, NullFormatter, ScalarFormatter

    panels = training_panels(log)
    fig, axes = plt.subplots(len(panels) // 2, 2, figsize=(11, 4 * len(panels) // 2))
    for ax, panel in zip(axes.flat, panels, strict=True):
        for c in panel.curves:
            ax.plot(c.x, c.y, c.style, ms=3, lw=c.width, color=c.color, alpha=c.alpha, label=c.label)
        for label, y in panel.hlines:
            ax.axhline(y, ls=":", lw=1.4, color="tab:green", label=f"{label} {y:.1f}")
        if panel.note:
            ax.text(0.5, 0.5, panel.note, ha="center", va="center", transform=ax.transAxes, color="tab:gray")
        if panel.log_y and (panel.curves or panel.hlines):
            ax.set_yscale("log")
            ax.yaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
            ax.yaxis.set_major_formatter(ScalarFormatter())
            ax.yaxis.set_minor_formatter(NullFormatter())
        if sum(1 for c in panel.curves if c.label) + len(panel.hlines) > 1:
            ax.legend()
        ax.set_xlabel(panel.xlabel)
        ax.set_ylabel(panel.ylabel)
        ax.set_title(panel.title, fontsize=10)
        ax.grid(alpha=0.3, which="both")
    fig.tight_layout()
    return _save(fig, path, dpi)


@dataclass
class SystemBleu:
    """One system's BLEU on one set: every run's, their mean and the mean's 95 % interval."""

    label: str
    runs: list[float]
    mean: float | None
    interval: tuple[float, float] | None


def experiment_bleu(report: dict, key: str) -> list[SystemBleu]:
    """The systems of an experiment report (``experiment.report``) on ``key`` ("dev", "test" or
    "test_detok"), in the report's order; a run without that score is left out."""
    out = []
    for entry in report["systems"].values():
        runs = [float(r[key]) for r in entry["runs"] if isinstance(r, dict) and isinstance(r.get(key), (int, float))]
        summary = entry.get(key) or {}
        interval = summary.get("interval_95")
        out.append(
            SystemBleu(
                entry["label"],
                runs,
                float(summary["mean"]) if isinstance(summary.get("mean"), (int, float)) else None,
                (float(interval[0]), float(interval[1])) if isinstance(interval, list) and len(interval) == 2 else None,
            )
        )
    return out


def experiment_chart(report: dict, path: str, dpi: int = 100) -> str:
    """BLEU per system, dev and test side by side: each run a dot, the mean a bar-ended line
    over its 95 % bootstrap interval (over the sentences, every run kept; the mean alone where
    the report gives no interval)."""
    plt = _pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.5))
    for ax, (key, title) in zip(axes, (("dev", "dev (tuned weights)"), ("test", "test")), strict=True):
        systems = experiment_bleu(report, key)
        for i, system in enumerate(systems):
            if system.runs:
                offsets = np.linspace(-0.12, 0.12, len(system.runs)) if len(system.runs) > 1 else np.zeros(1)
                ax.plot(
                    i + offsets, system.runs, "o", ms=5, color="tab:blue", alpha=0.6, label="run" if i == 0 else None
                )
            if system.mean is not None:
                if system.interval is not None:
                    low, high = system.interval
                    error = [[system.mean - low], [high - system.mean]]
                    ax.errorbar(
                        [i + 0.3],
                        [system.mean],
                        yerr=error,
                        fmt="s",
                        ms=6,
                        color="tab:red",
                        capsize=5,
                        label="mean, 95 % interval" if i == 0 else None,
                    )
                else:
                    ax.plot([i + 0.3], [system.mean], "s", ms=6, color="tab:red", label="mean" if i == 0 else None)
        ax.set_xticks(range(len(systems)))
        ax.set_xticklabels([s.label for s in systems], rotation=15, ha="right")
        ax.set_xlim(-0.6, len(systems) - 0.3)
        ax.set_ylabel("BLEU")
        ax.set_title(title, fontsize=10)
        ax.grid(alpha=0.3, axis="y")
        if systems:
            ax.legend(fontsize=8)
    signatures = report.get("signatures") or {}
    if signatures.get("tokenized"):
        fig.suptitle(f"BLEU over MERT runs ({signatures['tokenized']})", fontsize=9)
    fig.tight_layout()
    return _save(fig, path, dpi)
