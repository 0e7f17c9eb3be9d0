"""Cost of the Prometheus exporter at 64 users, measured live: series, payload, scrape time, exporter CPU.

    .venv/bin/python benchmarks/exporter_scrape.py                                  # one 64-user step of 60 s
    .venv/bin/python benchmarks/exporter_scrape.py --levels 8,16,32,64 --duration 30 --single 15   # demo sweep
    .venv/bin/python benchmarks/exporter_scrape.py --format text                    # plain text, no gzip

Starts the simulator (``--preset``, default ``demo``, on 127.0.0.1, free port) and runs ``locustfiles/k26.py``
headless against it with a temporary profile: ``profiles/demo.yaml``'s prompt mix and timeouts, no single stream
(``--single``), steps at ``--levels`` (default 64) of ``--duration`` seconds each, the exporter on a free loopback
port. While the highest level runs with all its users, ``/metrics`` is scraped every ``--interval`` seconds the
way Prometheus 2.x scrapes (its Accept header, so OpenMetrics; gzip), and each scrape records:

* series: sample lines of the exposition;
* payload: bytes on the wire (gzip) and uncompressed;
* wall time: the HTTP GET, from sending to the last byte read (ms);
* exporter CPU per scrape: the increase of ``llmload_exporter_scrape_cpu_seconds_total`` since the previous
  scrape (one scrape apart: nothing else scrapes it), i.e. thread time of collect + serialization + gzip (ms).

After the run (every record in: the largest state) a few back-to-back scrapes are taken while the exporter lingers
for its last scrape, for the same figures at the end. Prints medians and maxima and the exporter's CPU at
Prometheus' shipped 5 s interval as a fraction of one core, next to the Locust process's own CPU use in the window.

Every child process is bounded in time and killed on exit; everything listens on 127.0.0.1 only.
"""

from __future__ import annotations

import argparse
import gzip
import itertools
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from harness.sim import launch  # noqa: E402

#: The Accept header of Prometheus 2.x scrapes (2.42, before scrape_protocols): OpenMetrics first.
PROMETHEUS_ACCEPT = (
    "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,"
    "text/plain;version=0.0.4;q=0.5,*/*;q=0.1"
)
#: Prometheus' shipped scrape interval (prometheus/prometheus.yml), seconds.
PROM_INTERVAL_S = 5.0
#: Printed by the plugin once the records are closed and the report is written.
MARKER = "llmload: records and report in"
_VALUE = r"\{[^}]*\} (\S+)"


@dataclass
class Scrape:
    """One scrape of ``/metrics``: sizes in bytes, ``wall_s`` and ``cpu_total_s`` in seconds."""

    t: float
    series: int
    wire_bytes: int
    raw_bytes: int
    wall_s: float
    scrapes_total: float
    cpu_total_s: float
    users: float
    target: float


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _value(text: str, name: str) -> float:
    """The value of the single sample ``name{...}`` (NaN when absent)."""
    m = re.search(rf"^{re.escape(name)}{_VALUE}$", text, re.MULTILINE)
    return float(m.group(1)) if m else float("nan")


def scrape(url: str, fmt: str, timeout: float = 10.0) -> Scrape:
    """GET ``url`` as Prometheus does (``fmt`` ``prometheus``) or as plain text without gzip (``text``)."""
    headers = {"Accept": PROMETHEUS_ACCEPT, "Accept-Encoding": "gzip"} if fmt == "prometheus" else {}
    req = urllib.request.Request(url, headers=headers)
    t0 = time.perf_counter()
    with urllib.request.urlopen(req, timeout=timeout) as r:
        body = r.read()
        encoding = r.headers.get("Content-Encoding", "")
    wall = time.perf_counter() - t0
    raw = gzip.decompress(body) if encoding == "gzip" else body
    text = raw.decode()
    series = sum(1 for line in text.splitlines() if line and not line.startswith("#"))
    return Scrape(
        t=time.time(),
        series=series,
        wire_bytes=len(body),
        raw_bytes=len(raw),
        wall_s=wall,
        scrapes_total=_value(text, "llmload_exporter_scrapes_total"),
        cpu_total_s=_value(text, "llmload_exporter_scrape_cpu_seconds_total"),
        users=_value(text, "llmload_users"),
        target=_value(text, "llmload_target_users"),
    )


