"""n-best reranking end to end with the real Moses on tests/data/tiny-moses: the decoder's n-best
lists, the CSLM feature appended by ``nbest``, weights tuned by ``rerank-tune`` (Moses' extractor
and mert), the test list reranked; and Moses' own scripts/nbest-rescore reading what we write.
Skipped, with the reason, when no Moses is found ($MOSES, else ../shared/tools/moses)."""

from __future__ import annotations

import gzip
import subprocess
from pathlib import Path

import pytest

from phrase_rescorer.moses.nbest import read_nbest
from tests.helpers.cslm import TINY_MOSES, tiny_lm
from tests.helpers.moses import moses_root, tiny_lists, tune_then_rerank
from tests.helpers.moses import phrase_rescorer as run
from tests.helpers.nmt import tiny_nmt
from tests.helpers.paths import PYTHON

NEEDS = (
    "bin/moses",
    "bin/extractor",
    "bin/mert",
    "scripts/nbest-rescore/rescore.py",
    "scripts/nbest-rescore/topbest.py",
)


@pytest.fixture(scope="module")
def lists(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("rerank")
    return {**tiny_lists(moses_root(NEEDS), tmp, 50), "lm": tiny_lm(tmp / "cslm.pt")}


@pytest.mark.slow
def test_nbest_rerank_tune_and_rerank(lists: dict[str, Path], tmp_path: Path) -> None:
    for part in ("dev", "test"):
        r = run("nbest", str(lists[part]), str(tmp_path / f"{part}.cslm.nbest"), "-m", str(lists["lm"]))
        assert r.returncode == 0, r.stderr
        original = lists[part].read_bytes().splitlines(keepends=True)
        scored = (tmp_path / f"{part}.cslm.nbest").read_bytes().splitlines(keepends=True)
        assert len(scored) == len(original)
        assert all(b" CSLM0= " in line for line in scored)
        stripped = [
            line.split(b" CSLM0= ")[0] + b" |||" + line.split(b" CSLM0= ")[1].split(b" |||", 1)[1] for line in scored
        ]
        assert stripped == original  # every other byte kept, in order
    weights, out = tmp_path / "rerank.weights", tmp_path / "test.reranked"
    tuned = tune_then_rerank(
        lists, tmp_path / "dev.cslm.nbest", tmp_path / "test.cslm.nbest", weights, out, "--restarts", "2"
    )
    assert b"dev BLEU (tokenized, as MERT scores it)" in tuned
    text = weights.read_text()
    assert "[weight]" in text and "\nCSLM0= " in text and "\nTranslationModel0= " in text
    ours = out.read_text().splitlines()
    assert len(ours) == len((TINY_MOSES / "test.en").read_text().splitlines())

    # Moses' own reranking scripts read the list and the weights file and choose the same lines
    scripts = lists["moses"] / "scripts" / "nbest-rescore"
    rescored = subprocess.run(
        [PYTHON, str(scripts / "rescore.py"), str(weights)],
        input=(tmp_path / "test.cslm.nbest").read_bytes(),
        capture_output=True,
        check=True,
    )
    top = subprocess.run([PYTHON, str(scripts / "topbest.py")], input=rescored.stdout, capture_output=True, check=True)
    assert top.stdout.decode().splitlines() == ours


@pytest.mark.slow
def test_start_weights_reproduce_the_decoders_1best(lists: dict[str, Path], tmp_path: Path) -> None:
    """Reranking with the decoder's own weights (the new feature absent) gives its 1-best."""
    moses = lists["moses"]
    best = subprocess.run(
        [str(moses / "bin" / "moses"), "-f", str(lists["ini"]), "-input-file", str(TINY_MOSES / "test.en")],
        capture_output=True,
        check=True,
    ).stdout.decode()
    r = run("rerank", str(lists["test"]), str(lists["ini"]), str(tmp_path / "top.txt"))
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "top.txt").read_text().splitlines() == [line.strip() for line in best.splitlines()]
    assert len(list(read_nbest(str(lists["test"])))) > 8


