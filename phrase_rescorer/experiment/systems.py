"""The systems an experiment compares, and the checks made before hours of tuning start.

* ``baseline``: the user's moses.ini as given.
* ``rnn``: the same ini with the phrase table rescored by the network (one more column,
  :func:`~phrase_rescorer.rescoring.engine.rescore_table`) and the ini patched for it
  (:func:`~phrase_rescorer.moses.ini_file.patch_moses_ini_file`).
* ``rnn-wp`` (``--unk-feature``): the paper's "+ WP" system, a table with both columns.
* ``rnn-both`` (``--inverse-model``): "+ RNN both directions", the network's column and an
  inverse network's (``train --direction inverse``, p(source | target)): two columns, as Moses
  has each of its phrase probabilities in both directions.

Every system starts MERT from the same point: train-model.perl's starting weights
(:func:`~phrase_rescorer.moses.ini_weights.reset_weights`: 0.2 per phrase-table score, the added
columns included), or, with ``start_weights="ini"``, the ini's own weights with
``moses.columns.START_WEIGHT`` for each added column, as ``moses-ini`` and ``moses-step`` give.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from ..errors import EXIT_INI, EXIT_INPUT, EXIT_MODEL, InputError
from ..model.checkpoint import load_checkpoint
from ..model.kinds import ModelFile, path_of
from ..moses.columns import START_WEIGHT
from ..moses.ini import TEXT_TABLE_TYPES, MosesIniError, check_moses_ini
from ..moses.ini_file import patch_moses_ini_file
from ..moses.ini_weights import features, reset_weights
from ..moses.phrase_table import without_appended
from ..moses.stems import existing_table
from ..moses.table_reader import InputTable
from ..moses.words import split_words
from ..output import AtomicOutput
from ..rescoring.engine import rescore_table


class ExperimentError(InputError):
    """A refused experiment; ``exit_code`` one of ``errors``' codes (bad data unless given)."""

    def __init__(self, message: str, exit_code: int = EXIT_INPUT):
        super().__init__(message)
        self.exit_code = exit_code


@dataclass(frozen=True)
class System:
    key: str  # directory name and JSON key
    label: str  # row label of the table
    columns: int  # columns added to the phrase table
    reranks: str | None = None  # a reranked system: the key of the decoder system whose runs it reranks
    inverse: bool = False  # the inverse network's column follows the network's


BASELINE = System("baseline", "baseline", 0)
RNN = System("rnn", "+ RNN", 1)
RNN_WP = System("rnn-wp", "+ RNN + WP", 2)
RNN_BOTH = System("rnn-both", "+ RNN both directions", 2, inverse=True)


def run_seed(base: int, system_index: int, run: int) -> int:
    """Each run's own mert seed: distinct for every (system, run), recorded in its result."""
    return base + 1000 * system_index + run


def systems_for(with_model: bool, unk_feature: bool, inverse: bool = False) -> list[System]:
    if not with_model:
        return [BASELINE]
    return [BASELINE, RNN, *([RNN_WP] if unk_feature else []), *([RNN_BOTH] if inverse else [])]


#: Systems whose table begins with the network's column (the columns after it: the WP count, the
#: inverse network's): ``+ RNN``'s table is theirs without the last column.
RNN_FIRST = (RNN_BOTH, RNN_WP)


