"""The experiment's report: per system and run the BLEU scores, per system mean ± sd, per
system against the baseline the difference of means and its significance; as JSON and as a
table shaped like Table 1 of Cho et al. (2014)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .bleu import BleuScore
from .significance import approximate_randomization, paired_bootstrap
from .systems import System


@dataclass
class RunScores:
    meta: dict  # the run's result.json: seed, MERT's dev BLEU per iteration, times
    dev: BleuScore  # tokenized, tuned weights
    test: BleuScore  # tokenized
    test_detok: BleuScore  # detokenized output against the raw reference


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
                }
            )
        if runs:
            for key in ("dev", "test", "test_detok"):
                entry[key] = _summary([getattr(r, key).score for r in runs])
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


def _cell(summary: dict | None) -> str:
    if not summary:
        return "-"
    return f"{summary['mean']:.2f} ± {summary['sd']:.2f}"


def format_table(report: dict) -> str:
    """Systems × (dev, test, detokenized test), mean ± sd over runs, Δ test and p vs the baseline;
    the system column as wide as its longest name, so that the columns stay aligned."""
    width = max([18] + [len(entry["label"]) for entry in report["systems"].values()])
    header = (
        f"{'system':<{width}} {'runs':>4}  {'dev BLEU':>14}  {'test BLEU':>14}  {'test (detok)':>14}  "
        f"{'Δ test':>7}  {'p':>7}"
    )
    lines = [header, "-" * len(header)]
    for key, entry in report["systems"].items():
        comparison = report["comparisons"].get(key)
        delta = p = ""
        if comparison:
            ar = comparison["test"]["approximate_randomization"]
            delta, p = f"{ar['difference']:+.2f}", f"{ar['p_value']:.4f}"
        runs = len(entry["runs"])
        lines.append(
            f"{entry['label']:<{width}} {runs:>4}  {_cell(entry.get('dev')):>14}  {_cell(entry.get('test')):>14}  "
            f"{_cell(entry.get('test_detok')):>14}  {delta:>7}  {p:>7}"
        )
    signatures = report.get("signatures") or {}
    trials = next((c["test"]["approximate_randomization"]["trials"] for c in report["comparisons"].values()), None)
    lines.append("")
    lines.append("BLEU: mean ± sd over the MERT runs; Δ test: difference of mean test BLEU to the baseline;")
    if trials:
        lines.append(f"p: approximate randomization over test sentences and runs ({trials:,} trials, two-sided).")
    if signatures:
        lines.append(f"tokenized: {signatures['tokenized']}")
        lines.append(f"detokenized: {signatures['detokenized']} ({signatures['detokenized_reference']})")
    return "\n".join(lines)