@pytest.mark.slow
@pytest.mark.parametrize("scale", ["0.5", "2"])
def test_mbr_with_the_decoders_weights_is_the_decoders_mbr(lists: dict[str, Path], tmp_path: Path, scale: str) -> None:
    """``rerank --mbr`` of the decoder's distinct 50-best list with its own weights chooses what
    Moses' decoder outputs with ``-mbr -mbr-size 50 -mbr-scale S`` (moses/mbr.cpp's doMBR over
    ``manager.CalcNBest(nBestSize, nBestList, true)``, the distinct list)."""
    moses = lists["moses"]
    decoder = [str(moses / "bin" / "moses"), "-f", str(lists["ini"])]
    for part in ("dev", "test"):
        inputs = ["-input-file", str(TINY_MOSES / f"{part}.en")]
        mbr = ["-mbr", "-mbr-size", "50", "-mbr-scale", scale]
        want = subprocess.run([*decoder, *inputs, *mbr], capture_output=True, check=True).stdout.decode()
        top = subprocess.run([*decoder, *inputs], capture_output=True, check=True).stdout.decode()
        out = tmp_path / f"{part}.mbr.txt"
        r = run(
            "rerank", str(lists[part]), str(lists["ini"]), str(out), "--mbr", "--mbr-size", "50", "--mbr-scale", scale
        )
        assert r.returncode == 0, r.stderr
        assert out.read_text().splitlines() == [line.strip() for line in want.splitlines()]
        if part == "dev" and scale == "0.5":
            assert want != top  # the lists are such that MBR chooses otherwise for some sentence


@pytest.mark.slow
def test_the_sentence_level_feature_end_to_end(lists: dict[str, Path], tmp_path: Path) -> None:
    """train-nmt on the tiny corpus, both features appended by one nbest call (with --source),
    weights tuned with both, the test list reranked."""
    model = tmp_path / "nmt.pt"
    tiny_nmt(model, steps=30)
    for part in ("dev", "test"):
        r = run(
            "nbest",
            str(lists[part]),
            str(tmp_path / f"{part}.scored.nbest"),
            "-m",
            str(lists["lm"]),
            "-m",
            str(model),
            "--source",
            str(TINY_MOSES / f"{part}.en"),
        )
        assert r.returncode == 0, r.stderr
        assert b"features CSLM0, NMT0" in r.stderr
        scored = (tmp_path / f"{part}.scored.nbest").read_bytes().splitlines(keepends=True)
        original = lists[part].read_bytes().splitlines(keepends=True)
        stripped = [
            line.split(b" CSLM0= ")[0] + b" |||" + line.split(b" NMT0= ")[1].split(b" |||", 1)[1] for line in scored
        ]
        assert stripped == original  # every other byte kept, in order
    weights, out = tmp_path / "rerank.weights", tmp_path / "test.reranked"
    tune_then_rerank(
        lists, tmp_path / "dev.scored.nbest", tmp_path / "test.scored.nbest", weights, out, "--restarts", "2"
    )
    assert "\nNMT0= " in weights.read_text() and "\nCSLM0= " in weights.read_text()
    assert len((tmp_path / "test.reranked").read_text().splitlines()) == 8

    # a source text with a line less is refused before any output
    short = tmp_path / "short.en"
    short.write_text("".join((TINY_MOSES / "test.en").read_text().splitlines(keepends=True)[:-1]))
    r = run("nbest", str(lists["test"]), str(tmp_path / "wrong"), "-m", str(model), "--source", str(short))
    assert r.returncode == 3 and b"7 source sentences, but" in r.stderr, r.stderr
    assert not (tmp_path / "wrong").exists()


@pytest.mark.moses
def test_the_decoder_numbers_every_input_line(lists: dict[str, Path], tmp_path: Path) -> None:
    """An empty input line gets its own n-best line (an empty hypothesis): the IDs count the
    input lines 0, 1, 2, ... with none left out, the contract read_nbest checks."""
    lines = (TINY_MOSES / "test.en").read_text().splitlines(keepends=True)
    (tmp_path / "in.en").write_text("".join(lines[:2]) + "\n" + lines[2] + "\n")
    subprocess.run(
        [
            str(lists["moses"] / "bin" / "moses"),
            "-f",
            str(lists["ini"]),
            "-input-file",
            str(tmp_path / "in.en"),
            "-n-best-list",
            str(tmp_path / "n.txt"),
            "5",
            "distinct",
        ],
        check=True,
        capture_output=True,
    )
    read = list(read_nbest(str(tmp_path / "n.txt")))
    assert sorted({line.sentence for line in read}) == [0, 1, 2, 3, 4]
    assert [line.tokens for line in read if line.sentence in (2, 4)] == [[], []]


