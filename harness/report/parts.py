"""Parquet parts of a records file: completed byte ranges of ``records.jsonl`` converted while the run goes on.

Parsing a soak's JSON lines is most of the first report's time (1M records, 2 GB: ~30-50 s on 2 cores). During a
run, the part converter (:mod:`harness.report.parts_writer`, a child process of the run started by
:class:`harness.records.RunDir`) parses each completed, already-flushed range of whole lines of a records file into
one Parquet file, so the report that follows the run reads those parts and parses only the JSON after the last one.

Layout: the parts of ``<dir>/records.jsonl`` are ``<dir>/records.parts/<start>-<end>.parquet`` (:func:`parts_dir`,
:func:`part_path`; ``start`` / ``end`` are byte offsets in the records file, 12 digits, ``[start, end)``, ``end``
just after a newline). Each holds the records of exactly that range as :func:`harness.report.frame.read_frame`
reads them from the JSON (the same columns, dtypes and null defaults, no row-number column; ``chunk_times`` packed,
one ``Binary`` value a record, :mod:`harness.report.packed`, unless a list holds a null), and a Parquet
metadata entry ``llmload_part``: JSON ``{"key", "start", "end", "head_sha256", "tail_sha256"}``, ``key`` the
reader's :data:`harness.report.frame.SIDECAR_KEY`, the two digests over the range's first and last
:data:`CHECK_BYTES` bytes (the whole range when it is shorter).

A part is used only while it is valid: its name and stamp agree, its key is the reader's, the records file is at
least ``end`` bytes long and its bytes at both ends of the range still have the stamped digests, and it has
every column asked for with its dtype (packed ``chunk_times`` stand for ``List(Float64)``: a part written before
they were packed holds the list, and reads as before). Parts are used as one chain from byte 0 (each starting
where the previous ended); the first missing, invalid or unreadable part ends the chain and everything after it
is parsed from the JSON. ``records.jsonl`` stays the durable source: a part is only a cache, deleting one is
always safe, and a stale or corrupt one is ignored. The digests see a change at a range's ends only; once the run
has ended the report seals the parts with the file's size, times and inode (:func:`harness.report.frame.read_frame`),
so an edit anywhere after that drops them.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from harness.report.packed import PACKED_COLUMN, pack_chunk_times

__all__ = ["CHECK_BYTES", "Part", "part_path", "parts_dir", "range_digests", "valid_chain", "write_part"]

#: Bytes at each end of a part's range whose SHA-256 is stamped in the part (and checked before it is used).
CHECK_BYTES = 64 << 10
#: Key of the part's Parquet metadata entry.
PART_META = "llmload_part"
_NAME = re.compile(r"^(\d{12})-(\d{12})\.parquet$")


@dataclass(frozen=True)
class Part:
    """One valid part: its file and the byte range ``[start, end)`` of the records file it holds."""

    path: Path
    start: int
    end: int


def parts_dir(records_file: Path) -> Path:
    """The directory of a records file's parts: ``records.jsonl`` -> ``records.parts``, same directory."""
    return records_file.with_suffix(".parts")


def part_path(records_file: Path, start: int, end: int) -> Path:
    """The part file of byte range ``[start, end)`` of ``records_file``."""
    return parts_dir(records_file) / f"{start:012d}-{end:012d}.parquet"


def range_digests(records_file: Path, start: int, end: int) -> tuple[str, str]:
    """SHA-256 (hex) of the first and of the last :data:`CHECK_BYTES` bytes of ``[start, end)`` of the file (fewer
    when the range is shorter; the bytes that are there when the file is shorter than ``end``).

    Raises:
        OSError: the file cannot be read.
    """
    n = min(CHECK_BYTES, end - start)
    with open(records_file, "rb") as f:
        f.seek(start)
        head = f.read(n)
        f.seek(end - n)
        tail = f.read(n)
    return hashlib.sha256(head).hexdigest(), hashlib.sha256(tail).hexdigest()


def _stamp(records_file: Path, start: int, end: int, key: str) -> dict[str, Any]:
    head, tail = range_digests(records_file, start, end)
    return {"key": key, "start": start, "end": end, "head_sha256": head, "tail_sha256": tail}


def _valid(records_file: Path, path: Path, start: int, end: int, key: str, size: int,
           schema: dict[str, pl.DataType]) -> bool:
    """Whether ``path`` is a usable part of ``[start, end)`` (module docstring) holding every ``schema`` column."""
    if end > size:
        return False
    try:
        meta = pl.read_parquet_metadata(path).get(PART_META)
        if meta is None or json.loads(meta) != _stamp(records_file, start, end, key):
            return False
        have = pl.scan_parquet(path).collect_schema()
    except (OSError, ValueError, pl.exceptions.PolarsError):
        return False
    return all(c in have and (have[c] == dt or (c == PACKED_COLUMN and dt == pl.List(pl.Float64)
                                                and have[c] == pl.Binary)) for c, dt in schema.items())


def valid_chain(records_file: Path, key: str, schema: dict[str, pl.DataType]) -> list[Part]:
    """The valid parts of ``records_file`` forming one chain from byte 0, in byte order (empty when there are none).

    Args:
        records_file: a ``records*.jsonl`` file.
        key: the reader's key (:data:`harness.report.frame.SIDECAR_KEY`); a part stamped with another is invalid.
        schema: the columns (and dtypes) a part must hold to be used.
    """
    try:
        size = records_file.stat().st_size
        names = os.listdir(parts_dir(records_file))
    except OSError:
        return []
    by_start: dict[int, list[tuple[int, Path]]] = {}
    for name in names:
        m = _NAME.match(name)
        if m:
            s, e = int(m.group(1)), int(m.group(2))
            if e > s:
                by_start.setdefault(s, []).append((e, parts_dir(records_file) / name))
    chain: list[Part] = []
    at = 0
    while at in by_start:
        for end, path in sorted(by_start[at], reverse=True):  # the longest valid part starting here
            if _valid(records_file, path, at, end, key, size, schema):
                chain.append(Part(path, at, end))
                at = end
                break
        else:
            break
    return chain


def write_part(records_file: Path, df: pl.DataFrame, start: int, end: int, key: str) -> Path | None:
    """Write ``df`` (the records of ``[start, end)`` of ``records_file``, as read) as that range's part.

    Written to a temporary name then renamed, so a reader never sees half a part. Returns the part's path, or None
    when it could not be written (read-only directory, disk full: parts are a cache, nothing is raised).

    Uncompressed: lz4 cost 2.6x the CPU of the write (0.034 vs 0.013 CPU-s a 16 MB piece, ~5 CPU-s at 1M records
    with chunk times, on the first report's pass 1 and in the run's converter) and the read ~15 % more, for parts
    about half the size (0.78x the JSON's bytes uncompressed, 0.41x with lz4, 200k demo records). A part written
    lz4-compressed by an earlier version reads as before (same columns and stamp).
    """
    path = part_path(records_file, start, end)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(exist_ok=True)
        stamp = _stamp(records_file, start, end, key)
        pack_chunk_times(df).write_parquet(tmp, compression="uncompressed", metadata={PART_META: json.dumps(stamp)})
        os.replace(tmp, path)
    except (OSError, pl.exceptions.PolarsError):
        tmp.unlink(missing_ok=True)
        return None
    return path
