"""The experiment's report: per system and run the BLEU scores, per system mean ± sd and the
mean's 95 % bootstrap interval over the sentences, per system against the baseline the
difference of means and its significance; as JSON (read back by :func:`read_report`) and as a
table shaped like Table 1 of Cho et al. (2014)."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..errors import InputError
from .bleu import BleuScore
from .significance import approximate_randomization, bootstrap_interval, paired_bootstrap
from .systems import System


@dataclass
class RunScores:
    meta: dict  # the run's result.json: seed, MERT's dev BLEU per iteration, times
    dev: BleuScore  # tokenized, tuned weights
    test: BleuScore  # tokenized
    test_detok: BleuScore  # detokenized output against the raw reference
    #: a reranked run's dev BLEU with each sentence chosen by weights tuned on the other half
    #: (``reranking.heldout``); None for a decoder run (MERT tunes on the whole dev set)
    dev_heldout: BleuScore | None = None


def _summary(values: Sequence[float]) -> dict:
    a = np.asarray(values, dtype=np.float64)
    return {
        "mean": round(float(a.mean()), 4),
        "sd": round(float(a.std(ddof=1)) if len(a) > 1 else 0.0, 4),
        "runs": len(a),
    }


def build_report(
    systems: Sequence[System],
    scores: dict[str, list[RunScores]],
    *,
    settings_json: dict,
    raw_reference: bool,
    trials: int = 10000,
    seed: int = 0,
) -> dict:
    """The JSON report of whatever runs are finished (a system without runs is listed empty)."""
    out: dict = {"settings": settings_json, "systems": {}, "comparisons": {}, "signatures": {}}
    for system in systems:
        runs = scores.get(system.key, [])
        entry: dict = {"label": system.label, "runs": []}
        for r in runs:
            entry["runs"].append(
                {
                    **r.meta,
                    "dev": r.dev.to_json()["bleu"],
                    "test": r.test.to_json()["bleu"],
                    "test_detok": r.test_detok.to_json()["bleu"],
                    **({"dev_heldout": r.dev_heldout.to_json()["bleu"]} if r.dev_heldout is not None else {}),
                }
            )
        if runs:
            heldout = all(r.dev_heldout is not None for r in runs)  # reranked runs
            keys = ["dev", "test", "test_detok"] + (["dev_heldout"] if heldout else [])
            for key in keys:
                entry[key] = _summary([getattr(r, key).score for r in runs])
                if len({getattr(r, key).stats.shape for r in runs}) == 1:  # the same sentences in every run
                    stats = np.stack([getattr(r, key).stats for r in runs])
                    low, high = bootstrap_interval(stats, samples=max(1, trials // 10), seed=seed)
                    entry[key]["interval_95"] = [round(low, 4), round(high, 4)]
            out["signatures"] = {
                "tokenized": runs[0].test.signature,
                "detokenized": runs[0].test_detok.signature,
                "detokenized_reference": "raw reference"
                if raw_reference
                else "tokenized reference, detokenized with sacremoses",
            }
        out["systems"][system.key] = entry
    base = scores.get(systems[0].key, [])
    for system in systems[1:]:
        runs = scores.get(system.key, [])
        n = min(len(base), len(runs))
        if n == 0:
            continue
        comparison: dict = {"runs": n}
        for key, attr in (("test", "test"), ("test_detok", "test_detok")):
            a = np.stack([getattr(r, attr).stats for r in base[:n]])
            b = np.stack([getattr(r, attr).stats for r in runs[:n]])
            ar = approximate_randomization(a, b, trials=trials, seed=seed)
            boot = paired_bootstrap(a, b, samples=max(1, trials // 10), seed=seed)
            comparison[key] = {"approximate_randomization": ar.to_json(), "paired_bootstrap": boot.to_json()}
        out["comparisons"][system.key] = comparison
    return out


#: The report's file in an experiment's --out directory.
REPORT_NAME = "experiment.json"


class ReportError(InputError):
    """An --out directory without a readable report; the message names the file."""


def read_report(out_dir: str) -> dict:
    """The report of the experiment in ``out_dir`` (``experiment.json``, rewritten after every
    finished run), checked for what the pictures read: systems, each with a label and runs."""
    path = os.path.join(out_dir, REPORT_NAME)
    try:
        with open(path, encoding="utf-8") as f:
            report = json.load(f)
    except FileNotFoundError:
        raise ReportError(f"{path}: no such file: give an experiment's --out directory") from None
    except (ValueError, UnicodeDecodeError) as e:
        raise ReportError(f"{path}: not an experiment report ({e})") from None
    systems = report.get("systems") if isinstance(report, dict) else None
    if not isinstance(systems, dict) or not all(
        isinstance(e, dict) and isinstance(e.get("label"), str) and isinstance(e.get("runs"), list)
        for e in systems.values()
    ):
        raise ReportError(f"{path}: not an experiment report (no systems with a label and runs)")
    return report


def _cell(summary: dict | None) -> str:
    if not summary:
        return "-"
    return f"{summary['mean']:.2f} ± {summary['sd']:.2f}"


def format_table(report: dict) -> str:
    """Systems × (dev, test, detokenized test), mean ± sd over runs, Δ test and p vs the baseline;
    the system column as wide as its longest name, so that the columns stay aligned."""
    width = max([18] + [len(entry["label"]) for entry in report["systems"].values()])
    heldout = any("dev_heldout" in entry for entry in report["systems"].values())  # reranked rows
    header = (
        f"{'system':<{width}} {'runs':>4}  {'dev BLEU':>14}  "
        + (f"{'dev (held out)':>14}  " if heldout else "")
        + f"{'test BLEU':>14}  {'test (detok)':>14}  {'Δ test':>7}  {'p':>7}"
    )
    lines = [header, "-" * len(header)]
    base_runs = len(next(iter(report["systems"].values()))["runs"]) if report["systems"] else 0
    partial: list[str] = []  # the systems whose Δ and p are not over every run shown
    for key, entry in report["systems"].items():
        comparison = report["comparisons"].get(key)
        delta = p = ""
        if comparison:
            ar = comparison["test"]["approximate_randomization"]
            delta, p = f"{ar['difference']:+.2f}", f"{ar['p_value']:.4f}"
            if comparison["runs"] != len(entry["runs"]) or comparison["runs"] != base_runs:
                delta += "*"
                partial.append(f"{entry['label']} ({comparison['runs']})")
        runs = len(entry["runs"])
        lines.append(
            f"{entry['label']:<{width}} {runs:>4}  {_cell(entry.get('dev')):>14}  "
            + (f"{_cell(entry.get('dev_heldout')):>14}  " if heldout else "")
            + f"{_cell(entry.get('test')):>14}  {_cell(entry.get('test_detok')):>14}  {delta:>7}  {p:>7}"
        )
    signatures = report.get("signatures") or {}
    trials = next((c["test"]["approximate_randomization"]["trials"] for c in report["comparisons"].values()), None)
    lines.append("")
    lines.append("BLEU: mean ± sd over the MERT runs; Δ test: difference of mean test BLEU to the baseline;")
    if partial:
        lines.append(
            "*: over the runs both systems have, compared in pairs (run 1 with run 1, ...), not the means"
            f" shown: {', '.join(partial)}."
        )
    if trials:
        lines.append(f"p: approximate randomization over test sentences and runs ({trials:,} trials, two-sided).")
    settings = report.get("settings") or {}
    if settings.get("lm") or settings.get("nmt"):
        optimizer = settings.get("rerank_optimizer", "mert")
        lines.append(
            f"Reranked rows (+ CSLM, + NMT): weights tuned on the dev lists by {optimizer}"
            " (their dev BLEU is the tuning set's)."
        )
        if settings.get("network_candidates"):
            size = settings["network_candidates"]
            whose = (
                f"the {size} best (beam {size}) of each target order's ensemble of the forward --nmt networks"
                if settings.get("ensemble_candidates")
                else f"each forward --nmt network's {size} best (beam {size})"
            )
            first = settings.get("candidates_moses_nbest")
            moses = f"Moses' {first} best" if first else "Moses' lists"
            lines.append(
                f"with the networks' candidates: {moses} joined by {whose}"
                + (", only those Moses can produce." if settings.get("reached_only") else ".")
            )
        if heldout:
            lines.append(
                "dev (held out): each dev sentence chosen by weights tuned on the other half (2 folds):"
                " compare reranked rows by it."
            )
        for names in settings.get("rerank_choose_leave_out") or []:
            lines.append(
                f"each reranked run tried leaving out those of {' '.join(names)} its list has, and kept the set of"
                " the highest held-out dev BLEU (which also reads high by that choice)."
            )
    if signatures:
        lines.append(f"tokenized: {signatures['tokenized']}")
        lines.append(f"detokenized: {signatures['detokenized']} ({signatures['detokenized_reference']})")
    return "\n".join(lines)
