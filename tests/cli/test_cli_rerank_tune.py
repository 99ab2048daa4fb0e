"""``rerank-tune`` with every option that reaches the tuning (``reranking.tune``): what it prints,
the weights file and the held-out file, as before the tuning moved into the library, with a
stand-in for Moses' optimiser (``helpers.rerank_data``; tests/integration runs the real one)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from tests.helpers.cli_run import run_cli
from tests.helpers.rerank_data import REFS, START, stand_in_optimizer, write_dev


def test_rerank_tune_prints_and_writes_as_before(tmp_path: Path, monkeypatch, capsys) -> None:
    paths = write_dev(tmp_path)
    calls = stand_in_optimizer(monkeypatch)
    for name in ("extractor", "kbmira"):  # found, never run
        program = tmp_path / "moses" / "bin" / name
        program.parent.mkdir(parents=True, exist_ok=True)
        program.write_text("#!/bin/sh\nexit 1\n")
        program.chmod(0o755)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    weights, held = tmp_path / "w.txt", tmp_path / "held.fr"
    args = ["rerank-tune", str(paths["dev.nbest"]), str(paths["dev.fr"]), str(weights)]
    args += ["--init", str(paths["moses.ini"]), "--moses", str(tmp_path / "moses"), "--optimizer", "kbmira"]
    args += ["--restarts", "3", "--seed", "7"]
    args += ["--threads", "2", "--mbr", "--mbr-size", "3", "--mbr-scale", "0.2", "--held-out", str(held)]
    code, err = run_cli(args, monkeypatch, capsys)
    assert code == 0, err
    mbr = ", MBR of 3 at scale 0.2"
    assert err.splitlines()[-4:] == [
        f"{paths['dev.nbest']}: 18 hypotheses, features LM0 WordPenalty0 TranslationModel0 CSLM0",
        f"dev BLEU (tokenized, as MERT scores it{mbr}): 96.91 with the start weights, 100.00 reranked; wrote {weights}",
        "held-out dev BLEU: the weights tuned on each half of the dev sentences choose the other's (kbmira)",
        f"dev BLEU held out{mbr}: 96.91; wrote {held}",
    ]
    assert weights.read_text() == (
        f"# phrase-rescorer rerank-tune dev.nbest: dev BLEU 96.91 -> 100.00{mbr}\n"
        "[weight]\nLM0= 0.5\nWordPenalty0= -0.1\nTranslationModel0= 0.2 0.3\nCSLM0= 3\n"
    )
    chosen = [*REFS[:3], "il x", *REFS[4:]]  # the MBR choice of the odd sentences under the even ones' weights
    assert held.read_text() == "".join(line + "\n" for line in chosen)
    assert [c.pop("references") for c in calls] == [REFS, REFS[0::2], REFS[1::2]]
    assert calls == [{"start": START, "seed": 7, "restarts": 3, "threads": 2, "optimizer": "kbmira"}] * 3
    assert not os.listdir(tmp_path / "tmp")  # the temporary directory removed
