"""Tuning reranking weights with Moses' MERT (or its kbmira) on one fixed n-best list.

The same two programs mert-moses.pl runs each iteration, given the same arguments
(scripts/training/mert-moses.pl)::

    my $cmd = "$mert_extract_cmd $mert_extract_args --scfile $score_file --ffile $feature_file
               -r " . join(",", @references) . " -n $nbest_file";                    (867)
    $cmd = "$mert_mert_cmd -d $DIM $mert_mert_args";                                  (896)
    my $mert_settings = " -n $___RANDOM_RESTARTS";                                    (898)

with BLEU and ``--scconfig case:true`` (Moses' nbest-rescore/train.py uses the same), ``-n 20``
random restarts as mert-moses.pl's default, and ``init.opt`` as mert-moses.pl writes it: start
weights, then the random-restart ranges (0 and 1 per weight, its defaults at lines 1395-1396).
The start weights are the decoder's tuned ones, the added features at 0: Powell's search then
begins at the decoder's own 1-best, which reranking without a new feature reproduces (MOSES.md).

``mert`` prints ``Best point: w1 .. wn  => BLEU`` on stderr and writes the weights to
``weights.txt`` in its working directory.

The other optimiser, ``kbmira`` (batch MIRA, Cherry and Foster 2012; Moses builds it from the
same mert/ directory), reads the same features.dat and scores.dat. mert-moses.pl --batch-mira
runs it as::

    $mira_settings .= " --dense-init run$run.dense";                                    (939)
    $cmd = "$mert_mira_cmd $mira_settings $seed_settings $pro_file_settings -o $mert_outfile";  (999)

with ``run$run.dense`` one ``Name= value`` line per weight (``print $denseout "$names[$i]=
$vals[$i]\n";``, 807), the start weights. kbmira runs its own default of 60 passes, keeps the
weights of the pass whose 1-best has the best dev BLEU (``Best BLEU = 0.61...`` on stderr) and
writes them as ``F0 w0``, ``F1 w1``, ... in features.dat's column order; unlike mert's, they
are not normalised (a scale does not change which hypothesis is best).
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..errors import HostError
from ..moses.nbest import NbestError
from ..moses.toolkit import MosesToolkit
from ..output import AtomicOutput
from .nbest_features import NbestMatrix
from .weights import WeightsError

RESTARTS = 20
#: The optimisers ``tune`` runs (the first is the default).
OPTIMIZERS = ("mert", "kbmira")
_BEST = re.compile(r"^Best point:((?:\s+\S+)+?)\s+=>\s+(\S+)", re.M)
_MIRA_BEST = re.compile(r"^Best BLEU = (\S+)", re.M)
_MIRA_WEIGHT = re.compile(r"^F([0-9]+) (\S+)$")
#: The metric extractor, mert and kbmira are given.
_SCORER = ("--sctype", "BLEU", "--scconfig", "case:true")


class RerankError(HostError):
    pass


#: The largest magnitude Moses' extractor, mert and kbmira hold: they read feature values and
#: weights as single-precision floats (mert/Types.h: ``typedef float FeatureStatsType;``,
#: ``typedef float parameter_t;``), where a larger one is inf and the search is lost.
SINGLE_MAX = float(np.finfo(np.float32).max)


def check_single_precision(matrix: NbestMatrix, start: np.ndarray, source: str, skip: Sequence[int] = ()) -> None:
    """Refuse, before any tuning, a value of the list (``NbestError``, naming its file and line)
    or a start weight (``WeightsError``, naming ``source``) beyond :data:`SINGLE_MAX`: finite
    here, infinite for Moses' optimisers, whose weights would then be meaningless. ``skip``: value
    columns Moses is not given (left out of the tuning), not checked."""
    beyond = f"beyond what Moses' extractor and mert hold (single-precision floats, +-{SINGLE_MAX:.4g})"
    large = np.abs(matrix.features) > SINGLE_MAX
    large[:, list(skip)] = False
    columns = np.flatnonzero(np.abs(start) > SINGLE_MAX)
    if len(columns):
        column = int(columns[0])
        raise WeightsError(
            f"{source}: the start weight {float(start[column]):g} of {matrix.column_name(column)} is {beyond}: "
            "give weights of a smaller magnitude"
        )
    lines, columns = np.nonzero(large)
    if len(lines):
        line, column = int(lines[0]), int(columns[0])
        raise NbestError(
            matrix.path,
            line + 1,
            f"the value {float(matrix.features[line, column]):g} of {matrix.column_name(column)} is {beyond}, "
            "where it would be infinite: no weights can be tuned on it",
        )


@dataclass
class TuneResult:
    weights: np.ndarray
    dev_bleu: float  # the optimiser's own figure (0-100) on the dev n-best list (kbmira's: see _kbmira)


def _run(argv: list[str], cwd: str, log: str) -> str:
    with open(os.path.join(cwd, log), "wb") as err:
        result = subprocess.run(argv, cwd=cwd, stdout=subprocess.PIPE, stderr=err)
    with open(os.path.join(cwd, log), encoding="utf-8", errors="replace") as f:
        text = f.read()
    if result.returncode != 0:
        tail = "".join(text.splitlines(keepends=True)[-5:])
        raise RerankError(
            f"{os.path.basename(argv[0])} failed (exit {result.returncode}); see {os.path.join(cwd, log)}:\n{tail}"
        )
    return text


#: The files ``tune`` writes in its working directory (``rerank-tune --work-dir`` keeps them); the
#: n-best list's plain copy (``nbest.txt``) beside them is written by the caller.
WORK_FILES = (
    "reference.0.txt",
    "scores.dat",
    "features.dat",
    "init.opt",
    "weights.txt",
    "extractor.log",
    "mert.log",
    "init.dense",
    "kbmira.weights",
    "kbmira.log",
)
NBEST_COPY = "nbest.txt"


def expected_header(layout: Sequence[tuple[str, int]]) -> list[str]:
    """The feature names extractor writes into the header of features.dat for ``layout``: each
    dense feature's name with the index of each of its values (mert/Data.cpp,
    ``Data::InitFeatureMap``: ``ss << tmp_name << "_" << tmp_index << " ";``)."""
    return [f"{name}_{i}" for name, count in layout for i in range(count)]


def check_header(features_dat: str, layout: Sequence[tuple[str, int]], nbest: str) -> None:
    """Refuse a features.dat whose columns are not ``layout``'s (``FEATURES_TXT_BEGIN_0 0 N DIMS
    Name_0 Name_1 ...``, mert/FeatureArray.cpp): what mert tunes and what the weights file says
    must be the same columns."""
    with open(features_dat, encoding="utf-8", errors="replace") as f:
        header = f.readline().split()
    got, want = header[4:], expected_header(layout)
    if not header or not header[0].startswith("FEATURES_TXT_BEGIN") or got != want:
        raise NbestError(
            nbest,
            None,
            f"Moses' extractor reads the features as {' '.join(got[:40]) or 'nothing'}, this list's first line "
            f"gives {' '.join(want[:40])}: the columns would not be the features the weights name",
        )


def tune(
    toolkit: MosesToolkit,
    nbest: str,
    references: Sequence[Sequence[str]],
    start: np.ndarray,
    work_dir: str,
    *,
    layout: Sequence[tuple[str, int]] | None = None,
    seed: int = 1,
    restarts: int = RESTARTS,
    threads: int = 1,
    optimizer: str = "mert",
    leave_out: Sequence[str] = (),
) -> TuneResult:
    """Run extractor and ``optimizer`` (one of :data:`OPTIMIZERS`; ``restarts`` and ``threads``
    are mert's) in ``work_dir`` (created, or emptied of a previous attempt's files).
    ``nbest`` is read by extractor: plain text, or gzip named ``.gz`` (``nbest_features.read_matrix``
    writes such a copy of any list); ``references``: the lines of each reference (read by content,
    ``data.corpus.read_lines``), written plain for extractor (LF ends: a CRLF reference would
    give it tokens ending in ``\\r``). ``layout``: the list's dense features, checked against
    the columns extractor found (:func:`check_header`). ``leave_out``: features of ``layout``
    (and weights of ``start``) that ``nbest`` does not hold, taken out of it by the caller
    (``nbest_features.read_matrix(copy_to=..., leave_out=...)``): the optimiser tunes the others
    as on a list that never had them (extractor merges the hypotheses they alone told apart), and
    their weights are 0 in the result."""
    if optimizer not in OPTIMIZERS:  # the arguments checked before the work directory is touched
        raise ValueError(f"optimizer {optimizer!r}: one of {', '.join(OPTIMIZERS)}")
    if optimizer == "kbmira" and layout is None:  # its start weights are named: "Name= value"
        raise ValueError("kbmira needs the list's layout (the names of its start weights)")
    if leave_out and (layout is None or isinstance(leave_out, str)):
        raise ValueError("leave_out: feature names of the list's layout, which it needs")
    if layout is not None and set(leave_out) - {name for name, _ in layout}:
        raise ValueError(f"leave_out {sorted(set(leave_out) - {name for name, _ in layout})}: not in the layout")
    names = [name for name, count in layout or [] for _ in range(count)] or [""] * len(start)
    kept = [column for column, name in enumerate(names) if name not in leave_out]
    if not kept or len(names) != len(start):
        raise ValueError(f"{len(start)} start weights for {len(names)} values, {len(kept)} of them tuned")
    os.makedirs(work_dir, exist_ok=True)
    for name in WORK_FILES:
        with_path = os.path.join(work_dir, name)
        if os.path.lexists(with_path):
            os.remove(with_path)
    reference_files = []
    for i, lines in enumerate(references):
        name = os.path.join(work_dir, f"reference.{i}.txt")
        with AtomicOutput(name, compress=False) as out:
            out.write("".join(line + "\n" for line in lines).encode("utf-8"))
        reference_files.append(os.path.abspath(name))
    _run(
        [
            toolkit.path("bin/extractor"),
            *_SCORER,
            "--scfile",
            "scores.dat",
            "--ffile",
            "features.dat",
            "-r",
            ",".join(reference_files),
            "-n",
            os.path.abspath(nbest),
        ],
        work_dir,
        "extractor.log",
    )
    if layout is not None:
        held = [(name, count) for name, count in layout if name not in leave_out]
        check_header(os.path.join(work_dir, "features.dat"), held, nbest)
    kept_start = np.asarray(start, dtype=np.float64)[kept]
    kept_names = [names[column] for column in kept]
    result = _optimise(toolkit, kept_start, work_dir, kept_names, seed, restarts, threads, optimizer)
    weights = np.zeros(len(start), dtype=np.float64)
    weights[kept] = result.weights
    return TuneResult(weights, result.dev_bleu)


def _optimise(
    toolkit: MosesToolkit,
    start: np.ndarray,
    work_dir: str,
    names: Sequence[str],
    seed: int,
    restarts: int,
    threads: int,
    optimizer: str,
) -> TuneResult:
    """``optimizer`` on the features.dat and scores.dat in ``work_dir`` from ``start``; ``names``:
    the feature of each weight (kbmira's start weights are named)."""
    if optimizer == "kbmira":
        return _kbmira(toolkit, start, work_dir, names, seed)
    dims = len(start)
    with open(os.path.join(work_dir, "init.opt"), "w", encoding="utf-8") as f:
        f.write(" ".join(repr(float(w)) for w in start) + "\n")
        f.write(" ".join(["0"] * dims) + "\n")
        f.write(" ".join(["1"] * dims) + "\n")
    log = _run(
        [
            toolkit.path("bin/mert"),
            "-d",
            str(dims),
            *_SCORER,
            "--ffile",
            "features.dat",
            "--scfile",
            "scores.dat",
            "--ifile",
            "init.opt",
            "-n",
            str(restarts),
            "-r",
            str(seed),
            "--threads",
            str(threads),
        ],
        work_dir,
        "mert.log",
    )
    found = _BEST.findall(log)
    if not found:
        raise RerankError(f"mert printed no 'Best point'; see {os.path.join(work_dir, 'mert.log')}")
    values, bleu = found[-1]
    weights = np.array([float(v) for v in values.split()], dtype=np.float64)
    if len(weights) != dims:
        raise RerankError(f"mert returned {len(weights)} weights for {dims} features")
    return TuneResult(weights, 100.0 * float(bleu))


def dense_only(features_dat: str) -> None:
    """Rewrite ``features_dat`` without its sparse features, so that kbmira tunes the dense
    weights alone, as mert does and as reranking applies them. extractor writes a sparse
    feature as a ``name=value`` token after a hypothesis' dense values (mert/FeatureStats.cpp,
    ``SparseVector::write``: ``out << name << sep << i->second << " ";``, ``sep`` ``=``), and
    kbmira would weigh them too (mert/kbmira.cpp writes their weights by name beside ``F0``,
    ``F1``, ...), tuning the dense weights beside features no reranked choice adds."""
    with open(features_dat, "rb") as f:
        lines = f.read().split(b"\n")
    if not any(b"=" in line for line in lines if not line.startswith(b"FEATURES_TXT_")):
        return
    kept = [
        line if line.startswith(b"FEATURES_TXT_") else b" ".join(t for t in line.split(b" ") if b"=" not in t)
        for line in lines
    ]
    with AtomicOutput(features_dat, compress=False) as out:
        out.write(b"\n".join(kept))


def _kbmira(toolkit: MosesToolkit, start: np.ndarray, work_dir: str, names: Sequence[str], seed: int) -> TuneResult:
    """kbmira on the features.dat and scores.dat extractor wrote in ``work_dir``, from ``start``.
    Its ``Best BLEU`` is its own evaluation of the averaged weights; on the en→fr dev lists the
    weights it writes chose hypotheses of 0.9 BLEU more than that figure (computed from the same
    scores.dat), so callers that report BLEU compute it from the chosen lines."""
    dims = len(start)
    if len(names) != dims:
        raise RerankError(f"{dims} start weights for {len(names)} feature values")
    dense_only(os.path.join(work_dir, "features.dat"))
    with open(os.path.join(work_dir, "init.dense"), "w", encoding="utf-8") as f:
        f.write("".join(f"{name}= {float(w)!r}\n" for name, w in zip(names, start, strict=True)))
    files = ["--ffile", "features.dat", "--scfile", "scores.dat"]
    argv = [toolkit.path("bin/kbmira"), "--dense-init", "init.dense", *_SCORER, *files, "-r", str(seed)]
    log = _run([*argv, "-o", "kbmira.weights"], work_dir, "kbmira.log")
    found = _MIRA_BEST.findall(log)
    if not found:
        raise RerankError(f"kbmira printed no 'Best BLEU'; see {os.path.join(work_dir, 'kbmira.log')}")
    if float(found[-1]) == 0.0 and not os.path.exists(os.path.join(work_dir, "kbmira.weights")):
        # kbmira writes the weights of a pass only when its BLEU beats the best so far, which
        # starts at 0 (mert/kbmira.cpp: ``if(bleu > bestBleu) {``): no pass scored above 0 (say,
        # no hypothesis has a 4-gram of its reference), no weights beat the start, which is kept
        return TuneResult(np.array(start, dtype=np.float64), 0.0)
    values: dict[int, float] = {}
    with open(os.path.join(work_dir, "kbmira.weights"), encoding="utf-8") as f:
        for line in f:
            match = _MIRA_WEIGHT.match(line.strip())
            if match:  # dense weights only: features.dat has no sparse ones (dense_only)
                values[int(match.group(1))] = float(match.group(2))
    if sorted(values) != list(range(dims)):
        raise RerankError(
            f"kbmira wrote {len(values)} dense weights for {dims} features; "
            f"see {os.path.join(work_dir, 'kbmira.weights')}"
        )
    return TuneResult(np.array([values[i] for i in range(dims)], dtype=np.float64), 100.0 * float(found[-1]))
