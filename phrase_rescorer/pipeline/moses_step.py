"""The drop-in step for a Moses model directory: rescore, patch moses.ini, say how to tune.

It follows the directory's moses.ini to the phrase table (``moses.step_files``: train-model.perl's
``MODEL_DIR/moses.ini`` or EMS's newest ``moses.ini.N``), rescores that table with the network
(``rescoring.engine``), writes the patched ini beside it, and returns the mert-moses.pl command
to run next, in a working directory that does not exist yet.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..moses.columns import START_WEIGHT
from ..moses.ini import PatchResult, check_moses_ini
from ..moses.ini_file import patch_moses_ini_file
from ..moses.step_files import find_ini, fresh_directory, mert_command, rnn_name, table_of
from ..rescoring.engine import rescore_table
from ..rescoring.options import ProgressCallback, RescoreSummary


@dataclass
class StepResult:
    table: str
    ini: str
    summary: RescoreSummary
    patch: PatchResult
    mert_command: list[str]


def rescore_model_dir(
    model_dir: str,
    network: str | Sequence[str],
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
    threads: int = 1,
    on_progress: ProgressCallback | None = None,
    on_warning: Callable[[str], None] | None = None,
    **rescore_options,
) -> StepResult:
    """Rescore ``moses_step``'s phrase table with ``network`` (or the networks, one column each,
    in order) and write the patched moses.ini, num-features grown by the added columns;
    the mert-moses.pl command returned runs the decoder on ``threads`` threads (the step's own
    thread count, as the CLI passes it)."""
    model_dir = os.path.abspath(model_dir)
    ini_in = ini_in or find_ini(model_dir)
    if table_in is None:
        table_in = table_of(ini_in, name)  # checks the ini too: fail now, not after hours of scoring
    else:
        with open(ini_in, encoding="utf-8", newline="") as f:
            check_moses_ini(f.read(), name, ini_in)
    table_out = table_out or rnn_name(table_in)
    ini_out = ini_out or rnn_name(ini_in)
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
        threads=threads,
    )
    return StepResult(table_out, ini_out, summary, patch, command)
