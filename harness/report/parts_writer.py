"""The part converter: during a run, turns completed ranges of ``records*.jsonl`` into Parquet parts.

``python -m harness.report.parts_writer RUN_DIR --parent PID`` (started by :class:`harness.records.RunDir` once
its records file holds :data:`PART_BYTES`; a separate process, so neither the GIL nor gevent's loop of the run's
process is touched). Every ``--poll`` seconds it looks at each records file of the run directory and, while at
least :data:`PART_BYTES` of whole, flushed lines follow the last part, parses the next such range (ending at a
newline) exactly as :func:`harness.report.frame.read_frame` parses the JSON and writes it as a part
(:mod:`harness.report.parts`). It runs on CPU time nothing else wants (Linux ``SCHED_IDLE``; elsewhere
``nice`` 19) with one polars thread, parsing one range at a time (so a busy load generator is never slowed: the
converter then falls behind and the report parses more JSON), and exits when the run directory's ``run.json``
no longer says ``running``, when its parent process is gone, or on SIGTERM (which
:meth:`harness.records.RunDir.close` sends; parts are written to a temporary name then renamed, so a kill leaves
no half part). A range that cannot be parsed (a corrupt line) stops
the conversion of that file: the report then parses the JSON and reports the error as usual.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import polars as pl

# polars (through harness.report.frame / .parts) is imported by the functions, so that main() lowers this
# process's CPU priority before the import's half-second of CPU.

__all__ = ["PART_BYTES", "convert_ready", "main", "next_range", "watch"]

#: Bytes of JSON lines per part (about 8k records of ~2 KB): the most the first report after a run parses from
#: JSON (plus what the converter had not reached when the run ended).
PART_BYTES = 16 << 20


def next_range(records_file: Path, start: int, part_bytes: int = PART_BYTES) -> int | None:
    """The end of the next range to convert from byte ``start`` (a line start): just after the first newline at
    or beyond ``start + part_bytes``, or None when the file does not yet hold that many bytes of whole lines.

    Raises:
        OSError: the file cannot be read.
    """
    with open(records_file, "rb") as f:
        f.seek(0, os.SEEK_END)
        if f.tell() - start < part_bytes:
            return None
        f.seek(start + part_bytes - 1)
        rest = f.readline()  # up to and including the newline ending the range, if it was written yet
    if not rest.endswith(b"\n"):
        return None
    return start + part_bytes - 1 + len(rest)


def convert_ready(records_file: Path, start: int, part_bytes: int = PART_BYTES) -> int:
    """Convert every ready range of ``records_file`` from byte ``start`` into parts; return where the next starts.

    Raises:
        ValueError: a line of a range is not a readable record (corrupt JSON, wrong type, not a record).
        OSError: the file cannot be read.
    """
    while True:
        end = next_range(records_file, start, part_bytes)
        if end is None:
            return start
        from harness.report.frame import PART_COLUMNS, SIDECAR_KEY, read_json_range
        from harness.report.parts import write_part

        df = read_json_range(records_file, start, end, PART_COLUMNS, chunk_bytes=end - start + 1, decode=False)
        if write_part(records_file, df, start, end, SIDECAR_KEY) is None:
            raise OSError(f"{records_file}: cannot write its parts")
        start = end


def _running(run_dir: Path) -> bool:
    try:
        return bool(json.loads((run_dir / "run.json").read_text()).get("status") == "running")
    except (OSError, ValueError, AttributeError):
        return True  # being rewritten (or not yet written): look again at the next poll


def watch(run_dir: Path, parent_pid: int | None, poll_s: float = 1.0, part_bytes: int = PART_BYTES) -> None:
    """Convert ready ranges of the run directory's records files until the run ends or its process is gone."""
    from harness.report.frame import PART_COLUMNS, RECORD_SCHEMA, SIDECAR_KEY, record_files
    from harness.report.parts import valid_chain

    schema: dict[str, pl.DataType] = {c: RECORD_SCHEMA[c] for c in PART_COLUMNS}
    starts: dict[Path, int] = {}
    stopped: set[Path] = set()
    while _running(run_dir) and (parent_pid is None or os.getppid() == parent_pid):
        for path in record_files(run_dir):
            if path in stopped:
                continue
            if path not in starts:  # parts left by an earlier converter of this run are reused
                chain = valid_chain(path, SIDECAR_KEY, schema)
                starts[path] = chain[-1].end if chain else 0
            try:
                starts[path] = convert_ready(path, starts[path], part_bytes)
            except (OSError, ValueError) as e:
                print(f"llmload: Parquet parts of {path} stopped ({e}); the report parses its JSON",
                      file=sys.stderr)
                stopped.add(path)
        time.sleep(poll_s)


def main(argv: list[str] | None = None) -> int:
    """Command line (module docstring)."""
    p = argparse.ArgumentParser(description="Convert completed ranges of a run's records.jsonl to Parquet parts.")
    p.add_argument("run_dir", type=Path)
    p.add_argument("--parent", type=int, default=None, help="exit when this process is no longer the parent")
    p.add_argument("--poll", type=float, default=1.0, help="seconds between looks at the records files")
    p.add_argument("--part-bytes", type=int, default=PART_BYTES, help="bytes of JSON lines per part")
    args = p.parse_args(argv)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C of the run reaches us too: the run stops us itself
    try:  # only the CPU time nothing else wants (Linux SCHED_IDLE), else the lowest priority
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    except (AttributeError, OSError):
        try:
            os.nice(19)
        except OSError:
            pass
    watch(args.run_dir, args.parent, args.poll, args.part_bytes)
    return 0


if __name__ == "__main__":
    sys.exit(main())
