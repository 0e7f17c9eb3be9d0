"""Capacity of one simulator process: token-bearing SSE chunks per second it can push.

Starts ``python -m harness.sim serve --preset bench`` (zero decode/prefill time, 200 reasoning +
200 answer tokens per request, one token per chunk), keeps ``--concurrency`` raw-socket streams busy
from this process (a ``selectors`` loop, no gevent, no JSON parsing), and counts ``data: `` events.
Prints per-run rates and the median of ``--runs`` runs (chunks/s = token-bearing events/s).

    .venv/bin/python benchmarks/sim_capacity.py --concurrency 64 --duration 5 --runs 3
    .venv/bin/python benchmarks/sim_capacity.py --sim-args "--truth-log /tmp/truth.jsonl"   # cost of the truth log

``--sweep PRESET`` instead measures a preset's real decode throughput (time scale 1) at several
concurrencies: aggregate token events/s in the measured window and the mean per-stream rate
(tokens - 1) / (last token - first token) of the requests that finished inside it.

    .venv/bin/python benchmarks/sim_capacity.py --sweep demo --levels 1,8,32,64 --duration 20
"""

from __future__ import annotations

import argparse
import json
import selectors
import shlex
import socket
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.sim import launch

_EVENT = b"data: "
_END = b"0\r\n\r\n"
#: Non-token events per request: role chunk, finish chunk, [DONE].
_OVERHEAD_EVENTS = 3


_TOKEN_MARKERS = (b'{"reasoning":', b'{"content":"')


class Stream:
    """One keep-alive connection issuing streamed requests back to back."""

    def __init__(self, addr: tuple[str, int], request: bytes) -> None:
        self.sock = socket.create_connection(addr)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock.setblocking(False)
        self.request = request
        self.tail = b""
        self.events = 0
        self.completed = 0
        self.tokens = 0  # token-bearing events (vllm flavour, 1 token each)
        self.req_tokens = 0
        self.t_first = 0.0
        self.t_last = 0.0
        #: (finish time, tokens, per-stream rate tokens/s) of completed requests
        self.finished: list[tuple[float, int, float]] = []

    def send(self) -> None:
        self.sock.setblocking(True)
        self.sock.sendall(self.request)
        self.sock.setblocking(False)

    def on_readable(self) -> None:
        data = self.sock.recv(262144)
        if not data:
            raise ConnectionError("server closed the connection")
        now = time.perf_counter()
        window = self.tail + data
        self.events += window.count(_EVENT)
        n_tok = sum(window.count(m) for m in _TOKEN_MARKERS)
        if n_tok:
            if self.req_tokens == 0:
                self.t_first = now
            self.t_last = now
            self.req_tokens += n_tok
            self.tokens += n_tok
        if window.endswith(_END):  # last bytes of a response (the server sends it in one write)
            self.completed += 1
            span = self.t_last - self.t_first
            rate = (self.req_tokens - 1) / span if span > 0 else float("nan")
            self.finished.append((now, self.req_tokens, rate))
            self.req_tokens = 0
            self.tail = b""
            self.send()
        else:
            self.tail = window[-12:]


