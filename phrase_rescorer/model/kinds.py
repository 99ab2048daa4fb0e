"""The kinds of model file, told apart before any work: a phrase network (``train``), a
translation network (``train-nmt``), a CSLM (``train-lm``), each forward or inverse, whether the
best network, a kept or averaged one or a run's ``.last.pt``; the one reading of a model file
(``open_model``: its payload and kind, from which ``checkpoint.load_checkpoint`` and
``lm.lm_file.load_lm`` build without reading it again); and the one check every command that takes
a model makes of the file it is given (``check_kind``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .files import CSLM_FORMAT, FORMAT, CheckpointError, read_torch_file_hashed

#: What ``info["direction"]`` may say (``train --direction``).
DIRECTIONS = ("forward", "inverse")

#: The families of model file: what each is, the command that writes it.
FAMILIES: dict[str, tuple[str, str]] = {
    "phrase": ("phrase network", "phrase-rescorer train"),
    "sentence": ("translation network", "phrase-rescorer train-nmt"),
    "cslm": ("CSLM", "phrase-rescorer train-lm"),
}

#: A model file's kind: (family of :data:`FAMILIES`, direction of :data:`DIRECTIONS`).
ModelKind = tuple[str, str]

#: The families of network: every kind but the CSLM.
NETWORKS = ("phrase", "sentence")

#: Every option that takes a model file (the command and its option) with the families and
#: directions it takes (a CSLM has no direction): what a refused file is for (:func:`taken_by`).
TAKES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "phrase-rescorer rescore -m": (("phrase",), DIRECTIONS),  # rescore-phrase-table --model too
    "phrase-rescorer moses-step -m": (("phrase",), DIRECTIONS),  # moses-rescore-step -m too
    "phrase-rescorer inspect -m": (("phrase",), DIRECTIONS),
    "phrase-rescorer suggest -m": (NETWORKS, DIRECTIONS),
    "phrase-rescorer compare -m": (NETWORKS, DIRECTIONS),
    "phrase-rescorer embed -m": (NETWORKS, DIRECTIONS),
    "phrase-rescorer translate -m": (NETWORKS, DIRECTIONS),
    "phrase-rescorer average": (NETWORKS, DIRECTIONS),
    "phrase-rescorer score -m": ((*NETWORKS, "cslm"), DIRECTIONS),
    "phrase-rescorer nbest -m": ((*NETWORKS, "cslm"), DIRECTIONS),
    "phrase-rescorer bundle -m": ((*NETWORKS, "cslm"), DIRECTIONS),  # nbest -m's features
    "phrase-rescorer bundle --candidates": (("sentence",), ("forward",)),  # translate --n-best-list's candidates
    "phrase-rescorer experiment -m/--model": (("phrase",), ("forward",)),
    "phrase-rescorer experiment --inverse-model": (("phrase",), ("inverse",)),
    "phrase-rescorer experiment --nmt": (("sentence",), DIRECTIONS),
    "phrase-rescorer experiment --lm": (("cslm",), DIRECTIONS),
}


def taken_by(kind: ModelKind) -> str:
    """The options of :data:`TAKES` that take a file of ``kind``, the program named once:
    ``phrase-rescorer score -m, nbest -m, experiment --lm``."""
    family, direction = kind
    options = [
        option
        for option, (families, directions) in TAKES.items()
        if family in families and (family == "cslm" or direction in directions)
    ]
    return ", ".join(o if i == 0 else o.removeprefix("phrase-rescorer ") for i, o in enumerate(options))


@dataclass(frozen=True)
class ModelFile:
    """A model file read (:func:`open_model`): its path, what ``read_torch_file`` read, its kind,
    and the SHA-256 of the bytes read (what a record of the file should name: the file on disk may
    have been replaced since)."""

    path: str
    payload: dict[str, Any]
    kind: ModelKind
    sha256: str


def open_model(source: str | ModelFile) -> ModelFile:
    """The model file ``source`` read, the one reading of it (a :class:`ModelFile` is returned as it
    is); a missing, unreadable or foreign file is a :class:`CheckpointError` naming it."""
    if isinstance(source, ModelFile):
        return source
    payload, digest = read_torch_file_hashed(source)
    kind = kind_of(payload)
    if kind is None:
        raise CheckpointError(f"{source}: not a phrase_rescorer model file")
    return ModelFile(source, payload, kind, digest)


def path_of(source: str | ModelFile) -> str:
    """The path of a model file given by its path or read (:func:`open_model`)."""
    return source.path if isinstance(source, ModelFile) else source


def kind_of(payload: Any) -> ModelKind | None:
    """The kind of what ``read_torch_file`` read (None: no phrase_rescorer model file). A network's
    family is its ``info["trained_on"]`` (absent: phrase pairs), its direction ``info["direction"]``
    (absent: forward); a CSLM has no direction (forward)."""
    if not isinstance(payload, dict):
        return None
    if payload.get("format") == CSLM_FORMAT:
        return ("cslm", "forward")
    if payload.get("format") != FORMAT:
        return None
    return network_kind(payload.get("info"))


def network_kind(info: Any) -> ModelKind:
    """The kind of a network whose model file's ``info`` is ``info``."""
    info = info if isinstance(info, dict) else {}
    family = "sentence" if info.get("trained_on") == "sentence pairs" else "phrase"
    return family, "inverse" if info.get("direction") == "inverse" else "forward"


def phrase_network_warning(path: str, info: Any, what: str) -> str | None:
    """The warning for a phrase network given where a translation network is expected (None:
    it is one); ``what`` says what its output then is."""
    if network_kind(info)[0] == "sentence":
        return None
    return (
        f"{path} was trained on phrase pairs (phrase-rescorer train), not on sentence pairs "
        f"(phrase-rescorer train-nmt): {what}"
    )


def describe_kind(kind: ModelKind) -> str:
    """``an inverse phrase network (phrase-rescorer train --direction inverse)``."""
    family, direction = kind
    name, command = FAMILIES[family]
    if family != "cslm" and direction == "inverse":
        name, command = f"inverse {name}", f"{command} --direction inverse"
    return f"{'an' if name[0] in 'aeiou' else 'a'} {name} ({command})"


def check_kind(
    source: str | ModelFile, option: str, families: tuple[str, ...], directions: tuple[str, ...] = DIRECTIONS
) -> ModelFile:
    """The model file ``source`` (:func:`open_model`) given to ``option`` (the command and its
    option: ``phrase-rescorer translate -m``), refused (:class:`CheckpointError`, exit 4) unless it
    is of one of ``families`` and ``directions``; the one check of every command that takes a model,
    made before any work. The message says what the file is, which options take it, and what
    ``option`` takes."""
    opened = open_model(source)
    family, direction = opened.kind
    if family in families and (family == "cslm" or direction in directions):
        return opened
    both = set(directions) == set(DIRECTIONS)  # "a phrase network": of either direction
    wanted = " or ".join(
        describe_kind((f, d)) for f in families for d in (("forward",) if f == "cslm" or both else directions)
    )
    raise CheckpointError(
        f"{opened.path}: {describe_kind(opened.kind)}, for {taken_by(opened.kind)}; {option} takes {wanted}"
    )
