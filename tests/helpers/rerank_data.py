"""Reranking without Moses: a dev set of six sentences, three hypotheses each (the reference among
them), the moses.ini of its start weights, and a stand-in for Moses' optimiser whose weights
depend on the references it is given, so that the full tuning and each held-out half differ."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from phrase_rescorer.reranking import heldout, mert

REFS = [
    "le chat est noir",
    "un homme marche",
    "la maison est grande",
    "il pleut",
    "nous mangeons du pain",
    "le ciel bleu",
]
#: The start weights: CSLM0, the added feature, starts at 0.
INI = "[feature]\nKENLM name=LM0\n\n[weight]\nLM0= 0.5\nWordPenalty0= -0.1\nTranslationModel0= 0.2 0.3\n"
START = [0.5, -0.1, 0.2, 0.3, 0.0]


def write_dev(directory: Path) -> dict[str, Path]:
    """dev.nbest (the reference second, below the others by LM0, above them by CSLM0), dev.fr,
    dev.en and moses.ini in ``directory``."""
    lines = []
    for i, ref in enumerate(REFS):
        words = ref.split()
        for j, hyp in enumerate([" ".join(words[:-1]) + " x", ref, " ".join(words[:1] + words[2:])]):
            lm, cslm = [-2.0, -4.0, -3.0][j] - 0.1 * i, [-5, -1, -3][j]
            features = f"LM0= {lm:g} WordPenalty0= -{len(hyp.split())} TranslationModel0= -1 -{j + 1} CSLM0= {cslm}"
            lines.append(f"{i} ||| {hyp} ||| {features} ||| 0\n")
    paths = {name: directory / name for name in ("dev.nbest", "dev.fr", "dev.en", "moses.ini")}
    paths["dev.nbest"].write_text("".join(lines))
    paths["dev.fr"].write_text("".join(r + "\n" for r in REFS))
    paths["dev.en"].write_text("".join(f"source {i}\n" for i in range(len(REFS))))
    paths["moses.ini"].write_text(INI)
    return paths


def stand_in_optimizer(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """``mert.tune`` (also as the held-out tunings call it) replaced: CSLM0's weight raised by the
    number of references less 3, and 3 more when the first is the second sentence's (the odd
    half). The list it returns records each call's arguments."""
    calls: list[dict[str, Any]] = []

    def tune(toolkit, nbest, references, start, work_dir, *, layout=None, **options):  # type: ignore[no-untyped-def]
        refs = list(references[0])
        if not options.get("leave_out", True):  # none left out: as a call without it
            del options["leave_out"]
        calls.append({"references": refs, "start": [float(w) for w in start], **options})
        weights = np.array(start, dtype=np.float64)
        weights[-1] += len(refs) - 3 + 3 * (refs[0] == REFS[1])
        return mert.TuneResult(weights, 12.5 + len(refs))

    monkeypatch.setattr(mert, "tune", tune)
    monkeypatch.setattr(heldout, "tune", tune)
    return calls
