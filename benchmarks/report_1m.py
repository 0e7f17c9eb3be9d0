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
    (``records.parquet``, see :mod:`harness.report.frame`) and parts (``records.parts/``) deleted first, so the
    records are parsed from JSON and written as parts (the report of a run without parts); then ``sidecar``, read
    from what that left (the parts, or a sidecar: every later ``llmload report``, and the report after a run whose
    part converter kept up). ``--sidecar json`` / ``--sidecar sidecar`` measure one of the two only.
(b) the whole ``llmload report RUN_DIR --quiet`` (``python -m harness.report``: report.json, report.md and
    report.html with its PNG figures), once; skipped with ``--skip-current``. When it runs, its ``report.json``
    is compared with (a)'s report (exact for counts, 1e-9 relative for floats) and the verdict printed.
(c) with ``--replay``: the first ``llmload report`` after a run, honestly. The generated records are written
    again into a fresh run directory (``<dir>-replay``) as a run writes them: appended and flushed through
    :class:`harness.records.RunDir` in blocks of whole lines at ``--replay-mbps`` MB/s (default 20, ~10k
    records/s: far faster than a real run, so the converter has less slack than in one), with ``run.json`` saying
    ``running`` and RunDir's Parquet part converter (:mod:`harness.report.parts_writer`) started as in a run;
    then ``RunDir.close()`` (which stops the converter) and ``llmload report``. Printed: the converter's CPU
    seconds and peak RSS (the run-side cost), how much of the file it had converted, then ``--runs`` first
    reports (each from the state just after the run: parts written by an earlier report and any sidecar are
    deleted first) and as many repeated reports, medians printed. With ``--no-parts`` the replay runs without the
    converter (the report parses all the JSON: the "before" case).

    .venv/bin/python benchmarks/report_1m.py                       # 1M records in /tmp/llmload-1m, (a) x3 and (b)
    .venv/bin/python benchmarks/report_1m.py --skip-current --runs 5
    .venv/bin/python benchmarks/report_1m.py --skip-current --sidecar sidecar   # later reports only
    .venv/bin/python benchmarks/report_1m.py --records 200000 --dir /tmp/llmload-200k
    .venv/bin/python benchmarks/report_1m.py --replay --runs 3                 # first report after a run
    .venv/bin/python benchmarks/report_1m.py --chunk-times compact --dir /tmp/llmload-1m-ct --runs 1
                                             # records as the demo profile writes them (chunk times, ~4.2 KB each)
    .venv/bin/python benchmarks/report_1m.py --chunk-times compact --dir /tmp/llmload-1m-ct --runs 1 --read lists
                                             # the same, every chunk list kept in the frame (before the two-pass read)

Wall times depend on what else runs on the machine; CPU seconds less so. Both are printed.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(_ROOT))


