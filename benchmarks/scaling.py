"""Scaling across cores: chunks/s of the standard locustfile with ``--processes 1``, ``--processes 2`` and a
master with 2 workers started as separate commands, within a TTFT / inter-chunk error bound.

    .venv/bin/python benchmarks/scaling.py [--levels 8,16,32] [--duration 8] [--modes p1,p2,mw2]
        [--decode-ms 2] [--bound-ms 1] [--pin SIM_CPUS:LOAD_CPUS] [--repeats 1]

For each concurrency of ``--levels`` and each mode (interleaved, so that the modes of one level share the
machine's state), a fresh simulator is started (``--preset bench``: 200 reasoning + 200 answer tokens, one token
per chunk, ``--decode-base`` = ``--decode-ms`` per engine step, so a stream gets one chunk every ``--decode-ms``,
with ``--truth-log``), and ``locust -f locustfiles/k26.py --headless`` runs one step of ``--duration`` seconds at
that concurrency with ``output.chunk_times: true``. Then, per run:

* **chunks/s**: token-bearing chunks of the step's records / the step's duration (all load-generator processes);
  per process = that / the number of worker processes (1 for ``p1``);
* **error**: harness stamp vs the simulator's truth (:func:`harness.report.fidelity.compare`): p99 of |TTFT
  difference| and of |inter-chunk gap difference|, ms; a run is *within the bound* when both are
  ≤ ``--bound-ms`` and the check found no mismatch;
* **CPU µs per chunk**: user + system CPU of the load-generator process tree (master and workers, forked or
  separate; ``/proc/PID/stat`` sampled when ``phases.jsonl`` shows the step start and again at its end) / the
  chunks that arrived in the step; ``cpu_share_per_process``: the CPU share (cores) of the busiest processes in
  the step, one per worker; ``cpu_us_per_chunk_whole_run``: the same from ``RUSAGE_CHILDREN`` over the whole
  run (start-up, warm-up, report included) / every record's chunks.

Prints one JSON line per run, then a table and, per mode, the highest chunks/s (total and per process) within
the bound, and the ratios ``p2 / p1`` and ``mw2 / p1`` of those maxima, measured in this one invocation (and the
same maxima and ratios whatever the error, ``max_any_bound``, for a machine where no level meets the bound).

On a 2-core machine the simulator competes with the load generators: ``--pin 0:1`` runs the simulator on CPU 0
and every Locust process on CPU 1 (``taskset``), which measures a fixed client budget (one core) shared by
1 or 2 processes; unpinned, the two processes can use both cores only when the simulator leaves room. On a larger
machine, pin the simulator to its own cores and the load generators to N others, e.g. ``--pin 0-3:4-7``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from harness.records import read_records  # noqa: E402
from harness.report.fidelity import compare  # noqa: E402
from harness.sim import launch  # noqa: E402

LOCUSTFILE = ROOT / "locustfiles" / "k26.py"

PROFILE = """
name: scaling
request: {{thinking: true, continuous_usage_stats: true}}
prompts:
  - {{id: p, text: "Write a comprehensive guide to Redis data structures.", max_tokens: 1000}}
warmup: {{max_tokens: 16, timeout: 60}}
single_stream: {{duration: 0}}
steps: {{concurrency: [{c}], duration: {d}, drain_timeout: 30}}
output: {{dir: {out}, chunk_times: true}}
"""

#: Worker processes (the ones that send requests) per mode.
MODES = {"p1": 1, "p2": 2, "mw2": 2}


def _cpu_children() -> float:
    """User + system CPU seconds of every reaped descendant of this process."""
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


_TICK = os.sysconf("SC_CLK_TCK")


def tree_cpu(root: int) -> dict[int, float]:
    """CPU seconds (user + system) of ``root`` and every live descendant, by pid (Linux ``/proc``); processes
    that vanish while being read are left out."""
    out: dict[int, float] = {}
    todo = [root]
    while todo:
        pid = todo.pop()
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
            fields = stat.rsplit(")", 1)[1].split()
            out[pid] = (int(fields[11]) + int(fields[12])) / _TICK
            for task in Path(f"/proc/{pid}/task").iterdir():
                todo += [int(x) for x in (task / "children").read_text().split()]
        except (OSError, ValueError):
            continue
    return out


def _step_window(run_parent: Path) -> tuple[bool, bool]:
    """(the step has started, the load has ended) from the run's ``phases.jsonl`` as written so far."""
    ph = next(run_parent.glob("*/phases.jsonl"), None) if run_parent.exists() else None
    text = ph.read_text() if ph else ""
    return '"phase": "step"' in text or '"phase":"step"' in text, '"load_end"' in text


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def locust_commands(mode: str, profile: Path, url: str, pin: str | None) -> list[list[str]]:
    """The command lines of one run in ``mode`` (``p1``, ``p2``: one command; ``mw2``: master + 2 workers).

    Raises ValueError on an unknown mode."""
    if mode not in MODES:
        raise ValueError(f"--modes: unknown mode {mode!r} (one of {', '.join(MODES)})")
    pre = ["taskset", "-c", pin] if pin else []
    locust = [*pre, sys.executable, "-m", "locust", "-f", str(LOCUSTFILE)]
    common = ["--headless", "--profile", str(profile), "--host", url, "--no-metrics"]
    port = str(_free_port())
    bind = ["--master-bind-host", "127.0.0.1", "--master-bind-port", port]
    if mode == "p1":
        return [[*locust, *common]]
    if mode == "p2":
        return [[*locust, *common, "--processes", "2", *bind, "--master-port", port]]
    worker = [*locust, "--worker", "--master-host", "127.0.0.1", "--master-port", port]
    return [[*locust, *common, "--master", *bind, "--expect-workers", "2"], worker, worker]