@pytest.mark.moses
def test_extractor_reads_the_columns_the_parser_reads(lists: dict[str, Path], tmp_path: Path) -> None:
    """Moses' own extractor on the decoder's list and on a sparse feature (``sp_x= 1``) gives the
    columns of ``parse_features``' layout; a ``name=value`` token (which the parser refuses) is
    read by extractor as one more value of the feature before it, and check_header says so."""
    from phrase_rescorer.moses.nbest import NbestError
    from phrase_rescorer.reranking.mert import check_header
    from phrase_rescorer.reranking.nbest_features import read_matrix

    layout = read_matrix(str(lists["dev"])).layout
    text = lists["dev"].read_text()

    def extract(name: str, data: str) -> str:
        (tmp_path / name).write_text(data)
        subprocess.run(
            [
                str(lists["moses"] / "bin" / "extractor"),
                "--sctype",
                "BLEU",
                "--scfile",
                str(tmp_path / f"{name}.scores"),
                "--ffile",
                str(tmp_path / f"{name}.features"),
                "-r",
                str(TINY_MOSES / "dev.fr"),
                "-n",
                str(tmp_path / name),
            ],
            check=True,
            capture_output=True,
        )
        return str(tmp_path / f"{name}.features")

    check_header(extract("plain", text), layout, "plain")
    sparse = text.replace(" WordPenalty0= ", " sp_x= 1 WordPenalty0= ")
    check_header(extract("sparse", sparse), layout, "sparse")
    assert read_matrix(str(tmp_path / "sparse")).layout == layout
    glued = extract("glued", text.replace(" WordPenalty0= ", " sp_x=1 WordPenalty0= "))
    with pytest.raises(NbestError, match="the columns would not be the features the weights name"):
        check_header(glued, layout, "glued")
    header = Path(glued).read_text().splitlines()[0].split()
    i = header.index("LM0_0")
    assert header[i : i + 3] == ["LM0_0", "LM0_1", "WordPenalty0_0"]  # the token became LM0's 2nd value


def kbmira_tune(lists: dict[str, Path], nbest: Path, out: Path, work: Path) -> subprocess.CompletedProcess:
    """rerank-tune --optimizer kbmira of ``nbest`` against the dev reference, from the decoder's weights."""
    return run(
        "rerank-tune",
        str(nbest),
        str(TINY_MOSES / "dev.fr"),
        str(out),
        "--init",
        str(lists["ini"]),
        "--moses",
        str(lists["moses"]),
        "--optimizer",
        "kbmira",
        "--work-dir",
        str(work),
    )


