"""moses.ini: point a phrase dictionary at a rescored table and give it its extra feature(s).

A moses.ini (Moses 2 and later) declares every feature function on one line of its
``[feature]`` section and gives its weights on one line of the ``[weight]`` section::

    [feature]
    PhraseDictionaryMemory name=TranslationModel0 num-features=4 path=/m/phrase-table.gz input-factor=0 output-factor=0
    [weight]
    TranslationModel0= 0.2 0.2 0.2 0.2

Moses refuses a table whose lines do not carry exactly ``num-features`` scores, and a feature
whose weight count differs. Patching therefore changes exactly three things and keeps every
other byte: ``path=`` on the named phrase dictionary (the new table, as an absolute path, since
mert-moses.pl runs the decoder from its own working directory), ``num-features=`` (+K), and the
weight line (K more numbers). A feature without ``name=`` is called as Moses calls it: its type
followed by its index among the unnamed features of that type (``PhraseDictionaryMemory0``).

Checks: the table the ini points at, when it is readable text, must carry ``num-features``
scores (else the ini does not describe it, and patching would hide the mismatch); the new table
must be in a form Moses loads and carry ``num-features + K`` scores, K read off it when not
given (:mod:`.table_forms`: text, Compact ``.minphr``, OnDisk and ProbingPT directories, each
with its recorded count). The line's type becomes the one that loads the new table (a
PhraseDictionaryMemory line given a ``.minphr`` becomes PhraseDictionaryCompact); a text table
for a binarized line is refused with the command that binarizes it. The decoders do not check a
binarized table's count (a ProbingPT made with CreateProbingPT's default ``--num-scores 4``
crashes moses2 on a 5-feature line).

Note that the decoder itself does not fall back to ``.gz``: ``PhraseDictionaryMemory
path=model/phrase-table.1`` fails with "Can't read model/phrase-table.1" when only
``phrase-table.1.gz`` exists (the ini that EMS's create-config writes is decoded only after
filter-model-given-input.pl has rewritten its paths).
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass

from ..errors import IniError
from .binarized import binarize_command
from .columns import START_WEIGHT
from .score_format import format_number
from .stems import table_candidates
from .table_files import table_columns
from .table_forms import FEATURE_TYPES, FORM_OF_TYPE, TableForm, TableFormError, table_form

#: Phrase-dictionary types whose ``path=`` is a text table that can be checked.
TEXT_TABLE_TYPES = ("PhraseDictionaryMemory",)
#: Feature types that are phrase dictionaries besides ``PhraseDictionary*``.
OTHER_DICTIONARY_TYPES = ("ProbingPT",)

_SECTION = re.compile(r"^\s*\[([^\]]+)\]")
_NEWLINE = re.compile(r"[\r\n]+$")


class MosesIniError(IniError):
    """A moses.ini that cannot be patched, or that does not match its phrase table."""


@dataclass
class FeatureLine:
    """A phrase dictionary of the ``[feature]`` section."""

    index: int  # line number (0-based) in the file
    type: str
    name: str
    num_features: int
    path: str | None


@dataclass
class PatchResult:
    text: str  # the patched moses.ini
    name: str
    type: str
    old_features: int
    new_features: int
    old_path: str | None
    new_path: str
    checked: list[str]  # what could be verified against the tables (for the user)
    new_type: str = ""  # the dictionary type of the patched line


def _content(line: str) -> str:
    """A line without its end of line and its comment (Moses reads ``#`` to the end as one)."""
    return _NEWLINE.sub("", line).split("#", 1)[0]


def _sections(lines: Sequence[str]) -> list[str | None]:
    """The section each line belongs to (None before the first header)."""
    current: str | None = None
    out: list[str | None] = []
    for line in lines:
        m = _SECTION.match(_content(line))
        if m:
            current = m.group(1).strip()
        out.append(current)
    return out


def phrase_dictionaries(lines: Sequence[str], ini: str = "moses.ini") -> list[FeatureLine]:
    """Every ``PhraseDictionary*`` line of the ``[feature]`` section."""
    sections = _sections(lines)
    if "feature" not in sections:
        raise MosesIniError(
            f"{ini}: no [feature] section; this is not a Moses 2 moses.ini (older files with "
            "[ttable-file] must be converted first, e.g. by rerunning train-model.perl's "
            "create-config step with a current Moses)"
        )
    counts: dict[str, int] = {}
    found = []
    for i, (line, section) in enumerate(zip(lines, sections, strict=True)):
        tokens = _content(line).split()
        if section != "feature" or not tokens or _SECTION.match(tokens[0]):
            continue
        ftype = tokens[0]
        args = dict(t.split("=", 1) for t in tokens[1:] if "=" in t)
        name = args.get("name")
        if name is None:  # Moses numbers the unnamed features of each type: Distortion0 ...
            name = f"{ftype}{counts.get(ftype, 0)}"
            counts[ftype] = counts.get(ftype, 0) + 1
        if not (ftype.startswith("PhraseDictionary") or ftype in OTHER_DICTIONARY_TYPES):
            continue
        try:
            nf = int(args["num-features"])
        except (KeyError, ValueError):
            raise MosesIniError(f"{ini}:{i + 1}: {ftype} without a numeric num-features=") from None
        found.append(FeatureLine(i, ftype, name, nf, args.get("path")))
    return found


def same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)


