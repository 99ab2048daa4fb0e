"""A moses.ini file patched (:func:`.ini.patch_moses_ini`) and written atomically, with the
table binarized first when asked (:mod:`.binarize`)."""

from __future__ import annotations

import os

from ..output import AtomicOutput
from .binarize import PROGRAMS, BinarizeError, binarize_table, planned_form
from .ini import MosesIniError, PatchResult, patch_moses_ini, same_file
from .table_forms import TableFormError, table_form
from .toolkit import find_moses


def patch_moses_ini_file(
    in_ini: str, out_ini: str, table: str, *, binarize: str | None = None, moses_dir: str | None = None, **options
) -> PatchResult:
    """Read ``in_ini``, patch it (see :func:`.ini.patch_moses_ini`), write ``out_ini``
    atomically (``-``: standard output). With ``binarize`` (a key of :data:`.binarize.PROGRAMS`),
    ``table`` is the text table: every check is made first, then the Moses at ``moses_dir``
    (else ``$MOSES``; :class:`.toolkit.MosesNotFound` when there is none) binarizes it, and the
    ini points at the binarized table."""
    if out_ini != "-" and os.path.exists(out_ini) and same_file(in_ini, out_ini):
        raise MosesIniError(f"{out_ini}: the output is the input; write the patched ini beside it")
    try:
        with open(in_ini, encoding="utf-8", newline="") as f:
            text = f.read()
    except UnicodeDecodeError as e:
        raise MosesIniError(f"{in_ini}: not UTF-8 text ({e})") from None
    output = AtomicOutput(out_ini, compress=False)  # a path that cannot be written: refused now
    if binarize is None:
        result = patch_moses_ini(text, table, ini=in_ini, **options)
    else:
        toolkit = find_moses(moses_dir, needs=(PROGRAMS[binarize],))
        try:
            source = table_form(table)
        except TableFormError as e:
            raise MosesIniError(str(e)) from None
        if source.kind != "text":
            raise MosesIniError(
                f"--binarize takes the rescored text table; {table} is already a {source.feature_type} table"
            )
        patch_moses_ini(text, table, ini=in_ini, form=planned_form(source, binarize), **options)  # checks
        try:
            made = binarize_table(toolkit, source, binarize)
        except BinarizeError as e:
            raise MosesIniError(str(e)) from None
        result = patch_moses_ini(text, made.path, ini=in_ini, form=made, **options)
        result.checked.insert(0, f"binarized {source.path} -> {made.path} ({made.feature_type}, {made.scores} scores)")
    with output as f:
        f.write(result.text.encode("utf-8"))
    return result
