"""Prompt data files: validated and indexed once, read a row at a time when sampled.

Formats (``dataset.format``; ``auto`` picks by extension, and for JSON lines by the first row's keys):

- ``jsonl``: one JSON object per line with ``messages`` (a chat: a list of ``{"role", "content"}``), optional
  ``max_tokens`` (integer > 0), the weight key (``weight`` unless ``dataset.weight_column``; number > 0) and
  ``extra_body`` (an object merged into the request body).
- ``sharegpt``: one JSON object per line with ``conversations`` (a list of ``{"from", "value"}``); the prompt is
  the system turn (if any) and the first ``human``/``user`` turn. Same optional keys as ``jsonl``.
- ``text``: one prompt per line (the user message), UTF-8.
- ``csv`` / ``parquet``: the prompt text in ``dataset.column`` (default ``prompt``), optional weight and
  ``max_tokens`` columns (``dataset.weight_column``, ``dataset.max_tokens_column``).

Whitespace-only lines are skipped in the line formats. Memory: the line formats keep, per row, its byte offset and
end (int64 each) and its line number (uint32), plus its weight (float64) when weighted: 20-28 bytes a row, never
the prompt text; the row is read back with ``os.pread`` when drawn. CSV/Parquet keep the text column as one polars
(Arrow) string column, not as Python objects.

Every problem is a :class:`DataFileError` whose message is one line: ``<file>:<line>: <problem>`` (``<file>:
<problem>`` when no line applies), raised while indexing, i.e. before any load is sent.
"""

from __future__ import annotations

import os
from array import array
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

__all__ = [
    "FORMATS",
    "DataFileError",
    "DatasetIndex",
    "Row",
    "detect_format",
    "open_dataset",
]

#: The data-file formats ``dataset.format`` accepts besides ``auto``.
FORMATS = ("jsonl", "sharegpt", "text", "csv", "parquet")

_EXTENSIONS = {
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".json": "jsonl",
    ".txt": "text",
    ".text": "text",
    ".csv": "csv",
    ".parquet": "parquet",
    ".pq": "parquet",
}
_HUMAN = ("human", "user")
_ROLE_OF = {"system": "system", "human": "user", "user": "user", "gpt": "assistant", "assistant": "assistant"}


class DataFileError(ValueError):
    """A data file that cannot be used; the message is one line: file, line (when one applies) and problem."""


@dataclass(frozen=True, slots=True)
class Row:
    """One prompt read from a data file.

    Attributes:
        line: 1-based line of the file it came from (CSV: counting the header line; Parquet: 1-based row).
        messages: the chat sent (``[{"role", "content"}, ...]``).
        max_tokens: the row's own ``max_tokens`` (tokens), None when it has none.
        extra_body: request fields from the row, merged over the request body.
    """

    line: int
    messages: list[dict[str, Any]]
    max_tokens: int | None = None
    extra_body: dict[str, Any] = field(default_factory=dict)


def _where(path: Path, line: int | None) -> str:
    return f"{path}:{line}" if line is not None else str(path)


def _fail(path: Path, line: int | None, problem: str) -> DataFileError:
    return DataFileError(f"{_where(path, line)}: {problem}")


def detect_format(path: Path) -> str:
    """The format of ``path`` from its extension; for ``.jsonl``/``.json`` the first non-blank line decides
    between ``sharegpt`` (it has ``conversations``) and ``jsonl``.

    Raises:
        DataFileError: unknown extension, or the file cannot be read / is empty (see :func:`open_dataset`).
    """
    fmt = _EXTENSIONS.get(path.suffix.lower())
    if fmt is None:
        known = ", ".join(sorted(_EXTENSIONS))
        raise _fail(
            path, None, f"cannot tell the format from the extension {path.suffix!r} ({known}); set dataset.format"
        )
    if fmt != "jsonl":
        return fmt
    with open(path, "rb") as f:
        for n, line in enumerate(f, 1):
            if line.strip():
                if line.lstrip().startswith(b"["):
                    raise _fail(path, n, "a JSON array, not JSON lines: convert it (jq -c '.[]' in > out.jsonl)")
                try:
                    obj = orjson.loads(line)
                except orjson.JSONDecodeError as e:
                    raise _fail(path, n, f"not valid JSON ({e.msg})") from None
                return "sharegpt" if isinstance(obj, dict) and "conversations" in obj else "jsonl"
    return "jsonl"


def _positive_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v > 0


def _positive_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 and v != float("inf")


def _check_messages(msgs: Any) -> str | None:
    if not isinstance(msgs, list) or not msgs:
        return "'messages' must be a non-empty list of {role, content}"
    for i, m in enumerate(msgs):
        if not isinstance(m, dict) or "role" not in m or "content" not in m:
            return f"messages[{i}] needs 'role' and 'content'"
        if not isinstance(m["role"], str) or not isinstance(m["content"], (str, list)):
            return f"messages[{i}]: 'role' must be a string and 'content' a string or a list of parts"
    return None


