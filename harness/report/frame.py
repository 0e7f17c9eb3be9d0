"""Columnar records: the ``records*.jsonl`` files of a run directory as one typed polars DataFrame.

The report's figures over a soak (a million records, 1.9 GB of JSON lines) cannot afford a Python object per
record. This module parses the files with polars' NDJSON reader in byte chunks of ``chunk_bytes`` (whole
lines, two chunks parsed at a time), so memory is bounded by a few chunks of text plus the columns kept, and
no Python object is made per record.

Columns and dtypes (:data:`RECORD_SCHEMA`: one per field of the record schema,
:data:`harness.result.RECORD_FIELDS`, in its order; ``docs/records.md`` defines each; ``extra`` is not read):

* ``schema`` (Int64): the record layout version, 1 for a record without the key (written before it existed).
* identity: ``prompt_id``, ``prompt_class``, ``user``, ``phase`` (String); ``step``, ``concurrency``,
  ``max_tokens`` (Int64).
* times, **seconds**: ``start_wall``, ``scheduled_wall`` (Float64, wall-clock epoch seconds); ``connect``,
  ``read_lag_max``, ``t_headers``, ``ttft``, ``ttfat``, ``t_first_reasoning``, ``t_last_token``, ``e2e``
  (Float64, seconds from the request being sent); ``time_source`` (String).
* chunks: ``chunks``, ``reasoning_chunks``, ``answer_chunks``, ``sse_comments`` (Int64, counts of SSE chunks
  or comments, not tokens); ``gap_hist`` / ``itl_hist``: :data:`HIST_DTYPE`, a struct of ``n`` (Int64,
  samples), ``sum`` / ``min`` / ``max`` (Float64, seconds) and ``buckets`` (String: the JSON object
  ``{"bucket index": count}`` of :class:`harness.histogram.LogHistogram`, kept as text because its keys vary);
  ``chunk_times`` (List(Float64), seconds from request sent) and ``chunk_tokens`` (List(Int64), tokens, one
  per chunk): a schema-3 record's compact form (integer µs deltas; one count for all chunks) is decoded as
  :func:`harness.result.decode_chunks` decodes it (running sums times 1e-6, the chunks in the µs of ``ttft``,
  ``t_last_token`` and ``ttfat`` pinned to those timings), so the column equals ``from_record``'s attribute.
* tokens (Int64, **tokens**): ``output_tokens``, ``estimated_output_tokens``, ``reasoning_tokens``,
  ``answer_tokens``, ``prompt_tokens``, and characters ``reasoning_chars`` / ``answer_chars``;
  ``token_source`` / ``reasoning_source`` (String).
* outcome: ``ok``, ``done_seen``, ``truncated``, ``truncated_in_reasoning``, ``suspect_truncation``,
  ``usable``, ``hidden_reasoning`` (Boolean); ``usable_reason``, ``error_class``, ``error_detail``,
  ``error_code``, ``finish_reason`` (String);
  ``retry_after_s`` (Float64, **seconds**); ``http_status`` (Int64).
* rates, **tokens per second**: ``tpot`` is the exception, **seconds per token** (Float64);
  ``decode_rate``, ``reasoning_rate``, ``answer_rate`` (Float64).
* :data:`ROW` (Int64): the record's 0-based position in the run (file order, files in name order), the order
  :func:`harness.records.read_records` returns them in.

Values read as :meth:`harness.result.RequestResult.from_record` reads them: a field absent from a record (a
schema 1 record, an older layout, or ``itl_hist`` / ``chunk_times`` / ``chunk_tokens``, which ``to_record``
omits when unset), or a JSON ``null``, is null when the field is nullable and the field's default
(:data:`NULL_READS_AS`) when it is not; so every column equals the attribute of the ``RequestResult`` read from
the same line. A record whose ``schema`` is not one this harness reads
(:data:`harness.result.READABLE_SCHEMAS`) is refused, like ``from_record`` does. :data:`LAZY_COLUMNS`
(``itl_hist``, ``chunk_times``, ``chunk_tokens``: large and unused by the report) are read only when asked for
by ``columns``.

Parquet sidecar (:func:`read_frame` only): parsing a soak's JSON is most of a report's time, so after
:func:`read_frame` has parsed a records file of a run whose ``run.json`` says it is no longer running, it writes
the columns it read, as read, to ``<file stem>.parquet`` next to it (``records.jsonl`` -> ``records.parquet``),
stamped with the JSON file's size, modification and inode change times and inode, and a key of this reader's
schema and defaults (:data:`SIDECAR_KEY`). A later :func:`read_frame` reads that sidecar instead of the JSON when
it is newer than the JSON file, its stamp matches the file as it is now, its key is this reader's and it holds
every column asked for; otherwise it parses the JSON (and rewrites the sidecar). ``records*.jsonl`` stays the durable
source: a sidecar is only a cache, deleting it is always safe, and a sidecar that cannot be written (read-only
directory) is skipped silently.

Parquet parts (:func:`read_frame` only; :mod:`harness.report.parts`): when there is no valid sidecar and the
records file has valid parts (written during the run by :mod:`harness.report.parts_writer`: completed byte ranges
of whole lines, each stamped with its range and digests of the range's first and last bytes), the records are
the parts' rows (one chain from byte 0, read in one Parquet scan) followed by the JSON after the last part, parsed
as above (so a torn last line, a corrupt line or a newer schema are met as without parts). Parts hold
:data:`PART_COLUMNS` (all but ``itl_hist``): a read asking for another column parses the JSON. After such a read
of a run that has ended, the JSON after the parts is written as one more part (not a whole sidecar), so the next
read is parts only, and the parts are sealed (``records.parts/sealed.json``: the records file's sidecar stamp); a
later read finding the file's stamp changed (any edit after the run, even one the parts' digests cannot see)
deletes the parts and parses the JSON. A part that is stale (the file's bytes changed, the file is shorter),
unreadable, of another reader key or lacking a column asked for ends the chain: what follows is parsed from the
JSON.

Same tolerance as :func:`harness.records.read_records`: blank lines are skipped, a last line that is not valid JSON
and is torn (:func:`harness.jsonl.is_torn_line`: it starts with ``{``, a run killed mid-write) is dropped (any other
invalid last line is an error like a bad line before it), a line that is valid JSON but not an object is ignored,
and keys that are not record fields are ignored (a newer writer's additions). Same refusal: a JSON object without a
key of :data:`harness.records.REQUIRED_RECORD_FIELDS` is an error ``path:line: not a request record (missing step,
start_wall, ok)`` (a JSON null there is a record: null reads as the default). Known differences: numbers are stored
in their column's dtype (``from_record`` keeps a JSON ``12`` in a float field as an int), a field of the wrong JSON
type for its dtype is an error (``path:line: field e2e: expected a number, got "abc"``), and ``"schema": null``
reads as schema 1 (``from_record`` refuses it).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
from collections import deque
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import orjson
import polars as pl

from harness.chunkpath import pure_forced
from harness.jsonl import is_torn_line
from harness.records import REQUIRED_RECORD_FIELDS, missing_record_fields, not_a_record_message
from harness.report.packed import PACKED_COLUMN, unpacked
from harness.report.parts import parts_dir, valid_chain, write_part
from harness.result import CHUNK_ANCHORS, CHUNK_TIME_UNIT_S, READABLE_SCHEMAS, RECORD_FIELDS, RequestResult

__all__ = [
    "CHUNK_COLUMNS",
    "DEFAULT_CHUNK_BYTES",
    "DEFAULT_COLUMNS",
    "HIST_DTYPE",
    "LAZY_COLUMNS",
    "NULL_READS_AS",
    "PART_COLUMNS",
    "RAW_CHUNK_COLUMNS",
    "RECORD_SCHEMA",
    "ROW",
    "SIDECAR_KEY",
    "decode_chunk_lists",
    "iter_chunk_batches",
    "iter_chunk_frames",
    "iter_frames",
    "read_frame",
    "read_json_range",
    "record_files",
    "sidecar_path",
    "torn_last_line",
]

#: The struct of a :class:`harness.histogram.LogHistogram` JSON form (``to_json``): n samples, their sum, min
#: and max in seconds, and the sparse ``{"bucket": count}`` object as JSON text.
HIST_DTYPE = pl.Struct({"n": pl.Int64, "sum": pl.Float64, "min": pl.Float64, "max": pl.Float64,
                        "buckets": pl.String})

#: One dtype per record field, in record order (:data:`harness.result.RECORD_FIELDS`: ``schema``, then the
#: fields of :class:`harness.result.RequestResult`; ``extra`` is not read).
RECORD_SCHEMA: dict[str, pl.DataType] = {
    "schema": pl.Int64(),
    "prompt_id": pl.String(),
    "prompt_class": pl.String(),
    "user": pl.String(),
    "phase": pl.String(),
    "step": pl.Int64(),
    "concurrency": pl.Int64(),
    "max_tokens": pl.Int64(),
    "setting": pl.String(),
    "conversation": pl.String(),
    "turn": pl.Int64(),
    "start_wall": pl.Float64(),
    "scheduled_wall": pl.Float64(),
    "connect": pl.Float64(),
    "time_source": pl.String(),
    "read_lag_max": pl.Float64(),
    "t_headers": pl.Float64(),
    "ttft": pl.Float64(),
    "ttfat": pl.Float64(),
    "t_first_reasoning": pl.Float64(),
    "t_last_token": pl.Float64(),
    "e2e": pl.Float64(),
    "chunks": pl.Int64(),
    "reasoning_chunks": pl.Int64(),
    "answer_chunks": pl.Int64(),
    "sse_comments": pl.Int64(),
    "gap_hist": HIST_DTYPE,
    "itl_hist": HIST_DTYPE,
    "chunk_times": pl.List(pl.Float64),
    "chunk_tokens": pl.List(pl.Int64),
    "output_tokens": pl.Int64(),
    "token_source": pl.String(),
    "estimated_output_tokens": pl.Int64(),
    "reasoning_tokens": pl.Int64(),
    "answer_tokens": pl.Int64(),
    "reasoning_source": pl.String(),
    "prompt_tokens": pl.Int64(),
    "cached_tokens": pl.Int64(),
    "reasoning_chars": pl.Int64(),
    "answer_chars": pl.Int64(),
    "ok": pl.Boolean(),
    "error_class": pl.String(),
    "error_detail": pl.String(),
    "retry_after_s": pl.Float64(),
    "error_code": pl.String(),
    "http_status": pl.Int64(),
    "finish_reason": pl.String(),
    "done_seen": pl.Boolean(),
    "truncated": pl.Boolean(),
    "truncated_in_reasoning": pl.Boolean(),
    "suspect_truncation": pl.Boolean(),
    "usable": pl.Boolean(),
    "usable_reason": pl.String(),
    "hidden_reasoning": pl.Boolean(),
    "tpot": pl.Float64(),
    "decode_rate": pl.Float64(),
    "reasoning_rate": pl.Float64(),
    "answer_rate": pl.Float64(),
}


def _null_reads_as() -> dict[str, Any]:
    """What a null (or missing) value of each non-nullable field reads as, asked of ``from_record`` itself."""
    names = [f.name for f in RECORD_FIELDS if f.name not in ("schema", "extra")]
    read = RequestResult.from_record(dict.fromkeys(names))
    out: dict[str, Any] = {"schema": 1}  # a record without ``schema`` is schema 1
    out.update({n: getattr(read, n) for n in names if getattr(read, n) is not None})
    return out


#: The value a missing or null field reads as, for every column whose field is not nullable (the field's
#: :class:`harness.result.RequestResult` default, as :meth:`~harness.result.RequestResult.from_record` reads it;
#: ``schema``: 1). Nullable fields stay null.
NULL_READS_AS: dict[str, Any] = _null_reads_as()

#: Columns read only when named in ``columns``: large, and not used by the report.
LAZY_COLUMNS: frozenset[str] = frozenset({"itl_hist", "chunk_times", "chunk_tokens"})

#: The columns :func:`read_frame` reads by default: every field but :data:`LAZY_COLUMNS`.
DEFAULT_COLUMNS: tuple[str, ...] = tuple(k for k in RECORD_SCHEMA if k not in LAZY_COLUMNS)

#: Name of the record-position column added to every frame (Int64, 0-based, file order).
ROW = "row_nr"

#: The columns of a Parquet part (:mod:`harness.report.parts`): every field but ``itl_hist`` (large, unused by
#: the report, and as costly to parse as all the scalar fields together). A read asking for it parses the JSON.
PART_COLUMNS: tuple[str, ...] = tuple(k for k in RECORD_SCHEMA if k != "itl_hist")

#: Bytes of JSON text parsed at a time (whole lines; a longer line is parsed alone).
DEFAULT_CHUNK_BYTES = 16 << 20
#: Pieces parsed at once (each parse is multi-threaded inside polars too; two keep both cores busy through the
#: parser's serial parts). At most ``_PARSERS + 1`` pieces of text are held at a time.
_PARSERS = 2


#: Changes whenever what a sidecar holds would change: the dtypes, the null defaults, the readable record
#: schemas, the records refused and the form of the chunk lists (4: as written, :func:`_stored`; a sidecar with
#: another key is ignored and rewritten).
SIDECAR_KEY: str = hashlib.sha256(repr((4, REQUIRED_RECORD_FIELDS, CHUNK_ANCHORS,
                                        sorted((k, str(v)) for k, v in RECORD_SCHEMA.items()),
                                        sorted((k, repr(v)) for k, v in NULL_READS_AS.items()),
                                        sorted(READABLE_SCHEMAS))).encode()).hexdigest()[:16]
#: Rows per row group of a sidecar: a slice of it (the second pass of a two-pass read, :func:`iter_chunk_frames`)
#: decodes only the row groups it overlaps.
_SIDECAR_ROW_GROUP = 20_000
#: Key of the sidecar's Parquet metadata entry: JSON ``{"key", "source_bytes", "source_mtime_ns", "source_ctime_ns",
#: "source_inode"}``.
_SIDECAR_META = "llmload_sidecar"


def record_files(run_dir: str | os.PathLike[str]) -> list[Path]:
    """The run directory's ``records*.jsonl`` files in name order (the order their records are numbered in)."""
    return sorted(Path(run_dir).glob("records*.jsonl"))


