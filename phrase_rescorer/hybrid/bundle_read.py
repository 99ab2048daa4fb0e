"""Reading a bundle (``bundle`` writes it, its docstring says what it records):
:func:`read_bundle` parses ``bundle.json`` into a :class:`system.Bundle` and checks every recorded
file before anything runs: a missing or changed one is refused with one line naming it
(:class:`BundleError`, exit 2), one whose content cannot be read too (``errors.HostError``, exit
6), one whose modification time alone changed is told to ``on_note``; a record that is not
complete, or whose format version and settings disagree, is refused too (exit 2).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any

from ..errors import HostError, UsageError
from . import recorded_files
from .system import (
    BATCH_VERSION,
    ENSEMBLE_VERSION,
    FORMAT,
    MOSES_NBEST_VERSION,
    ORDERS_VERSION,
    READ_VERSIONS,
    RECORD,
    Bundle,
    Candidates,
)


class BundleError(UsageError):
    """A bundle that cannot be written or used as it is (exit 2)."""


def _checked(directory: str, entry: dict[str, Any], where: str) -> recorded_files.Checked:
    """Refuse a missing or changed file (:class:`BundleError`, naming it and ``where`` it is recorded)."""
    found = recorded_files.check(directory, entry)
    if found.missing is not None:
        raise BundleError(f"{found.path}: {found.missing} (recorded in {where})")
    if found.differs is not None:
        raise BundleError(
            f"{found.path}: changed since the bundle was written (its {found.differs} differs from {where}): restore "
            "it, or write the bundle again (phrase-rescorer bundle)"
        )
    return found


def read_bundle(directory: str, verify: bool = True, on_note: Callable[[str], None] | None = None) -> Bundle:
    """The bundle in ``directory``; ``verify``: every recorded file checked first (module
    docstring), ``on_note`` told of those whose modification time alone changed."""
    directory = os.path.abspath(directory)
    where = os.path.join(directory, RECORD)
    try:
        with open(where, encoding="utf-8") as f:
            record = json.load(f)
    except FileNotFoundError:
        raise BundleError(f"{directory}: no {RECORD}: not a bundle (write one with phrase-rescorer bundle)") from None
    except (OSError, ValueError) as e:
        raise BundleError(f"{where}: unreadable ({e})") from None
    if not isinstance(record, dict) or record.get("format") != FORMAT:
        raise BundleError(f"{where}: not a {FORMAT}")
    if record.get("version") not in READ_VERSIONS:
        raise BundleError(
            f"{where}: format version {record.get('version')}, this program reads versions "
            f"{', '.join(map(str, READ_VERSIONS))}: write the bundle again (phrase-rescorer bundle)"
        )
    try:
        bundle = _bundle(directory, record)
        checked = [_checked(directory, entry, where) for entry in recorded_files.entries(record)] if verify else []
        retimed = [found.path for found in checked if found.retimed]
        if retimed and on_note is not None:
            on_note(
                f"{', '.join(retimed)}: modification time changed since the bundle was written, content unchanged "
                "(SHA-256): continued"
            )
    except (KeyError, TypeError, ValueError) as e:
        if isinstance(e, BundleError | HostError):  # HostError: a recorded file unreadable (exit 6)
            raise
        raise BundleError(f"{where}: not a complete bundle record ({type(e).__name__}: {e})") from None
    if bundle.candidates is not None and bundle.candidates.reached_only and not bundle.candidates.constrained:
        raise BundleError(
            f"{where}: its candidates are to be those the decoder can produce, without constrained decoding: "
            "write the bundle again"
        )
    found = bundle.candidates
    if found is not None and (
        record["version"] < found.version
        or (found.ensemble and len(found.networks) < 2)
        or (found.groups is not None and not found.ensemble)
    ):
        raise BundleError(
            f"{where}: format version {record['version']} and its candidates' settings disagree (an ensemble needs "
            f"version {ENSEMBLE_VERSION} and two networks or more, the decoder's first N hypotheses joined version "
            f"{MOSES_NBEST_VERSION}, an ensemble per target order version {ORDERS_VERSION}, sentences searched "
            f"together version {BATCH_VERSION}): write the bundle again"
        )
    if found is not None and found.moses_nbest is not None and not 1 <= found.moses_nbest <= bundle.nbest:
        raise BundleError(
            f"{where}: its candidates join the decoder's first {found.moses_nbest} hypotheses of a sentence, its lists "
            f"hold {bundle.nbest}: write the bundle again"
        )
    if [list(f) for f in bundle.layout] != record["features"]:
        raise BundleError(f"{where}: its features differ from those of its settings: write the bundle again")
    return bundle


def _count_or_none(value: Any, name: str) -> int | None:
    """A record's whole number (not a bool, which JSON keeps apart), or None."""
    if value is not None and type(value) is not int:
        raise ValueError(f"{name} is {value!r}, not a whole number")
    return value


def _batch(value: Any) -> int:
    """A record's sentences searched together: a whole number, at least 1."""
    if type(value) is not int or value < 1:
        raise ValueError(f"batch is {value!r}, not a whole number of sentences (at least 1)")
    return value


def _groups_or_none(value: Any, networks: int) -> tuple[tuple[int, ...], ...] | None:
    """A record's ensembles (the networks' indices of each, two ensembles or more that hold every
    network once), or None."""
    if value is None:
        return None
    groups = tuple(tuple(i for i in group if type(i) is int) for group in value)
    if len(groups) < 2 or sorted(i for group in groups for i in group) != list(range(networks)):
        raise ValueError(f"ensembles is {value!r}, not two ensembles or more that hold each of the {networks} networks")
    return groups


def _bundle(directory: str, record: dict[str, Any]) -> Bundle:
    found = record.get("candidates")
    candidates = (
        None
        if not found
        else Candidates(
            tuple(entry["path"] for entry in found["networks"]),
            found["nbest"],
            found["beam_size"],
            found["length_alpha"],
            found["max_length"],
            bool(found.get("constrained", False)),
            bool(found.get("reached_only", False)),
            bool(found.get("ensemble", False)),
            _count_or_none(found.get("moses_nbest"), "moses_nbest"),
            _groups_or_none(found.get("ensembles"), len(found["networks"])),
            _batch(found.get("batch", 1)),
        )
    )
    return Bundle(
        directory,
        record["nbest"],
        tuple((name, count) for name, count in record["decoder_features"]),
        tuple((entry["name"], entry["path"]) for entry in record["models"]),
        candidates,
        record["ngram_lm"]["path"] if record.get("ngram_lm") else None,
        record["lm_feature"],
    )
