"""``steps.csv`` (:mod:`harness.report.csvexport`): written beside report.json by ``write_report``, one row per
step, every cell equal to report.json's number (read back with the csv module and with polars)."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from harness.report.build import write_report
from harness.report.catalogue import FIGURES
from harness.report.csvexport import CSV_NAME, step_columns
from tests.report.test_html import _scenario


def _num(cell: str) -> float | None:
    return None if cell == "" else float(cell)


def _check(root: Path) -> tuple[list[dict[str, str]], dict[str, Any]]:
    rep_json = json.loads((root / "report.json").read_text())
    with (root / CSV_NAME).open(newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == len(rep_json["steps"]) >= 3
    for row, step in zip(rows, rep_json["steps"], strict=True):
        assert row["step"] == step["label"] and int(row["concurrency"]) == step["concurrency"]
        assert row["steady"] == ("true" if step["steady"] else "false")
        for col, cell in row.items():
            key, _, unit = col.partition(" (")
            if key in FIGURES and unit:
                assert unit == FIGURES[key].unit.value + ")", col  # the stored unit, never a display conversion
                assert _num(cell) == step.get(key), col  # full precision: equal, not approximately
            elif "@" in key:
                name, n = key.split("@")
                entries = step["real_time"]["hours"] if name.startswith("real_") else step["hours"]
                (h,) = [h for h in entries if h["n"] == int(n)]
                assert _num(cell) == h.get(name.removeprefix("real_")), col
    return rows, rep_json


def test_steps_csv_holds_report_json_numbers(tmp_path: Path) -> None:
    root = _scenario(tmp_path / "run")
    rep, _ = write_report(root)
    rows, rep_json = _check(root)
    cols = list(rows[0])
    assert cols == step_columns(rep)
    assert cols[:6] == ["step", "phase", "step_index", "concurrency", "steady", "window_s (s)"]
    assert "ttft_p50_s (s)" in cols and "tpot_mean_s (s)" in cols and "error_rate (share)" in cols
    for n in rep_json["hours_to_n"]:
        assert {f"hours@{n} (h)", f"hours_low@{n} (h)", f"hours_high@{n} (h)"} <= set(cols)
    assert not any(c.startswith(("real_hours", "usd@")) for c in cols)  # real time, unpriced
    # the NOT steady C=4 step has no interval: empty cells, not "inf" or "–"
    c4 = next(r for r in rows if r["step"].startswith("C=4"))
    assert c4["steady"] == "false" and all(v != "inf" and "–" not in v for v in c4.values())
    # data frames read it with the right types
    df = pl.read_csv(root / CSV_NAME)
    assert df.height == len(rows) and df.schema["ttft_p50_s (s)"] == pl.Float64
    assert df["completed (count)"].to_list() == [s["completed"] for s in rep_json["steps"]]


def test_compressed_time_adds_real_time_hours(tmp_path: Path) -> None:
    root = _scenario(tmp_path / "run", {"simulator": {"time_scale": 0.5}})
    write_report(root)
    rows, rep_json = _check(root)
    n = rep_json["hours_to_n"][0]
    single = rows[0]
    assert _num(single[f"real_hours@{n} (h)"]) == pytest.approx(_num(single[f"hours@{n} (h)"]) / 0.5)  # type: ignore[operator]


def test_records_parquet_export_reads_back_as_the_records(tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    from harness.records import read_records
    from harness.report.cli import main as report_main

    root = _scenario(tmp_path / "run")
    out = tmp_path / "recs.parquet"
    assert report_main([str(root), "--quiet", "--records-parquet", str(out)]) == 0
    recs = read_records(root)
    assert f"wrote {len(recs):,} records to {out}" in capsys.readouterr().err
    df = pl.read_parquet(out)
    assert df.height == len(recs) and "chunk_times" in df.columns and "row_nr" not in df.columns
    for r, got in zip(recs, df.iter_rows(named=True), strict=True):
        for k in ("user", "phase", "step", "start_wall", "e2e", "ttft", "ok", "output_tokens", "finish_reason"):
            assert got[k] == getattr(r, k), k
    assert report_main([str(root), "--quiet", "--records-parquet", str(tmp_path / "no" / "x.parquet")]) == 1
    assert "--records-parquet: cannot write" in capsys.readouterr().err
