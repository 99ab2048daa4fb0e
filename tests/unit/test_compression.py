"""Compressed tables: output compressed by its name, input recognised by its content, in every
format both ways (gzip, bzip2, xz, zstd); a name of another format refused; a truncated stream
an error, never a short table."""

from __future__ import annotations

import bz2
import gzip
import lzma
from collections.abc import Callable
from pathlib import Path

import pytest
import zstandard

from phrase_rescorer import compression
from phrase_rescorer.moses.phrase_table import PhraseTableError, PhraseTableStreamError
from phrase_rescorer.moses.table_reader import InputTable
from phrase_rescorer.output import AtomicOutput, OutputError
from phrase_rescorer.parallel.sharding import TablePart, find_cuts, plan_parts
from tests.helpers.paths import SAMPLE
from tests.helpers.rescore_data import read_lines

LINES = read_lines(SAMPLE)[:3000]
DATA = b"".join(LINES)
#: Decompressors independent of the package (the reference for what was written).
DECOMPRESS: dict[str, Callable[[bytes], bytes]] = {
    ".gz": gzip.decompress,
    ".bz2": bz2.decompress,
    ".xz": lzma.decompress,
    ".zst": lambda b: zstandard.ZstdDecompressor().decompressobj().decompress(b),
}
COMPRESS: dict[str, Callable[[bytes], bytes]] = {
    ".gz": gzip.compress,
    ".bz2": bz2.compress,
    ".xz": lzma.compress,
    ".zst": lambda b: zstandard.ZstdCompressor().compress(b),
}


def _read(path: Path) -> tuple[bytes, str | None]:
    with InputTable(str(path)) as table:
        return b"".join(e.raw + e.terminator for e in table), table.compression


@pytest.mark.parametrize("suffix", [".gz", ".bz2", ".xz", ".zst", ".GZ", ".Xz"])
def test_output_is_compressed_by_its_name_and_reads_back(tmp_path: Path, suffix: str) -> None:
    out = tmp_path / f"t.txt{suffix}"
    with AtomicOutput(str(out)) as f:
        f.write(DATA)
    assert DECOMPRESS[suffix.lower()](out.read_bytes()) == DATA
    assert _read(out) == (DATA, compression.SUFFIXES[suffix.lower()])
    assert [p.name for p in tmp_path.iterdir()] == [out.name]  # no temporary left


@pytest.mark.parametrize("suffix", [".gz", ".bz2", ".xz", ".zst"])
def test_input_is_recognised_by_content_whatever_its_name(tmp_path: Path, suffix: str) -> None:
    table = tmp_path / "table.txt"  # a plain name
    table.write_bytes(COMPRESS[suffix](DATA))
    data, found = _read(table)
    assert data == DATA and found == compression.SUFFIXES[suffix]


@pytest.mark.parametrize("suffix", [".gz", ".bz2", ".xz", ".zst"])
def test_concatenated_streams_read_as_one(tmp_path: Path, suffix: str) -> None:
    table = tmp_path / f"t{suffix}"
    table.write_bytes(COMPRESS[suffix](DATA[:100_000]) + COMPRESS[suffix](DATA[100_000:]))
    assert _read(table)[0] == DATA


@pytest.mark.parametrize("suffix", [".gz", ".bz2", ".xz", ".zst"])
def test_a_truncated_stream_is_an_error(tmp_path: Path, suffix: str) -> None:
    table = tmp_path / f"t{suffix}"
    packed = COMPRESS[suffix](DATA)
    table.write_bytes(packed[: len(packed) // 2])
    with pytest.raises(PhraseTableStreamError, match=f"truncated or corrupt {compression.SUFFIXES[suffix]} stream"):
        _read(table)


@pytest.mark.parametrize("suffix", [".gz", ".bz2", ".xz", ".zst"])
def test_parts_of_a_compressed_table_join_to_the_whole(tmp_path: Path, suffix: str) -> None:
    table = tmp_path / f"t{suffix}"
    table.write_bytes(COMPRESS[suffix](DATA))
    index = find_cuts(str(table), window=500, window_cap=4000)
    assert index.lines == len(LINES) and index.size == len(DATA)
    joined = b""
    for part in plan_parts(index, 3):
        with TablePart(str(table), part) as p:
            joined += b"".join(e.raw + e.terminator for e in p)
    assert joined == DATA


@pytest.mark.parametrize("name", ["t.lzma", "t.Z", "t.tgz", "t.zip", "t.txz"])
def test_a_name_of_a_format_not_written_is_refused(tmp_path: Path, name: str) -> None:
    with pytest.raises(OutputError, match="which is not written: name the output .gz, .bz2, .xz, .zst or plain"):
        AtomicOutput(str(tmp_path / name))
    assert list(tmp_path.iterdir()) == []


def test_a_model_file_is_not_compressed_by_name(tmp_path: Path) -> None:
    with AtomicOutput(str(tmp_path / "m.gz"), compress=False) as f:  # compress=False: as given
        f.write(b"abc")
    assert (tmp_path / "m.gz").read_bytes() == b"abc"


def test_formats_not_read_are_named() -> None:
    with pytest.raises(compression.CompressionError, match="legacy lzma"):
        compression.format_of_head(lzma.compress(b"x", format=lzma.FORMAT_ALONE))
    assert compression.format_of_head(b"BZh ||| la") is None  # plain text starting like bzip2


def test_an_unreadable_format_is_a_table_error(tmp_path: Path) -> None:
    table = tmp_path / "t.gz"
    table.write_bytes(b"\x1f\x9d\x90" + DATA[:100])
    with pytest.raises(PhraseTableError, match=r"compress \(\.Z\)-compressed input"):
        _read(table)


@pytest.mark.parametrize("suffix", [".gz", ".bz2", ".xz", ".zst"])
def test_bytes_after_the_last_stream_are_an_error(tmp_path: Path, suffix: str) -> None:
    table = tmp_path / f"t{suffix}"
    table.write_bytes(COMPRESS[suffix](DATA) + b"garbage, not another stream")
    with pytest.raises(PhraseTableStreamError, match=f"truncated or corrupt {compression.SUFFIXES[suffix]} stream"):
        _read(table)