@pytest.mark.moses
def test_kbmira_tunes_the_same_columns(lists: dict[str, Path], tmp_path: Path) -> None:
    """rerank-tune --optimizer kbmira: Moses' kbmira from the decoder's weights, its ``F<i>``
    weights read back in features.dat's column order (kbmira.cpp: ``*out << "F" << i << " " <<
    avg.weight(i)``), the same seed giving the same weights; the hypotheses they choose score the
    BLEU computed from extractor's own statistics of those hypotheses (Moses' BLEU: the same
    columns chosen), and the dev BLEU printed is the reranked lines'."""
    import math

    import numpy as np

    from phrase_rescorer.reranking.nbest_features import read_matrix
    from phrase_rescorer.reranking.weights import read_weights_file, vector

    outputs = []
    for name in ("a", "b"):
        work, out = tmp_path / f"work-{name}", tmp_path / f"{name}.weights"
        r = kbmira_tune(lists, lists["dev"], out, work)
        assert r.returncode == 0, r.stderr
        outputs.append(out.read_bytes())
    assert outputs[0] == outputs[1]
    matrix = read_matrix(str(lists["dev"]))
    start = vector(read_weights_file(str(lists["ini"])), matrix.layout, source="moses.ini")
    # as mert-moses.pl writes run$run.dense: one "Name= value" line per weight
    dense = [line.split(" ") for line in (work / "init.dense").read_text().splitlines()]
    assert [name for name, _ in dense] == [f"{name}=" for name, count in matrix.layout for _ in range(count)]
    assert [float(v) for _, v in dense] == list(start)
    written = [line.split() for line in (work / "kbmira.weights").read_text().splitlines()]
    weights = vector(read_weights_file(str(tmp_path / "b.weights")), matrix.layout, source="b.weights")
    assert [name for name, _ in written] == [f"F{i}" for i in range(len(weights))]
    np.testing.assert_allclose(weights, [float(v) for _, v in written], rtol=1e-12)

    def blocks(path: Path) -> list[np.ndarray]:
        out: list[np.ndarray] = []
        rows: list[list[float]] = []
        for line in path.read_text().splitlines():
            if line.endswith("_BEGIN_0") or "_TXT_BEGIN_" in line:
                rows = []
            elif "_TXT_END_" in line:
                out.append(np.array(rows))
            else:
                rows.append([float(x) for x in line.split()])
        return out

    features, scores = blocks(work / "features.dat"), blocks(work / "scores.dat")
    stats = sum(s[int(np.argmax(f @ weights))] for f, s in zip(features, scores, strict=True))
    log_precision = sum(math.log(stats[2 * i] / stats[2 * i + 1]) for i in range(4)) / 4
    moses_bleu = 100 * math.exp(log_precision + min(0.0, 1 - stats[8] / stats[1]))
    printed = float(r.stderr.decode().split(" reranked; wrote")[0].rsplit(" ", 1)[1])
    assert printed == pytest.approx(moses_bleu, abs=0.01)


@pytest.mark.moses
def test_kbmira_tunes_the_dense_weights_alone_beside_sparse_features(lists: dict[str, Path], tmp_path: Path) -> None:
    """A list with a sparse feature (``sp_x= v``, varying over the hypotheses) tunes, under
    kbmira, the dense weights the same list without it tunes: extractor writes the sparse values
    into features.dat (``sp_x=v`` tokens), kbmira would weigh them too and write ``sp_x w``
    beside ``F0``, ``F1``, ..., and reranking adds only the dense features the weights file
    names, so ``dense_only`` removes them before kbmira reads the file."""
    lines = lists["dev"].read_text().splitlines(keepends=True)
    sparse = "".join(
        line.replace(" WordPenalty0= ", f" sp_x= {(i % 7) - 3} WordPenalty0= ", 1) for i, line in enumerate(lines)
    )
    (tmp_path / "sparse.nbest").write_text(sparse)
    outputs = []
    for name, nbest in (("plain", lists["dev"]), ("sparse", tmp_path / "sparse.nbest")):
        r = kbmira_tune(lists, nbest, tmp_path / f"{name}.weights", tmp_path / name)
        assert r.returncode == 0, r.stderr
        outputs.append((tmp_path / f"{name}.weights").read_text().split("\n", 1)[1])  # below the comment
    assert "sp_x=" in (tmp_path / "sparse" / "nbest.txt").read_text()
    assert "sp_x" not in (tmp_path / "sparse" / "features.dat").read_text()
    assert all(line.startswith("F") for line in (tmp_path / "sparse" / "kbmira.weights").read_text().splitlines())
    assert outputs[0] == outputs[1]