def cpu_per_scrape(scrapes: list[Scrape]) -> list[float]:
    """Exporter CPU seconds per scrape, from consecutive scrapes' self-monitoring counters."""
    out = []
    for a, b in itertools.pairwise(scrapes):
        n = b.scrapes_total - a.scrapes_total
        if n > 0:
            out.append((b.cpu_total_s - a.cpu_total_s) / n)
    return out


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process (Linux /proc; NaN elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def write_profile(tmp: Path, levels: list[int], duration: float, single: float, drain: float) -> Path:
    """``profiles/demo.yaml`` with the benchmark's phases and output directory; returns its path."""
    prof = yaml.safe_load((ROOT / "profiles" / "demo.yaml").read_text())
    prof.update(
        name="exporter-bench",
        single_stream={"duration": single},
        steps={"concurrency": levels, "duration": duration, "drain_timeout": drain},
        output={"dir": str(tmp / "runs")},
    )
    prof["warmup"]["timeout"] = 60
    path = tmp / "exporter-bench.yaml"
    path.write_text(yaml.safe_dump(prof, sort_keys=False))
    return path


def run(args: argparse.Namespace, tmp: Path) -> tuple[list[Scrape], list[Scrape], float]:
    """Run the sweep; return (live scrapes at the top level, end-of-run scrapes, Locust CPU share in the window)."""
    levels = [int(x) for x in args.levels.split(",")]
    top = max(levels)
    profile = write_profile(tmp, levels, args.duration, args.single, args.drain)
    port = free_port()
    url = f"http://127.0.0.1:{port}/metrics"
    budget = 60 + 60 + args.single + len(levels) * args.duration + args.drain + 30  # warm-up timeout + margin
    with launch(preset=args.preset, time_scale=args.time_scale) as sim:
        cmd = [
            sys.executable, "-m", "locust", "-f", str(ROOT / "locustfiles" / "k26.py"), "--headless",
            "--profile", str(profile), "--host", sim.url, "--exit-code-on-error", "0",
            "--metrics-addr", "127.0.0.1", "--metrics-port", str(port), "--metrics-linger", "20",
        ]  # fmt: skip
        log = (tmp / "locust.log").open("w")
        proc = subprocess.Popen(
            cmd,
            cwd=tmp,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        done, finished = threading.Event(), threading.Event()

        def read() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                if MARKER in line:
                    finished.set()
                    done.set()
            done.set()

        threading.Thread(target=read, daemon=True).start()
        live: list[Scrape] = []
        end: list[Scrape] = []
        cpu0 = cpu1 = t_cpu0 = t_cpu1 = float("nan")
        try:
            deadline = time.monotonic() + budget
            next_at = time.monotonic()
            print(
                f"locust pid {proc.pid}, exporter {url}, simulator {sim.url} ({args.preset}); at most {budget:.0f} s",
                flush=True,
            )
            while not done.is_set() and time.monotonic() < deadline:
                done.wait(max(0.0, next_at - time.monotonic()))
                next_at += args.interval
                if done.is_set():
                    break
                try:
                    s = scrape(url, args.format)
                except (OSError, urllib.error.URLError):
                    continue
                if s.target == top and s.users == top:
                    if not live:
                        cpu0, t_cpu0 = process_cpu_s(proc.pid), time.monotonic()
                    live.append(s)
                    cpu1, t_cpu1 = process_cpu_s(proc.pid), time.monotonic()
                    print(
                        f"  C={top}: {s.series} series, {s.wire_bytes} B on the wire ({s.raw_bytes} B), "
                        f"{1e3 * s.wall_s:.1f} ms",
                        flush=True,
                    )
            if not finished.is_set():
                log.flush()
                tail = (tmp / "locust.log").read_text()[-3000:]
                why = "exited" if done.is_set() else f"did not end within {budget:.0f} s"
                raise SystemExit(f"the Locust run {why}; its log ends with:\n{tail}")
            for _ in range(args.end_scrapes):  # the exporter lingers ~0.5 s after the first of these
                try:
                    end.append(scrape(url, args.format, timeout=3))
                except (OSError, urllib.error.URLError):
                    break
            proc.wait(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            log.close()
    share = (cpu1 - cpu0) / (t_cpu1 - t_cpu0) if t_cpu1 > t_cpu0 else float("nan")
    return live, end, share


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", default="demo", help="simulator preset (demo, bench, k26)")
    parser.add_argument("--time-scale", type=float, default=1.0, help="simulator time scale")
    parser.add_argument("--levels", default="64", help="step concurrencies; scraped while the highest one runs")
    parser.add_argument("--duration", type=float, default=60.0, help="seconds per step")
    parser.add_argument("--single", type=float, default=0.0, help="seconds of the single-stream phase (0: none)")
    parser.add_argument("--drain", type=float, default=60.0, help="drain timeout after the last step, seconds")
    parser.add_argument("--interval", type=float, default=2.0, help="seconds between live scrapes")
    parser.add_argument("--end-scrapes", type=int, default=6, help="back-to-back scrapes after the run")
    parser.add_argument(
        "--format",
        choices=("prometheus", "text"),
        default="prometheus",
        help="prometheus: its Accept header (OpenMetrics) and gzip; text: plain text, no gzip",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="llmload-exporter-bench-") as d:
        live, end, share = run(args, Path(d))
    top = max(int(x) for x in args.levels.split(","))
    if len(live) < 2:
        print(f"only {len(live)} scrape(s) while {top} users ran: lengthen --duration", file=sys.stderr)
        return 1
    cpu_live = cpu_per_scrape(live)
    cpu_end = cpu_per_scrape(end)
    fmt = "OpenMetrics + gzip, as Prometheus 2.x" if args.format == "prometheus" else "plain text 0.0.4, no gzip"
    print(
        f"\nexporter at C={top} (levels {args.levels}, {args.duration:.0f} s each, preset {args.preset}; {fmt}): "
        f"{len(live)} live scrapes every {args.interval:g} s, {len(end)} after the run"
    )
    rows: list[tuple[str, list[float], list[float], str]] = [
        ("series (sample lines)", [s.series for s in live], [s.series for s in end], "{:.0f}"),
        ("payload on the wire, B", [s.wire_bytes for s in live], [s.wire_bytes for s in end], "{:.0f}"),
        ("payload uncompressed, B", [s.raw_bytes for s in live], [s.raw_bytes for s in end], "{:.0f}"),
        ("scrape wall time, ms", [1e3 * s.wall_s for s in live], [1e3 * s.wall_s for s in end], "{:.2f}"),
        ("exporter CPU/scrape, ms", [1e3 * c for c in cpu_live], [1e3 * c for c in cpu_end], "{:.2f}"),
    ]
    print(f"{'':26s}{'live median':>13s}{'live max':>11s}{'end median':>12s}{'end max':>10s}")
    for label, lv, ev, f in rows:
        cells = [statistics.median(lv), max(lv)] + ([statistics.median(ev), max(ev)] if ev else [float("nan")] * 2)
        print(f"{label:26s}" + "".join(f"{f.format(v):>{w}s}" for v, w in zip(cells, (13, 11, 12, 10), strict=True)))
    worst = max(cpu_live + cpu_end)
    med = statistics.median(cpu_live)
    print(
        f"exporter CPU at Prometheus' {PROM_INTERVAL_S:g} s interval: {med / PROM_INTERVAL_S:.3%} of one core "
        f"(live median), {worst / PROM_INTERVAL_S:.3%} (worst scrape)"
    )
    print(
        f"Locust process CPU while {top} users ran: {share:.1%} of one core "
        f"(of which these {args.interval:g} s scrapes: {med / args.interval:.2%})"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
