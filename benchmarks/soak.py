"""Compressed soak: a Locust master + N workers on loopback against a time-scaled simulator, for a count of requests.

The simulator (preset ``bench``, ``--time-scale`` 0 by default: no decode or prefill time) answers a short prompt
with ``--max-tokens`` tokens, so the run is as many requests as the client can drive. One concurrency step is held
until the master's exporter counts ``--requests`` records (or ``--time-cap`` seconds pass), then the master gets
Ctrl-C (SIGINT): in-flight requests finish and are recorded, the run is marked ``interrupted``, the report written.

Measured every ``--every`` seconds and reported at four moments, by records counted: ``start`` (the first sample
with 1 % of the requests), ``warm`` (``--warm`` of the requests, default 10 %: the growth baseline), ``middle``
(50 %) and ``end`` (the last sample before the stop):

* RSS (bytes) of every process: the master, its child processes (the records.parts converter), each worker and the
  simulator; growth after warm-up = (end - warm) / warm, in %, and over the second half, (end - middle) / middle;
* the number of series the master's Prometheus exporter serves (sample lines of one ``/metrics`` scrape), and
  whether it stayed constant from ``warm`` to the end;
* records (``records.jsonl`` lines, ``ok`` ones) against the simulator's completions (its
  ``vllm:request_success_total`` by finish reason: ``stop`` + ``length``; ``abort``: cut off);
* the end-of-run report: ``llmload report RUN_DIR`` run again after the run under ``/usr/bin/time -v`` (wall
  seconds and peak RSS; without ``/usr/bin/time``, polled with psutil every 0.05 s).

    .venv/bin/python benchmarks/soak.py --requests 500000 --time-cap 2700   # the full soak (~7-10 min here)
    .venv/bin/python benchmarks/soak.py --requests 20000                   # quick mode (~1-2 min)

``--trace DIR`` makes the master write its memory trace to DIR (``benchmarks/soak_trace.py``, a debugging aid:
RSS, malloc figures, gc objects, the exporter windows' cells; optionally ``tracemalloc`` diffs).

Prints a table and writes every figure to ``--json`` (default ``soak.json`` in the output directory). The run
directory stays in ``--out`` (default a new directory under /tmp; ~1.5 KB a record).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import psutil
from prometheus_client.parser import text_string_to_metric_families

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from harness.sim import launch  # noqa: E402

#: The moments reported (see the module docstring).
MOMENTS = ("start", "warm", "middle", "end")
#: The fraction of ``--requests`` counted at the ``start`` sample: the step's users all sending (the warm-up
#: request alone is counted before them, with fewer series).
START = 0.01

PROFILE = """
name: soak-bench
description: benchmarks/soak.py, one step held until the driver's request count.
request: {{thinking: true}}
prompts:
  - {{id: short, text: "Say hi.", max_tokens: {max_tokens}}}
warmup: {{max_tokens: 4, timeout: 60}}
single_stream: {{duration: 0}}
steps: {{concurrency: [{concurrency}], duration: {duration}, drain_timeout: 30}}
output: {{dir: {out}}}
"""


@dataclass
class Sample:
    """One look at the run: seconds since the master started, records the exporter counted, series it serves,
    and the RSS in bytes of each process (``master``, ``master_children``: their sum, ``worker1``.., ``sim``)."""

    t: float
    requests: int
    series: int
    rss: dict[str, int]


@dataclass
class SoakResult:
    """Every figure of one soak (see the module docstring); ``moments``: the samples named in :data:`MOMENTS`."""

    requested: int
    workers: int
    concurrency: int
    max_tokens: int
    time_scale: float
    run_dir: str = ""
    load_s: float = 0.0
    requests_per_s: float = 0.0
    capped: bool = False
    moments: dict[str, Sample] = field(default_factory=dict)
    rss_growth_pct: dict[str, float] = field(default_factory=dict)
    rss_growth_second_half_pct: dict[str, float] = field(default_factory=dict)
    rss_max: dict[str, int] = field(default_factory=dict)
    series_constant: bool = False
    records: int = 0
    records_ok: int = 0
    run_json_records: int | None = None
    status: str = ""
    cut_off: int | None = None
    server: dict[str, int] = field(default_factory=dict)
    records_equal_server: bool = False
    report_s: float | None = None
    report_peak_rss: int | None = None
    report_rc: int | None = None
    samples: list[Sample] = field(default_factory=list)


def scrape(url: str, timeout: float = 10.0) -> tuple[int, int]:
    """(records counted, series served) from one scrape of the exporter at ``url`` (``.../metrics``): the sum of
    ``llmload_requests_total`` over its labels, and the number of sample lines. Raises OSError when unreachable."""
    with urllib.request.urlopen(url, timeout=timeout) as r:
        text = r.read().decode()
    series = sum(1 for line in text.splitlines() if line and not line.startswith("#"))
    n = 0.0
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            if s.name == "llmload_requests_total":
                n += s.value
    return int(n), series


def server_outcomes(url: str) -> dict[str, int]:
    """The simulator's finished requests by finish reason (``stop`` / ``length`` / ``abort``) from its /metrics."""
    with urllib.request.urlopen(url + "/metrics", timeout=10) as r:
        text = r.read().decode()
    out: dict[str, int] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            if s.name == "vllm:request_success_total":
                reason = s.labels.get("finished_reason", "")
                out[reason] = out.get(reason, 0) + int(s.value)
    return out


