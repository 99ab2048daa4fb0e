"""The real Moses for the integration tests: found, or the tests skipped with the reason.

Moses is found as a user's installation is, by the product's own finder: ``$MOSES`` when
set, else ``../shared/tools/moses`` beside the checkout. The tiny system of tests/data/moses
(eight dev sentences, the phrase-table lines that cover them) is completed here with a
language model built by the Moses found and a moses.ini; ``decode`` runs ``moses`` or
``moses2`` on it and reads back, for each sentence, the phrase pairs of the best hypothesis
(``-t``: ``target words |i-j|`` per phrase) and its feature values from the n-best list.
``tiny_lists`` decodes the dev and test text of tests/data/tiny-moses into n-best lists, and
``tune_then_rerank`` is the reranking sequence of the tests on tests/data/tiny-moses: weights
tuned by ``rerank-tune`` with the Moses found, a test list reranked with them.
``stand_in_moses`` makes a directory of programs standing in for Moses, each of which fails:
enough for what ``experiment`` does before Moses runs.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

from phrase_rescorer.moses.toolkit import EXPERIMENT_NEEDS, MosesNotFound
from phrase_rescorer.moses.toolkit import find_moses as find_toolkit
from tests.helpers.cslm import TINY_MOSES
from tests.helpers.paths import PYTHON, REPO, SHARED, cli_env

DATA = REPO / "tests" / "data" / "moses"
DEV_EN = DATA / "dev.en"
DEV_FR = DATA / "dev.fr"
PHRASE_TABLE = DATA / "phrase-table.gz"


def find_moses(needs: tuple[str, ...] = ("bin/moses",)) -> tuple[Path | None, str]:
    """(the Moses directory, "") or (None, why there is none). The product's own finder
    (``phrase_rescorer.moses.toolkit``) checks the directory: ``$MOSES`` when set (and then
    only it), else ``../shared/tools/moses``; ``needs`` are the paths a test runs."""
    given = os.environ.get("MOSES")
    where = given or str(SHARED / "tools" / "moses")
    if not given and not os.path.isdir(where):
        return None, f"no Moses: MOSES is not set and {where} does not exist"
    try:
        return Path(find_toolkit(where, needs=needs).root), ""
    except MosesNotFound as e:
        return None, str(e) if given else f"no Moses: MOSES is not set and {e}"


def stand_in_moses(root: Path) -> Path:
    """``root`` made a directory of stand-in Moses programs, each of which fails: every path
    ``experiment`` needs is there, enough for what it does before Moses runs."""
    for relative in EXPERIMENT_NEEDS:
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("#!/bin/sh\nexit 1\n")
        path.chmod(0o755)
    return root


def moses_root(needs: tuple[str, ...] = ("bin/moses",)) -> Path:
    """The Moses directory, or skip the test saying why there is none."""
    path, reason = find_moses(needs)
    if path is None:
        pytest.skip(reason)
    return path


def run(argv: list[str | Path], **kwargs) -> subprocess.CompletedProcess:
    """Run a Moses program; a failure shows its stderr."""
    kwargs.setdefault("stdout", subprocess.PIPE)
    r = subprocess.run([str(a) for a in argv], stderr=subprocess.PIPE, **kwargs)
    assert r.returncode == 0, (argv, r.returncode, r.stderr.decode(errors="replace")[-3000:])
    return r


def build_lm(moses: Path, directory: Path) -> Path:
    """A 3-gram ARPA model of dev.fr (lmplz needs --discount_fallback on eight sentences)."""
    lm = directory / "lm.fr.arpa"
    if not lm.exists():
        with open(DEV_FR, "rb") as text, open(lm, "wb") as out:
            run(
                [moses / "bin" / "lmplz", "-o", "3", "--discount_fallback", "-S", "5%", "-T", directory],
                stdin=text,
                stdout=out,
            )
    return lm


def write_ini(path: Path, table_line: str, lm: Path, tm_weights: list[float]) -> Path:
    """A phrase-based moses.ini: the given phrase-dictionary line, distortion, the LM."""
    path.write_text(
        "[input-factors]\n0\n\n[mapping]\n0 T 0\n\n[distortion-limit]\n6\n\n[feature]\n"
        "UnknownWordPenalty\nWordPenalty\nPhrasePenalty\n"
        f"{table_line}\nDistortion\nKENLM name=LM0 factor=0 path={lm} order=3\n\n"
        "[weight]\nDistortion0= 0.05\nLM0= 0.1\nWordPenalty0= -0.1\nPhrasePenalty0= 0.05\n"
        f"TranslationModel0= {' '.join(map(str, tm_weights))}\nUnknownWordPenalty0= 1\n"
    )
    return path


@dataclass
class Best:
    """The best hypothesis of one sentence."""

    pairs: list[tuple[str, str]]  # (source phrase, target phrase) in target order
    features: dict[str, list[float]]  # from the n-best list


def parse_features(field: str) -> dict[str, list[float]]:
    """``Distortion0= 0 LM0= -5.3 TranslationModel0= -0.7 -3.1 ...`` as a dict."""
    features: dict[str, list[float]] = {}
    name = None
    for token in field.split():
        if token.endswith("="):
            name = token[:-1]
            features[name] = []
        else:
            assert name is not None, field
            features[name].append(float(token))
    return features


def _is_span(token: str) -> bool:
    """A ``|i-j|`` source-span marker of ``-t`` output."""
    return token.startswith("|") and token.endswith("|") and len(token) > 2


def decode(moses: Path, ini: Path, workdir: Path, decoder: str = "moses") -> list[Best]:
    """Decode dev.en with ``decoder`` (moses or moses2) and ``ini``: one :class:`Best` per line."""
    nbest = workdir / f"nbest.{decoder}.txt"
    with open(DEV_EN, "rb") as source:
        r = run([moses / "bin" / decoder, "-f", ini, "-t", "-n-best-list", nbest, "1", "-threads", "1"], stdin=source)
    sentences = DEV_EN.read_text(encoding="utf-8").splitlines()
    first: dict[int, dict[str, list[float]]] = {}
    texts: dict[int, str] = {}
    for line in nbest.read_text(encoding="utf-8").splitlines():
        fields = line.split(" ||| ")
        i = int(fields[0])
        if i not in first:  # the first entry of a sentence is its best hypothesis
            # moses (not moses2) repeats the -t segmentation in the n-best list
            words = [w for w in fields[1].split() if not _is_span(w)]
            first[i], texts[i] = parse_features(fields[2]), " ".join(words)
    best = []
    for i, (sentence, output) in enumerate(zip(sentences, r.stdout.decode().splitlines(), strict=True)):
        words, pairs, target = sentence.split(), [], []
        for token in output.split():
            if _is_span(token):
                start, end = map(int, token[1:-1].split("-"))
                pairs.append((" ".join(words[start : end + 1]), " ".join(target)))
                target = []
            else:
                target.append(token)
        assert not target and pairs, output
        assert " ".join(t for _, t in pairs) == texts[i], (output, texts[i])
        best.append(Best(pairs, first[i]))
    return best


def tiny_lists(moses: Path, directory: Path, size: int) -> dict[str, Path]:
    """tests/data/tiny-moses' moses.ini completed in ``directory`` and the ``size``-best distinct
    lists the decoder writes there for dev.en and test.en: {"moses", "ini", "dev", "test"}."""
    ini = directory / "moses.ini"
    ini.write_text((TINY_MOSES / "moses.ini").read_text().replace("@MODEL_DIR@", str(TINY_MOSES)))
    paths: dict[str, Path] = {"moses": moses, "ini": ini}
    for part in ("dev", "test"):
        nbest = directory / f"{part}.nbest"
        decoder = [str(moses / "bin" / "moses"), "-f", str(ini), "-input-file", str(TINY_MOSES / f"{part}.en")]
        subprocess.run([*decoder, "-n-best-list", str(nbest), str(size), "distinct"], check=True, capture_output=True)
        paths[part] = nbest
    return paths


def phrase_rescorer(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    """``python -m phrase_rescorer ARGS`` from this checkout, its output captured."""
    return subprocess.run(
        [PYTHON, "-m", "phrase_rescorer", *args], input=stdin, capture_output=True, env=cli_env(), timeout=600
    )


def tune_then_rerank(
    lists: Mapping[str, Path],
    dev: Path,
    test: Path,
    weights: Path,
    out: Path,
    *options: str,
    reference: Path = TINY_MOSES / "dev.fr",
) -> bytes:
    """``rerank-tune DEV REFERENCE WEIGHTS --init INI --moses MOSES OPTIONS`` (``lists["ini"]``,
    ``lists["moses"]``), then ``rerank TEST WEIGHTS OUT``; each must succeed. The tuning's stderr."""
    tuned = phrase_rescorer(
        "rerank-tune",
        str(dev),
        str(reference),
        str(weights),
        "--init",
        str(lists["ini"]),
        "--moses",
        str(lists["moses"]),
        *options,
    )
    assert tuned.returncode == 0, tuned.stderr
    r = phrase_rescorer("rerank", str(test), str(weights), str(out))
    assert r.returncode == 0, r.stderr
    return tuned.stderr
