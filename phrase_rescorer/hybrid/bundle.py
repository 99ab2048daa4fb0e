"""A tuned hybrid system in one directory: what ``translate-hybrid`` reads to translate as the
step-by-step pipeline does (decode, the networks' candidates, merge, features, rerank).

``bundle.json`` records, in format version :data:`VERSION` (:data:`REACHED_ONLY_VERSION` for a
bundle whose candidates are those the decoder can produce, which a reader of version 1 would merge
all of; :data:`ENSEMBLE_VERSION` for one whose candidate networks translate as one ensemble, which
an earlier reader would run one by one; :data:`MOSES_NBEST_VERSION` for one whose candidates join
only the decoder's first N hypotheses of each sentence, which an earlier reader would join to all;
:data:`ORDERS_VERSION` for one whose candidate networks write in both orders and translate as one
ensemble per order, which an earlier reader would try to run as one; :data:`BATCH_VERSION` for one
whose candidate networks searched several sentences' beams together, which an earlier reader
would search one at a time, its products rounding differently; ``bundle_read`` reads all six,
:data:`READ_VERSIONS`):

* the settings: the decoder's n-best size, the candidate networks with their beam, n-best size,
  length normalisation, longest output and sentences searched together, and whether they translate
  each on its own (a list each) or as one ensemble (``translate -m A -m B``: one list; networks of
  both target orders: one ensemble per order, ``analysis.translate.order_ensembles``, a list each),
  how many of the decoder's distinct hypotheses of each sentence they join (``merge-nbest
  --moses-nbest``; all by default), the feature networks in order with the names their features get
  (``nbest``'s: ``CSLM0``, ``NMT0``, ...), the n-gram LM that gives the candidates' LM feature
  (``merge-nbest --lm``) and that feature's name: the ini's feature of that name (its first KENLM
  feature by default) and its ``path=`` (:func:`candidate_lm`);
* the features of the lists the system reranks, in order: the decoder's (``moses -show-weights``,
  ``moses.decoder.nbest_layout``), then ``FromMoses`` and ``FromNet0``, ... with candidates
  (``reranking.merge``; an ensemble's list: ``FromNet0`` alone; one per order: ``FromNet0`` and
  ``FromNet1``), and ``MosesReached`` where the weights name it (they were tuned on lists merged with
  constrained decoding, ``merge-nbest --ini``: the candidates are decoded so too), then the
  networks' (``scoring.nbest``); ``reached_only``: the candidates the decoder cannot produce are
  left out, as ``merge-nbest --reached-only`` leaves them out of the lists the weights were tuned
  on (``MosesReached`` is then 1 on every line);
* every file (``recorded_files``): the tuned moses.ini and the reranking weights as copies in the
  directory, the networks by absolute path, size and SHA-256, and the n-gram LM and every file
  the ini's ``path=`` stand for (tables, LMs: ``moses.ini_paths.path_files``, each file under a
  directory on its own) also with their modification time: hashed once when the bundle is
  written, and again only for a file whose modification time changed (a copy that did not keep
  the times, a restored backup), which goes on when its content is the recorded one; hashing
  gigabytes on every run would cost minutes, and a file rewritten in place changes its
  modification time. Bundles written before the hash was recorded compare size and modification
  time alone.

:func:`write_bundle` refuses, before writing anything: an output directory that exists and is not
empty, or whose parent is no writable directory (before any model is read); a moses.ini ``path=``
that is relative (the decoder reads it from the directory it runs in) or stands for no file; a
model file that its option does not take (``kinds.TAKES``: ``-m`` any model ``nbest -m`` takes,
``--candidates`` a forward translation network; an ensemble's networks that cannot translate as
one, ``analysis.translate.ensemble_members``, or no two of one target order); an ``--lm`` that
is not the file of the ini's LM feature; weights that do not name exactly the features the system's lists will have
(``reranking.weights.vector``'s check). The directory is written as a temporary beside it, renamed
into place once complete. Reading a bundle, its record and files checked: ``bundle_read``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Sequence
from typing import Any

from ..analysis.translate import order_ensembles
from ..errors import UsageError
from ..model.checkpoint import Checkpoint, load_checkpoint
from ..model.kinds import TAKES, check_kind
from ..moses.decoder import nbest_layout
from ..moses.ini_paths import decoder_files
from ..moses.ini_paths import ngram_lm as ini_ngram_lm
from ..moses.nbest import Layout, show_layout
from ..moses.toolkit import MosesToolkit
from ..output_paths import OutputError
from ..reranking.merge import REACHED_INDICATOR, added_indicator
from ..reranking.weights import Weights, WeightsError, read_weights_file, vector
from ..scoring.features import default_names, model_kind
from . import recorded_files
from .bundle_read import BundleError, read_bundle
from .system import FORMAT, INI_COPY, RECORD, VERSION, WEIGHTS_COPY, Bundle, Candidates, system_layout


def check_weights(weights: Weights, layout: Layout) -> None:
    """Refuse weights that do not name exactly ``layout``'s features, each with its count (a
    moses.ini as weights: at least them), as ``rerank`` refuses them for a list."""
    try:
        vector(weights, layout, source=weights.path)
    except WeightsError as e:
        raise BundleError(f"{e} (the bundle's lists: features {show_layout(layout)})") from None


BUNDLE_MODELS = "phrase-rescorer bundle -m"
BUNDLE_CANDIDATES = "phrase-rescorer bundle --candidates"


def candidate_lm(ini: str, lm: str | None, lm_feature: str | None) -> tuple[str, str] | None:
    """The LM feature the candidates get and its n-gram LM (``merge-nbest --lm-feature``,
    ``--lm``): the ini's feature ``lm_feature`` (None: its first KENLM feature, as ``experiment
    --network-candidates`` takes it), whose ``path=`` ``lm``, when given, must be; None: the ini
    has no KENLM feature and no ``lm`` is given (the candidates' LM feature is then 0)."""
    feature = ini_ngram_lm(ini, lm_feature)
    if feature is None or "path" not in feature.args:
        if lm is None and lm_feature is None:
            return None
        what = f"no feature {lm_feature} with a path=" if lm_feature is not None else "no KENLM feature"
        raise BundleError(f"{ini}: {what}: --lm is the n-gram LM of the ini's feature --lm-feature names")
    path = feature.args["path"]
    if lm is not None and not (os.path.exists(path) and os.path.samefile(lm, path)):
        raise BundleError(
            f"--lm {lm} is not the file of {ini}:{feature.index + 1}: {feature.name} path={path}: the candidates' "
            f"{feature.name} must be the decoder's: give that file (or name its feature with --lm-feature)"
        )
    return feature.name, lm if lm is not None else path


def write_bundle(
    directory: str,
    toolkit: MosesToolkit,
    *,
    ini: str,
    weights: str,
    models: Sequence[str] = (),
    candidates: Candidates | None = None,
    nbest: int = 100,
    ngram_lm: str | None = None,
    lm_feature: str | None = None,
    on_note: Callable[[str], None] | None = None,
    on_warning: Callable[[str], None] | None = None,
) -> Bundle:
    """Write the bundle ``directory`` (module docstring) and return it. With ``candidates``, their
    LM feature and n-gram LM are :func:`candidate_lm`'s: ``on_note`` is told the LM taken from the
    ini, ``on_warning`` that the feature is 0 (no KENLM feature), once every check has passed."""
    final = os.path.abspath(directory)
    if os.path.lexists(final) and not (os.path.isdir(final) and not os.path.islink(final) and not os.listdir(final)):
        raise OutputError(final, "exists and is not an empty directory: give a new directory for the bundle")
    parent = os.path.dirname(final)
    if not os.path.isdir(parent):
        raise OutputError(final, f"its directory {parent} does not exist", errno.ENOENT)
    if not os.access(parent, os.W_OK | os.X_OK):
        raise OutputError(final, f"permission denied: cannot create the bundle in {parent}", errno.EACCES)
    for path in (ini, weights, *([ngram_lm] if ngram_lm else [])):  # a network's file: its loader says
        if not os.path.isfile(path):
            raise BundleError(f"{path}: no such file")
    named = decoder_files(ini)
    opened = [check_kind(path, BUNDLE_MODELS, *TAKES[BUNDLE_MODELS]) for path in models]
    proposing = [  # each a forward translation network, readable; an ensemble's able to translate as one
        load_checkpoint(check_kind(path, BUNDLE_CANDIDATES, *TAKES[BUNDLE_CANDIDATES]), BUNDLE_CANDIDATES)
        for path in (candidates.networks if candidates is not None else ())
    ]
    if candidates is not None and candidates.ensemble:
        candidates = _ensembled(candidates, proposing)
    lm = candidate_lm(ini, ngram_lm, lm_feature) if candidates is not None else None
    from_ini = lm is not None and ngram_lm is None
    lm_feature, ngram_lm = lm if lm is not None else (lm_feature or "LM0", None)
    weights_file = read_weights_file(weights)
    if (
        candidates is not None and REACHED_INDICATOR in weights_file.by_name
    ):  # tuned on lists made with merge-nbest --ini
        candidates = dataclasses.replace(candidates, constrained=True)
    if candidates is not None and candidates.moses_nbest is not None and candidates.moses_nbest > nbest:
        raise BundleError(
            f"the candidates join the decoder's first {candidates.moses_nbest} hypotheses of a sentence, but its "
            f"lists hold {nbest}: give a smaller number, or decode more (--nbest)"
        )
    if candidates is not None and candidates.reached_only and not candidates.constrained:
        raise BundleError(
            f"{weights}: the weights name no {REACHED_INDICATOR}, but the candidates are to be those the decoder "
            "can produce (--reached-only): give the weights tuned on lists of merge-nbest --ini --reached-only"
        )
    names = default_names([model_kind(model) for model in opened])
    decoder = nbest_layout(toolkit, ini)
    if ngram_lm is not None and candidates is not None and dict(decoder).get(lm_feature) != 1:
        raise BundleError(
            f"{ini}: the decoder's lists have no feature {lm_feature} of one value (features {show_layout(decoder)}): "
            "name the KENLM feature of the ini (--lm-feature)"
        )
    layout = system_layout(decoder, candidates, names)
    try:
        check_weights(weights_file, layout)
    except BundleError:
        other = None  # the other choice of --ensemble, where there is one
        if candidates is not None and candidates.ensemble:
            other = dataclasses.replace(candidates, ensemble=False, groups=None)
        elif candidates is not None and len(candidates.networks) > 1:
            with contextlib.suppress(UsageError):  # none: the refusal says what is missing
                other = _ensembled(candidates, proposing)
        if candidates is not None and other is not None:
            _check_ensemble_choice(weights_file, system_layout(decoder, other, names), candidates, other)
        raise
    if candidates is not None and lm is None and on_warning is not None:
        on_warning(
            f"{ini} has no KENLM feature: new candidates get the LM feature {lm_feature} 0 (Moses' lines keep theirs)"
        )
    elif from_ini and on_note is not None:
        on_note(
            f"the candidates' {lm_feature}: the n-gram LM {ngram_lm} of the ini's {lm_feature} feature "
            "(through bin/query of the Moses that translates)"
        )
    record: dict[str, Any] = {
        "format": FORMAT,
        "version": VERSION if candidates is None else candidates.version,
        "nbest": nbest,
        "features": [[name, count] for name, count in layout],
        "decoder_features": [[name, count] for name, count in decoder],
        "ini": recorded_files.copied(ini, INI_COPY),
        "weights": recorded_files.copied(weights, WEIGHTS_COPY),
        "models": [{"name": name, **recorded_files.hashed(path)} for name, path in zip(names, models, strict=True)],
        "candidates": None
        if candidates is None
        else {
            "networks": [recorded_files.hashed(path) for path in candidates.networks],
            "nbest": candidates.nbest,
            "beam_size": candidates.beam_size,
            "length_alpha": candidates.length_alpha,
            "max_length": candidates.max_length,
            "constrained": candidates.constrained,
            "reached_only": candidates.reached_only,
            "ensemble": candidates.ensemble,
            "moses_nbest": candidates.moses_nbest,
            **({} if candidates.groups is None else {"ensembles": [list(group) for group in candidates.groups]}),
            **({} if candidates.batch == 1 else {"batch": candidates.batch}),
        },
        "ngram_lm": None if ngram_lm is None else recorded_files.read_by_decoder(ngram_lm),
        "lm_feature": lm_feature,
        "ini_files": [recorded_files.read_by_decoder(path) for path in named],
    }
    temporary = tempfile.mkdtemp(prefix=f".{os.path.basename(final)}.", dir=parent)
    try:
        shutil.copyfile(ini, os.path.join(temporary, INI_COPY))
        shutil.copyfile(weights, os.path.join(temporary, WEIGHTS_COPY))
        with open(os.path.join(temporary, RECORD), "w", encoding="utf-8") as f:
            json.dump(record, f, indent=1)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.chmod(temporary, 0o777 & ~_umask())
        os.rename(temporary, final)  # onto an empty directory, or none
    except BaseException:
        shutil.rmtree(temporary, ignore_errors=True)
        raise
    return read_bundle(final, verify=False)


def _ensembled(candidates: Candidates, proposing: Sequence[Checkpoint]) -> Candidates:
    """``candidates`` as ensembles, one per target order of the networks ``proposing``
    (``order_ensembles``; each of one vocabulary and units, else UsageError, exit 2); refused where
    no two networks write in one order (an ensemble of one is the network itself)."""
    groups = order_ensembles(proposing)
    if len(groups) == len(proposing):
        raise BundleError(
            "--ensemble: no two --candidates write their target in one order; an ensemble needs two or more of one "
            "order (left to right, or right to left)"
        )
    return dataclasses.replace(candidates, ensemble=True, groups=tuple(map(tuple, groups)) if len(groups) > 1 else None)


def _check_ensemble_choice(weights: Weights, layout: Layout, candidates: Candidates, other: Candidates) -> None:
    """For weights that do not fit the lists of ``candidates``: refuse, saying so, those that fit
    the lists of ``other``, the other choice of ``--ensemble`` (their ``layout``); else return (the
    caller's refusal says what is missing)."""
    try:
        check_weights(weights, layout)
    except BundleError:
        return
    if candidates.ensemble:
        whose = "one ensemble's" if candidates.lists == 1 else "the ensembles' of each target order"
        raise BundleError(
            f"{weights.path}: the weights name {added_indicator(candidates.lists)}: tuned on a list per candidate "
            f"network, not on {whose}: leave out --ensemble"
        )
    named = added_indicator(0) if other.lists == 1 else f"{added_indicator(0)} to {added_indicator(other.lists - 1)}"
    whose = "one list of the candidate networks' ensemble" if other.lists == 1 else "a list per target order's ensemble"
    raise BundleError(
        f"{weights.path}: the weights name {named} alone: tuned on {whose} (translate -m A -m B): give --ensemble"
    )


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