def rss_of(procs: dict[str, int]) -> dict[str, int]:
    """RSS in bytes of each named pid, and ``master_children``: the sum over the master's descendants (0 when
    none). A process gone meanwhile counts 0."""
    out: dict[str, int] = {}
    for name, pid in procs.items():
        try:
            p = psutil.Process(pid)
            out[name] = p.memory_info().rss
            if name == "master":
                kids = 0
                for c in p.children(recursive=True):
                    try:
                        kids += c.memory_info().rss
                    except psutil.Error:
                        pass
                out["master_children"] = kids
        except psutil.Error:
            out[name] = 0
    return out


def count_records(path: Path) -> tuple[int, int]:
    """(lines, lines with ``"ok":true``) of a records.jsonl, read in 16 MB blocks (no JSON parse)."""
    lines = ok = 0
    tail = b""
    with path.open("rb") as f:
        while block := f.read(16 << 20):
            data = tail + block
            cut = data.rfind(b"\n") + 1
            whole, tail = data[:cut], data[cut:]
            lines += whole.count(b"\n")
            ok += whole.count(b'"ok":true')
    if tail.strip():
        lines += 1
        ok += tail.count(b'"ok":true')
    return lines, ok


def time_report(run_dir: Path) -> tuple[float, int, int]:
    """Run ``llmload report RUN_DIR --quiet``: (wall seconds, peak RSS bytes, exit code). Uses ``/usr/bin/time -v``
    when present (its maximum resident set size), else polls the process tree with psutil every 0.05 s."""
    cmd = [sys.executable, "-m", "harness.cli", "report", str(run_dir), "--quiet"]
    gnu = shutil.which("time", path="/usr/bin")
    t0 = time.monotonic()
    if gnu:
        p = subprocess.run([gnu, "-v", *cmd], cwd=ROOT, capture_output=True, text=True)
        wall = time.monotonic() - t0
        m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", p.stderr)
        return wall, int(m.group(1)) * 1024 if m else 0, p.returncode
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    peak = 0
    ps = psutil.Process(proc.pid)
    while proc.poll() is None:
        try:
            peak = max(peak, ps.memory_info().rss + sum(c.memory_info().rss for c in ps.children(recursive=True)))
        except psutil.Error:
            pass
        time.sleep(0.05)
    return time.monotonic() - t0, peak, proc.returncode


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def growth(a: Sample, b: Sample) -> dict[str, float]:
    """RSS growth from sample ``a`` to ``b`` per process, % of ``a`` (2 decimals); processes at 0 in ``a`` left out."""
    return {k: round(100.0 * (b.rss.get(k, 0) - v) / v, 2) for k, v in a.rss.items() if v}


def _pick(samples: list[Sample], requested: int, warm: float) -> dict[str, Sample]:
    """The samples named in :data:`MOMENTS` (see the module docstring); a moment never reached is left out."""
    loaded = [s for s in samples if s.requests > 0]
    out: dict[str, Sample] = {}
    if not loaded:
        return out
    out["start"] = next((s for s in loaded if s.requests >= START * requested), loaded[-1])
    for name, frac in (("warm", warm), ("middle", 0.5)):
        hit = next((s for s in loaded if s.requests >= frac * requested), None)
        if hit is not None:
            out[name] = hit
    out["end"] = loaded[-1]
    return out