@pytest.mark.slow
@pytest.mark.moses
def test_kbmira_without_a_pass_above_bleu_0_keeps_the_start(lists: dict[str, Path], tmp_path: Path) -> None:
    """A reference no hypothesis shares a word with: every pass of kbmira scores BLEU 0, and
    kbmira writes weights only for a pass above the best so far, 0 at first (kbmira.cpp: ``if(bleu
    > bestBleu) {``). No file is written, and the start weights are the result."""
    import numpy as np

    from phrase_rescorer.moses.toolkit import find_moses
    from phrase_rescorer.reranking.mert import tune
    from phrase_rescorer.reranking.nbest_features import read_matrix

    matrix = read_matrix(str(lists["dev"]))
    start = np.linspace(0.1, 1.0, matrix.features.shape[1])
    hopeless = ["zzz"] * matrix.sentence_count
    toolkit = find_moses(str(lists["moses"]), needs=("bin/extractor", "bin/kbmira"))
    result = tune(
        toolkit, str(lists["dev"]), [hopeless], start, str(tmp_path / "w"), layout=matrix.layout, optimizer="kbmira"
    )
    assert not (tmp_path / "w" / "kbmira.weights").exists()
    assert result.dev_bleu == 0.0 and np.array_equal(result.weights, start)


@pytest.mark.slow
@pytest.mark.moses
def test_rerank_tune_held_out_is_the_two_fold_choice(lists: dict[str, Path], tmp_path: Path) -> None:
    """rerank-tune --held-out: the weights are those of the run without it, the file holds
    ``heldout_lines``' choice (each half by the weights tuned on the other with the same
    optimiser, start weights, seed and restarts: mert's -n 2 here, not the default 20), one line
    per dev sentence, the same on stdout (``-``), and the BLEU printed is that file's."""
    from phrase_rescorer.experiment.bleu import tokenized_bleu
    from phrase_rescorer.moses.toolkit import find_moses
    from phrase_rescorer.reranking.heldout import heldout_lines
    from phrase_rescorer.reranking.nbest_features import read_matrix
    from phrase_rescorer.reranking.weights import read_weights_file, vector

    common = ["--init", str(lists["ini"]), "--moses", str(lists["moses"]), "--restarts", "2", "--seed", "3"]
    dev, ref = str(lists["dev"]), str(TINY_MOSES / "dev.fr")
    plain = run("rerank-tune", dev, ref, str(tmp_path / "plain.weights"), *common)
    assert plain.returncode == 0, plain.stderr
    held = tmp_path / "dev.heldout"
    work = tmp_path / "work"
    r = run("rerank-tune", dev, ref, str(tmp_path / "w"), *common, "--held-out", str(held), "--work-dir", str(work))
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "w").read_bytes() == (tmp_path / "plain.weights").read_bytes()
    matrix = read_matrix(dev)
    refs = (TINY_MOSES / "dev.fr").read_text().splitlines()
    start = vector(read_weights_file(str(lists["ini"])), matrix.layout, missing=0.0, source="moses.ini")
    toolkit = find_moses(str(lists["moses"]), needs=("bin/extractor", "bin/mert"))
    expected = heldout_lines(toolkit, dev, matrix, refs, start, str(tmp_path / "lib"), seed=3, restarts=2)
    lines = held.read_text().splitlines()
    assert expected is not None and lines == expected and len(lines) == len(refs)
    assert all(line in matrix.hypotheses for line in lines)
    assert (work / "heldout" / "fold0.nbest").is_file() and (work / "heldout" / "tune1" / "mert.log").is_file()
    assert f"dev BLEU held out: {tokenized_bleu(lines, refs).score:.2f}; wrote {held}" in r.stderr.decode()
    piped = run("rerank-tune", dev, ref, str(tmp_path / "w2"), *common, "--held-out", "-")
    assert piped.returncode == 0, piped.stderr
    assert piped.stdout == held.read_bytes()