def _schema(columns: Sequence[str] | None) -> dict[str, pl.DataType]:
    names = DEFAULT_COLUMNS if columns is None else tuple(columns)
    unknown = [c for c in names if c not in RECORD_SCHEMA]
    if unknown:
        raise KeyError(f"not a record field: {', '.join(unknown)}")
    return {c: RECORD_SCHEMA[c] for c in names}


def _pieces(f: io.BufferedReader, size: int, start: int = 0,
            end: int | None = None) -> Iterator[tuple[int, bytes, bool]]:
    """``(byte offset, text, last)`` for consecutive runs of whole lines of ``f`` from byte ``start`` (a line start)
    to ``end`` (just after a newline; None: the end of the file), about ``size`` bytes each.

    ``last`` marks the piece holding the file's last non-blank line (which may lack its newline); never set when
    ``end`` is given. A piece of blank lines only is merged into the piece before it, so the flag is exact.
    """
    pending: bytes | None = None
    pending_at = 0
    offset = start
    f.seek(start)
    while True:
        block = f.read(size if end is None else min(size, end - offset))
        if not block:
            break
        if not block.endswith(b"\n"):
            block += f.readline()  # up to the end of the line (or of the file)
        at = offset
        offset += len(block)
        if pending is not None and block.isspace():
            pending += block
            continue
        if pending is not None:
            yield pending_at, pending, False
        pending, pending_at = block, at
    if pending is not None:
        yield pending_at, pending, end is None


