"""``bundle`` and ``translate-hybrid`` with the real Moses on tests/data/tiny-moses: the one command,
three lines a chunk, writes byte for byte what the five steps run by hand write (moses
-n-best-list, translate --n-best-list, merge-nbest, nbest, rerank), with and without candidate
networks (each network's beam, or one ensemble's), an empty input line included; and the same
through stdin and stdout. Skipped, with the reason, when no Moses is found ($MOSES, else
../shared/tools/moses)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.helpers.cslm import TINY_MOSES, tiny_lm
from tests.helpers.moses import moses_root
from tests.helpers.moses import phrase_rescorer as run
from tests.helpers.nmt import tiny_nmt

NEEDS = ("bin/moses", "bin/query")
LM = TINY_MOSES / "lm.fr.3gram.arpa.gz"
#: Weights of every feature, far from the decoder's choice: the network's candidates preferred, and among
#: them not the network's best (its first), so that every candidate counts.
DECODER_WEIGHTS = (
    "Distortion0= 0.3\nLM0= 0.5\nWordPenalty0= -1\nPhrasePenalty0= 0.2\nTranslationModel0= 0.2 0.2 0.2 0.2\n"
)
NETWORK_WEIGHTS = "CSLM0= 0.3\nNMT0= -0.4\n"
CANDIDATE_WEIGHTS = "FromMoses= -100\nFromNet0= 2\n"
#: ... and weights that prefer Moses' own lines, its lowest scored first: the choice depends on how many join.
LOWEST_MOSES_WEIGHTS = (
    "Distortion0= -0.3\nLM0= -0.5\nWordPenalty0= 1\nPhrasePenalty0= -0.2\nTranslationModel0= -0.2 -0.2 -0.2 -0.2\n"
    "FromMoses= 100\nFromNet0= 2\n"
)


@pytest.fixture(scope="module")
def system(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The tiny system's ini (absolute paths), a CSLM, two translation networks of one vocabulary
    (20 and 30 steps) and one that writes right to left, a source text of nine lines (test.en with
    an empty line after its fourth)."""
    moses = moses_root(NEEDS)
    tmp = tmp_path_factory.mktemp("hybrid")
    ini = tmp / "moses.ini"
    ini.write_text((TINY_MOSES / "moses.ini").read_text().replace("@MODEL_DIR@", str(TINY_MOSES)))
    lines = (TINY_MOSES / "test.en").read_text().splitlines(keepends=True)
    source = tmp / "source.en"
    source.write_text("".join([*lines[:4], "\n", *lines[4:]]))
    return {
        "moses": moses,
        "ini": ini,
        "source": source,
        "cslm": tiny_lm(tmp / "cslm.pt"),
        "nmt": tiny_nmt(tmp / "nmt.pt", steps=20),
        "nmt2": tiny_nmt(tmp / "nmt2.pt", steps=30),
        "r2l": tiny_nmt(tmp / "r2l.pt", steps=20, right_to_left=True),
    }


def ok(*args: str, stdin: bytes | None = None) -> bytes:
    r = run(*args, stdin=stdin)
    assert r.returncode == 0, r.stderr
    return r.stdout


def by_hand(
    system: dict[str, Path],
    work: Path,
    weights: Path,
    candidates: bool,
    constrained: bool = False,
    reached_only: bool = False,
    ensemble: bool = False,
    moses_nbest: int | None = None,
    orders: bool = False,
    batch: int = 1,
) -> bytes:
    """The five steps, as the README and docs/nmt.md run them (``constrained``: merge-nbest --ini,
    ``reached_only``: and --reached-only; ``ensemble``: the candidates of the two networks' ensemble;
    ``moses_nbest``: joined to Moses' first N only, merge-nbest --moses-nbest; ``orders``: and the
    right-to-left network's own, a second list; ``batch``: translate --batch-sentences)."""
    listed = work / "source.nbest"
    decoder = [str(system["moses"] / "bin" / "moses"), "-f", str(system["ini"]), "-input-file", str(system["source"])]
    subprocess.run([*decoder, "-n-best-list", str(listed), "20", "distinct"], check=True, capture_output=True)
    if candidates:
        beam = work / "source.nmt.nbest"
        networks = ["-m", str(system["nmt"]), *(["-m", str(system["nmt2"])] if ensemble else [])]
        networks += ["--batch-sentences", str(batch)]
        ok("translate", str(system["source"]), str(work / "nmt.fr"), *networks, "--beam-size", "4",
           "--n-best-list", str(beam), "3")  # fmt: skip
        added = ["--add", str(beam)]
        if orders:
            backwards = work / "source.r2l.nbest"
            ok("translate", str(system["source"]), str(work / "r2l.fr"), "-m", str(system["r2l"]), "--beam-size", "4",
               "--n-best-list", str(backwards), "3", "--batch-sentences", str(batch))  # fmt: skip
            added += ["--add", str(backwards)]
        merged = work / "source.merged.nbest"
        ok(
            "merge-nbest",
            str(listed),
            str(merged),
            *added,
            "--lm",
            str(LM),
            "--moses",
            str(system["moses"]),
            *(["--ini", str(system["ini"]), "--source", str(system["source"])] if constrained else []),
            *(["--reached-only"] if reached_only else []),
            *(["--moses-nbest", str(moses_nbest)] if moses_nbest else []),
        )
        listed = merged
    scored = work / "source.scored.nbest"
    ok("nbest", str(listed), str(scored), "-m", str(system["cslm"]), "-m", str(system["nmt"]),
       "--source", str(system["source"]))  # fmt: skip
    r = run("rerank", str(scored), str(weights), str(work / "by-hand.fr"))
    assert r.returncode == 0, r.stderr
    (work / "by-hand.err").write_bytes(r.stderr)
    return (work / "by-hand.fr").read_bytes()