def soak(
    requests: int,
    out: Path,
    workers: int = 2,
    concurrency: int = 8,
    max_tokens: int = 8,
    time_scale: float = 0.0,
    time_cap: float = 3600.0,
    every: float = 5.0,
    warm: float = 0.1,
    report: bool = True,
    log: Any = None,
    locustfile: Path | None = None,
    trace: Path | None = None,
    sim_args: tuple[str, ...] = (),
) -> SoakResult:
    """Run one soak of ``requests`` requests (see the module docstring) with its run directory under ``out``.

    ``time_cap``: seconds of load at most (then stopped, ``capped`` set); ``every``: seconds between samples;
    ``warm``: the fraction of ``requests`` whose sample is the RSS growth baseline; ``report``: time the
    ``llmload report`` after the run; ``log``: called with each progress line (default: print it);
    ``locustfile``: the locustfile to run (default ``locustfiles/k26.py``); ``trace``: a directory where the
    master writes its memory trace (``benchmarks/soak_trace.py`` becomes the locustfile; see its docstring for the
    ``LLMLOAD_TRACE_*`` settings); ``sim_args``: more simulator options (``("--decode-base", "0.01")`` paces the
    ``bench`` preset's otherwise instant replies: 10 ms a token before ``time_scale``). Every process started is
    ended before this returns.

    Raises:
        RuntimeError: the master or a worker exited early, or the exporter never answered.
    """
    if log is None:
        def log(msg: str) -> None:
            print(msg, flush=True)
    out.mkdir(parents=True, exist_ok=True)
    res = SoakResult(requests, workers, concurrency, max_tokens, time_scale)
    prof = out / "soak-profile.yaml"
    prof.write_text(PROFILE.format(max_tokens=max_tokens, concurrency=concurrency,
                                   duration=int(time_cap) + 60, out=out / "runs"))
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    if trace is not None:
        env["LLMLOAD_TRACE_DIR"] = str(trace.resolve())
        locustfile = Path(__file__).resolve().parent / "soak_trace.py"
    rpc, mport = str(_free_port()), _free_port()
    locust = [sys.executable, "-m", "locust", "-f", str(locustfile or ROOT / "locustfiles" / "k26.py")]
    logs = [out / f"proc{i}.log" for i in range(workers + 1)]
    with launch(preset="bench", time_scale=time_scale, seed=1, extra_args=list(sim_args)) as sim:
        master = [*locust, "--headless", "--master", "--master-bind-host", "127.0.0.1", "--master-bind-port", rpc,
                  "--expect-workers", str(workers), "--profile", str(prof), "--host", sim.url,
                  "--metrics-addr", "127.0.0.1", "--metrics-port", str(mport), "--loglevel", "WARNING"]
        worker = [*locust, "--worker", "--master-host", "127.0.0.1", "--master-port", rpc, "--loglevel", "WARNING"]
        cmds = [master, *[worker] * workers]
        procs = [subprocess.Popen(c, cwd=out, env=env, stdout=subprocess.DEVNULL, stderr=lg.open("w"),
                                  start_new_session=True) for c, lg in zip(cmds, logs, strict=True)]
        names = {"master": procs[0].pid, **{f"worker{i + 1}": p.pid for i, p in enumerate(procs[1:])},
                 "sim": sim.popen.pid}
        metrics = f"http://127.0.0.1:{mport}/metrics"
        t0 = t_answer = time.monotonic()  # t_answer: the exporter's last answer
        t_load: float | None = None
        try:
            while True:
                for p in procs:
                    if p.poll() is not None:
                        raise RuntimeError(f"a Locust process exited early (code {p.returncode}): see {out}")
                try:
                    n, series = scrape(metrics)
                except OSError:
                    if time.monotonic() - t_answer > 120:
                        raise RuntimeError(f"the exporter at {metrics} did not answer for 120 s: see {out}") from None
                    time.sleep(0.5)
                    continue
                now = t_answer = time.monotonic()
                if n > 0 and t_load is None:
                    t_load = now
                res.samples.append(Sample(round(now - t0, 2), n, series, rss_of(names)))
                if n > 0:
                    log(f"{now - t0:7.1f} s  {n:>9,} requests  {series} series  "
                        f"RSS MB " + " ".join(f"{k}={v / 1e6:.0f}" for k, v in res.samples[-1].rss.items()))
                if n >= requests:
                    break
                if t_load is not None and now - t_load >= time_cap:
                    res.capped = True
                    log(f"time cap ({time_cap:.0f} s) reached at {n:,} requests: stopping")
                    break
                time.sleep(every)
            res.load_s = round(time.monotonic() - (t_load or t0), 1)
            procs[0].send_signal(signal.SIGINT)  # Ctrl-C: in-flight requests finish and are recorded, report written
            procs[0].wait(timeout=600)
            for p in procs[1:]:
                p.wait(timeout=60)
        finally:
            for p in procs:
                if p.poll() is None:
                    os.killpg(p.pid, signal.SIGKILL)
                    p.wait()
        res.server = server_outcomes(sim.url)
    run_dir = next((out / "runs").iterdir())
    res.run_dir = str(run_dir)
    meta = json.loads((run_dir / "run.json").read_text())
    res.status, res.cut_off, res.run_json_records = meta.get("status", ""), meta.get("cut_off"), meta.get("records")
    res.records, res.records_ok = count_records(run_dir / "records.jsonl")
    done = res.server.get("stop", 0) + res.server.get("length", 0)
    res.records_equal_server = res.records_ok == done == res.records and not res.server.get("abort")
    res.moments = _pick(res.samples, requests, warm)
    first, last = res.moments.get("start"), res.moments.get("end")
    if first is not None and last is not None and last.t > first.t:
        res.requests_per_s = round((last.requests - first.requests) / (last.t - first.t), 1)
    base, mid, end = res.moments.get("warm"), res.moments.get("middle"), res.moments.get("end")
    # a process with no RSS at the baseline (the records.parts converter starts once records.jsonl holds 16 MB)
    # has no growth figure
    if base is not None and end is not None:
        res.rss_growth_pct = growth(base, end)
    if mid is not None and end is not None:
        res.rss_growth_second_half_pct = growth(mid, end)
    for s in res.samples:
        for k, v in s.rss.items():
            res.rss_max[k] = max(res.rss_max.get(k, 0), v)
    warm_t = base.t if base is not None else None
    after = [s.series for s in res.samples if warm_t is not None and s.t >= warm_t]
    res.series_constant = bool(after) and len(set(after)) == 1
    if report:
        res.report_s, res.report_peak_rss, res.report_rc = time_report(run_dir)
    return res