def _line_number(path: Path, offset: int) -> int:
    """1-based number of the line starting at byte ``offset`` of ``path`` (error messages only)."""
    n = 1
    with open(path, "rb") as f:
        left = offset
        while left > 0:
            block = f.read(min(left, 1 << 24))
            if not block:
                break
            n += block.count(b"\n")
            left -= len(block)
    return n


def _load_scanner() -> Any:
    try:
        from harness import _fastrecords  # type: ignore[attr-defined]
    except ImportError:
        return None
    return _fastrecords


#: The compiled records scanner (``harness._fastrecords``, docs/development/native.md), None when not built.
_SCANNER = _load_scanner()
#: ``(name, scanner kind)`` of each column of a schema, by the schema's items (None: a dtype it does not read).
_KINDS: dict[tuple[tuple[str, str], ...], list[tuple[str, int]] | None] = {}


def scanner_available() -> bool:
    """True when the compiled records scanner (``harness._fastrecords``) imported."""
    return _SCANNER is not None


def scanner_active() -> bool:
    """Whether :func:`_parse` tries the compiled scanner: built, and not forced off by ``LLMLOAD_PURE_PYTHON``
    (:func:`harness.chunkpath.pure_forced`, the switch of the compiled stream path too)."""
    return _SCANNER is not None and not pure_forced()


def _scan_kinds(schema: dict[str, pl.DataType]) -> list[tuple[str, int]] | None:
    """The scanner's column kinds for ``schema``, or None when a dtype is not one it reads."""
    key = tuple((k, str(v)) for k, v in schema.items())
    if key not in _KINDS:
        names = {pl.Int64(): "Int64", pl.Float64(): "Float64", pl.Boolean(): "Boolean", pl.String(): "String",
                 HIST_DTYPE: "Hist", pl.List(pl.Int64): "List(Int64)", pl.List(pl.Float64): "List(Float64)"}
        kinds: list[tuple[str, int]] | None = []
        for name, dtype in schema.items():
            kind = next((n for d, n in names.items() if dtype == d), None)
            if kind is None or kinds is None:
                kinds = None
                break
            kinds.append((name, _SCANNER.KINDS[kind]))
        _KINDS[key] = kinds
    return _KINDS[key]


def _parse(text: bytes, schema: dict[str, pl.DataType]) -> pl.DataFrame:
    """``text`` (whole NDJSON lines) as the frame ``pl.read_ndjson(io.BytesIO(text), schema=schema)`` returns: by
    the compiled scanner when it is active (:func:`scanner_active`) and reads the piece exactly (the same frame,
    tested), else (anything it does not read exactly: invalid JSON, a wrong type, an escaped key, ...) by polars,
    whose errors callers turn into messages.

    Raises:
        polars.exceptions.PolarsError: polars refused the piece.
    """
    if scanner_active():
        kinds = _scan_kinds(schema)
        if kinds is not None:
            try:
                return _SCANNER.scan(text, kinds)  # type: ignore[no-any-return]
            except _SCANNER.Unsupported:
                pass  # polars reads it (or raises its error)
    return pl.read_ndjson(io.BytesIO(text), schema=schema)


class _MaybeNotARecord(Exception):
    """A parsed piece has nulls in a required field: the JSON of those rows decides (absent key: not a record;
    a JSON null: a record). ``rows`` are their 0-based positions among the piece's JSON objects; ``df`` the
    piece as parsed."""

    def __init__(self, rows: list[int], df: pl.DataFrame) -> None:
        super().__init__(f"{len(rows)} rows with a null required field")
        self.rows, self.df = rows, df


def _as_read(df: pl.DataFrame, path: Path, keep: Sequence[str], checked: bool = False,
             decode: bool = True) -> pl.DataFrame:
    """``df`` (parsed with ``schema`` and :data:`~harness.records.REQUIRED_RECORD_FIELDS`) with nulls of
    non-nullable fields read as their defaults, columns ``keep`` in that order, rechunked (one compact chunk per
    column). ``checked``: the rows with a null required field were found to be records (see below).
    ``decode``: schema-3 chunk lists decoded (:func:`_decode_chunks`); False leaves them as written.

    Raises:
        _MaybeNotARecord: unless ``checked``, some row has a null in a required field (absent, or a JSON null).
        ValueError: a record's ``schema`` is not in :data:`harness.result.READABLE_SCHEMAS`.
    """
    parsed = df
    lacking = None
    if df.height and not checked:
        lacking = df.select(pl.any_horizontal(pl.col(c).is_null() for c in REQUIRED_RECORD_FIELDS)).to_series()
    df = df.with_columns(pl.col(c).fill_null(NULL_READS_AS[c]) for c in df.columns if c in NULL_READS_AS)
    version = df.get_column("schema")
    bad = version.filter(~version.is_in(sorted(READABLE_SCHEMAS)))
    if bad.len():
        raise ValueError(f"{path}: record schema {bad[0]!r} is not readable by this harness "
                         f"(reads {sorted(READABLE_SCHEMAS)})")
    if lacking is not None and lacking.any():  # after the version: a newer layout is refused as such
        raise _MaybeNotARecord(lacking.arg_true().to_list(), parsed)
    if decode:
        df = _decode_chunks(df)
    # One chunk per column, in buffers of the piece's size: the parser's chunks hold grown-by-doubling spare
    # capacity, kept (~2x the frame: 1.29 GB peak at 1M records instead of 1.0 GB) if the frame is not copied.
    return df.select(keep).rechunk()