def check_ini(ini: str, name: str = "TranslationModel0") -> str:
    """Refuse an ini whose files Moses could not load; return the text table of ``name``."""
    try:
        with open(ini, encoding="utf-8", newline="") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as e:
        raise ExperimentError(f"{ini}: cannot read the moses.ini ({e})", EXIT_INI) from None
    lines = text.splitlines(keepends=True)
    for feature in features(lines):
        path = feature.args.get("path")
        if path is None:
            continue
        # mert-moses.pl runs the decoder after `chdir($___WORKING_DIR) or die "Can't chdir to
        # $___WORKING_DIR";` (scripts/training/mert-moses.pl): a relative path leads nowhere there
        if not os.path.isabs(path):
            raise ExperimentError(
                f"{ini}:{feature.index + 1}: {feature.name} has the relative path {path}: mert-moses.pl runs "
                "the decoder in its own working directory; give the ini absolute paths",
                EXIT_INI,
            )
        if not os.access(existing_table(path), os.R_OK):
            raise ExperimentError(
                f"{ini}:{feature.index + 1}: {feature.name} points at {path}, which cannot be read", EXIT_INI
            )
    pd = check_moses_ini(text, name, ini)  # the table carries num-features scores
    if pd.type not in TEXT_TABLE_TYPES or pd.path is None:
        raise MosesIniError(
            f"{ini}:{pd.index + 1}: {name} is a {pd.type}; the experiment rescores a text phrase table "
            "(PhraseDictionaryMemory): give the ini that points at phrase-table.gz"
        )
    return existing_table(pd.path)


def count_lines(path: str) -> int:
    """The lines of a dev or test file, each checked for UTF-8 (a bad one named with its line,
    exit 3). The decoder and mert-moses.pl read these files themselves, as plain text only: a
    compressed one is refused."""
    with InputTable(path, parse=_utf8_line(path)) as text:
        if text.compression is not None:
            raise ExperimentError(
                f"{path}: {text.compression}-compressed: Moses (the decoder, mert-moses.pl) reads the dev and "
                "test sets as plain text; decompress it"
            )
        return sum(1 for _ in text)


def _utf8_line(path: str) -> Callable[[bytes, bytes, int], None]:
    def parse(raw: bytes, terminator: bytes, line_no: int) -> None:
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise ExperimentError(f"{path}:{line_no}: invalid UTF-8 at byte {e.start}") from None

    return parse


def check_parallel(what: str, *paths: str) -> int:
    """All files of a set (source, reference, raw reference) have the same number of lines."""
    counts = [count_lines(p) for p in paths]
    if len(set(counts)) != 1:
        listed = ", ".join(f"{p}: {n:,} lines" for p, n in zip(paths, counts, strict=True))
        raise ExperimentError(f"{what} files differ in length ({listed})")
    if counts[0] == 0:
        raise ExperimentError(f"{what} files are empty ({paths[0]})")
    return counts[0]


def vocabulary_coverage(table: str, model: str | ModelFile) -> tuple[float, float]:
    """Share of the table's source and target token occurrences (over all lines) that the
    network's shortlists know (an inverse network's source shortlist is the table's target side);
    ``model`` its file, read (``kinds.open_model``) unless given read."""
    checkpoint = load_checkpoint(model)
    vocabularies = (checkpoint.src_vocab, checkpoint.tgt_vocab)
    counts: list[Counter[str]] = [Counter(), Counter()]
    with InputTable(table, check_scores=False) as entries:
        for entry in entries:
            counts[0].update(split_words(entry.source))
            counts[1].update(split_words(entry.target))
    shares = []
    for vocab, c in zip(vocabularies[::-1] if checkpoint.inverse else vocabularies, counts, strict=True):
        total = sum(c.values())
        shares.append(sum(n for t, n in c.items() if t in vocab) / total if total else 0.0)
    return shares[0], shares[1]


def check_coverage(table: str, model: str | ModelFile, minimum: float) -> tuple[float, float]:
    src, tgt = vocabulary_coverage(table, model)
    if min(src, tgt) < minimum:
        raise ExperimentError(
            f"{path_of(model)}: its vocabulary covers {src:.1%} of the source and {tgt:.1%} of the target "
            f"tokens of {table} (at least {minimum:.0%} needed): was it trained on another table? "
            "(--min-coverage sets the limit)",
            EXIT_MODEL,
        )
    return src, tgt


def _write_text(path: str, text: str) -> None:
    with AtomicOutput(path) as f:
        f.write(text.encode("utf-8"))


