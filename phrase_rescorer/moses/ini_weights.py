"""The ``[weight]`` section of a moses.ini: every feature's weights, and starting values for tuning.

MERT starts from the weights in the ini it is given (mert-moses.pl reads them with
``moses -show-weights``). A comparison of systems should start every system from the same,
untuned point, whatever the ini carries (the bundled en-fr ini is already tuned):
:func:`reset_weights` writes train-model.perl's own starting values, by feature type, quoted from
``scripts/training/train-model.perl`` (create_ini):

    $weight_spec .= "TranslationModel$i= 0.2 0.2 0.2 0.2\\n";     (2177; 0.2 per score, 2163)
    for(...) { $weight_spec .= " 0.3"; }                        (2242, LexicalReordering)
    $weight_spec .= "Distortion0= 0.3\\n";                       (2286)
    $weight_spec .= "LM$i= 0.5" ...                              (2330)
    print INI "UnknownWordPenalty0= 1\\n";                       (2406)
    print INI "WordPenalty0= -1\\n";                             (2407)
    print INI "PhrasePenalty0= 0.2\\n";                          (2408)

A feature of another type keeps its weights (and is listed as kept). Every other byte stays.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .ini import _SECTION, MosesIniError, _content, _sections
from .score_format import format_number

#: train-model.perl's starting weight per score, by feature type (or type prefix).
DEFAULT_WEIGHTS = {
    "PhraseDictionary": 0.2,
    "LexicalReordering": 0.3,
    "Distortion": 0.3,
    "KENLM": 0.5,
    "SRILM": 0.5,
    "IRSTLM": 0.5,
    "UnknownWordPenalty": 1.0,
    "WordPenalty": -1.0,
    "PhrasePenalty": 0.2,
}


@dataclass
class Feature:
    """A line of the ``[feature]`` section: its type, Moses' name for it, its ``key=value`` args."""

    index: int  # line number (0-based) in the file
    type: str
    name: str
    args: dict[str, str]


def features(lines: Sequence[str]) -> list[Feature]:
    """Every feature function of the ``[feature]`` section, named as Moses names it (a feature
    without ``name=`` is its type plus its index among the unnamed features of that type)."""
    counts: dict[str, int] = {}
    found = []
    for i, (line, section) in enumerate(zip(lines, _sections(lines), strict=True)):
        tokens = _content(line).split()
        if section != "feature" or not tokens or _SECTION.match(tokens[0]):
            continue
        args = dict(t.split("=", 1) for t in tokens[1:] if "=" in t)
        name = args.get("name")
        if name is None:
            name = f"{tokens[0]}{counts.get(tokens[0], 0)}"
            counts[tokens[0]] = counts.get(tokens[0], 0) + 1
        found.append(Feature(i, tokens[0], name, args))
    return found


def weight_lines(lines: Sequence[str]) -> dict[str, int]:
    """Feature name -> index of its ``NAME= w1 w2 ...`` line in the ``[weight]`` section."""
    out: dict[str, int] = {}
    for i, (line, section) in enumerate(zip(lines, _sections(lines), strict=True)):
        body = _content(line)
        if section == "weight" and "=" in body and not _SECTION.match(body):
            out[body.split("=", 1)[0].strip()] = i
    return out


def default_weight(feature_type: str) -> float | None:
    for prefix, value in DEFAULT_WEIGHTS.items():
        if feature_type == prefix or (prefix == "PhraseDictionary" and feature_type.startswith(prefix)):
            return value
    return None


def reset_weights(
    text: str, ini: str = "moses.ini", *, added: dict[str, int] | None = None, added_weight: float = 0.2
) -> tuple[str, list[str]]:
    """``tokenizer`` with every known feature's weights set to train-model.perl's starting values;
    the last ``added[name]`` weights of a feature (columns added to a table) get
    ``added_weight``. Returns the new text and the names of the features left as they were."""
    lines = text.splitlines(keepends=True)
    where = weight_lines(lines)
    kept = []
    for feature in features(lines):
        value = default_weight(feature.type)
        if feature.name not in where:
            continue  # a feature without weights (Moses then uses its defaults)
        if value is None:
            kept.append(feature.name)
            continue
        i = where[feature.name]
        body = _content(lines[i])
        count = len(body.split("=", 1)[1].split())
        if count == 0:
            raise MosesIniError(f"{ini}:{i + 1}: {feature.name} has an empty weight line")
        extra = min((added or {}).get(feature.name, 0), count)
        weights = [value] * (count - extra) + [added_weight] * extra
        trailing = body[len(body.rstrip()) :]  # spaces before a comment, kept like the comment
        lines[i] = f"{feature.name}= {' '.join(format_number(w) for w in weights)}{trailing}{lines[i][len(body) :]}"
    return "".join(lines), kept


def read_weights(text: str, ini: str = "moses.ini") -> dict[str, list[float]]:
    """Every ``NAME= w1 w2 ...`` line of the ``[weight]`` section, as numbers."""
    lines = text.splitlines(keepends=True)
    out: dict[str, list[float]] = {}
    for name, i in weight_lines(lines).items():
        try:
            out[name] = [float(v) for v in _content(lines[i]).split("=", 1)[1].split()]
        except ValueError as e:
            raise MosesIniError(f"{ini}:{i + 1}: {name}: a weight is not a number ({e})") from e
    return out
