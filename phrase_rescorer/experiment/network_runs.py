"""Whether another experiment's runs of a system with the network's column are this experiment's own.

``experiment --baseline-from DIR`` copies ``+ RNN``'s finished runs (``borrowed``) only where
tuning them here would repeat them: the same network (its file's SHA-256 as the other
experiment recorded it), a ``start.ini`` equal to this one's but for the rescored table's path
(each experiment writes its own, under its ``--out``; the other ``--out`` may have moved since),
and that table the same text, compared line by line after this experiment has written its own.
The seeds are checked with the runs (``borrowed``). A copied run's inis are then pointed at this
experiment's table (``repoint_table``), so that decoding with them (the reranked runs) does not
depend on the other directory.
"""

from __future__ import annotations

import itertools
import os
import re

from ..errors import EXIT_OS
from ..moses.ini_weights import features
from ..moses.phrase_table import PhraseTableError
from ..moses.table_reader import InputTable
from ..output import AtomicOutput
from .settings import Settings, read_settings
from .systems import ExperimentError, System, rescored_table
from .workdir import sha256_of

#: The feature whose table the network's column was appended to (``systems.prepare_system``).
TABLE_FEATURE = "TranslationModel0"


def network_difference(
    settings: Settings, source: str, system: System, start_ini: str
) -> tuple[str | None, tuple[str, str] | None]:
    """Why ``system``'s runs in the experiment at ``source`` are not this one's (None where they
    are), and where they are, (the table their inis name, this one's table). Their files missing
    or unreadable are a reason; this experiment's own ``start_ini`` or table unreadable raises."""
    recorded = read_settings(os.path.join(source, "settings.json")).get("fingerprints")
    theirs_model = recorded.get("model") if isinstance(recorded, dict) else None
    if theirs_model is None:
        return "it ran no network", None
    if settings.model is None or theirs_model != sha256_of(settings.model):
        return "another network than -m", None
    their_start = os.path.join(source, "systems", system.key, "start.ini")
    try:
        their_text = _read(their_start)
    except (OSError, UnicodeDecodeError) as e:
        return f"its {their_start} cannot be read: {_why(e)}", None
    try:
        our_text = _read(start_ini)
    except (OSError, UnicodeDecodeError) as e:
        raise ExperimentError(f"{start_ini}: cannot read it ({_why(e)})", EXIT_OS) from None
    theirs, ours = _table_path(their_text), _table_path(our_text)
    if theirs is None or ours is None:
        return f"{their_start} names no {TABLE_FEATURE} table", None
    if _repointed(their_text, theirs, ours) != our_text:
        return f"another start: {their_start} differs from {start_ini} beyond its table's path", None
    # their table where it is now (``theirs`` is where it was when their runs started)
    difference = _table_difference(rescored_table(os.path.join(source, "tables"), system), ours)
    return (difference, None) if difference else (None, (theirs, ours))


def repoint_table(ini: str, theirs: str, ours: str) -> None:
    """Make ``ini`` name the table ``ours`` wherever it names ``theirs`` (``path=THEIRS``)."""
    with open(ini, encoding="utf-8", newline="") as f:
        text = f.read()
    new = _repointed(text, theirs, ours)
    if new != text:
        with AtomicOutput(ini) as out:
            out.write(new.encode("utf-8"))


def _why(e: Exception) -> str:
    return getattr(e, "strerror", None) or str(e)


def _read(path: str) -> str:
    with open(path, encoding="utf-8", newline="") as f:
        return f.read()


def _table_path(ini_text: str) -> str | None:
    for feature in features(ini_text.splitlines()):
        if feature.name == TABLE_FEATURE:
            return feature.args.get("path")
    return None


def _repointed(text: str, theirs: str, ours: str) -> str:
    """``text`` with every whole ``path=THEIRS`` argument made ``path=OURS``."""
    return re.sub(rf"(?<!\S)path={re.escape(theirs)}(?!\S)", lambda _: f"path={ours}", text)


def _table_difference(theirs: str, ours: str) -> str | None:
    """Why the two tables' texts differ, or None where they hold the same lines (either may be
    compressed, in any format); theirs unreadable is a difference, ours an error."""

    def line(raw: bytes, terminator: bytes, _: int) -> bytes:
        return raw + terminator

    def error(e: PhraseTableError) -> ExperimentError:
        return ExperimentError(str(e), e.exit_code)

    try:
        mine = InputTable(ours, check_scores=False, parse=line)
    except PhraseTableError as e:
        raise error(e) from None
    with mine:
        try:
            other = InputTable(theirs, check_scores=False, parse=line)
        except PhraseTableError as e:
            return f"its table cannot be read: {e}"
        with other:
            try:
                same = all(a == b for a, b in itertools.zip_longest(mine, other))
            except PhraseTableError as e:
                if e.path == ours:
                    raise error(e) from None
                return f"its table cannot be read: {e}"
    return None if same else f"its table {theirs} differs from {ours}"