def _decode_chunks(df: pl.DataFrame) -> pl.DataFrame:
    """``df`` with its schema-3 rows' compact ``chunk_times`` / ``chunk_tokens`` (integer µs deltas; one count for
    every chunk) decoded to seconds and one count per chunk, as :func:`harness.result.decode_chunks` decodes them
    (the same float operations: running sums times 1e-6). Schema 1-2 rows, and frames without those columns,
    are returned as they are. Packed chunk times (a part's ``Binary`` form, :mod:`harness.report.packed`) are
    unpacked first."""
    df = unpacked(df)
    if "chunk_times" not in df.columns or not df.height:
        return df
    v3 = pl.col("schema") == 3
    if not df.select(v3.any()).item():
        return df
    ct, us, t = pl.col("chunk_times"), pl.col("_us"), pl.col("_t")
    if "chunk_tokens" in df.columns:
        tk = pl.col("chunk_tokens")
        one = v3 & (tk.list.len() == 1) & (ct.list.len() >= 2)
        df = df.with_columns(pl.when(one).then(ct.list.eval(pl.element().cast(pl.Int64) * 0) + tk.list.first())
                             .otherwise(tk).alias("chunk_tokens"))
    # one step at a time (an expression naming the running times twice per anchor would recompute them 2^3 times)
    df = df.with_columns(ct.list.eval(pl.element().cum_sum()).alias("_us"))
    df = df.with_columns((us * CHUNK_TIME_UNIT_S).alias("_t"))
    for name in CHUNK_ANCHORS:  # a chunk in an anchor's µs reads back as the anchor: t + (a - t), exact (Sterbenz)
        a = pl.col(name).cast(pl.Float64).fill_null(-1.0)  # for it; t + 0 for every other chunk
        at = (us - (a * 1e6).round()).list.eval(1.0 - pl.element().abs().clip(0.0, 1.0))
        df = df.with_columns((t + at * (a - t)).alias("_t"))
    return df.with_columns(pl.when(v3).then(t).otherwise(ct).alias("chunk_times")).drop("_us", "_t")


def _with_decode_columns(asked: dict[str, pl.DataType]) -> dict[str, pl.DataType]:
    """``asked`` plus what decoding its chunk lists needs (``schema`` and :data:`harness.result.CHUNK_ANCHORS`) when
    it asks for a chunk list: a sidecar or part stores the lists as written (:func:`_stored`)."""
    if not {"chunk_times", "chunk_tokens"} & set(asked):
        return asked
    return {**asked, **{c: RECORD_SCHEMA[c] for c in ("schema", *CHUNK_ANCHORS) if c not in asked}}


def _stored(df: pl.DataFrame, keep: Sequence[str]) -> pl.DataFrame:
    """``df`` read from a sidecar or part (chunk lists as written, with the columns :func:`_with_decode_columns`
    adds) as :func:`read_frame` returns it: chunk lists decoded, columns ``keep``."""
    if "chunk_times" in df.columns or "chunk_tokens" in df.columns:
        df = _decode_chunks(df)
    return df.select(keep)


def decode_chunk_lists(df: pl.DataFrame) -> pl.DataFrame:
    """``df`` (with ``schema`` and, for its chunk times, :data:`harness.result.CHUNK_ANCHORS`) with its schema-3
    rows' chunk lists decoded as :func:`read_frame` decodes them (a batch of :func:`iter_chunk_batches` that is not
    ``decoded``)."""
    return _decode_chunks(df)


def _parse_as_read(text: bytes, schema: dict[str, pl.DataType], path: Path, keep: Sequence[str],
                   decode: bool = True) -> pl.DataFrame:
    """:func:`_parse` then :func:`_as_read`, in a parser thread."""
    return _as_read(_parse(text, schema), path, keep, decode=decode)