def _find(lines: Sequence[str], name: str, ini: str) -> tuple[FeatureLine, int]:
    """The phrase dictionary called ``name`` and the index of its weight line, both checked."""
    dictionaries = phrase_dictionaries(lines, ini)
    matches = [d for d in dictionaries if d.name == name]
    if not matches:
        known = ", ".join(f"{d.name} ({d.type})" for d in dictionaries) or "none"
        raise MosesIniError(f"{ini}: no phrase dictionary named {name!r}; found: {known}")
    if len(matches) > 1:
        raise MosesIniError(f"{ini}: {len(matches)} phrase dictionaries are named {name!r}")
    pd = matches[0]
    w = _weight_line(lines, name, ini)
    weights = _content(lines[w]).split("=", 1)[1].split()
    if len(weights) != pd.num_features:
        raise MosesIniError(
            f"{ini}:{w + 1}: {name} has {len(weights)} weights but num-features="
            f"{pd.num_features}; the ini is inconsistent"
        )
    return pd, w


def _check_current_table(pd: FeatureLine, ini: str) -> str | None:
    """Refuse an ini whose (readable, text) table does not carry num-features scores."""
    if pd.type not in TEXT_TABLE_TYPES or pd.path is None:
        return None
    columns = table_columns(pd.path)
    if columns is None:
        return None
    if columns != pd.num_features:
        raise MosesIniError(
            f"{ini}:{pd.index + 1}: {pd.name} has num-features={pd.num_features} but its table "
            f"{pd.path} has {columns} scores per line; Moses would refuse it. Fix the ini "
            "(or point it at the right table) before adding features"
        )
    return f"{pd.path}: {columns} scores = num-features"


def check_moses_ini(text: str, name: str = "TranslationModel0", ini: str = "moses.ini") -> FeatureLine:
    """Everything :func:`patch_moses_ini` checks before it sees the new table."""
    lines = text.splitlines(keepends=True)
    pd, _ = _find(lines, name, ini)
    _check_current_table(pd, ini)
    return pd


