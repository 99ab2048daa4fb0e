"""Table names given as stems, the way EMS gives them.

EMS runs the rescoring step from ``scripts/ems/experiment.meta``::

    custom-phrase-table-pruning
        in: phrase-translation-table
        out: sigtest-filter-phrase-translation-table
        template: $custom-phrase-table-pruning IN OUT
        default-name: model/phrase-table-pruned

with IN and OUT as stems, without ``.gz``: e.g. ``COMMAND model/phrase-table.1
model/phrase-table-pruned.1``. The file on disk is ``model/phrase-table.1.gz``, because
train-model.perl's phrase scoring ends ``$cmd .= " | $GZIP_EXEC -c > $ttable_file.gz";``, and
every step after this one reads ``OUT.gz``: the sigtest filter that this step replaces writes
``gzip - > $filtered_table.gz`` (experiment.perl), create-config passes the stem to
train-model.perl, and filter-model-given-input.pl opens it with ``if ( $file !~ /\\.gz$/ &&
-e "$file.gz" ) { $file .= ".gz"; }``.

So: when IN does not exist but ``IN.gz`` does, IN is that stem. The input is then
``IN.gz``, and an OUT that does not end with ``.gz`` is written as ``OUT.gz``, where the next
step looks. An IN that exists is read as named and OUT written as named, whatever the names.
The same rule finds the text table a moses.ini names (:func:`existing_table`): the one
definition of "IN or IN.gz" in the package.
"""

from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass(frozen=True)
class TablePaths:
    input: str
    output: str
    note: str | None  # what was changed and why, for the user; None when nothing was


def table_candidates(path: str) -> tuple[str, ...]:
    """The files a table named ``path`` may be, in the order they are tried: ``path``, then,
    for a stem (a name without ``.gz``), ``path.gz``."""
    return (path,) if path == "-" or path.endswith(".gz") else (path, path + ".gz")


def named_files(path: str) -> tuple[str, ...]:
    """The files a ``path=`` of moses.ini (or ``--table``) may stand for: the table's
    (``table_candidates``), then a Compact phrase table's ``.minphr`` and a compact reordering
    table's ``.minlexr`` (their ``path=`` is the prefix: ``binarize.binarized_path``)."""
    return (*table_candidates(path), f"{path}.minphr", f"{path}.minlexr")


def existing_table(path: str) -> str:
    """``path``, or ``path.gz`` when only that exists: a table named by its stem, as EMS names
    them (train-model.perl writes ``$ttable_file.gz``), is the file a decoder can open."""
    if len(table_candidates(path)) > 1 and not os.path.exists(path) and os.path.isfile(path + ".gz"):
        return path + ".gz"
    return path


def resolve_stems(in_path: str, out_path: str) -> TablePaths:
    """The files to read and write for IN and OUT as given on the command line."""
    if existing_table(in_path) == in_path:
        return TablePaths(in_path, out_path, None)
    out = out_path if out_path == "-" or out_path.endswith(".gz") else out_path + ".gz"
    note = (
        f"{in_path} does not exist: reading {in_path}.gz"
        + (f" and writing {out}" if out != out_path else "")
        + " (EMS names tables by their stem and reads STEM.gz)"
    )
    return TablePaths(in_path + ".gz", out, note)