def _object_lines(text: bytes) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(0-based line index, object)`` of each line of ``text`` that is a JSON object (others skipped)."""
    for i, line in enumerate(text.split(b"\n")):
        if not line.strip():
            continue
        try:
            obj = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if isinstance(obj, dict):
            yield i, obj


def _check_records(path: Path, at: int, text: bytes, rows: list[int]) -> None:
    """Raise ``path:line: not a request record (missing ...)`` for the first of the ``rows``-th JSON objects of a
    piece (0-based, starting at byte ``at``) that lacks a required key; return when all have them."""
    wanted = set(rows)
    for k, (i, obj) in enumerate(_object_lines(text)):
        if k in wanted:
            missing = missing_record_fields(obj)
            if missing:
                raise ValueError(not_a_record_message(path, _line_number(path, at) + i, missing))


def _type_error(value: Any, dtype: Any, name: str) -> tuple[str, str, Any] | None:
    """``(field path, expected, value)`` of the first part of ``value`` (a JSON value) the polars reader cannot
    read as ``dtype`` (None when it can: null is always readable, and anything is readable as a String)."""
    if isinstance(dtype, type):
        dtype = dtype()  # a struct's or list's inner dtype may be given as its class
    if value is None or isinstance(dtype, pl.String):
        return None
    if isinstance(dtype, pl.Struct):
        if not isinstance(value, dict):
            return name, "an object", value
        for f in dtype.fields:
            bad = _type_error(value.get(f.name), f.dtype, f"{name}.{f.name}")
            if bad:
                return bad
        return None
    if isinstance(dtype, pl.List):
        if not isinstance(value, list):
            return name, "a list", value
        for j, v in enumerate(value):
            bad = _type_error(v, dtype.inner, f"{name}[{j}]")
            if bad:
                return bad
        return None
    if isinstance(dtype, pl.Boolean):
        return None if isinstance(value, bool) else (name, "a boolean", value)
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if isinstance(dtype, pl.Int64):
        return None if number and isinstance(value, int) else (name, "an integer", value)
    if isinstance(dtype, pl.Float64):
        return None if number else (name, "a number", value)
    return None  # a dtype the record schema does not use


def _wrong_type(path: Path, at: int, text: bytes, schema: dict[str, pl.DataType]) -> str | None:
    """``path:line: field F: expected a number, got "abc"`` for the first field of ``text`` (a piece starting at
    byte ``at``) whose JSON type its column cannot take, None when none is found."""
    for i, obj in _object_lines(text):
        for name, dtype in schema.items():
            bad = _type_error(obj.get(name), dtype, name)
            if bad:
                field, expected, value = bad
                got = orjson.dumps(value).decode()
                got = got if len(got) <= 60 else got[:57] + "..."
                return f"{path}:{_line_number(path, at) + i}: field {field}: expected {expected}, got {got}"
    return None


def _parse_careful(path: Path, at: int, text: bytes, last: bool, schema: dict[str, pl.DataType]) -> pl.DataFrame:
    """Parse a piece polars refused, line by line: drop a torn last line and non-object lines, else raise.

    Raises:
        ValueError: ``path:line: not valid JSON (reason)`` for a bad line before the last, or
            ``path:line: field F: expected a number, got "abc"`` when a field has the wrong JSON type for its
            column (``path: a record field has the wrong JSON type (...)`` if that line cannot be found).
    """
    lines = text.split(b"\n")
    end = len(lines) - 1
    while end >= 0 and not lines[end].strip():
        end -= 1
    keep: list[bytes] = []
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            obj = orjson.loads(line)
        except orjson.JSONDecodeError as e:  # the reader read_records uses: the same messages
            if last and i == end and is_torn_line(line):
                break  # a record cut short by a kill: everything before it is kept
            raise ValueError(f"{path}:{_line_number(path, at) + i}: not valid JSON ({e.msg})") from None
        if isinstance(obj, dict):
            keep.append(line)
    if not keep:
        return pl.DataFrame(schema=schema)
    try:
        return _parse(b"\n".join(keep) + b"\n", schema)
    except pl.exceptions.PolarsError as e:
        raise ValueError(_wrong_type(path, at, text, schema)
                         or f"{path}: a record field has the wrong JSON type ({e})") from None


def sidecar_path(records_file: Path) -> Path:
    """The Parquet sidecar of a records file: ``records.jsonl`` -> ``records.parquet``, same directory."""
    return records_file.with_suffix(".parquet")


def _stamp(path: Path) -> dict[str, Any]:
    """The sidecar's stamp of ``path`` as it is now: reader key, size, modification time, inode change time and
    inode. The change time (ctime) is set by the kernel on every write and cannot be set back by ``touch -r`` or a
    ``cp -p``, so an edit that keeps the size and restores the mtime still invalidates the sidecar (a copied run
    directory re-parses its JSON once)."""
    st = path.stat()
    return {"key": SIDECAR_KEY, "source_bytes": st.st_size, "source_mtime_ns": st.st_mtime_ns,
            "source_ctime_ns": st.st_ctime_ns, "source_inode": st.st_ino}


def _order(asked: dict[str, pl.DataType]) -> list[str]:
    """Column order of a frame read from JSON: ``schema`` (when asked) first, then the others as asked."""
    return [c for c in {"schema": None, **asked} if c in asked]


def _read_sidecar(path: Path, schema: dict[str, pl.DataType]) -> pl.DataFrame | None:
    """The ``schema`` columns of ``path``'s sidecar, or None when it is absent, stale or lacks a column."""
    side = sidecar_path(path)
    try:
        if side.stat().st_mtime_ns < path.stat().st_mtime_ns:
            return None
        meta = pl.read_parquet_metadata(side).get(_SIDECAR_META)
        if meta is None or json.loads(meta) != _stamp(path):
            return None
        lf = pl.scan_parquet(side)
        have = lf.collect_schema()
        need = _with_decode_columns(schema)
        if any(c not in have or have[c] != dt for c, dt in need.items()):
            return None
        return _stored(lf.select(_order(need)).collect(), _order(schema))
    except (OSError, ValueError, pl.exceptions.PolarsError):
        return None  # no sidecar, or one that cannot be read: the JSON is the source


def _run_ended(run_dir: Path) -> bool:
    """``run.json`` exists and its ``status`` is not ``running`` (records are no longer appended)."""
    try:
        status = json.loads((run_dir / "run.json").read_text()).get("status")
    except (OSError, ValueError, AttributeError):
        return False
    return isinstance(status, str) and status != "running"


def _write_sidecar(path: Path, df: pl.DataFrame, stamp: dict[str, Any]) -> None:
    """Write ``df`` (``path``'s records, as read) as its sidecar, if ``path`` is still as ``stamp`` says."""
    side = sidecar_path(path)
    tmp = side.with_name(f".{side.name}.{os.getpid()}.tmp")
    try:
        if _stamp(path) != stamp:
            return  # appended to while it was read
        df.write_parquet(tmp, compression="zstd", metadata={_SIDECAR_META: json.dumps(stamp)},
                         row_group_size=_SIDECAR_ROW_GROUP)
        os.replace(tmp, side)
    except (OSError, pl.exceptions.PolarsError):
        tmp.unlink(missing_ok=True)  # a cache: a run directory we cannot write to is read from its JSON


def _json_frames(path: Path, schema: dict[str, pl.DataType], keep: Sequence[str], chunk_bytes: int,
                 pool: ThreadPoolExecutor, start: int = 0, end: int | None = None,
                 decode: bool = True) -> Iterator[pl.DataFrame]:
    """``path``'s records as frames of about ``chunk_bytes`` of JSON each (``_PARSERS`` parsed at a time),
    parsed with ``schema`` (which holds ``schema`` and the required fields), columns ``keep``; only the lines of
    bytes ``[start, end)`` (see :func:`_pieces`; a torn line is dropped only at the end of the file). ``decode``:
    as :func:`_as_read`."""
    with open(path, "rb") as f:
        inflight: deque[tuple[int, bytes, bool, Future[pl.DataFrame]]] = deque()
        pieces = _pieces(f, chunk_bytes, start, end)
        while True:
            for at, text, last in pieces:  # keep _PARSERS + 1 pieces parsing or read
                inflight.append((at, text, last, pool.submit(_parse_as_read, text, schema, path, keep, decode)))
                if len(inflight) > _PARSERS:
                    break
            if not inflight:
                break
            at, text, last, fut = inflight.popleft()
            try:
                try:
                    df = fut.result()
                except pl.exceptions.PolarsError:
                    df = _as_read(_parse_careful(path, at, text, last, schema), path, keep, decode=decode)
            except _MaybeNotARecord as e:
                _check_records(path, at, text, e.rows)
                df = _as_read(e.df, path, keep, checked=True, decode=decode)
            if df.height:
                yield df