def patch_moses_ini(
    text: str,
    table: str,
    *,
    name: str = "TranslationModel0",
    weights: Sequence[float] = (START_WEIGHT,),
    features: int | None = None,
    ini: str = "moses.ini",
    form: TableForm | None = None,
) -> PatchResult:
    """``tokenizer`` (a moses.ini) with phrase dictionary ``name`` pointing at ``table`` and carrying
    ``features`` more scores (read off ``table`` when None), each weighted ``weights`` (one
    value for all, or one per added feature). The line's type becomes the one that loads
    ``table`` (:mod:`.table_forms`; ``form``: as if ``table`` were that)."""
    lines = text.splitlines(keepends=True)
    pd, w = _find(lines, name, ini)
    checked: list[str] = []
    if pd.type not in FORM_OF_TYPE:
        raise MosesIniError(
            f"{ini}:{pd.index + 1}: {name} is a {pd.type}; moses-ini points PhraseDictionaryMemory, "
            "PhraseDictionaryCompact, PhraseDictionaryOnDisk and ProbingPT lines at a rescored table"
        )
    if not all(math.isfinite(x) for x in weights):
        raise MosesIniError(f"a starting weight must be a finite number, not {', '.join(map(str, weights))}")
    if form is None:
        try:
            form = table_form(table, prefer_compact=pd.type == "PhraseDictionaryCompact")
        except TableFormError as e:
            raise MosesIniError(str(e)) from None
    if form.kind == "text" and pd.type != FEATURE_TYPES["text"]:
        raise MosesIniError(
            f"{ini}:{pd.index + 1}: {name} is a {pd.type}, which loads a binarized table, "
            f"but {form.path} is a text table; binarize it (--binarize "
            f"{FORM_OF_TYPE[pd.type]}), or run\n  "
            + binarize_command(pd.type, form.path, form.scores)
            + "\nthen pass the binarized table as --table"
        )
    table, new_columns = form.path, form.scores
    # EMS' create-config may already point the ini at the rescored table: then the table has
    # the new count, not the old one.
    same_table = (
        pd.path is not None
        and os.path.exists(table)
        and any(os.path.exists(p) and same_file(p, table) for p in table_candidates(pd.path))
    )
    if not same_table and (note := _check_current_table(pd, ini)):
        checked.append(note)

    if features is None:
        features = new_columns - pd.num_features if new_columns is not None else 1
        if features < 1:
            raise MosesIniError(
                f"{table} has {new_columns} scores per line, not more than the "
                f"{pd.num_features} that {name} already has: is it the rescored table?" + _binarized_hint(form)
            )
    if features < 1:
        raise MosesIniError("the number of added features must be at least 1")
    total = pd.num_features + features
    if new_columns != total:
        raise MosesIniError(
            f"{table} has {new_columns} scores per line, but {name} would get "
            f"num-features={pd.num_features}+{features}={total}" + _binarized_hint(form)
        )
    checked.append(f"{table}: {new_columns} scores = new num-features")
    if form.feature_type != pd.type:
        checked.append(f"{table} is a {form.feature_type} table: the line's type changes from {pd.type}")
    if len(weights) not in (1, features):
        raise MosesIniError(f"give one weight, or one per added feature ({features}); got {len(weights)}")
    added = list(weights) * features if len(weights) == 1 else list(weights)

    new_path = os.path.abspath(table)
    lines[pd.index] = _patch_feature_line(lines[pd.index], total, new_path, form.feature_type)
    lines[w] = _append_weights(lines[w], added)
    return PatchResult(
        "".join(lines), name, pd.type, pd.num_features, total, pd.path, new_path, checked, form.feature_type
    )


def _binarized_hint(form: TableForm) -> str:
    if form.kind == "text":
        return ""
    return (
        f" (it was binarized with that score count; binarize the rescored text table "
        f"again with the new one: {binarize_command(form.feature_type, 'TABLE.gz', 'N')})"
    )


def _patch_feature_line(line: str, num_features: int, path: str, feature_type: str) -> str:
    body = _content(line)
    rest = line[len(body) :]
    body = re.sub(r"^(\s*)\S+", lambda m: m.group(1) + feature_type, body, count=1)
    body = re.sub(r"(?<=\s)num-features=\S+", f"num-features={num_features}", body, count=1)
    if re.search(r"(?<=\s)path=\S+", body):
        body = re.sub(r"(?<=\s)path=\S+", lambda _: f"path={path}", body, count=1)
    else:
        body = body.rstrip() + f" path={path}"
    return body + rest


def _weight_line(lines: Sequence[str], name: str, ini: str) -> int:
    sections = _sections(lines)
    pattern = re.compile(rf"^\s*{re.escape(name)}\s*=")
    found = [i for i, line in enumerate(lines) if sections[i] == "weight" and pattern.match(_content(line))]
    if not found:
        raise MosesIniError(f"{ini}: no weight line '{name}= ...' in the [weight] section")
    if len(found) > 1:
        raise MosesIniError(f"{ini}: {len(found)} weight lines for {name}")
    return found[0]


def _append_weights(line: str, weights: Sequence[float]) -> str:
    body = _content(line)
    kept = body.rstrip()
    extra = " ".join(format_number(float(w)) for w in weights)
    return f"{kept} {extra}{body[len(kept) :]}{line[len(body) :]}"
