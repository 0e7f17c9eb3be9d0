"""Reading JSON-lines files that a killed process may have left with a torn last line.

Used for the run directory's ``records.jsonl`` / ``phases.jsonl`` (:mod:`harness.records`) and the simulator's
ground-truth log (:func:`harness.sim.truth.read_truth`): both are appended and flushed line by line, so a process
killed mid-write leaves at most its last line incomplete. Such a line starts like the object it was going to be
(``{``): :func:`is_torn_line` is the one rule every reader of these files applies to a last line that is not valid
JSON. Any other invalid last line (``not json``, a stray word) is corrupt, an error like a bad line before it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import orjson

__all__ = ["is_torn_line", "read_jsonl", "read_jsonl_numbered"]


def is_torn_line(line: bytes) -> bool:
    """Whether ``line``, the last non-blank line of a JSON-lines file and not valid JSON, is a torn line: a JSON
    object cut off by a kill mid-write (it starts with ``{`` after any leading whitespace). Every line these files
    hold is an object written whole and flushed, so a kill can leave only such a prefix; a last line that does not
    start with ``{`` is corrupt, not torn (its reader raises as for a bad line before it)."""
    return line.lstrip().startswith(b"{")


def read_jsonl(path: str | os.PathLike[str], missing_ok: bool = False) -> Iterator[Any]:
    """Yield the JSON value of each non-blank line of ``path``, in order; a torn last line is skipped.

    The last non-blank line is the only one allowed to be invalid JSON, and only when it is torn
    (:func:`is_torn_line`: an interrupted write; everything before it is kept).

    Args:
        path: the file.
        missing_ok: yield nothing for a file that does not exist (else ``FileNotFoundError``).

    Raises:
        ValueError: naming the file and (1-based) line when a line before the last is not valid JSON, or the last
            is not valid JSON and not torn.
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
            if i == last and is_torn_line(line):
                return  # cut short by a kill
            raise ValueError(f"{os.fspath(path)}:{i + 1}: not valid JSON ({e.msg})") from None
