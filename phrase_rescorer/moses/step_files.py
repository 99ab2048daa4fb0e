"""The Moses side of the drop-in step for a model directory: which ini and table, the output
names, the mert-moses.pl command (the step itself, which runs the network: ``pipeline.moses_step``).

The step starts from the directory's moses.ini and follows it: the table it rescores is the
``path=`` of the phrase dictionary (``TranslationModel0``), with the ``.gz`` fallback of
train-model.perl and filter-model-given-input.pl for a path written without it. The ini is
``MODEL_DIR/moses.ini`` (train-model.perl step 9) or, in an EMS working directory's ``model/``,
the newest ``moses.ini.N`` (EMS versions every file by its run number; ``phrase-table.N.gz``
is the table). Outputs go beside their inputs, ``.rnn`` added before the version and ``.gz``:

    model/phrase-table.gz   -> model/phrase-table.rnn.gz     model/moses.ini   -> model/moses.rnn.ini
    model/phrase-table.1.gz -> model/phrase-table.rnn.1.gz   model/moses.ini.1 -> model/moses.rnn.ini.1

and ``mert_command`` is the mert-moses.pl command to run next. The command uses a working directory
that does not exist yet: mert-moses.pl caches the feature list of a run (features.list) in its
working directory, so tuning the new ini in an old directory would tune the old features.
"""

from __future__ import annotations

import os
import re
import shlex

from .binarized import BINARIZED_TYPES
from .ini import MosesIniError, check_moses_ini
from .table_files import existing_table


def find_ini(model_dir: str) -> str:
    """``model_dir/moses.ini``, else the newest EMS ``model_dir/moses.ini.N``."""
    plain = os.path.join(model_dir, "moses.ini")
    if os.path.isfile(plain):
        return plain
    versions = []
    for name in os.listdir(model_dir):
        m = re.fullmatch(r"moses\.ini\.(\d+)", name)
        if m and os.path.isfile(os.path.join(model_dir, name)):
            versions.append((int(m.group(1)), name))
    if not versions:
        raise MosesIniError(
            f"{model_dir}: no moses.ini here; give the model/ directory written by train-model.perl "
            "(moses.ini from step 9) or by EMS (moses.ini.N), or name the ini with --ini"
        )
    return os.path.join(model_dir, max(versions)[1])


def rnn_name(path: str) -> str:
    """``path`` with ``.rnn`` before its EMS version number and ``.gz`` (before ``.ini`` for an
    ini): phrase-table.1.gz -> phrase-table.rnn.1.gz, moses.ini.1 -> moses.rnn.ini.1."""
    directory, name = os.path.split(path)
    m = re.fullmatch(r"(.*?)((?:\.ini)?(?:\.\d+)?(?:\.gz)?)", name)
    assert m is not None  # the pattern matches every name
    return os.path.join(directory, f"{m.group(1)}.rnn{m.group(2)}")


def table_of(ini_path: str, name: str) -> str:
    """The text table that phrase dictionary ``name`` of ``ini_path`` loads (checked)."""
    with open(ini_path, encoding="utf-8", newline="") as f:
        pd = check_moses_ini(f.read(), name, ini_path)
    where = f"{ini_path}:{pd.index + 1}"
    if pd.type in BINARIZED_TYPES:
        raise MosesIniError(
            f"{where}: {name} is a {pd.type}, a binarized table the network cannot read; rescore "
            "the text table it was made from (rescore-phrase-table TABLE.gz OUT.gz --model M.pt), "
            "binarize OUT.gz with the new score count and point the ini at it with moses-ini"
        )
    if pd.path is None:
        raise MosesIniError(f"{where}: {name} has no path=")
    table = existing_table(pd.path)
    if not os.path.isfile(table):
        raise MosesIniError(f"{where}: {name}'s table {pd.path} does not exist (nor {pd.path}.gz)")
    return table


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
    threads: int = 1,
) -> list[str]:
    """The mert-moses.pl command line that tunes ``ini`` (all paths as given), the decoder on
    ``threads`` threads."""
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
