"""``translate``: the network's own best translation of every line, in order, one line out per
line in (an empty line stays empty)."""

from __future__ import annotations

import gzip
import subprocess
from pathlib import Path

from phrase_rescorer.analysis.search import beam_search
from phrase_rescorer.analysis.translate import translate
from phrase_rescorer.model.checkpoint import load_checkpoint
from tests.helpers.paths import PYTHON, cli_env
from tests.helpers.rescore_data import tiny_arch_checkpoint

SENTENCES = ["a man in a blue shirt .", "", "two dogs play in the snow"]


def test_each_line_is_the_best_beam_candidate(tmp_path: Path) -> None:
    ckpt = load_checkpoint(str(tiny_arch_checkpoint(tmp_path / "m.pt", arch="rnnsearch")))
    got = list(translate(ckpt, SENTENCES, beam_size=3, alpha=0.0, max_length=8))
    model = ckpt.build_model()
    want = []
    for s in SENTENCES:
        ids = ckpt.src_vocab.encode(s.split())
        want.append(" ".join(ckpt.tgt_vocab.decode(beam_search(model, ids, 3, 8)[0].tokens)) if ids else "")
    assert got == want and got[1] == "" and all("<unk>" not in line for line in got)


def test_the_command_writes_one_line_per_line(tmp_path: Path) -> None:
    model = tiny_arch_checkpoint(tmp_path / "m.pt", arch="rnnsearch")
    (tmp_path / "in.en").write_text("".join(s + "\n" for s in SENTENCES))
    r = subprocess.run(
        [
            PYTHON,
            "-m",
            "phrase_rescorer",
            "translate",
            str(tmp_path / "in.en"),
            str(tmp_path / "out.gz"),
            "-m",
            str(model),
            "--max-length",
            "6",
        ],
        capture_output=True,
        env=cli_env(),
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    assert len(gzip.decompress((tmp_path / "out.gz").read_bytes()).decode().splitlines()) == len(SENTENCES)
