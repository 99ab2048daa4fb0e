"""The rescored table in the real Moses decoders: the feature they compute is the network's.

For each way a Moses user loads a phrase table (text, Compact, OnDisk, ProbingPT in moses and
in moses2), starting from train-model.perl's PhraseDictionaryMemory line or from a line of the
binarized type, the tiny system of tests/data/moses is decoded with a table rescored by a small
random network, and for every sentence the n-best list's TranslationModel0 must hold 5 values
(6 with --unk-feature) whose 5th is the sum, over the phrase pairs of the best hypothesis, of
the network's own log p(f|e) (computed here, not read from the table), to 1e-4; the 6th the sum
of the out-of-shortlist word counts.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from phrase_rescorer.model.checkpoint import load_checkpoint
from phrase_rescorer.moses.ini import MosesIniError
from phrase_rescorer.moses.ini_file import patch_moses_ini_file
from phrase_rescorer.moses.words import split_words
from tests.helpers import moses as m
from tests.helpers.rescore_data import appended_columns, reference_log_probs
from tests.integration.conftest import rescored_table

pytestmark = pytest.mark.moses

BASE_WEIGHTS = [0.1, 0.01, 0.06, 0.04]
#: Moses' floor for every log score (LOWEST_SCORE in moses/TypeDef.h).
FLOOR = -100.0


@pytest.fixture(scope="module", params=[False, True], ids=["5-scores", "6-scores-unk"])
def rescored(request: pytest.FixtureRequest, work: Path, network: Path) -> tuple[Path, int]:
    unk = request.param
    out = rescored_table(work, network, unk)
    columns = 2 if unk else 1
    appended_columns(m.PHRASE_TABLE, out, columns)  # nothing else changed
    return out, 4 + columns


def expected(network: Path, pairs: list[tuple[str, str]], work: Path) -> tuple[float, int]:
    """The sum of max(log p, -100) over ``pairs`` by the plain model, and of the unknown counts."""
    checkpoint = load_checkpoint(str(network))
    table = work / "pairs.txt"
    table.write_text("".join(f"{s} ||| {t} ||| 1\n" for s, t in pairs), encoding="utf-8")
    logps = reference_log_probs(checkpoint, table)
    unknown = sum(
        checkpoint.src_vocab.count_unknown(split_words(s)) + checkpoint.tgt_vocab.count_unknown(split_words(t))
        for s, t in pairs
    )
    return sum(max(v, FLOOR) for v in logps.values()), unknown


def table_pairs(table: Path) -> set[tuple[str, str]]:
    import gzip

    with gzip.open(table, "rt", encoding="utf-8") as f:
        return {tuple(line.split(" ||| ")[:2]) for line in f}  # type: ignore[misc]


BINARIZE = {
    "memory": None,
    "compact": lambda mo, t, o, n: [
        mo / "bin/processPhraseTableMin",
        "-in",
        t,
        "-out",
        o,
        "-nscores",
        n,
        "-threads",
        1,
    ],
    "ondisk": lambda mo, t, o, n: [mo / "bin/CreateOnDiskPt", 1, 1, n, 100, 2, t, o],
    "probing": lambda mo, t, o, n: [mo / "bin/CreateProbingPT", "--input-pt", t, "--output-dir", o, "--num-scores", n],
}
TYPE = {
    "memory": "PhraseDictionaryMemory",
    "compact": "PhraseDictionaryCompact",
    "ondisk": "PhraseDictionaryOnDisk",
    "probing": "ProbingPT",
}


@pytest.mark.parametrize(
    ("kind", "decoder", "start"),
    [
        ("memory", "moses", "memory"),
        *[
            (k, d, s)
            for k, d in [("compact", "moses"), ("ondisk", "moses"), ("probing", "moses"), ("probing", "moses2")]
            for s in ("memory", "binarized")
        ],
    ],
)
def test_the_decoders_feature_is_the_networks_log_p(
    moses: Path, work: Path, lm: Path, network: Path, rescored: tuple[Path, int], kind: str, decoder: str, start: str
) -> None:
    table, n = rescored
    here = work / f"{kind}-{decoder}-{n}-{start}"
    here.mkdir()
    # The baseline ini, as train-model.perl writes it (or with the binarized type), patched by
    # moses-ini: the line gets the type that loads the table, and the count it was made with.
    base = m.write_ini(
        here / "moses.ini",
        f"PhraseDictionaryMemory name=TranslationModel0 num-features=4 path={m.PHRASE_TABLE} "
        "input-factor=0 output-factor=0",
        lm,
        BASE_WEIGHTS,
    )
    loaded = table
    if BINARIZE[kind] is not None:
        if start == "binarized":
            base.write_text(base.read_text().replace("PhraseDictionaryMemory", TYPE[kind]))
        loaded = here / ("phrase-table.rnn" if kind == "compact" else f"phrase-table.rnn.{kind}")
        m.run(BINARIZE[kind](moses, table, loaded, n), cwd=here)
    ini = here / "moses.rnn.ini"
    result = patch_moses_ini_file(str(base), str(ini), str(loaded))
    assert result.new_features == n and f"{TYPE[kind]} name=TranslationModel0 num-features={n} " in ini.read_text()

    known = table_pairs(table)
    best = m.decode(moses, ini, here, decoder)
    assert len(best) == 8
    fifth, unknowns = set(), 0
    for sentence in best:
        tm = sentence.features["TranslationModel0"]
        assert len(tm) == n, sentence.features
        assert all(pair in known for pair in sentence.pairs), sentence.pairs
        logp, unknown = expected(network, sentence.pairs, here)
        assert -100 < logp < -1  # a sum the n-best list prints to 1e-4 (6 significant digits)
        assert tm[4] == pytest.approx(logp, abs=1e-4), (sentence.pairs, tm, logp)
        if n == 6:
            assert tm[5] == pytest.approx(unknown, abs=1e-4), (sentence.pairs, tm, unknown)
        fifth.add(round(tm[4], 3))
        unknowns += unknown
    assert len(fifth) == len(best)  # the sums differ from sentence to sentence
    assert unknowns > 0 or n == 5  # some words lie outside the 300-word shortlists


def test_a_probing_table_with_the_default_score_count_is_refused(
    moses: Path, work: Path, lm: Path, rescored: tuple[Path, int]
) -> None:
    """CreateProbingPT without --num-scores stores 4 scores; moses and moses2 crash (SIGSEGV) on
    such a table under num-features=5, so moses-ini refuses it, naming the command to rerun."""
    table, n = rescored
    here = work / f"probing-default-{n}"
    here.mkdir()
    base = m.write_ini(
        here / "moses.ini",
        f"ProbingPT name=TranslationModel0 num-features=4 path={here}/old input-factor=0 output-factor=0",
        lm,
        BASE_WEIGHTS,
    )
    m.run([moses / "bin/CreateProbingPT", "--input-pt", table, "--output-dir", here / "pt"])
    with pytest.raises(MosesIniError, match="has 4 scores.*--num-scores N"):
        patch_moses_ini_file(str(base), str(here / "out.ini"), str(here / "pt"), features=n - 4)
    assert not (here / "out.ini").exists()


def test_moses_refusals_quoted_in_the_docs(moses: Path, work: Path, lm: Path, network: Path) -> None:
    """An ini not patched, or patched without its weight line, stops the decoder at load."""
    table = rescored_table(work, network)
    here = work / "refusals"
    here.mkdir()
    line = "PhraseDictionaryMemory name=TranslationModel0 num-features={} path=" + str(table)
    cases = [
        (4, BASE_WEIGHTS, "Size of scoreVector != number (5!=4)"),
        (
            5,
            BASE_WEIGHTS,
            "Mismatch in number of features and number of weights for Feature Function "
            "TranslationModel0 (features: 5 vs. weights: 4)",
        ),
    ]
    for features, weights, message in cases:
        ini = m.write_ini(here / f"moses.{features}.ini", line.format(features), lm, weights)
        r = subprocess.run([str(moses / "bin/moses"), "-f", str(ini)], input=b"two girls\n", capture_output=True)
        assert r.returncode != 0 and message in r.stderr.decode(errors="replace"), r.stderr[-2000:]


def test_moses_refuses_a_table_with_one_line_of_another_score_count(
    moses: Path, work: Path, lm: Path, network: Path
) -> None:
    """What moses/score_fields.py relies on: one line with 4 scores in a 5-score table stops the
    decoder at load (PhraseDictionaryMemory checks every line's count against num-features)."""
    import gzip

    here = work / "mixed"
    here.mkdir()
    lines = gzip.decompress(rescored_table(work, network).read_bytes()).splitlines(keepends=True)
    fields = lines[1].split(b" ||| ")
    fields[2] = fields[2].rsplit(b" ", 1)[0]  # the second line loses its last score
    lines[1] = b" ||| ".join(fields)
    (here / "pt.gz").write_bytes(gzip.compress(b"".join(lines)))
    ini = m.write_ini(
        here / "moses.ini",
        f"PhraseDictionaryMemory name=TranslationModel0 num-features=5 path="
        f"{here}/pt.gz input-factor=0 output-factor=0",
        lm,
        [*BASE_WEIGHTS, 0.2],
    )
    r = subprocess.run([str(moses / "bin/moses"), "-f", str(ini)], input=b"two girls\n", capture_output=True)
    assert r.returncode != 0 and b"Size of scoreVector != number (4!=5)" in r.stderr, r.stderr[-2000:]