def _child_frame(run_dir: str, rows_out: str | None, read: str = "two-pass") -> None:
    """(a), run inside the child: build the whole report, print the split as JSON. ``read``: ``two-pass`` (the
    report's read, :func:`harness.report.build.load_report_run`: chunk lists reduced while read) or ``lists``
    (:func:`harness.report.columns.load_frame_run`: every chunk list kept in the frame, the "before" case)."""
    from harness.report.build import assemble_report, load_report_run, report_settings, run_figures
    from harness.report.columns import load_frame_run

    t0 = time.perf_counter()
    run = load_report_run(run_dir) if read == "two-pass" else load_frame_run(run_dir)
    t1 = time.perf_counter()
    settings = report_settings(run.meta)
    rep = assemble_report(run, settings, run_figures(run, settings)).as_dict()
    t2 = time.perf_counter()
    if rows_out:
        Path(rows_out).write_text(json.dumps(rep))
    side = Path(run_dir) / "records.parquet"
    print(json.dumps({"records": run.frame.height, "load_s": t1 - t0, "figures_s": t2 - t1,
                      "frame_mb": run.frame.estimated_size() / 1e6,
                      "slices": sum(len(r.get("slices") or []) for r in rep["steps"]),
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


def _ensure_run(run_dir: Path, records: int, seed: int, chunk_times: str = "none") -> None:
    """Generate ``records`` records into ``run_dir`` unless it holds a generated run of that size, of the
    record schema the generator writes now and with chunk times in the ``chunk_times`` form."""
    from records_gen import RECORD_SCHEMA_VERSION, GenSpec, generate  # benchmarks/ is first on sys.path

    meta_path = run_dir / "run.json"
    if meta_path.exists() and (run_dir / "records.jsonl").exists():
        meta = json.loads(meta_path.read_text())
        gen = meta.get("generator") if isinstance(meta.get("generator"), dict) else {}
        if (meta.get("records") == records and gen.get("record_schema") == RECORD_SCHEMA_VERSION
                and gen.get("chunk_times", "none") == chunk_times):
            return

    print(f"generating {records} records into {run_dir} (chunk times: {chunk_times}) ...", flush=True)
    got = generate(run_dir, GenSpec(records, seed=seed, chunk_times=chunk_times))
    print(f"  {got['records']} records, {got['bytes'] / 1e6:.0f} MB in {got['seconds']:.1f} s", flush=True)


def _replay(src: Path, dest: Path, mbps: float, parts: bool) -> dict[str, Any]:
    """Write ``src``'s records into a fresh run directory ``dest`` as a run does (module docstring, (c)); return
    the replay's wall seconds and the converter's CPU seconds and peak RSS (MB; 0 without a converter)."""
    import resource
    import shutil

    from harness.records import PARTS_AFTER_BYTES, RunDir
    from harness.report.parts import parts_dir

    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    meta = json.loads((src / "run.json").read_text())
    meta.update(status="running", end_wall=None)
    meta.pop("records", None)
    shutil.copy(src / "phases.jsonl", dest / "phases.jsonl")
    rd = RunDir(dest, meta)
    rd.parts = parts
    rd.write_meta()
    rd._records = open(dest / "records.jsonl", "ab")
    rd._phases = open(dest / "phases.jsonl", "ab")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    block = 1 << 20
    t0 = time.perf_counter()
    written = 0
    with open(src / "records.jsonl", "rb") as f:
        while True:
            data = f.read(block)
            if not data:
                break
            data += f.readline()
            # RunDir.write_record's writes, a block of lines at a time (the per-record work is the client's)
            rd._records.write(data)
            rd._records.flush()
            rd.count += data.count(b"\n")
            rd._bytes += len(data)
            if rd._bytes >= PARTS_AFTER_BYTES and rd.parts and not rd._converter_tried:
                rd._start_converter()
            written += len(data)
            lag = written / (mbps * 1e6) - (time.perf_counter() - t0)
            if lag > 0:
                time.sleep(lag)
    # the phases' run_end is already in the generated phases.jsonl: close() appends another one later, harmless
    rd.close("finished")
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    covered = 0
    pdir = parts_dir(dest / "records.jsonl")
    if pdir.exists():
        covered = max((int(p.name.split("-")[1].split(".")[0]) for p in pdir.glob("*.parquet")), default=0)
    return {"wall_s": wall, "converter_cpu_s": (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime),
            "converter_rss_mb": after.ru_maxrss / 1024.0 if parts else 0.0, "bytes": written, "covered": covered,
            "parts": sorted(p.name for p in pdir.glob("*.parquet")) if pdir.exists() else []}


def _first_reports(dest: Path, runs: int, after_run: list[str]) -> None:
    """``runs`` first reports (state reset to just after the run each time) and ``runs`` repeated reports."""
    from harness.report.parts import parts_dir

    pdir = parts_dir(dest / "records.jsonl")
    res: dict[str, list[dict[str, Any]]] = {"first": [], "repeated": []}
    for i in range(max(1, runs)):
        (dest / "records.parquet").unlink(missing_ok=True)
        if pdir.exists():
            for p in pdir.glob("*.parquet"):
                if p.name not in after_run:
                    p.unlink()
        for kind in ("first", "repeated"):
            m = _measure([sys.executable, "-m", "harness.report", str(dest), "--quiet"])
            res[kind].append(m)
            print(f"(c) llmload report, {kind:8s} run {i + 1}: wall {m['wall_s']:.2f} s, cpu {m['cpu_s']:.2f} s, "
                  f"peak RSS {m['rss_mb']:.0f} MB (load average {os.getloadavg()[0]:.1f})", flush=True)
    for kind, ms in res.items():
        print(f"(c) llmload report, {kind:8s} median of {len(ms)}: wall "
              f"{statistics.median(m['wall_s'] for m in ms):.2f} s, cpu {statistics.median(m['cpu_s'] for m in ms):.2f}"
              f" s, peak RSS {statistics.median(m['rss_mb'] for m in ms):.0f} MB")


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
    p.add_argument("--replay", action="store_true", help="(c) only: the first report after a replayed run")
    p.add_argument("--replay-mbps", type=float, default=20.0, help="MB/s of records written by the replay")
    p.add_argument("--no-parts", action="store_true", help="replay without the Parquet part converter")
    p.add_argument("--chunk-times", choices=("none", "float", "compact"), default="none",
                   help="records with demo-like chunk times (output.chunk_times: true): float = the schema-2 form "
                        "(the 'before' case), compact = the schema-3 form the harness writes now; use another --dir")
    p.add_argument("--read", choices=("two-pass", "lists"), default="two-pass",
                   help="(a)'s read: two-pass (chunk lists reduced while read, the report's) or lists (kept whole)")
    p.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        _child_frame(args.child[0], args.child[1] if len(args.child) > 1 and args.child[1] != "-" else None,
                     args.child[2] if len(args.child) > 2 else "two-pass")
        return 0

    _ensure_run(args.dir, args.records, args.seed, args.chunk_times)
    if args.replay:
        dest = args.dir.with_name(args.dir.name + "-replay")
        r = _replay(args.dir, dest, args.replay_mbps, not args.no_parts)
        print(f"(c) replayed {r['bytes'] / 1e6:.0f} MB of records into {dest} in {r['wall_s']:.1f} s; part converter: "
              f"{r['converter_cpu_s']:.1f} s CPU, peak RSS {r['converter_rss_mb']:.0f} MB, {len(r['parts'])} parts "
              f"covering {r['covered'] / 1e6:.0f} MB ({100 * r['covered'] / max(1, r['bytes']):.1f} %)", flush=True)
        _first_reports(dest, args.runs, r["parts"])
        return 0
    size = (args.dir / "records.jsonl").stat().st_size
    print(f"run: {args.dir} ({size / 1e6:.0f} MB records.jsonl)")
    rows_out = args.dir / "frame-report.json"
    modes = ("json", "sidecar") if args.sidecar == "both" else (args.sidecar,)
    res: dict[str, list[dict[str, Any]]] = {m: [] for m in modes}
    for i in range(max(1, args.runs)):
        for mode in modes:
            if mode == "json":
                (args.dir / "records.parquet").unlink(missing_ok=True)
                shutil.rmtree(args.dir / "records.parts", ignore_errors=True)
            m = _measure([sys.executable, __file__, "--child", str(args.dir), str(rows_out), args.read])
            split = json.loads(m["stdout"].strip().splitlines()[-1])
            res[mode].append({**m, **split})
            side = f"{split['sidecar_mb']:.0f} MB" if split["sidecar_mb"] is not None else "none"
            print(f"(a) build_report [{args.read}] {mode:7s} run {i + 1}: wall {m['wall_s']:.2f} s "
                  f"(load {split['load_s']:.2f} s + "
                  f"figures {split['figures_s']:.2f} s), cpu {m['cpu_s']:.2f} s, peak RSS {m['rss_mb']:.0f} MB, "
                  f"frame {split['frame_mb']:.0f} MB, sidecar {side}, {split['records']} records, "
                  f"{split['slices']} soak slices", flush=True)
    med: dict[str, float] = {}
    for mode, runs in res.items():
        med = {k: statistics.median(r[k] for r in runs) for k in ("wall_s", "cpu_s", "rss_mb", "load_s", "figures_s")}
        print(f"(a) build_report [{args.read}] {mode:7s} median of {len(runs)}: wall {med['wall_s']:.2f} s (load "
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