def _sharegpt_messages(conv: Any) -> tuple[list[dict[str, Any]] | None, str | None]:
    if not isinstance(conv, list) or not conv:
        return None, "'conversations' must be a non-empty list of {from, value}"
    out: list[dict[str, Any]] = []
    for i, turn in enumerate(conv):
        if (
            not isinstance(turn, dict)
            or not isinstance(turn.get("from"), str)
            or not isinstance(turn.get("value"), str)
        ):
            return None, f"conversations[{i}] needs 'from' and 'value' (strings)"
        who = turn["from"].lower()
        if who == "system" and not out:
            out.append({"role": "system", "content": turn["value"]})
        elif who in _HUMAN:
            out.append({"role": "user", "content": turn["value"]})
            return out, None
        elif who not in _ROLE_OF:
            return None, f"conversations[{i}]: unknown 'from' {turn['from']!r} (human, user, gpt, assistant, system)"
    return None, "no 'human' (or 'user') turn in 'conversations'"


class DatasetIndex:
    """A validated, indexed data file. Build with :func:`open_dataset`.

    Attributes:
        path: the file (absolute).
        format: one of :data:`FORMATS`.
        weights: one weight per row (float64 array), None when no row gives one (all rows weigh 1).
    """

    path: Path
    format: str
    weights: array[float] | None

    def __len__(self) -> int:
        raise NotImplementedError

    def row(self, i: int) -> Row:
        """Row ``i`` (0-based, ``0 <= i < len(self)``), read from the file / column now."""
        raise NotImplementedError


class _LineIndex(DatasetIndex):
    """JSONL / ShareGPT / text: byte offsets of every prompt line; a line is re-read with ``os.pread``."""

    def __init__(self, path: Path, fmt: str, weight_key: str, max_tokens_key: str) -> None:
        self.path, self.format = path, fmt
        self._weight_key, self._mt_key = weight_key, max_tokens_key
        self._starts: array[int] = array("q")
        self._ends: array[int] = array("q")
        self._lines: array[int] = array("I")
        weights: array[float] = array("d")
        any_weight = False
        loads = orjson.loads
        pos = 0
        with open(path, "rb") as f:
            for n, raw in enumerate(f, 1):
                start, pos = pos, pos + len(raw)
                if not raw.strip():
                    continue
                if fmt == "text":
                    try:
                        raw.decode("utf-8")
                    except UnicodeDecodeError as e:
                        raise _fail(path, n, f"not UTF-8 text ({e.reason})") from None
                    w = 1.0
                else:
                    try:
                        obj = loads(raw)
                    except orjson.JSONDecodeError as e:
                        raise _fail(path, n, f"not valid JSON ({e.msg})") from None
                    w, has_w = self._check(obj, n)
                    any_weight = any_weight or has_w
                self._starts.append(start)
                self._ends.append(pos)
                self._lines.append(n)
                weights.append(w)
        if not self._starts:
            raise _fail(path, None, "empty: no prompt in the file")
        self.weights = weights if any_weight else None

    def _check(self, obj: Any, n: int) -> tuple[float, bool]:
        path = self.path
        if not isinstance(obj, dict):
            raise _fail(path, n, f"expected a JSON object, got {type(obj).__name__}")
        if self.format == "sharegpt":
            if "conversations" not in obj:
                raise _fail(path, n, "no 'conversations' (a ShareGPT row is {\"conversations\": [{from, value}]})")
            _, problem = _sharegpt_messages(obj["conversations"])
        else:
            if "messages" not in obj:
                raise _fail(path, n, "no 'messages' (a JSONL row is {\"messages\": [{role, content}], ...})")
            problem = _check_messages(obj["messages"])
        if problem:
            raise _fail(path, n, problem)
        mt = obj.get(self._mt_key)
        if mt is not None and not _positive_int(mt):
            raise _fail(path, n, f"'{self._mt_key}' must be an integer > 0, got {mt!r}")
        eb = obj.get("extra_body")
        if eb is not None and not isinstance(eb, dict):
            raise _fail(path, n, f"'extra_body' must be an object, got {type(eb).__name__}")
        if self._weight_key in obj:
            w = obj[self._weight_key]
            if not _positive_number(w):
                raise _fail(path, n, f"'{self._weight_key}' must be a number > 0, got {w!r}")
            return float(w), True
        return 1.0, False

    def __len__(self) -> int:
        return len(self._starts)

    def row(self, i: int) -> Row:
        start = self._starts[i]
        fd = os.open(self.path, os.O_RDONLY)
        try:
            raw = os.pread(fd, self._ends[i] - start, start)
        finally:
            os.close(fd)
        line = self._lines[i]
        if self.format == "text":
            return Row(line, [{"role": "user", "content": raw.decode("utf-8").rstrip("\r\n")}])
        obj = orjson.loads(raw)
        if self.format == "sharegpt":
            msgs, _ = _sharegpt_messages(obj["conversations"])
            assert msgs is not None  # checked when indexed
        else:
            msgs = obj["messages"]
        return Row(line, msgs, obj.get(self._mt_key), obj.get("extra_body") or {})


