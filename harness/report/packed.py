"""Chunk times packed in the Parquet parts: each record's ``chunk_times`` list stored as one ``Binary`` value (its
float64s, little-endian, back to back) instead of a ``List(Float64)``.

Why: the report's second pass reads every part's chunk times (1M demo records: ~250M values). Polars decodes a
Parquet ``List`` column level by level (repetition and definition levels for every value): 17 CPU-ms a part of
~4,000 records, 4.3 CPU-s over 1M, the largest cost of that pass; the same values stored as one ``Binary`` value a
record read in 6 ms, and :func:`unpack_flat` gives them as one flat numpy array (what the reducer,
:mod:`harness.report.chunkbins`, works on) without exploding a list column. Measured in
docs/development/benchmarks.md ("Chunk times packed in the parts").

The values are those of the records as read (schema 3: whole µs deltas; schema 1-2: seconds), bit for bit: a
float64 is stored as its 8 bytes. A null list is a null value, an empty list an empty value. A list holding a
null (a hand-edited record; the harness never writes one) cannot be packed: :func:`pack_chunk_times` leaves such a
frame's column as it is (a part may hold either form; readers take both, :func:`unpacked`).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import numpy as np
import polars as pl

from harness.chunkpath import native_records

__all__ = ["PACKED_COLUMN", "is_packed", "lists_from_flat", "pack_chunk_times", "unpack_flat", "unpacked"]

#: The record field packed in the parts.
PACKED_COLUMN = "chunk_times"

_LIST = pl.List(pl.Float64)


#: The compiled pack, unpack and list builder (``harness._fastrecords``), or None each: numpy and polars (equal
#: results, tested). A float64 is packed in the machine's byte order: the compiled forms only where that is little.
_PACK: Callable[[pl.Series], pl.Series | None] | None
_UNPACK: Callable[[pl.Series], Any] | None
_LISTS: Callable[[np.ndarray, np.ndarray], pl.Series] | None
_PACK, _UNPACK, _LISTS = (native_records("pack_f64", "unpack_f64", "lists_f64") if sys.byteorder == "little"
                          else None) or (None, None, None)


def is_packed(s: pl.Series) -> bool:
    """Whether ``s`` holds packed chunk times (``Binary``)."""
    return s.dtype == pl.Binary


def pack_chunk_times(df: pl.DataFrame) -> pl.DataFrame:
    """``df`` with its ``chunk_times`` (``List(Float64)``) packed, one ``Binary`` value a record; ``df`` itself
    (unchanged) when it has no such column or a list holds a null (see the module docstring). Compiled (one copy
    of the values) when built, else numpy (a Python ``bytes`` a record)."""
    if PACKED_COLUMN not in df.columns:
        return df
    s = df.get_column(PACKED_COLUMN)
    if s.dtype != _LIST:
        return df
    if _PACK is not None:
        packed_s = _PACK(s)
        return df if packed_s is None else df.with_columns(packed_s)
    flat = s.list.explode(empty_as_null=False, keep_nulls=False)
    if flat.null_count():  # a null inside a list: not packable
        return df
    lengths = s.list.len().fill_null(-1).cast(pl.Int64).to_numpy()
    raw = flat.cast(pl.Float64).to_numpy().astype("<f8", copy=False).tobytes()
    ends = np.cumsum(np.maximum(lengths, 0)) * 8
    starts = ends - np.maximum(lengths, 0) * 8
    packed = [None if n < 0 else raw[a:b] for a, b, n in zip(starts.tolist(), ends.tolist(), lengths.tolist(),
                                                                strict=True)]
    return df.with_columns(pl.Series(PACKED_COLUMN, packed, dtype=pl.Binary))


def unpack_flat(s: pl.Series) -> tuple[np.ndarray, np.ndarray]:
    """``(values, lengths)`` of packed chunk times ``s`` (``Binary``): float64 values of every list in row order and
    int64 length of each row's list (-1 for a null). Compiled (one copy, no Python object a value) when built.

    Raises:
        ValueError: a value's size is not a multiple of 8 bytes (not packed chunk times: a broken part).
    """
    if _UNPACK is not None:
        values, lengths = _UNPACK(s)
        return values, lengths
    items = s.to_list()
    lengths = np.fromiter((-1 if b is None else len(b) >> 3 for b in items), dtype=np.int64, count=len(items))
    if any(b is not None and len(b) % 8 for b in items):
        bad = next(len(b) for b in items if b is not None and len(b) % 8)
        raise ValueError(f"a packed chunk-times value of {bad} bytes (not a multiple of 8)")
    values = np.frombuffer(b"".join(b for b in items if b), dtype="<f8").astype(np.float64)
    return values, lengths


def lists_from_flat(values: np.ndarray, lengths: np.ndarray) -> pl.Series:
    """The ``List(Float64)`` series ``chunk_times`` of flat ``values`` and ``lengths`` (-1: a null list).

    Raises:
        ValueError: the lengths do not add up to the values.
    """
    if int(np.maximum(lengths, 0).sum()) != values.size:
        raise ValueError(f"the lengths add up to {int(np.maximum(lengths, 0).sum())}, not the {values.size} values")
    if _LISTS is not None:
        return _LISTS(values, lengths)
    n = lengths.size
    rows = np.repeat(np.arange(n, dtype=np.int64), np.maximum(lengths, 0))
    grouped = pl.DataFrame({"_r": rows, PACKED_COLUMN: values}).group_by("_r", maintain_order=True).agg(
        pl.col(PACKED_COLUMN))
    full = pl.DataFrame({"_r": np.arange(n, dtype=np.int64), "_n": lengths}).join(
        grouped, on="_r", how="left", maintain_order="left")
    return full.select(pl.when(pl.col("_n") == 0).then(pl.lit([], dtype=_LIST))
                       .otherwise(pl.col(PACKED_COLUMN)).cast(_LIST).alias(PACKED_COLUMN)).to_series()


def unpacked(df: pl.DataFrame) -> pl.DataFrame:
    """``df`` with packed ``chunk_times`` (``Binary``) as the ``List(Float64)`` they were; ``df`` itself when they
    are not packed.

    Raises:
        ValueError: as :func:`unpack_flat`.
    """
    if PACKED_COLUMN not in df.columns or not is_packed(df.get_column(PACKED_COLUMN)):
        return df
    return df.with_columns(lists_from_flat(*unpack_flat(df.get_column(PACKED_COLUMN))))