def _every_tenth(say: Callable[[str], None] | None) -> Callable[[int, int, int | None], None] | None:
    """A rescoring progress callback that reports each tenth of the input read."""
    if say is None:
        return None
    reported = [0]

    def progress(lines: int, position: int, size: int | None) -> None:
        if size:
            tenth = 10 * position // size
            if tenth > reported[0]:
                reported[0] = tenth
                say(f"rescoring: {lines:,} lines, {10 * tenth}% of the table")

    return progress


def drop_last_columns(table: str, new_table: str, count: int) -> None:
    """Write ``new_table``: ``table`` without the last ``count`` scores of every line."""
    with InputTable(table, check_scores=False) as entries, AtomicOutput(new_table) as out:
        for entry in entries:
            out.write(without_appended(entry, count))


def rescored_table(tables: str, system: System) -> str:
    """Where the experiment writes ``system``'s rescored table (in ``OUT/tables``)."""
    return os.path.join(tables, f"phrase-table.{system.key}.gz")


def _rnn_first_table(tables: str) -> tuple[str, int] | None:
    """A rescored table already written whose first added column is the network's, and how many
    columns follow it."""
    for other in RNN_FIRST:
        path = rescored_table(tables, other)
        if os.path.exists(path):
            return path, other.columns - RNN.columns
    return None


def prepare_system(
    system: System,
    ini: str,
    table: str,
    model: str | ModelFile | None,
    out_dir: str,
    *,
    start_weights: str = "moses-defaults",
    rescore_options: dict | None = None,
    on_progress: Callable[[str], None] | None = None,
    inverse_model: str | ModelFile | None = None,
) -> str:
    """The starting moses.ini of ``system`` (rescoring its table first when needed, with
    ``inverse_model``'s column after ``model``'s for a system of both directions; each network's
    file read unless given read, ``kinds.open_model``): kept as
    ``out_dir/systems/KEY/start.ini``; an existing one (a restarted experiment) is reused.
    ``+ RNN``'s table is cut from one of ``RNN_FIRST``'s when that is written already (the same
    network's column over the same batches: the same bytes, ``tests/unit/test_experiment_setup.py``),
    which saves rescoring the table once more; ``runner`` prepares the wider systems first."""
    directory = os.path.join(out_dir, "systems", system.key)
    os.makedirs(directory, exist_ok=True)
    start = os.path.join(directory, "start.ini")
    if os.path.exists(start):
        return start
    with open(ini, encoding="utf-8", newline="") as f:
        text = f.read()
    name = "TranslationModel0"
    if system.columns:
        assert model is not None
        models = [model]
        if system.inverse:
            assert inverse_model is not None
            models.append(inverse_model)
        tables = os.path.join(out_dir, "tables")
        os.makedirs(tables, exist_ok=True)
        new_table = rescored_table(tables, system)
        wider = _rnn_first_table(tables) if system == RNN else None
        if not os.path.exists(new_table) and wider:
            if on_progress:
                on_progress(f"{new_table}: {wider[0]} without its last {wider[1]} column(s)")
            drop_last_columns(wider[0], new_table, wider[1])
        if not os.path.exists(new_table):  # written atomically: present means complete
            if on_progress:
                on_progress(f"rescoring {table} -> {new_table}")
            summary = rescore_table(
                table,
                new_table,
                models,
                unk_feature=system.columns > len(models),
                on_progress=_every_tenth(on_progress),
                **(rescore_options or {}),
            )
            if on_progress:
                on_progress(summary.closing_line())
        patched = os.path.join(directory, "patched.ini")
        patch_moses_ini_file(ini, patched, new_table, name=name, weights=(START_WEIGHT,), features=system.columns)
        with open(patched, encoding="utf-8", newline="") as f:
            text = f.read()
    if start_weights == "moses-defaults":
        text, _ = reset_weights(text, ini, added={name: system.columns})
    _write_text(start, text)
    return start
