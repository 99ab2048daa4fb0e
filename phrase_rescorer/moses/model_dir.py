"""The drop-in step for a train-model.perl model directory: rescore, patch moses.ini, say how to tune.

train-model.perl leaves ``model/phrase-table.gz`` and ``model/moses.ini`` (steps 6 and 9). This
step writes, beside them,

    model/phrase-table.rnn.gz   every line of phrase-table.gz plus the RNN column(s)
    model/moses.rnn.ini         moses.ini with the phrase dictionary pointing at it, +K features

and returns the mert-moses.pl command to run next. The command uses a working directory that
does not exist yet: mert-moses.pl caches the feature list of a run (features.list) in its
working directory, so tuning the new ini in an old directory would tune the old features.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Callable
from dataclasses import dataclass

from ..rescoring.engine import ProgressCallback, RescoreSummary, rescore_table
from .columns import START_WEIGHT
from .ini import MosesIniError, PatchResult, check_moses_ini, patch_moses_ini_file


@dataclass
class StepResult:
    table: str
    ini: str
    summary: RescoreSummary
    patch: PatchResult
    mert_command: list[str]


def fresh_directory(path: str) -> str:
    """``path`` if nothing is there, else ``path.2``, ``path.3`` ... (the first free one)."""
    candidate, n = path, 1
    while os.path.exists(candidate):
        n += 1
        candidate = f"{path}.{n}"
    return candidate


def mert_command(
    ini: str,
    *,
    moses_dir: str = "$MOSES",
    dev_source: str = "DEV.SRC",
    dev_reference: str = "DEV.REF",
    working_dir: str,
    threads: int = 4,
) -> list[str]:
    """The mert-moses.pl command line that tunes ``ini`` (all paths as given)."""
    return [
        f"{moses_dir}/scripts/training/mert-moses.pl",
        dev_source,
        dev_reference,
        f"{moses_dir}/bin/moses",
        ini,
        f"--working-dir={working_dir}",
        f"--mertdir={moses_dir}/bin",
        f"--decoder-flags=-threads {threads}",
    ]


def format_command(argv: list[str]) -> str:
    """A shell line for ``argv``, one argument per line; ``$MOSES`` stays expandable."""

    def quote(arg: str) -> str:
        return '"$MOSES"'.join(shlex.quote(part) if part else "" for part in arg.split("$MOSES"))

    return " \\\n    ".join(quote(arg) for arg in argv)


def rescore_model_dir(
    model_dir: str,
    network: str,
    *,
    table_in: str | None = None,
    ini_in: str | None = None,
    table_out: str | None = None,
    ini_out: str | None = None,
    name: str = "TranslationModel0",
    weights: tuple[float, ...] = (START_WEIGHT,),
    moses_dir: str | None = None,
    dev_source: str = "DEV.SRC",
    dev_reference: str = "DEV.REF",
    working_dir: str | None = None,
    on_progress: ProgressCallback | None = None,
    on_warning: Callable[[str], None] | None = None,
    **rescore_options,
) -> StepResult:
    """Rescore ``model_dir``'s phrase table with ``network`` and write the patched moses.ini."""
    model_dir = os.path.abspath(model_dir)
    table_in = table_in or os.path.join(model_dir, "phrase-table.gz")
    ini_in = ini_in or os.path.join(model_dir, "moses.ini")
    table_out = table_out or os.path.join(model_dir, "phrase-table.rnn.gz")
    ini_out = ini_out or os.path.join(model_dir, "moses.rnn.ini")
    for what, path in (("phrase table", table_in), ("moses.ini", ini_in)):
        if not os.path.isfile(path):
            raise MosesIniError(
                f"{path}: no {what} here; give the model/ directory written by train-model.perl "
                "(phrase-table.gz from step 6, moses.ini from step 9)"
            )
    with open(ini_in, encoding="utf-8", newline="") as f:  # fail now, not after hours of scoring
        check_moses_ini(f.read(), name, ini_in)
    summary = rescore_table(
        table_in, table_out, network, on_progress=on_progress, on_warning=on_warning, **rescore_options
    )
    patch = patch_moses_ini_file(ini_in, ini_out, table_out, name=name, weights=weights, features=summary.columns)
    working_dir = working_dir or fresh_directory(os.path.join(os.path.dirname(model_dir), "mert-work-rnn"))
    command = mert_command(
        ini_out,
        moses_dir=moses_dir or os.environ.get("MOSES", "$MOSES"),
        dev_source=dev_source,
        dev_reference=dev_reference,
        working_dir=os.path.abspath(working_dir),
    )
    return StepResult(table_out, ini_out, summary, patch, command)