@pytest.mark.slow
@pytest.mark.moses
def test_rerank_tune_with_mbr_tunes_the_same_weights_and_chooses_by_mbr(lists: dict[str, Path], tmp_path: Path):
    """rerank-tune --mbr: the weights are those tuned without it (the weights file differs only
    in its comment line); the dev BLEU printed and the held-out lines are the MBR choice's
    (``heldout_lines(..., mbr=...)``), which rerank --mbr with the weights reproduces on the list."""
    from phrase_rescorer.experiment.bleu import tokenized_bleu
    from phrase_rescorer.moses.toolkit import find_moses
    from phrase_rescorer.reranking.heldout import heldout_lines
    from phrase_rescorer.reranking.mbr import Mbr
    from phrase_rescorer.reranking.nbest_features import read_matrix
    from phrase_rescorer.reranking.weights import read_weights_file, vector

    common = ["--init", str(lists["ini"]), "--moses", str(lists["moses"]), "--restarts", "2", "--seed", "3"]
    dev, ref = str(lists["dev"]), str(TINY_MOSES / "dev.fr")
    plain = run("rerank-tune", dev, ref, str(tmp_path / "plain.weights"), *common)
    assert plain.returncode == 0, plain.stderr
    held = tmp_path / "dev.heldout"
    mbr = ["--mbr", "--mbr-scale", "0.5", "--mbr-size", "20"]
    r = run("rerank-tune", dev, ref, str(tmp_path / "w"), *common, *mbr, "--held-out", str(held))
    assert r.returncode == 0, r.stderr
    body = [line for line in (tmp_path / "w").read_text().splitlines() if not line.startswith("#")]
    assert body == [line for line in (tmp_path / "plain.weights").read_text().splitlines() if not line.startswith("#")]
    matrix = read_matrix(dev)
    refs = (TINY_MOSES / "dev.fr").read_text().splitlines()
    start = vector(read_weights_file(str(lists["ini"])), matrix.layout, missing=0.0, source="moses.ini")
    toolkit = find_moses(str(lists["moses"]), needs=("bin/extractor", "bin/mert"))
    rule = Mbr(0.5, 20)
    expected = heldout_lines(toolkit, dev, matrix, refs, start, str(tmp_path / "lib"), seed=3, restarts=2, mbr=rule)
    assert expected is not None and held.read_text().splitlines() == expected
    reranked = tmp_path / "dev.mbr"
    assert run("rerank", dev, str(tmp_path / "w"), str(reranked), *mbr).returncode == 0
    chosen = reranked.read_text().splitlines()
    err = r.stderr.decode()
    assert "MBR of 20 at scale 0.5): " in err and f"{tokenized_bleu(chosen, refs).score:.2f} reranked" in err


@pytest.mark.slow
@pytest.mark.moses
def test_a_crlf_or_gzip_reference_tunes_as_the_plain_one(lists: dict[str, Path], tmp_path: Path) -> None:
    """Moses' extractor reads references as raw lines (a CRLF one gives tokens ending in \\r):
    rerank-tune reads the reference by content and hands extractor plain LF lines, so the same
    text tunes the same weights however it is stored; weights named .gz are written gzipped, and
    rerank reads them as the plain ones."""
    ref = (TINY_MOSES / "dev.fr").read_bytes()
    (tmp_path / "crlf.fr").write_bytes(ref.replace(b"\n", b"\r\n"))
    (tmp_path / "ref.fr.gz").write_bytes(gzip.compress(ref.replace(b"\n", b"\r\n")))
    weights, chosen = {}, {}
    for name, path in (("lf", TINY_MOSES / "dev.fr"), ("crlf", tmp_path / "crlf.fr"), ("gz", tmp_path / "ref.fr.gz")):
        out = tmp_path / f"{name}.weights{'.gz' if name == 'gz' else ''}"
        reranked = tmp_path / f"{out.name}.out"
        tune_then_rerank(lists, lists["dev"], lists["test"], out, reranked, "--restarts", "2", reference=path)
        data = out.read_bytes()
        weights[name] = gzip.decompress(data) if name == "gz" else data
        chosen[name] = reranked.read_bytes()
    assert weights["crlf"] == weights["lf"] and weights["gz"] == weights["lf"]
    assert chosen["lf"] == chosen["gz"] and len(chosen["lf"].splitlines()) == 8


