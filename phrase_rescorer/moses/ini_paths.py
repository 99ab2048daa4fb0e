"""The files a moses.ini's features name (``path=``: tables, language models) as they are on
disk: each one's size and modification time, what tells cheaply that a file changed (a table
rewritten in place changes its modification time) without reading gigabytes; every file the
decoder reads for the ini, each path= refused when relative or of no file (:func:`decoder_files`);
and the ini's n-gram LM (:func:`ngram_lm`)."""

from __future__ import annotations

import contextlib
import glob
import os

from .ini import MosesIniError
from .ini_weights import Feature, features
from .stems import named_files


def ini_files(ini: str) -> dict[str, list[int]]:
    """``{path: [size, mtime_ns]}`` of every file (or directory) that the ini's features name
    (a stem's ``.gz``, a binarized table's ``.minphr`` or ``.minlexr``: ``stems.named_files``);
    a name with no file is left out."""
    with open(ini, encoding="utf-8", newline="") as f:
        lines = f.read().splitlines(keepends=True)
    found: dict[str, list[int]] = {}
    for feature in features(lines):
        path = feature.args.get("path")
        if path is None:
            continue
        for candidate in named_files(path):
            with contextlib.suppress(OSError):
                info = os.stat(candidate)
                found[candidate] = [info.st_size, info.st_mtime_ns]
    return found


def _features(ini: str) -> list[Feature]:
    with open(ini, encoding="utf-8", errors="replace", newline="") as f:
        return features(f.read().splitlines())


def path_files(path: str) -> list[str]:
    """Every file on disk that a feature's ``path=`` stands for, sorted: those of
    ``stems.named_files`` that exist, every file under a directory (a ProbingPT table), and the
    files of a binarized table of the older formats, which Moses finds by their names
    (LexicalReorderingTable.cpp: ``if(FileExists(filePath+".binlexr.idx"))``; their sets, in
    Moses' scripts/ems/support/cache-model.perl: ``foreach my $suffix
    (".binphr.idx",".binphr.srctree.wa",".binphr.srcvoc",".binphr.tgtdata.wa",".binphr.tgtvoc")``
    and ``(".binlexr.idx",".binlexr.srctree",".binlexr.tgtdata",".binlexr.voc0",".binlexr.voc1")``).
    Empty: the path resolves to no file."""
    found: set[str] = set()
    stem = glob.escape(path)
    for candidate in (*named_files(path), *glob.glob(f"{stem}.binphr.*"), *glob.glob(f"{stem}.binlexr.*")):
        if os.path.isdir(candidate):
            for directory, _, names in os.walk(candidate):
                found.update(os.path.join(directory, name) for name in names)
        elif os.path.isfile(candidate):
            found.add(candidate)
    return sorted(found)


def decoder_files(ini: str) -> list[str]:
    """Every file the features' ``path=`` of the ini stand for (:func:`path_files`), sorted;
    refused: a relative ``path=`` (the decoder reads it from the directory it runs in, which is no
    longer the one the ini was tuned in) and one that resolves to no file."""
    found: set[str] = set()
    for feature in _features(ini):
        path = feature.args.get("path")
        if path is None:
            continue
        where = f"{ini}:{feature.index + 1}: {feature.name} path={path}"
        if not os.path.isabs(path):
            raise MosesIniError(
                f"{where} is relative: the decoder reads it from the directory it runs in; give the ini absolute paths"
            )
        files = path_files(path)
        if not files:
            tried = ", ".join([*named_files(path)[1:], f"{path}.binphr.*", f"{path}.binlexr.*"])
            raise MosesIniError(
                f"{where}: no such file (nor {tried}, nor a directory of files): give the path of the table or LM "
                "the decoder reads"
            )
        found.update(files)
    return sorted(found)


def ngram_lm(ini: str, name: str | None = None) -> Feature | None:
    """The n-gram LM feature of the moses.ini ``ini``: the feature called ``name``, else its first
    KENLM feature with a ``path=`` (None: no such feature)."""
    for feature in _features(ini):
        if feature.name == name if name is not None else feature.type == "KENLM" and "path" in feature.args:
            return feature
    return None
