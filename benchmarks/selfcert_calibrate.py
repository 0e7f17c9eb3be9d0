"""Calibrate the self-certification's TTFT / inter-chunk error bound against the simulator's ground truth.

    .venv/bin/python benchmarks/selfcert_calibrate.py [--concurrency 8 32 64 128] [--duration 12] [--runs 1]
        [--scale 0.5] [--out /tmp/selfcert-cal]

For each concurrency, one headless single-process run (``locustfiles/k26.py``) against the built-in simulator
(preset ``demo`` at ``--scale``, no faults, ``output.chunk_times: true``, the simulator's truth log on), then per
run: the report's load step figures (client CPU share, chunks/s per process, read lag p50 / p99) and the fidelity
comparison with the truth (:func:`harness.report.fidelity.compare`: TTFT harness - true, inter-chunk gap harness -
true, p50 / p99 in ms). Prints one JSON line per run and a table; the bound table in
``harness/selfcert.py`` (``CALIBRATION``) is written from its output (docs/guides/self-certification.md).
Not a timed test: numbers depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PROFILE = """
name: selfcert-cal-c%(c)d
simulator: {preset: demo, time_scale: %(scale)s, seed: 3}
request: {thinking: true, continuous_usage_stats: true}
prompts:
  - {id: explain, text: "Explain how TCP congestion control works, with an example.", max_tokens: 512}
warmup: {max_tokens: 16, timeout: 30}
single_stream: {duration: 0}
steps: {concurrency: [%(c)d], duration: %(d)s, drain_timeout: 20}
output: {dir: %(out)s, chunk_times: true}
"""


def one(c: int, duration: float, scale: float, out: Path, processes: int = 1) -> dict[str, object]:
    """One run at concurrency ``c`` (``processes`` Locust processes: ``--processes N`` when > 1); its step's
    self-certification figures (chunks/s per process is the busiest process's) and the fidelity errors."""
    from harness.report.build import build_report
    from harness.report.fidelity import compare

    work = out / f"c{c}-{os.getpid()}-{len(list(out.glob('c*')))}"
    work.mkdir(parents=True)
    prof = work / "p.yaml"
    prof.write_text(PROFILE % {"c": c, "scale": scale, "d": duration, "out": work / "runs"})
    truth = work / "truth.jsonl"
    env = dict(os.environ, PYTHONUNBUFFERED="1", LLMLOAD_SIM_ARGS=f"--truth-log {truth}")
    proc = subprocess.run(
        [sys.executable, "-m", "locust", "-f", str(ROOT / "locustfiles" / "k26.py"), "--headless",
         "--only-summary", "--profile", str(prof), *(["--processes", str(processes)] if processes > 1 else [])],
        cwd=work, env=env, capture_output=True, text=True,
        timeout=duration + 120)
    if proc.returncode not in (0, 1):
        raise RuntimeError(proc.stderr[-3000:])
    (run,) = [p for p in (work / "runs").iterdir() if p.is_dir()]
    fid = compare(run, truth).summary
    rep = build_report(run)
    row = next(r for r in rep.steps if r.phase == "step" and r.concurrency == c)
    keys = ("client_cpu_share_max", "client_chunks_per_s_proc", "client_read_lag_p50_s", "client_read_lag_p99_s")
    return {"concurrency": c, "processes": processes, **{k: getattr(row, k, None) for k in keys},
            "ttft_diff_ms": fid["ttft_diff_ms"], "gap_diff_ms": fid["gap_diff_ms"], "run": str(run)}


def main() -> None:
    """Run the calibration and print the table."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--concurrency", type=int, nargs="+", default=[8, 32, 64, 128])
    ap.add_argument("--duration", type=float, default=12.0)
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--scale", type=float, default=0.5)
    ap.add_argument("--out", type=Path, default=Path("/tmp/selfcert-cal"))
    ap.add_argument("--processes", type=int, default=1,
                    help="Locust processes per run (--processes N): calibrates the bound of N-process steps")
    a = ap.parse_args()
    if a.processes < 1:
        ap.error(f"--processes {a.processes}: give 1 or more")
    a.out.mkdir(parents=True, exist_ok=True)
    for _ in range(a.runs):
        for c in a.concurrency:
            print(json.dumps(one(c, a.duration, a.scale, a.out, a.processes)), flush=True)


if __name__ == "__main__":
    main()