def test_train_lm_reports_kenlm_on_the_same_texts(tmp_path: Path) -> None:
    """``train-lm --kenlm`` prints KenLM's perplexity of the --valid and the --test text as Moses'
    own ``query -v summary`` gives it, says that it compares on those texts only, and refuses an
    LM file that is not there or not an LM before training."""
    moses = moses_root(("bin/query",))
    arpa = TINY_MOSES / "lm.fr.3gram.arpa.gz"
    common = ["--order", "3", "--embed-dim", "8", "--hidden", "16", "--max-steps", "5", "--threads", "1"]
    common += ["--valid", str(TINY_MOSES / "dev.fr"), "--test", str(TINY_MOSES / "test.fr"), "--moses", str(moses)]
    r = run("train-lm", str(TINY_MOSES / "dev.fr"), str(tmp_path / "lm.pt"), *common, "--kenlm", str(arpa))
    assert r.returncode == 0, r.stderr
    said = r.stderr.decode()
    for name in ("dev.fr", "test.fr"):
        summary = subprocess.run(
            [str(moses / "bin/query"), "-v", "summary", str(arpa)],
            input=(TINY_MOSES / name).read_bytes(),
            capture_output=True,
            check=True,
        ).stdout.decode()
        figures = dict(line.split(":\t") for line in summary.splitlines() if ":\t" in line)
        label = "held-out" if name == "dev.fr" else str(TINY_MOSES / name)
        assert (
            f"{label}: KenLM {arpa} perplexity {float(figures['Perplexity excluding OOVs']):.2f} "
            f"over {int(figures['Tokens']) - int(figures['OOVs']):,} tokens, {int(figures['OOVs']):,} OOVs left out "
            f"({float(figures['Perplexity including OOVs']):.2f} with OOVs)"
        ) in said, said
    assert f"{TINY_MOSES / 'test.fr'}: CSLM perplexity" in said
    assert "KenLM compared on --valid and --test only" in said
    missing = tmp_path / "no.arpa"
    r = run("train-lm", str(TINY_MOSES / "dev.fr"), str(tmp_path / "lm2.pt"), *common, "--kenlm", str(missing))
    assert r.returncode == 6, r.stderr
    assert f"--kenlm: {missing}: cannot read: No such file or directory" in r.stderr.decode()
    assert not (tmp_path / "lm2.log").exists()  # nothing trained
    # a file that is not an n-gram LM: Moses' query says so, before any training
    r = run(
        "train-lm", str(TINY_MOSES / "dev.fr"), str(tmp_path / "lm3.pt"), *common, "--kenlm", str(TINY_MOSES / "dev.fr")
    )
    assert r.returncode == 6 and "--kenlm: " in r.stderr.decode() and "failed" in r.stderr.decode(), r.stderr
    assert not (tmp_path / "lm3.log").exists()


def without_features(nbest: Path, names: tuple[str, ...], out: Path) -> None:
    """``nbest`` written to ``out`` with the dense features ``names`` (each ``Name=`` and its
    values) taken out of every line, the rest of each line as it was."""
    import re

    lines = []
    for line in nbest.read_text().splitlines(keepends=True):
        sentence, hypothesis, features, rest = line.split(" ||| ", 3)
        for name in names:
            features = re.sub(rf"(^| ){name}= \S+(?: (?![^ ]*= )\S+)*", "", features)
        lines.append(" ||| ".join((sentence, hypothesis, features.strip(), rest)))
    out.write_text("".join(lines))