def chosen_line(stderr: bytes) -> list[bytes]:
    """The line that says where the chosen translations of a merged list come from."""
    return [line for line in stderr.splitlines() if line.startswith(b"chosen: ")]


@pytest.mark.parametrize(
    ("candidates", "constrained", "reached_only", "ensemble", "moses_nbest", "orders", "batch"),
    [
        (False, False, False, False, None, False, 1),
        (True, False, False, False, None, False, 1),
        (True, True, False, False, None, False, 1),
        (True, True, True, False, None, False, 1),
        (True, False, False, True, None, False, 1),
        (True, True, False, False, 2, False, 1),
        (True, True, False, True, None, True, 1),
        (True, True, False, True, None, True, 2),
    ],
    ids=[
        "moses-list",
        "with-candidates",
        "constrained",
        "reached-only",
        "ensemble",
        "moses-first-2",
        "both-orders",
        "both-orders-2-at-once",
    ],
)
def test_one_command_writes_what_the_five_steps_write(
    system: dict[str, Path],
    tmp_path: Path,
    candidates: bool,
    constrained: bool,
    reached_only: bool,
    ensemble: bool,
    moses_nbest: int | None,
    orders: bool,
    batch: int,
) -> None:
    """With constrained decoding: weights tuned on lists with MosesReached make the bundle decode
    the candidates so too; with --reached-only it leaves out those the decoder cannot produce, as
    merge-nbest --reached-only does (which changes the choice here: the weights prefer them); with
    --ensemble the two networks' candidates are their ensemble's one list (which changes them here);
    with --moses-nbest 2 they join the decoder's first 2 hypotheses of a sentence only (which
    changes the choice here: the weights prefer Moses' lowest lines, which are then left out); with
    --ensemble and a right-to-left network among them, an ensemble per target order (FromNet0: the two
    left-to-right networks', FromNet1: the right-to-left one's), bundle format version 5; and with
    their beams searched 2 sentences at a time (translate and bundle --batch-sentences 2), version 6,
    its chunks of 3 lines rounded up to 4 (whole pairs)."""
    weights = tmp_path / "rerank.weights"
    marks = (CANDIDATE_WEIGHTS if candidates else "") + ("MosesReached= 3\n" if constrained else "")
    marks += "FromNet1= 3\n" if orders else ""
    weights.write_text("[weight]\n" + DECODER_WEIGHTS + marks + NETWORK_WEIGHTS)
    if moses_nbest:
        weights.write_text("[weight]\n" + LOWEST_MOSES_WEIGHTS + "MosesReached= 3\n" + NETWORK_WEIGHTS)
    expected = by_hand(
        system, tmp_path, weights, candidates, constrained, reached_only, ensemble, moses_nbest, orders, batch
    )
    assert expected.count(b"\n") == 9 and b"\n\n" in expected  # the empty line's empty translation
    if (reached_only or ensemble or moses_nbest) and not orders:
        (tmp_path / "every").mkdir()
        assert expected != by_hand(system, tmp_path / "every", weights, candidates, constrained)
    if orders:  # the right-to-left network's list counts: shunned, the choice differs
        (tmp_path / "shunned").mkdir()
        shunned = tmp_path / "shunned" / "rerank.weights"
        shunned.write_text(weights.read_text().replace("FromNet1= 3", "FromNet1= -100"))
        assert expected != by_hand(
            system, tmp_path / "shunned", shunned, candidates, constrained, False, True, None, True
        )

    bundle = tmp_path / "hybrid"
    args = ["bundle", str(bundle), "--ini", str(system["ini"]), "--weights", str(weights), "--nbest", "20"]
    args += ["-m", str(system["cslm"]), "-m", str(system["nmt"]), "--moses", str(system["moses"])]
    if candidates:
        args += ["--candidates", str(system["nmt"]), "--beam-size", "4", "--candidate-nbest", "3", "--lm", str(LM)]
        args += ["--candidates", str(system["r2l"])] if orders else []
        args += ["--candidates", str(system["nmt2"]), "--ensemble"] if ensemble else []
        args += ["--batch-sentences", str(batch)] if batch != 1 else []
    ok(*args, *(["--reached-only"] if reached_only else []), *(["--moses-nbest", "2"] if moses_nbest else []))
    assert ('"constrained": true' in (bundle / "bundle.json").read_text()) == constrained
    assert ('"reached_only": true' in (bundle / "bundle.json").read_text()) == reached_only
    assert ('"ensemble": true' in (bundle / "bundle.json").read_text()) == ensemble
    assert ('"moses_nbest": 2' in (bundle / "bundle.json").read_text()) == bool(moses_nbest)
    assert ('"version": 5' in (bundle / "bundle.json").read_text()) == (orders and batch == 1)
    assert ('"version": 6' in (bundle / "bundle.json").read_text()) == (batch != 1)
    out = tmp_path / "hybrid.fr"
    r = run("translate-hybrid", str(bundle), str(system["source"]), str(out), "--chunk-lines", "3",
            "--moses", str(system["moses"]))  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert b"9 lines translated with " in r.stderr and b"in 3 chunk(s)" in r.stderr
    assert out.read_bytes() == expected
    # the chunks' counts of where the chosen lines came from add up to those of the whole list
    assert chosen_line(r.stderr) == chosen_line((tmp_path / "by-hand.err").read_bytes())
    assert len(chosen_line(r.stderr)) == int(candidates)

    # stdin to stdout: the same bytes
    piped = ok("translate-hybrid", str(bundle), "-", "-", "--chunk-lines", "4", "--moses", str(system["moses"]),
               stdin=system["source"].read_bytes())  # fmt: skip
    assert piped == expected