def one_run(mode: str, c: int, args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """One simulator + one Locust run (``mode`` at concurrency ``c``); the figures of the module docstring.

    Raises RuntimeError naming the log when Locust fails or writes no run directory."""
    tag = f"{mode}-c{c}-{time.time_ns()}"
    out, truth, prof = work / tag, work / f"{tag}.truth.jsonl", work / f"{tag}.yaml"
    prof.write_text(PROFILE.format(c=c, d=args.duration, out=out))
    sim_pin, load_pin = args.pin.split(":") if args.pin else (None, None)
    sim_args = ["--decode-base", str(args.decode_ms / 1000), "--truth-log", str(truth), "--max-num-seqs", "1024"]
    with launch(preset="bench", seed=1, extra_args=sim_args) as sim:
        if sim_pin:
            subprocess.run(["taskset", "-a", "-p", "-c", sim_pin, str(sim.pid)], check=True, capture_output=True)
        cpu0 = _cpu_children()
        logs = [work / f"{tag}.{i}.log" for i in range(3)]
        procs = [subprocess.Popen(cmd, cwd=work, stdout=subprocess.DEVNULL, stderr=log.open("w"))
                 for cmd, log in zip(locust_commands(mode, prof, sim.url, load_pin), logs, strict=False)]
        limit = time.monotonic() + args.duration + 180
        started = ended = False
        cpu_a: dict[int, float] = {}
        cpu_b: dict[int, float] = {}
        t_a = t_b = 0.0
        while procs[0].poll() is None and time.monotonic() < limit:
            time.sleep(0.1)
            s, e = _step_window(out)
            if s and not started:
                started, t_a = True, time.monotonic()
                cpu_a = {k: v for p in procs for k, v in tree_cpu(p.pid).items()}
            if started and not ended and (e or time.monotonic() - t_a >= args.duration):
                ended, t_b = True, time.monotonic()
                cpu_b = {k: v for p in procs for k, v in tree_cpu(p.pid).items()}
        for p in procs:
            p.wait(timeout=max(1.0, limit - time.monotonic()))
        cpu = _cpu_children() - cpu0
    if procs[0].returncode != 0 or not out.exists():
        raise RuntimeError(f"{mode} C={c}: locust exited {procs[0].returncode}; see {logs[0]}")
    run = next(p for p in out.iterdir() if p.is_dir())
    recs = [json.loads(x) for x in (run / "records.jsonl").read_text().splitlines() if x.strip()]
    step = [r for r in recs if r["phase"] == "step"]
    chunks_all = sum(r["chunks"] for r in recs)
    fid_rep = compare(run, truth, include_warmup=False)
    fid = fid_rep.summary
    ttft99, gap99 = fid["ttft_diff_ms"]["p99"], fid["gap_diff_ms"]["p99"]
    n = MODES[mode]
    # chunks whose arrival fell in the step (chunk times: offsets from the request's send, s)
    t0 = min(r["start_wall"] for r in step)
    t1 = t0 + args.duration
    decoded = [r for r in read_records(run) if r.phase == "step"]
    in_step = sum(1 for r in decoded for t in (r.chunk_times or []) if t0 <= r.start_wall + t < t1)
    rate = in_step / args.duration
    # CPU in the step window, per process (pid -> s), of the processes present at both samples
    step_cpu = {k: cpu_b[k] - cpu_a[k] for k in cpu_b if k in cpu_a}
    busy = sorted((v for v in step_cpu.values()), reverse=True)[:n]
    failures = fid_rep.failures()
    within = not failures and ttft99 is not None and gap99 is not None \
        and ttft99 <= args.bound_ms and gap99 <= args.bound_ms
    return {
        "mode": mode, "concurrency": c, "processes": n, "requests": len(step),
        "errors": sum(not r["ok"] for r in step),
        "chunks_per_s": round(rate), "chunks_per_s_per_process": round(rate / n),
        "ttft_err_p99_ms": ttft99, "gap_err_p99_ms": gap99, "within_bound": within,
        "cpu_us_per_chunk": round(sum(step_cpu.values()) / in_step * 1e6, 2) if in_step else None,
        "cpu_share_per_process": [round(v / max(t_b - t_a, 1e-9), 2) for v in busy],
        "cpu_us_per_chunk_whole_run": round(cpu / chunks_all * 1e6, 2) if chunks_all else None,
        "records_vs_truth": [fid["records"], fid["truth_requests"]], "fidelity_failures": failures,
    }


def main(argv: list[str] | None = None) -> int:
    """Run the sweep; print JSON lines, the table and the maxima. Returns the exit code (0)."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--levels", default="8,16,32", help="concurrencies, comma-separated")
    ap.add_argument("--modes", default="p1,p2,mw2", help="p1, p2 (--processes 1/2), mw2 (master + 2 workers)")
    ap.add_argument("--duration", type=float, default=8.0, help="step duration, s")
    ap.add_argument("--decode-ms", type=float, default=2.0, help="ms per engine step (one chunk per stream)")
    ap.add_argument("--bound-ms", type=float, default=1.0, help="p99 TTFT and inter-chunk error bound, ms")
    ap.add_argument("--pin", default=None, metavar="SIM:LOAD", help="taskset CPU lists, e.g. 0:1 or 0-3:4-7")
    ap.add_argument("--repeats", type=int, default=1, help="runs per (level, mode), interleaved")
    ap.add_argument("--keep", action="store_true", help="keep the run directories (path printed)")
    args = ap.parse_args(argv)
    if args.pin and (":" not in args.pin or not shutil.which("taskset")):
        ap.error("--pin SIM:LOAD needs both CPU lists and the taskset command")
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    levels = [int(x) for x in args.levels.split(",")]
    work = Path(tempfile.mkdtemp(prefix="llmload-scaling-"))
    rows = []
    for _ in range(args.repeats):
        for c in levels:
            for mode in modes:
                row = one_run(mode, c, args, work)
                print(json.dumps(row), flush=True)
                rows.append(row)
    print(f"\n{'mode':5} {'C':>4} {'chunks/s':>9} {'/proc':>7} {'TTFT p99':>9} {'gap p99':>8} {'µs/chunk':>9} ok")
    for r in rows:
        print(f"{r['mode']:5} {r['concurrency']:>4} {r['chunks_per_s']:>9} {r['chunks_per_s_per_process']:>7} "
              f"{r['ttft_err_p99_ms']:>9.3f} {r['gap_err_p99_ms']:>8.3f} {r['cpu_us_per_chunk']:>9} "
              f"{'yes' if r['within_bound'] else 'NO'}")
    best: dict[str, dict[str, Any] | None] = {}
    for mode in modes:
        ok = [r for r in rows if r["mode"] == mode and r["within_bound"]]
        best[mode] = max(ok, key=lambda r: r["chunks_per_s"]) if ok else None
    summary: dict[str, Any] = {
        m: None if b is None else {"concurrency": b["concurrency"], "chunks_per_s": b["chunks_per_s"],
                                   "chunks_per_s_per_process": b["chunks_per_s_per_process"]}
        for m, b in best.items()
    }
    summary["max_any_bound"] = {m: max((r["chunks_per_s"] for r in rows if r["mode"] == m), default=None)
                                for m in modes}
    for m in ("p2", "mw2"):
        if best.get("p1") and best.get(m):
            summary[f"ratio_{m}_over_p1"] = round(best[m]["chunks_per_s"] / best["p1"]["chunks_per_s"], 2)  # type: ignore[index]
    anyb = summary["max_any_bound"]
    for m in ("p2", "mw2"):
        if anyb.get("p1") and anyb.get(m):
            summary[f"ratio_{m}_over_p1_any_bound"] = round(anyb[m] / anyb["p1"], 2)
    summary["setup"] = {"levels": levels, "duration_s": args.duration, "decode_ms": args.decode_ms,
                        "bound_ms": args.bound_ms, "pin": args.pin, "cpus": os.cpu_count()}
    print(f"\nmax within {args.bound_ms:g} ms p99:", json.dumps(summary))
    if args.keep:
        print(f"run directories: {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
