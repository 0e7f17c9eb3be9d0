"""Exports for spreadsheets and data frames: the per-step table as CSV (``steps.csv`` beside ``report.json``,
written with every report) and the records as one Parquet file (:func:`export_records_parquet`, on request:
``llmload report RUN_DIR --records-parquet FILE``).

``steps.csv``:

One row per report step (:class:`harness.report.model.StepRow`, in the report's order); numbers unformatted at full
precision (``repr`` of the float), an empty cell where the report has none (no value, or an unbounded side of an
interval). Columns, in order:

* identity: ``step`` (the report label, e.g. ``C=16``), ``phase``, ``step_index``, ``concurrency``, ``steady``
  (true / false), ``window_s``;
* every catalogued figure (:data:`harness.report.catalogue.FIGURES`) that is a field of a step row, in the
  catalogue's order, headed ``<key> (<unit>)`` in the unit ``report.json`` stores it in (``ttft_p50_s (s)``,
  ``error_rate (share)``): the CSV holds report.json's numbers, never a display conversion;
* per hours-to-N count N: ``hours@N (h)``, ``hours_low@N (h)``, ``hours_high@N (h)`` (the 95 % prediction interval;
  empty high = unbounded), ``rate_low@N (usable/s)``, ``rate_high@N (usable/s)``, and with a price ``usd@N (US$)``,
  ``usd_low@N (US$)``, ``usd_high@N (US$)``;
* compressed-time runs (simulator ``time_scale`` < 1) add ``real_hours@N (h)``, ``real_hours_low@N (h)``,
  ``real_hours_high@N (h)``: the real-time equivalents (:attr:`harness.report.model.StepRow.real_time`).

The figures' definitions are the report's (``report.json``'s ``definitions``; the docs' report-figures reference).
"""

from __future__ import annotations

import csv
import io
import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harness.report.catalogue import FIGURES, value
from harness.report.model import Report, StepRow

__all__ = ["CSV_NAME", "export_records_parquet", "step_columns", "steps_csv", "write_steps_csv"]

#: The file name written beside report.json.
CSV_NAME = "steps.csv"

_IDENTITY = (("step", "label"), ("phase", "phase"), ("step_index", "step"), ("concurrency", "concurrency"),
             ("steady", "steady"), ("window_s (s)", "window_s"))


def _cell(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return repr(v) if math.isfinite(v) else ""
    return str(v)


def _figure_keys() -> list[str]:
    fields = StepRow.model_fields
    return [k for k in FIGURES if k in fields and k not in ("concurrency", "window_s", "hours")]


def _hours_of(entries: Sequence[Any], n: int) -> Any:
    return next((h for h in entries if h.n == n), None)


def step_columns(rep: Report) -> list[str]:
    """The CSV header of ``rep`` (module docstring), in column order."""
    cols = [c for c, _ in _IDENTITY]
    cols += [f"{k} ({FIGURES[k].unit.value})" for k in _figure_keys()]
    priced = any(h.usd is not None for r in rep.steps for h in r.hours)
    compressed = any(r.real_time is not None for r in rep.steps)
    for n in rep.hours_to_n:
        cols += [f"hours@{n} (h)", f"hours_low@{n} (h)", f"hours_high@{n} (h)", f"rate_low@{n} (usable/s)",
                 f"rate_high@{n} (usable/s)"]
        if priced:
            cols += [f"usd@{n} (US$)", f"usd_low@{n} (US$)", f"usd_high@{n} (US$)"]
        if compressed:
            cols += [f"real_hours@{n} (h)", f"real_hours_low@{n} (h)", f"real_hours_high@{n} (h)"]
    return cols


def _row(rep: Report, row: StepRow, priced: bool, compressed: bool) -> list[str]:
    out = [_cell(getattr(row, attr)) for _, attr in _IDENTITY]
    out += [_cell(value(row, k)) for k in _figure_keys()]
    for n in rep.hours_to_n:
        h = _hours_of(row.hours, n)
        out += [_cell(getattr(h, a, None)) for a in ("hours", "hours_low", "hours_high", "rate_low", "rate_high")]
        if priced:
            out += [_cell(getattr(h, a, None)) for a in ("usd", "usd_low", "usd_high")]
        if compressed:
            rh = _hours_of(row.real_time.hours, n) if row.real_time is not None else None
            out += [_cell(getattr(rh, a, None)) for a in ("hours", "hours_low", "hours_high")]
    return out


def steps_csv(rep: Report) -> str:
    """``rep``'s per-step table as CSV text (module docstring; ``\\n`` line ends, a header line first)."""
    priced = any(h.usd is not None for r in rep.steps for h in r.hours)
    compressed = any(r.real_time is not None for r in rep.steps)
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(step_columns(rep))
    for row in rep.steps:
        w.writerow(_row(rep, row, priced, compressed))
    return buf.getvalue()


def write_steps_csv(run_dir: str | os.PathLike[str], rep: Report) -> Path:
    """Write ``steps.csv`` into ``run_dir`` (atomically: a temporary file renamed) and return its path.

    Raises:
        OSError: the run directory is not writable.
    """
    path = Path(run_dir) / CSV_NAME
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(steps_csv(rep), encoding="utf-8")
    os.replace(tmp, path)
    return path


def export_records_parquet(run_dir: str | os.PathLike[str], out: str | os.PathLike[str]) -> tuple[Path, int]:
    """Write every record of ``run_dir`` (all ``records*.jsonl``, as :func:`harness.report.frame.read_frame` reads
    them: every field of :data:`harness.report.frame.RECORD_SCHEMA` with its dtype, chunk lists as list columns,
    in file then line order) to the Parquet file ``out`` (zstd), atomically. Returns ``(path, records)``.

    Memory: the whole frame is held (with chunk times, ~1 GB per 100k demo-like records); a run of a million
    records with chunk times needs the columns chosen instead (``read_frame(run_dir, columns=[...])``).

    Raises:
        ValueError: a records line is not a record (as :func:`~harness.report.frame.read_frame`).
        OSError: a records file cannot be read, or ``out`` cannot be written.
    """
    from harness.report.frame import RECORD_SCHEMA, ROW, read_frame

    df = read_frame(run_dir, columns=list(RECORD_SCHEMA), sidecar=False).drop(ROW)
    path = Path(out)
    tmp = path.with_name(path.name + ".tmp")
    df.write_parquet(tmp, compression="zstd")
    os.replace(tmp, path)
    return path, df.height