def run_once(url: str, concurrency: int, duration: float, warmup: float) -> dict[str, float]:
    """Drive ``concurrency`` streams for ``warmup + duration`` seconds; rates over the last ``duration``."""
    host, port = url.removeprefix("http://").rsplit(":", 1)
    body = json.dumps({
        "model": "sim-reasoner",
        "messages": [{"role": "user", "content": "Benchmark the simulator, please, with an ordinary prompt."}],
        "stream": True,
        "max_tokens": 4000,
    }).encode()
    request = (
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: sim\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n%b" % (len(body), body)
    )
    sel = selectors.DefaultSelector()
    streams = [Stream((host, int(port)), request) for _ in range(concurrency)]
    for s in streams:
        sel.register(s.sock, selectors.EVENT_READ, s)
        s.send()
    t_start = time.perf_counter()
    t_measure = t_start + warmup
    t_end = t_measure + duration
    base_events = base_done = base_tokens = None
    while True:
        now = time.perf_counter()
        if base_events is None and now >= t_measure:
            base_events = sum(s.events for s in streams)
            base_done = sum(s.completed for s in streams)
            base_tokens = sum(s.tokens for s in streams)
            t_measure = now
        if now >= t_end:
            break
        for key, _ in sel.select(timeout=0.1):
            key.data.on_readable()
    elapsed = time.perf_counter() - t_measure
    events = sum(s.events for s in streams) - (base_events or 0)
    done = sum(s.completed for s in streams) - (base_done or 0)
    tokens = sum(s.tokens for s in streams) - (base_tokens or 0)
    rates = [r for s in streams for (t, _n, r) in s.finished if t >= t_measure and r == r]
    for s in streams:
        sel.unregister(s.sock)
        s.sock.close()
    token_chunks = events - _OVERHEAD_EVENTS * done
    return {
        "events_per_s": events / elapsed,
        "chunks_per_s": token_chunks / elapsed,
        "requests_per_s": done / elapsed,
        "tokens_per_s": tokens / elapsed,
        "per_stream": statistics.fmean(rates) if rates else float("nan"),
        "finished": float(len(rates)),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--concurrency", type=int, default=64, help="concurrent streams")
    parser.add_argument("--duration", type=float, default=5.0, help="measured seconds per run")
    parser.add_argument("--warmup", type=float, default=1.0, help="unmeasured seconds per run")
    parser.add_argument("--runs", type=int, default=3, help="runs (the median is reported)")
    parser.add_argument("--tokens-per-chunk", type=int, default=1, help="passed to the simulator")
    parser.add_argument("--decode-base", type=float, default=0.0,
                        help="engine step time, seconds (0 = as fast as possible; e.g. 0.01 = 100 chunks/s/stream)")
    parser.add_argument("--sim-args", default="",
                        help="extra simulator options, shell-quoted (e.g. '--truth-log /tmp/t.jsonl')")
    parser.add_argument("--sweep", metavar="PRESET", default=None,
                        help="measure PRESET's throughput at --levels instead of the capacity")
    parser.add_argument("--levels", default="1,8,32,64", help="concurrency levels for --sweep")
    args = parser.parse_args()
    if args.sweep:
        return sweep(args.sweep, [int(x) for x in args.levels.split(",")], args.duration, args.warmup)
    results = []
    extra = ["--tokens-per-chunk", str(args.tokens_per_chunk), "--decode-base", repr(args.decode_base),
             *shlex.split(args.sim_args)]
    with launch(preset="bench", extra_args=extra) as sim:
        for i in range(args.runs):
            cpu0 = _cpu_seconds(sim.pid)
            r = run_once(sim.url, args.concurrency, args.duration, args.warmup)
            r["server_cpu"] = (_cpu_seconds(sim.pid) - cpu0) / (args.duration + args.warmup)
            results.append(r)
            us = 1e6 * r["server_cpu"] / r["events_per_s"] if r["events_per_s"] else float("nan")
            print(f"run {i + 1}: {r['chunks_per_s']:9.0f} token chunks/s  {r['events_per_s']:9.0f} events/s  "
                  f"{r['requests_per_s']:7.1f} req/s  server CPU {r['server_cpu']:.0%} "
                  f"({us:.1f} us CPU/event)  (C={args.concurrency})")
    median = statistics.median(r["chunks_per_s"] for r in results)
    cpu_us = statistics.median(1e6 * r["server_cpu"] / r["events_per_s"] for r in results if r["events_per_s"])
    opts = f", {args.sim_args}" if args.sim_args else ""
    print(f"median: {median:.0f} token chunks/s per simulator process (C={args.concurrency}, "
          f"{args.tokens_per_chunk} token/chunk, decode step {args.decode_base} s{opts}); "
          f"{cpu_us:.1f} us server CPU per event -> ~{1e6 / cpu_us:.0f} events/s per fully used core")
    return 0


def sweep(preset: str, levels: list[int], duration: float, warmup: float) -> int:
    """Print aggregate and per-stream decode rates (tokens/s) of ``preset`` at each concurrency level."""
    from harness.sim.presets import get_preset

    model = get_preset(preset)
    with launch(preset=preset) as sim:
        for c in levels:
            r = run_once(sim.url, c, duration, warmup)
            print(f"C={c:<3d} aggregate {r['tokens_per_s']:8.1f} tok/s (model {model.aggregate_rate(c):7.1f})   "
                  f"per-stream {r['per_stream']:6.1f} tok/s (model {model.per_stream_rate(c):6.1f}, "
                  f"{r['finished']:.0f} requests)   {r['requests_per_s']:.2f} req/s", flush=True)
    return 0


def _cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process (Linux /proc)."""
    import os

    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


if __name__ == "__main__":
    raise SystemExit(main())
