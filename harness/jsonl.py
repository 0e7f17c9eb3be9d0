"""Reading JSON-lines files that a killed process may have left with a torn last line.

Used for the run directory's ``records.jsonl`` / ``phases.jsonl`` (:mod:`harness.records`) and the simulator's
ground-truth log (:func:`harness.sim.truth.read_truth`): both are appended and flushed line by line, so a process
killed mid-write leaves at most its last line incomplete.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import orjson

__all__ = ["read_jsonl", "read_jsonl_numbered"]


def read_jsonl(path: str | os.PathLike[str], missing_ok: bool = False) -> Iterator[Any]:
    """Yield the JSON value of each non-blank line of ``path``, in order; a torn last line is skipped.

    The last non-blank line is the only one allowed to be invalid JSON (an interrupted write: everything before
    it is kept).

    Args:
        path: the file.
        missing_ok: yield nothing for a file that does not exist (else ``FileNotFoundError``).

    Raises:
        ValueError: naming the file and (1-based) line when a line before the last is not valid JSON.
        OSError: when the file cannot be read (``FileNotFoundError`` unless ``missing_ok``).
    """
    for _line, value in read_jsonl_numbered(path, missing_ok):
        yield value


def read_jsonl_numbered(path: str | os.PathLike[str], missing_ok: bool = False) -> Iterator[tuple[int, Any]]:
    """:func:`read_jsonl`'s values, each with its 1-based line number in ``path`` (same errors)."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        if missing_ok:
            return
        raise
    lines = data.split(b"\n")
    last = len(lines) - 1
    while last >= 0 and not lines[last].strip():
        last -= 1
    loads = orjson.loads
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            yield i + 1, loads(line)
        except orjson.JSONDecodeError as e:
            if i == last:
                return  # cut short by a kill
            raise ValueError(f"{os.fspath(path)}:{i + 1}: not valid JSON ({e.msg})") from None