def table(res: SoakResult) -> str:
    """The figures of ``res`` as Markdown (the docs' Soak section's form)."""
    names = list(res.moments["end"].rss) if "end" in res.moments else []
    head = "| moment | requests | series | " + " | ".join(f"{n} RSS MB" for n in names) + " |"
    rows = [head, "|" + "---|" * (3 + len(names))]
    for m in MOMENTS:
        s = res.moments.get(m)
        if s is None:
            continue
        rows.append(f"| {m} ({s.t:.0f} s) | {s.requests:,} | {s.series} | "
                    + " | ".join(f"{s.rss.get(n, 0) / 1e6:.1f}" for n in names) + " |")
    warm = [f"{res.rss_growth_pct[n]:+.2f} %" if n in res.rss_growth_pct else "n/a" for n in names]
    rows.append("| growth warm→end | | | " + " | ".join(warm) + " |")
    half = [f"{res.rss_growth_second_half_pct[n]:+.2f} %" if n in res.rss_growth_second_half_pct else "n/a"
            for n in names]
    rows.append("| growth middle→end | | | " + " | ".join(half) + " |")
    lines = [
        "\n".join(rows),
        "",
        f"requests {res.records:,} in {res.load_s:.0f} s of load ({res.requests_per_s:.0f}/s), capped: {res.capped}; "
        f"records ok {res.records_ok:,}, run.json {res.run_json_records}, server {res.server}, "
        f"equal: {res.records_equal_server}; status {res.status}, cut_off {res.cut_off}",
        f"series constant from warm to end: {res.series_constant}",
    ]
    if res.report_s is not None:
        lines.append(f"llmload report: {res.report_s:.1f} s wall, peak RSS {(res.report_peak_rss or 0) / 1e6:.0f} MB "
                     f"(exit {res.report_rc})")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Command line (see the module docstring); exit 1 when records differ from the server's completions."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--requests", type=int, default=500_000, help="requests to drive (default 500000)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--concurrency", type=int, default=8, help="users over all workers")
    ap.add_argument("--max-tokens", type=int, default=8, help="tokens a request (short outputs)")
    ap.add_argument("--time-scale", type=float, default=0.0, help="simulator time scale (0: no delays)")
    ap.add_argument("--time-cap", type=float, default=3600.0, help="seconds of load at most")
    ap.add_argument("--every", type=float, default=5.0, help="seconds between samples")
    ap.add_argument("--warm", type=float, default=0.1, help="fraction of --requests: the RSS growth baseline")
    ap.add_argument("--out", type=Path, default=None, help="output directory (default: new under /tmp)")
    ap.add_argument("--json", type=Path, default=None, help="figures file (default OUT/soak.json)")
    ap.add_argument("--no-report", action="store_true", help="do not time llmload report afterwards")
    ap.add_argument("--locustfile", type=Path, default=None, help="default locustfiles/k26.py")
    ap.add_argument("--trace", type=Path, default=None,
                    help="the master writes its memory trace here (benchmarks/soak_trace.py: LLMLOAD_TRACE_*)")
    args = ap.parse_args(argv)
    out = args.out or Path(tempfile.mkdtemp(prefix="llmload-soak-"))
    res = soak(args.requests, out, args.workers, args.concurrency, args.max_tokens, args.time_scale,
               args.time_cap, args.every, args.warm, not args.no_report, locustfile=args.locustfile,
               trace=args.trace)
    (args.json or out / "soak.json").write_text(json.dumps(asdict(res), indent=1))
    print(table(res))
    print(f"figures: {args.json or out / 'soak.json'}")
    return 0 if res.records_equal_server else 1


if __name__ == "__main__":
    sys.exit(main())