class _ColumnIndex(DatasetIndex):
    """CSV / Parquet: the prompt column (and the weight / max_tokens columns) read once with polars."""

    def __init__(self, path: Path, fmt: str, column: str, weight_col: str | None, mt_col: str | None) -> None:
        import polars as pl

        self.path, self.format = path, fmt
        try:
            schema = pl.read_csv(path, n_rows=0).columns if fmt == "csv" else list(pl.read_parquet_schema(path))
        except Exception as e:
            raise _fail(path, None, f"not a readable {fmt.upper()} file ({str(e).splitlines()[0]})") from None
        wanted = [column] + [c for c in (weight_col, mt_col) if c is not None and c in schema]
        if column not in schema:
            raise _fail(path, 1 if fmt == "csv" else None, f"no column {column!r} (columns: {', '.join(schema)})")
        if weight_col is not None and weight_col not in schema and weight_col != "weight":
            raise _fail(path, 1 if fmt == "csv" else None, f"no weight column {weight_col!r}")
        try:
            if fmt == "csv":
                df = pl.read_csv(path, columns=wanted, infer_schema=False)
            else:
                df = pl.read_parquet(path, columns=wanted)
        except Exception as e:
            raise _fail(path, None, f"not a readable {fmt.upper()} file ({str(e).splitlines()[0]})") from None
        if df.height == 0:
            raise _fail(path, None, "empty: no prompt in the file")
        first = 2 if fmt == "csv" else 1  # line (CSV: after the header) or row of row 0
        text = df.get_column(column).cast(pl.String, strict=False)
        bad = text.is_null() | (text.str.strip_chars() == "")
        if bad.any():
            raise _fail(path, int(bad.arg_true()[0]) + first, f"empty prompt in column {column!r}")
        self._text = text
        self._first = first
        self.weights = None
        if weight_col is not None and weight_col in df.columns:
            w = df.get_column(weight_col).cast(pl.Float64, strict=False)
            badw = w.is_null() | (w <= 0) | w.is_infinite()
            if badw.any():
                i = int(badw.arg_true()[0])
                raise _fail(
                    path, i + first, f"weight column {weight_col!r} must be a number > 0, got {df[weight_col][i]!r}"
                )
            self.weights = array("d", w.to_list())
        self._mt: Any = None
        if mt_col is not None and mt_col in df.columns:
            raw = df.get_column(mt_col)
            mt = raw.cast(pl.Float64, strict=False)
            badm = raw.is_not_null() & (mt.is_null() | (mt <= 0) | (mt != mt.floor()))
            if badm.any():
                i = int(badm.arg_true()[0])
                raise _fail(path, i + first, f"column {mt_col!r} must be an integer > 0, got {raw[i]!r}")
            self._mt = mt.cast(pl.Int64)

    def __len__(self) -> int:
        return len(self._text)

    def row(self, i: int) -> Row:
        mt = self._mt[i] if self._mt is not None else None
        return Row(i + self._first, [{"role": "user", "content": self._text[i]}], int(mt) if mt is not None else None)


_CACHE: dict[tuple[Any, ...], DatasetIndex] = {}


def open_dataset(
    path: str | os.PathLike[str],
    fmt: str = "auto",
    column: str = "prompt",
    weight_column: str = "weight",
    max_tokens_column: str = "max_tokens",
) -> DatasetIndex:
    """Validate and index a data file (once per process: a file unchanged since is not read again).

    Args:
        path: the file.
        fmt: ``auto`` or one of :data:`FORMATS`.
        column: CSV/Parquet: the prompt text column.
        weight_column: the per-row weight key / column (rows without one weigh 1).
        max_tokens_column: the per-row ``max_tokens`` key / column.

    Raises:
        DataFileError: the file is missing, unreadable, empty, of an unknown format, or a row is malformed; the
            message is one line naming the file, the line and the problem.
    """
    p = Path(path).absolute()
    try:
        st = p.stat()
    except FileNotFoundError:
        raise _fail(p, None, "no such file") from None
    except OSError as e:
        raise _fail(p, None, f"cannot read: {e.strerror or e}") from None
    if not p.is_file():
        raise _fail(p, None, "not a regular file")
    if st.st_size == 0:
        raise _fail(p, None, "empty: no prompt in the file")
    key = (p, st.st_mtime_ns, st.st_size, fmt, column, weight_column, max_tokens_column)
    hit = _CACHE.get(key)
    if hit is not None:
        return hit
    if fmt not in ("auto", *FORMATS):
        raise _fail(p, None, f"unknown format {fmt!r} (auto, {', '.join(FORMATS)})")
    try:
        real = detect_format(p) if fmt == "auto" else fmt
        index: DatasetIndex
        if real in ("csv", "parquet"):
            index = _ColumnIndex(p, real, column, weight_column, max_tokens_column)
        else:
            index = _LineIndex(p, real, weight_column, max_tokens_column)
    except OSError as e:
        raise _fail(p, None, f"cannot read: {e.strerror or e}") from None
    _CACHE.clear()  # one data set per process: drop an older index (and its memory)
    _CACHE[key] = index
    return index