def _json_pieces(path: Path, schema: dict[str, pl.DataType], keep: Sequence[str], chunk_bytes: int,
                 pool: ThreadPoolExecutor, start: int, end: int,
                 file_end: bool = False) -> Iterator[tuple[int, int, pl.DataFrame]]:
    """``(start, end, records)`` of each piece of bytes ``[start, end)`` of ``path`` (whole lines, about
    ``chunk_bytes`` each, consecutive: a piece's end is the next one's start), parsed as :func:`_json_frames` parses
    them (``_PARSERS`` at a time), chunk lists as written (what a part stores; a piece may hold no record).
    ``file_end``: ``end`` is the end of the file, so the last piece holds its last line, skipped when it is not
    valid JSON (as :func:`_json_frames` skips it; :func:`torn_last_line` says so)."""
    with open(path, "rb") as f:
        inflight: deque[tuple[int, bytes, Future[pl.DataFrame]]] = deque()
        pieces = _pieces(f, chunk_bytes, start, end)
        while True:
            for at, text, _last in pieces:
                inflight.append((at, text, pool.submit(_parse_as_read, text, schema, path, keep, False)))
                if len(inflight) > _PARSERS:
                    break
            if not inflight:
                break
            at, text, fut = inflight.popleft()
            try:
                try:
                    df = fut.result()
                except pl.exceptions.PolarsError:
                    last = file_end and at + len(text) >= end
                    df = _as_read(_parse_careful(path, at, text, last, schema), path, keep, decode=False)
            except _MaybeNotARecord as e:
                _check_records(path, at, text, e.rows)
                df = _as_read(e.df, path, keep, checked=True, decode=False)
            yield at, at + len(text), df


def _parse_schema(asked: dict[str, pl.DataType]) -> dict[str, pl.DataType]:
    """The columns parsed for ``asked``: ``schema`` (a record of another version is refused) and the required
    fields (a JSON object without them is refused) always, then ``asked`` (and ``chunk_times`` with
    ``chunk_tokens``: a schema-3 ``chunk_tokens`` of one value is expanded to one per chunk)."""
    chunks = {"chunk_tokens", "chunk_times"} & set(asked)
    times = {c: RECORD_SCHEMA[c] for c in ("chunk_times", *CHUNK_ANCHORS)} if chunks else {}
    return {"schema": RECORD_SCHEMA["schema"], **{c: RECORD_SCHEMA[c] for c in REQUIRED_RECORD_FIELDS}, **times,
            **asked}


def iter_frames(
    run_dir: str | os.PathLike[str],
    columns: Sequence[str] | None = None,
    chunk_bytes: int = DEFAULT_CHUNK_BYTES,
) -> Iterator[pl.DataFrame]:
    """The records of a run directory as consecutive frames of about ``chunk_bytes`` of JSON text each.

    Each frame has the ``columns`` asked for (default :data:`DEFAULT_COLUMNS`, dtypes :data:`RECORD_SCHEMA`)
    and :data:`ROW`, numbered on from the previous frame. For streaming aggregations that must not hold every
    record's column at once.

    Raises:
        KeyError: a name in ``columns`` is not a record field.
        ValueError: a line before a file's last is not valid JSON (message ``path:line: ...``), a JSON object is
            not a request record (lacks a required field), a field has the wrong JSON type for its dtype, or a
            record's ``schema`` is a version this harness cannot read.
        OSError: a file cannot be read.
    """
    asked = _schema(columns)
    schema, keep = _parse_schema(asked), _order(asked)
    row = 0
    with ThreadPoolExecutor(max_workers=_PARSERS) as pool:
        for path in record_files(run_dir):
            for df in _json_frames(path, schema, keep, chunk_bytes, pool):
                yield df.with_columns(pl.int_range(row, row + df.height, dtype=pl.Int64).alias(ROW))
                row += df.height


def _row_index(df: pl.DataFrame, start: int) -> pl.Series:
    """The :data:`ROW` column of ``df`` (``start``, ``start + 1``, ...; Int64), split into chunks of the same
    lengths as ``df``'s columns.

    A column chunked unlike the others makes polars copy the whole frame into one chunk per column at the
    next ``select`` / ``with_columns`` (over a million records with their ``gap_hist`` text: +350 MB and a
    second of CPU, once per expression); one range per chunk keeps the frame aligned and those zero-copy.
    """
    first = df.get_column(df.columns[0]) if df.width else None
    lengths = [len(c) for c in first.get_chunks()] if first is not None else [df.height]
    parts, at = [], start
    for n in lengths:
        parts.append(pl.int_range(at, at + n, dtype=pl.Int64, eager=True))
        at += n
    return (pl.concat(parts, rechunk=False) if len(parts) > 1 else parts[0]).alias(ROW)


def read_frame(
    run_dir: str | os.PathLike[str],
    columns: Sequence[str] | None = None,
    chunk_bytes: int = DEFAULT_CHUNK_BYTES,
    sidecar: bool = True,
    parts: bool = False,
) -> pl.DataFrame:
    """Every record of a run directory (all ``records*.jsonl`` files, in name then line order) as one frame.

    Args:
        run_dir: the run directory.
        columns: record fields to read (default :data:`DEFAULT_COLUMNS`: all but :data:`LAZY_COLUMNS`).
        chunk_bytes: JSON text parsed at a time; bounds the transient memory above the frame itself.
        sidecar: read a records file's Parquet sidecar when it is valid, and write one after parsing the JSON
            of a run that has ended (module docstring); False reads (and writes) only the JSON.
        parts: a records file of a run that has ended, without a valid sidecar or parts, is written as Parquet
            parts (every :data:`PART_COLUMNS`, chunk lists as written) as its JSON is parsed, instead of a sidecar
            of the columns asked: the first pass of a two-pass read, whose second then reads the chunk lists from
            those parts instead of parsing the JSON again.

    Returns:
        One row per record, columns ``columns`` with :data:`RECORD_SCHEMA` dtypes plus :data:`ROW`; empty
        (with that schema) when there is no record file or no record.

    Raises:
        KeyError: a name in ``columns`` is not a record field.
        ValueError: a line before a file's last is not valid JSON (message ``path:line: ...``), a JSON object is
            not a request record (lacks a required field), a field has the wrong JSON type for its dtype, or a
            record's ``schema`` is a version this harness cannot read.
        OSError: a file cannot be read.
    """
    asked = _schema(columns)
    root = Path(run_dir)
    ended = sidecar and _run_ended(root)
    frames: list[pl.DataFrame] = []
    row = 0
    with ThreadPoolExecutor(max_workers=_PARSERS) as pool:
        for path in record_files(root):
            df = _read_sidecar(path, asked) if sidecar else None
            if df is None and sidecar:
                df = _read_with_parts(path, asked, chunk_bytes, pool, ended, from_start=parts)
            if df is None:
                df = _read_json_file(path, asked, chunk_bytes, pool, ended)
            if df.height:
                frames.append(df.with_columns(_row_index(df, row)))
                row += df.height
    if not frames:
        return pl.DataFrame(schema={**asked, ROW: pl.Int64()})
    return pl.concat(frames, rechunk=False)