@pytest.mark.slow
@pytest.mark.moses
@pytest.mark.parametrize("optimizer", ["mert", "kbmira"])
def test_leave_out_tunes_as_the_list_without_the_features(
    lists: dict[str, Path], tmp_path: Path, optimizer: str
) -> None:
    """rerank-tune --leave-out: Moses' optimiser tunes the other weights exactly as on the list
    without those features (the same weights, the same held-out lines, the same BLEU printed),
    and the weights file gives the left-out features 0, so that rerank takes the whole list and
    chooses what the weights of the shorter list choose there."""
    left_out = ("TranslationModel0", "Distortion0")
    header = lists["dev"].read_text().split(" ||| ")[2]
    assert all(f"{name}= " in header for name in left_out)
    for part in ("dev", "test"):
        without_features(lists[part], left_out, tmp_path / f"{part}.short.nbest")
    short = (tmp_path / "dev.short.nbest").read_text()
    assert "TranslationModel0" not in short and "LM0= " in short and "PhrasePenalty0= " in short
    ref = str(TINY_MOSES / "dev.fr")
    common = ["--init", str(lists["ini"]), "--moses", str(lists["moses"]), "--restarts", "2", "--seed", "3"]
    common += ["--optimizer", optimizer]
    runs = {}
    for name, nbest, options in (
        ("short", tmp_path / "dev.short.nbest", []),
        ("left", lists["dev"], ["--leave-out", "TranslationModel0", "--leave-out", "Distortion0,TranslationModel0"]),
    ):
        held = tmp_path / f"{name}.heldout"
        weights = str(tmp_path / f"{name}.weights")
        r = run("rerank-tune", str(nbest), ref, weights, *common, *options, "--held-out", str(held))
        assert r.returncode == 0, r.stderr
        runs[name] = (r.stderr.decode().splitlines(), held.read_text(), (tmp_path / f"{name}.weights").read_text())
    (short_err, short_held, short_weights), (left_err, left_held, left_weights) = runs["short"], runs["left"]
    assert left_held == short_held and len(left_held.splitlines()) == len(Path(ref).read_text().splitlines())
    assert left_err[0].endswith(" (TranslationModel0 Distortion0 left out: weight 0)")
    figures = [[line.split("; wrote ")[0] for line in err[1:]] for err in (left_err, short_err)]
    assert figures[0] == figures[1] and any(" reranked" in line for line in figures[0])
    left_lines = left_weights.splitlines()
    zeroed = [line for line in left_lines if line.split("= ")[0] in left_out]
    assert sorted(zeroed) == ["Distortion0= 0", "TranslationModel0= 0 0 0 0"]
    assert [line for line in left_lines[1:] if line not in zeroed] == short_weights.splitlines()[1:]
    for name, nbest in (("short", tmp_path / "test.short.nbest"), ("left", lists["test"])):
        r = run("rerank", str(nbest), str(tmp_path / f"{name}.weights"), str(tmp_path / f"{name}.test.fr"))
        assert r.returncode == 0, r.stderr
    assert (tmp_path / "left.test.fr").read_text() == (tmp_path / "short.test.fr").read_text()


@pytest.mark.slow
@pytest.mark.moses
def test_choose_leave_out_is_the_separate_runs_best(lists: dict[str, Path], tmp_path: Path) -> None:
    """rerank-tune --choose-leave-out with the real Moses (kbmira): each set's printed held-out
    BLEU is what rerank-tune --held-out prints for that set alone (with --leave-out), and the
    weights and held-out lines written are those of the separate run of the highest (the first
    of equal ones)."""
    sets = ["", "TranslationModel0,Distortion0", "LM0"]
    ref = str(TINY_MOSES / "dev.fr")
    common = ["--init", str(lists["ini"]), "--moses", str(lists["moses"]), "--seed", "2", "--optimizer", "kbmira"]
    alone = []
    for k, names in enumerate(sets):
        held, weights = tmp_path / f"{k}.heldout", tmp_path / f"{k}.weights"
        options = ["--leave-out", names] if names else []
        r = run("rerank-tune", str(lists["dev"]), ref, str(weights), *common, *options, "--held-out", str(held))
        assert r.returncode == 0, r.stderr
        figure = [line for line in r.stderr.decode().splitlines() if line.startswith("dev BLEU held out: ")]
        alone.append((float(figure[0].split()[4].rstrip(";")), held.read_text(), weights.read_text()))
    held, weights = tmp_path / "chosen.heldout", tmp_path / "chosen.weights"
    options = [option for names in sets[1:] for option in ("--choose-leave-out", names)]
    r = run("rerank-tune", str(lists["dev"]), ref, str(weights), *common, *options, "--held-out", str(held))
    assert r.returncode == 0, r.stderr
    err = r.stderr.decode().splitlines()
    assert err[0].endswith(": 3 sets")
    assert [float(line.split()[0]) for line in err[1:4]] == [figure for figure, _, _ in alone]
    best = max(range(len(sets)), key=lambda k: (alone[k][0], -k))
    assert best != 0  # a set tried on its own copy of the list is the one tuned
    assert held.read_text() == alone[best][1] and weights.read_text() == alone[best][2]
