"""Moses' binarized phrase tables: which dictionary type loads which, how to make one with the
added column(s), and how many scores an existing one holds.

Checked with the Moses in ../shared/tools/moses (tests/integration): each binarizer must be told
the new score count, and a table made with the wrong count is not refused by the decoder:

* ``processPhraseTableMin -in T.gz -out P -nscores N`` writes ``P.minphr`` for
  ``PhraseDictionaryCompact path=P`` (or ``path=P.minphr``); the file records N in the header
  of its phrase decoder, after the source-phrase index (see :func:`compact_score_count`);
* ``CreateOnDiskPt 1 1 N 100 2 T.gz DIR`` writes ``DIR/`` for ``PhraseDictionaryOnDisk
  path=DIR``; ``DIR/Misc.dat`` says ``NumScores N``;
* ``CreateProbingPT --input-pt T.gz --output-dir DIR --num-scores N`` writes ``DIR/`` for
  ``ProbingPT path=DIR`` (moses and moses2); ``--num-scores`` defaults to 4 and ``DIR/config``
  says ``num_scores N``. A 5-score table binarized with the default 4 crashes both decoders with
  a segmentation fault when the ini says num-features=5.
"""

from __future__ import annotations

import os
import re
import struct

#: Dictionary types that load a binarized table, with the command that makes one.
BINARIZED_TYPES = {
    "PhraseDictionaryCompact": "processPhraseTableMin -in {table} -out {prefix} -nscores {n} -threads 4",
    "PhraseDictionaryOnDisk": "CreateOnDiskPt 1 1 {n} 100 2 {table} {prefix}",
    "ProbingPT": "CreateProbingPT --input-pt {table} --output-dir {prefix} --num-scores {n}",
}

#: Where a binarized directory records its score count: (file, pattern).
_SCORE_COUNT = {
    "PhraseDictionaryOnDisk": ("Misc.dat", re.compile(r"^NumScores\s+(\d+)\s*$", re.M)),
    "ProbingPT": ("config", re.compile(r"^num_scores\s+(\d+)\s*$", re.M)),
}


def binarize_command(ftype: str, table: str, n: int | str) -> str:
    """The command that binarizes the text ``table`` (``n`` scores) for ``ftype``."""
    prefix = re.sub(r"(\.txt)?(\.gz)?$", "", table)
    if ftype != "PhraseDictionaryCompact":
        prefix += ".bin" if ftype == "PhraseDictionaryOnDisk" else ".probing"
    return BINARIZED_TYPES[ftype].format(table=table, prefix=prefix, n=n)


def binarized_score_count(ftype: str, path: str) -> int | None:
    """The score count that the binarized table at ``path`` says it holds; None when it does
    not say (a Compact table, or no table there)."""
    if ftype not in _SCORE_COUNT:
        return None
    name, pattern = _SCORE_COUNT[ftype]
    try:
        with open(os.path.join(path, name), "rb") as f:
            text = f.read(4096).decode("ascii", "replace")
    except OSError:
        return None
    match = pattern.search(text)
    return int(match.group(1)) if match else None


def compact_score_count(path: str) -> int | None:
    """The score count that the Compact table ``path`` (a ``.minphr`` file) was made with; None
    when the file is not laid out as processPhraseTableMin writes it.

    The layout, from mosesdecoder's ``moses/TranslationModel/CompactPT`` (little-endian,
    ``size_t`` = 8 bytes): PhraseDictionaryCompact::Load reads ``m_hash.Load(pFile)``, then
    ``m_phraseDecoder->Load(pFile)``. The index (BlockHashIndex::LoadIndex) is ``m_orderBits``,
    ``m_fingerPrintBits``, ``relIndexPos``; at 16 + relIndexPos its landmarks (a StringVector:
    ``m_sorted`` bool, a MonotonicVector ``m_final`` bool, ``m_size``, ``m_last``, the diffs
    (size_t count, 4-byte values), the anchors (size_t count, 4-byte values), then size_t count
    and bytes of the strings), then ``seekIndexSize`` and as many size_t offsets, and ``m_size``.
    PhraseDecoder::Load then reads ``std::fread(&m_coding, ...)`` (4 bytes) and ``std::fread(
    &m_numScoreComponent, ...)``: the count.
    """
    try:
        with open(path, "rb") as f:
            head = f.read(24)
            if len(head) < 24:
                return None
            _, _, rel = struct.unpack("<QQQ", head)
            size = os.fstat(f.fileno()).st_size
            f.seek(16 + rel)

            def read(fmt: str) -> tuple[int, ...]:
                data = f.read(struct.calcsize(fmt))
                if len(data) != struct.calcsize(fmt):
                    raise EOFError
                return struct.unpack(fmt, data)

            def skip(n: int) -> None:
                if n < 0 or f.tell() + n > size:
                    raise EOFError
                f.seek(n, os.SEEK_CUR)

            read("<BBQQ")  # m_sorted, m_final, m_size, m_last
            skip(4 * read("<Q")[0])  # diffs
            skip(4 * read("<Q")[0])  # anchors
            skip(read("<Q")[0])  # the landmark strings
            skip(8 * read("<Q")[0])  # seek index
            read("<Q")  # m_size
            coding, count = read("<IQ")
    except (OSError, EOFError, struct.error, OverflowError, ValueError):
        return None
    return count if coding <= 2 and 0 < count < 1000 else None
