"""Time and peak memory of the report over a million records: the report's figures (columnar engine) and the
whole ``llmload report`` command.

One command: generates a run directory of ``--records`` records with ``benchmarks/records_gen.py`` when the
directory does not already hold one of that size, then measures, each in a fresh child process (wall time,
CPU time user+sys and peak RSS from ``os.wait4``):

(a) :func:`harness.report.build.build_report`, the whole report dict (what ``report.json`` holds): the record
    frame (:func:`harness.report.columns.load_frame_run`, records.jsonl -> frame) and every figure over it
    (:func:`harness.report.build.run_figures`: step rows, goodput, soak slices and drift, warm-up, totals,
    per-prompt rows; then the header and notes); ``--runs`` times, medians printed. The child also reports its own
    split: load seconds and figures seconds. Each run is measured twice: ``json``, the Parquet sidecar
    (``records.parquet``, see :mod:`harness.report.frame`) deleted first, so the records are parsed from JSON and the
    sidecar written (the report at a run's end); then ``sidecar``, read from the sidecar just written (every later
    ``llmload report``). ``--sidecar json`` / ``--sidecar sidecar`` measure one of the two only.
(b) the whole ``llmload report RUN_DIR --quiet`` (``python -m harness.report``: report.json, report.md and
    report.html with its PNG figures), once; skipped with ``--skip-current``. When it runs, its ``report.json``
    is compared with (a)'s report (exact for counts, 1e-9 relative for floats) and the verdict printed.

    .venv/bin/python benchmarks/report_1m.py                       # 1M records in /tmp/llmload-1m, (a) x3 and (b)
    .venv/bin/python benchmarks/report_1m.py --skip-current --runs 5
    .venv/bin/python benchmarks/report_1m.py --skip-current --sidecar sidecar   # later reports only
    .venv/bin/python benchmarks/report_1m.py --records 200000 --dir /tmp/llmload-200k

Wall times depend on what else runs on the machine; CPU seconds less so. Both are printed.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(_ROOT))


def _child_frame(run_dir: str, rows_out: str | None) -> None:
    """(a), run inside the child: build the whole report, print the split as JSON."""
    from harness.report.build import assemble_report, report_settings, run_figures
    from harness.report.columns import load_frame_run

    t0 = time.perf_counter()
    run = load_frame_run(run_dir)
    t1 = time.perf_counter()
    settings = report_settings(run.meta)
    rep = assemble_report(run, settings, run_figures(run, settings))
    t2 = time.perf_counter()
    if rows_out:
        Path(rows_out).write_text(json.dumps(rep))
    side = Path(run_dir) / "records.parquet"
    print(json.dumps({"records": run.frame.height, "load_s": t1 - t0, "figures_s": t2 - t1,
                      "frame_mb": run.frame.estimated_size() / 1e6,
                      "slices": sum(len(r["slices"]) for r in rep["steps"]),
                      "sidecar_mb": side.stat().st_size / 1e6 if side.exists() else None}))


def _measure(cmd: list[str]) -> dict[str, Any]:
    """Run ``cmd``; its wall seconds, CPU seconds (user + sys), peak RSS (MB) and stdout."""
    t = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, cwd=_ROOT)
    assert p.stdout is not None
    out = p.stdout.read()
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} exited {p.returncode}")
    return {"wall_s": wall, "cpu_s": ru.ru_utime + ru.ru_stime, "rss_mb": ru.ru_maxrss / 1024.0,
            "stdout": out.decode()}


def _same(ref: Any, got: Any, path: str, diffs: list[str]) -> None:
    if isinstance(ref, dict) and isinstance(got, dict):
        if list(ref) != list(got):
            diffs.append(f"{path}: keys differ")
        for k in ref:
            if k in got:
                _same(ref[k], got[k], f"{path}.{k}", diffs)
    elif isinstance(ref, list) and isinstance(got, list):
        if len(ref) != len(got):
            diffs.append(f"{path}: lengths {len(ref)} != {len(got)}")
        for i, (r, g) in enumerate(zip(ref, got, strict=False)):
            _same(r, g, f"{path}[{i}]", diffs)
    elif isinstance(ref, float) and isinstance(got, float | int) and not isinstance(got, bool):
        if not math.isclose(ref, float(got), rel_tol=1e-9, abs_tol=0.0):
            diffs.append(f"{path}: {ref!r} != {got!r}")
    elif ref != got or type(ref) is not type(got):
        diffs.append(f"{path}: {ref!r} != {got!r}")


def _ensure_run(run_dir: Path, records: int, seed: int) -> None:
    """Generate ``records`` records into ``run_dir`` unless it holds a generated run of that size and of the
    record schema the generator writes now."""
    from records_gen import RECORD_SCHEMA_VERSION, GenSpec, generate  # benchmarks/ is first on sys.path

    meta_path = run_dir / "run.json"
    if meta_path.exists() and (run_dir / "records.jsonl").exists():
        meta = json.loads(meta_path.read_text())
        gen = meta.get("generator") if isinstance(meta.get("generator"), dict) else {}
        if meta.get("records") == records and gen.get("record_schema") == RECORD_SCHEMA_VERSION:
            return

    print(f"generating {records} records into {run_dir} ...", flush=True)
    got = generate(run_dir, GenSpec(records, seed=seed))
    print(f"  {got['records']} records, {got['bytes'] / 1e6:.0f} MB in {got['seconds']:.1f} s", flush=True)


def main(argv: list[str] | None = None) -> int:
    """Command line (see the module docstring)."""
    p = argparse.ArgumentParser(description="Time and peak RSS of the report over N records.")
    p.add_argument("--dir", type=Path, default=Path("/tmp/llmload-1m"), help="run directory (generated if absent)")
    p.add_argument("--records", type=int, default=1_000_000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--runs", type=int, default=3, help="runs of (a) (median printed)")
    p.add_argument("--sidecar", choices=("both", "json", "sidecar"), default="both",
                   help="measure the report parsing JSON (sidecar deleted first), reading the sidecar, or both")
    p.add_argument("--skip-current", action="store_true", help="do not run (b), the whole llmload report")
    p.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        _child_frame(args.child[0], args.child[1] if len(args.child) > 1 else None)
        return 0

    _ensure_run(args.dir, args.records, args.seed)
    size = (args.dir / "records.jsonl").stat().st_size
    print(f"run: {args.dir} ({size / 1e6:.0f} MB records.jsonl)")
    rows_out = args.dir / "frame-report.json"
    modes = ("json", "sidecar") if args.sidecar == "both" else (args.sidecar,)
    res: dict[str, list[dict[str, Any]]] = {m: [] for m in modes}
    for i in range(max(1, args.runs)):
        for mode in modes:
            if mode == "json":
                (args.dir / "records.parquet").unlink(missing_ok=True)
            m = _measure([sys.executable, __file__, "--child", str(args.dir), str(rows_out)])
            split = json.loads(m["stdout"].strip().splitlines()[-1])
            res[mode].append({**m, **split})
            side = f"{split['sidecar_mb']:.0f} MB" if split["sidecar_mb"] is not None else "none"
            print(f"(a) build_report {mode:7s} run {i + 1}: wall {m['wall_s']:.2f} s (load {split['load_s']:.2f} s + "
                  f"figures {split['figures_s']:.2f} s), cpu {m['cpu_s']:.2f} s, peak RSS {m['rss_mb']:.0f} MB, "
                  f"frame {split['frame_mb']:.0f} MB, sidecar {side}, {split['records']} records, "
                  f"{split['slices']} soak slices", flush=True)
    med: dict[str, float] = {}
    for mode, runs in res.items():
        med = {k: statistics.median(r[k] for r in runs) for k in ("wall_s", "cpu_s", "rss_mb", "load_s", "figures_s")}
        print(f"(a) build_report {mode:7s} median of {len(runs)}: wall {med['wall_s']:.2f} s (load "
              f"{med['load_s']:.2f} s + figures {med['figures_s']:.2f} s), cpu {med['cpu_s']:.2f} s, "
              f"peak RSS {med['rss_mb']:.0f} MB")
    if args.skip_current:
        print("(b) llmload report: skipped (--skip-current)")
        return 0
    m = _measure([sys.executable, "-m", "harness.report", str(args.dir), "--quiet"])
    print(f"(b) llmload report: wall {m['wall_s']:.2f} s, cpu {m['cpu_s']:.2f} s, "
          f"peak RSS {m['rss_mb']:.0f} MB")
    rep = json.loads((args.dir / "report.json").read_text())
    mine = json.loads(rows_out.read_text())
    diffs: list[str] = []
    _same({k: v for k, v in rep.items() if k != "run_dir"}, {k: v for k, v in mine.items() if k != "run_dir"},
          "report", diffs)
    if diffs:
        print(f"figures DIFFER in {len(diffs)} places:", *diffs[:20], sep="\n  ")
        return 1
    print(f"figures: (a)'s report equals (b)'s report.json ({len(rep['steps'])} steps)")
    print(f"(b) - (a): {m['wall_s'] - med['wall_s']:.1f} s wall outside build_report (report.md, report.html and its "
          "figures)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