def read_json_range(path: str | os.PathLike[str], start: int, end: int, columns: Sequence[str] = PART_COLUMNS,
                    chunk_bytes: int = DEFAULT_CHUNK_BYTES, decode: bool = True) -> pl.DataFrame:
    """The records of bytes ``[start, end)`` of a records file, parsed from its JSON as :func:`read_frame` parses
    them (same dtypes, null defaults and refusals), ``columns`` in :func:`read_frame`'s order, no :data:`ROW`.

    ``start`` must be a line start and ``end`` just after a newline (a part's range,
    :mod:`harness.report.parts`); a line in the range that is not valid JSON is an error even if it is the
    range's last (only the file's last line may be torn). ``decode`` False: schema-3 chunk lists as written (what a
    part stores).

    Raises:
        KeyError: a name in ``columns`` is not a record field.
        ValueError: as :func:`read_frame`.
        OSError: the file cannot be read.
    """
    asked = _schema(columns)
    with ThreadPoolExecutor(max_workers=_PARSERS) as pool:
        frames = list(_json_frames(Path(path), _parse_schema(asked), _order(asked), chunk_bytes, pool, start, end,
                                   decode=decode))
    return pl.concat(frames, rechunk=False) if frames else pl.DataFrame(schema={c: asked[c] for c in _order(asked)})


def _seal_path(records_file: Path) -> Path:
    return parts_dir(records_file) / "sealed.json"


