"""A moses.ini file patched (:func:`.ini.patch_moses_ini`) and written atomically, with the
table binarized first when asked (:mod:`.binarize`)."""

from __future__ import annotations

from ..errors import InputError
from ..output import AtomicOutput, check_not_an_input
from .binarize import PROGRAMS, BinarizeError, binarize_table, planned_form
from .ini import MosesIniError, PatchResult, patch_moses_ini
from .ini_weights import features
from .stems import named_files
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
    check_not_an_input(out_ini, (("input ini", in_ini), *(("table", path) for path in named_files(table))))
    with open(in_ini, "rb") as given:
        data = given.read()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line, column = data.count(b"\n", 0, e.start) + 1, e.start - data.rfind(b"\n", 0, e.start)
        raise InputError(f"{in_ini}:{line}: invalid UTF-8 at byte {column} of the line") from None
    named = [f.args["path"] for f in features(text.splitlines(keepends=True)) if "path" in f.args]
    check_not_an_input(out_ini, (("file the input ini names", p) for path in named for p in named_files(path)))
    output = AtomicOutput(out_ini, compress=False)  # a path that cannot be written: refused now
    if binarize is None:
        result = patch_moses_ini(text, table, ini=in_ini, **options)
        _not_a_table(out_ini, result)
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
        planned = planned_form(source, binarize)
        _not_a_table(out_ini, patch_moses_ini(text, table, ini=in_ini, form=planned, **options))  # checks
        try:
            made = binarize_table(toolkit, source, binarize)
        except BinarizeError as e:
            raise MosesIniError(str(e)) from None
        result = patch_moses_ini(text, made.path, ini=in_ini, form=made, **options)
        result.checked.insert(0, f"binarized {source.path} -> {made.path} ({made.feature_type}, {made.scores} scores)")
    with output as f:
        f.write(result.text.encode("utf-8"))
    return result


def _not_a_table(out_ini: str, result: PatchResult) -> None:
    """Refuse an ``out_ini`` that is the table the patched ini will name (a binarized table's
    file included): writing the ini there would destroy it."""
    check_not_an_input(out_ini, (("table", path) for path in named_files(result.new_path)))