def _read_seal(records_file: Path) -> dict[str, Any] | None:
    """The stamp (:func:`_stamp`) the records file had when its parts were sealed, or None (not sealed: the run
    goes on, or it was killed before a report; an unreadable seal counts as a stamp that matches nothing)."""
    try:
        got = json.loads(_seal_path(records_file).read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return {}
    return got if isinstance(got, dict) else {}


def _write_seal(records_file: Path) -> None:
    """Seal the parts of an ended run: they now cover the whole records file, whose :func:`_stamp` is kept. A later
    read finding another stamp (an edit after the run, even one keeping the size and the range ends' bytes, which
    the parts' own digests cannot see) distrusts every part. Atomic; silently skipped when it cannot be written."""
    seal = _seal_path(records_file)
    tmp = seal.with_name(f".{seal.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(json.dumps(_stamp(records_file)))
        os.replace(tmp, seal)
    except OSError:
        tmp.unlink(missing_ok=True)


def _read_with_parts(path: Path, asked: dict[str, pl.DataType], chunk_bytes: int, pool: ThreadPoolExecutor,
                     write_tail: bool, from_start: bool = False) -> pl.DataFrame | None:
    """``path``'s records from its valid Parquet parts (:mod:`harness.report.parts`) and the JSON after them, the
    ``asked`` columns; None when no part is usable (unless ``from_start``). ``write_tail`` (the run has ended): the
    JSON after the parts is written as parts, so the next read is parts only; with ``from_start`` also when there
    is no part yet (the whole file is the tail)."""
    keep = _order(asked)
    need = _with_decode_columns(asked)
    seal = _read_seal(path)
    if seal is not None and seal != _stamp(path):  # records.jsonl changed after the run's parts were sealed
        if not write_tail:
            return None
        shutil.rmtree(parts_dir(path), ignore_errors=True)  # a cache: the JSON is read (a copied run too: new inode)
        if not from_start:
            return None  # (and a sidecar written)
        # the report's own read (from_start): the whole file written as parts again, below (no part is left)
    chain = valid_chain(path, SIDECAR_KEY, need)
    size = path.stat().st_size
    if not chain and not (from_start and write_tail and size and _ends_with_newline(path, size)):
        return None
    try:  # one scan over every part: read in parallel (~1 s for 1M records, 1.5 s one file after the other)
        if PACKED_COLUMN in need:  # a part's chunk times packed or not (one dtype a scan): one part at a time
            frames = [_stored(pl.read_parquet(p.path, columns=_order(need)), keep) for p in chain]
        else:
            frames = [_stored(pl.scan_parquet([p.path for p in chain]).select(_order(need)).collect(), keep)] \
                if chain else []
    except (OSError, ValueError, pl.exceptions.PolarsError):  # ValueError: a packed value not whole float64s
        return None  # a part went away or broke since it was checked: the JSON is the source
    at = chain[-1].end if chain else 0
    if size > at:
        if write_tail and _ends_with_newline(path, size):  # parts hold every asked column: PART_COLUMNS do
            # the tail as parts of about chunk_bytes each, written as parsed: one piece's chunk lists held at a time
            wide = _schema(PART_COLUMNS)
            sealed = True
            for p_at, p_end, piece in _json_pieces(path, _parse_schema(wide), _order(wide), chunk_bytes, pool, at,
                                                    size, file_end=True):
                if sealed and not (path.stat().st_size == size and write_part(path, piece, p_at, p_end, SIDECAR_KEY)):
                    sealed = False  # appended to, or not writable: the rest is read, not written
                frames.append(_stored(piece.select(_order(need)), keep))
            if sealed:
                _write_seal(path)
        else:
            frames.extend(_json_frames(path, _parse_schema(asked), keep, chunk_bytes, pool, at))
    elif write_tail and seal is None:
        _write_seal(path)
    frames = [f for f in frames if f.height]
    return pl.concat(frames, rechunk=False) if frames else pl.DataFrame(schema={c: asked[c] for c in keep})


def torn_last_line(path: str | os.PathLike[str], tail_bytes: int = 4 << 20) -> bool:
    """Whether a records file's last non-blank line is one :func:`read_frame` skips: not valid JSON and torn
    (:func:`harness.jsonl.is_torn_line`: an incomplete line of a run killed mid-write, with or without a newline
    after it; within the last ``tail_bytes`` bytes). A last line that is invalid but not torn is False here: the
    read raises for it.
    False for a missing or empty file. Raises OSError when the file cannot be read."""
    p = Path(path)
    try:
        size = p.stat().st_size
    except FileNotFoundError:
        return False
    if size == 0:
        return False
    with open(p, "rb") as f:
        for n in (min(size, 1 << 18), min(size, tail_bytes)):  # the last line is short: a small read first
            f.seek(size - n)
            tail = f.read().rstrip()
            if b"\n" in tail or n == size or n == min(size, tail_bytes):
                break
    last = tail.rsplit(b"\n", 1)[-1]
    if not last.strip():
        return False
    try:
        json.loads(last)
    except ValueError:
        return is_torn_line(last)  # else corrupt: the read raises for it
    return False


def _ends_with_newline(path: Path, size: int) -> bool:
    with open(path, "rb") as f:
        f.seek(size - 1)
        return f.read(1) == b"\n"


def _read_json_file(path: Path, asked: dict[str, pl.DataType], chunk_bytes: int, pool: ThreadPoolExecutor,
                    write_sidecar: bool) -> pl.DataFrame:
    """``path``'s records parsed from its JSON, the ``asked`` columns; writes its sidecar if ``write_sidecar``.

    The sidecar gets ``schema``, the ``asked`` columns and those of the sidecar it replaces (so callers
    asking for different columns converge on one sidecar instead of taking turns rewriting it).
    """
    if not write_sidecar:
        parts = list(_json_frames(path, _parse_schema(asked), _order(asked), chunk_bytes, pool))
        return pl.concat(parts, rechunk=False) if parts else pl.DataFrame(schema=asked)
    stamp = _stamp(path)
    try:
        had = [c for c in pl.scan_parquet(sidecar_path(path)).collect_schema() if c in RECORD_SCHEMA
               and (c in asked or c not in ("chunk_times", "chunk_tokens"))]  # a two-pass read: not the lists
    except (OSError, pl.exceptions.PolarsError):
        had = []
    wide = _with_decode_columns({"schema": RECORD_SCHEMA["schema"], **{c: RECORD_SCHEMA[c] for c in had}, **asked})
    parts = list(_json_frames(path, _parse_schema(wide), _order(wide), chunk_bytes, pool, decode=False))
    whole = pl.concat(parts, rechunk=False) if parts else pl.DataFrame(schema=wide)
    del parts
    _write_sidecar(path, whole, stamp)  # chunk lists as written (compact), decoded as read
    return _stored(whole, _order(asked))


#: The columns :func:`iter_chunk_frames` yields: what :func:`harness.report.tokens.reduce_chunks` reads.
CHUNK_COLUMNS: tuple[str, ...] = ("start_wall", "ttfat", "chunk_times", "chunk_tokens")
#: The columns of a batch :func:`iter_chunk_batches` yields with its chunk lists as written (not decoded):
#: :data:`CHUNK_COLUMNS`, the record ``schema`` and the timings a schema-3 chunk time is anchored to.
RAW_CHUNK_COLUMNS: tuple[str, ...] = ("schema", *CHUNK_COLUMNS, *(a for a in CHUNK_ANCHORS if a not in CHUNK_COLUMNS))


def iter_chunk_frames(run_dir: str | os.PathLike[str], chunk_bytes: int = DEFAULT_CHUNK_BYTES,
                      batch_rows: int = 20_000) -> Iterator[pl.DataFrame]:
    """The :data:`CHUNK_COLUMNS` of every record of a run directory, in :func:`read_frame`'s row order, as
    consecutive frames (no :data:`ROW`), chunk lists decoded: :func:`iter_chunk_batches` with every batch decoded.

    Raises:
        ValueError, OSError: as :func:`read_frame`.
    """
    for df, decoded in iter_chunk_batches(run_dir, chunk_bytes, batch_rows):
        yield df if decoded else decode_chunk_lists(df).select(CHUNK_COLUMNS)


def iter_chunk_batches(run_dir: str | os.PathLike[str], chunk_bytes: int = DEFAULT_CHUNK_BYTES,
                       batch_rows: int = 20_000) -> Iterator[tuple[pl.DataFrame, bool]]:
    """``(batch, decoded)`` for every record of a run directory, in :func:`read_frame`'s row order, as consecutive
    batches (no :data:`ROW`): the second pass of a two-pass read, whose first (:func:`read_frame` without the
    chunk lists) has already validated the records and written any sidecar or last part.

    Per records file, from the first source that holds the columns: its valid sidecar (``batch_rows`` rows at a
    time), its valid Parquet parts (one part at a time, in slices of ``batch_rows``, then the JSON after the last
    part), else its JSON (about ``chunk_bytes`` of text at a time). Every batch has :data:`RAW_CHUNK_COLUMNS`, the
    chunk lists as written (``decoded`` False: a schema-3 record's µs deltas and single count, as the sidecar and
    the parts store them too; decoded by the reducer, :mod:`harness.report.chunkbins`, or
    :func:`decode_chunk_lists`); ``decoded`` True is kept for a source holding decoded lists.
    The chunk lists of the whole run are never held at once.

    Raises:
        ValueError, OSError: as :func:`read_frame`.
    """
    asked = _schema(CHUNK_COLUMNS)
    keep = _order(asked)
    raw = _schema(RAW_CHUNK_COLUMNS)
    with ThreadPoolExecutor(max_workers=_PARSERS) as pool:
        for path in record_files(run_dir):
            yield from _chunk_frames_of(path, asked, keep, raw, chunk_bytes, batch_rows, pool)


def _chunk_frames_of(path: Path, asked: dict[str, pl.DataType], keep: list[str], raw: dict[str, pl.DataType],
                     chunk_bytes: int, batch_rows: int, pool: ThreadPoolExecutor
                     ) -> Iterator[tuple[pl.DataFrame, bool]]:
    """:func:`iter_chunk_batches` of one records file."""
    side = sidecar_path(path)
    cols = _order(raw)
    if _sidecar_has(path, raw):
        n = pl.scan_parquet(side).select(pl.len()).collect().item()
        for at in range(0, n, batch_rows):
            yield pl.scan_parquet(side).slice(at, batch_rows).select(cols).collect(), False
        return
    seal = _read_seal(path)
    chain = [] if seal is not None and seal != _stamp(path) else valid_chain(path, SIDECAR_KEY, raw)
    at = 0
    for part in chain:
        try:
            df = pl.read_parquet(part.path, columns=cols)
        except (OSError, pl.exceptions.PolarsError) as e:  # after the first pass read it: a part removed meanwhile
            raise OSError(f"{part.path}: Parquet part unreadable in the second pass ({e})") from e
        for first in range(0, df.height, batch_rows):  # zero-copy slices: a large part is reduced a batch at a time
            yield df.slice(first, batch_rows), False
        del df
        at = part.end
    for df in _json_frames(path, _parse_schema(raw), _order(raw), chunk_bytes, pool, at, decode=False):
        yield df, False


def _sidecar_has(path: Path, schema: dict[str, pl.DataType]) -> bool:
    """``path``'s sidecar is valid (:func:`_read_sidecar`'s tests) and holds the ``schema`` columns."""
    side = sidecar_path(path)
    try:
        if side.stat().st_mtime_ns < path.stat().st_mtime_ns:
            return False
        meta = pl.read_parquet_metadata(side).get(_SIDECAR_META)
        if meta is None or json.loads(meta) != _stamp(path):
            return False
        have = pl.scan_parquet(side).collect_schema()
        return all(c in have and have[c] == dt for c, dt in schema.items())
    except (OSError, ValueError, pl.exceptions.PolarsError):
        return False
