"""Continuous batching: per-stream speed falls and aggregate throughput rises with concurrency."""

from __future__ import annotations

import time
from typing import Any

import gevent

from harness.sim.presets import DEMO
from tests.sim.sseclient import Reply, chat

SCALE = 0.5
TOKENS = 160
MSG = [{"role": "user", "content": "Measure the batching behaviour of this server."}]


def run_wave(url: str, concurrency: int) -> tuple[list[Reply], float]:
    """Start ``concurrency`` identical fixed-length streams at once; returns replies and wall seconds."""
    body = {"messages": MSG, "stream": True, "max_tokens": TOKENS, "ignore_eos": True}
    t0 = time.perf_counter()
    jobs = [gevent.spawn(chat, url, body) for _ in range(concurrency)]
    gevent.joinall(jobs, timeout=20, raise_error=True)
    replies = [j.value for j in jobs]
    return replies, time.perf_counter() - t0


def per_stream_rate(reply: Reply) -> float:
    """Decode rate of one stream, tokens/s: (tokens - 1) / (last token chunk - first token chunk)."""
    tokens = [e for e in reply.chunks if e.delta.get("reasoning") or e.delta.get("content")]
    assert len(tokens) == TOKENS
    return (TOKENS - 1) / (tokens[-1].t - tokens[0].t)


def test_batching_per_stream_falls_aggregate_rises(launch_sim: Any) -> None:
    proc = launch_sim(preset="demo", time_scale=SCALE)
    chat(proc.url, {"messages": MSG, "max_tokens": 2})  # warm the connection path
    one, wall_1 = run_wave(proc.url, 1)
    eight, wall_8 = run_wave(proc.url, 8)
    rate_1 = per_stream_rate(one[0])
    rates_8 = [per_stream_rate(r) for r in eight]
    mean_8 = sum(rates_8) / len(rates_8)
    agg_1 = TOKENS / wall_1
    agg_8 = 8 * TOKENS / wall_8
    # the model: 1 / (step(n) * scale)  ->  ~185 tok/s at C=1, ~155 tok/s per stream at C=8
    model_1 = DEMO.per_stream_rate(1) / SCALE
    model_8 = DEMO.per_stream_rate(8) / SCALE
    assert 0.8 * model_1 < rate_1 < 1.2 * model_1, (rate_1, model_1)
    assert 0.8 * model_8 < mean_8 < 1.2 * model_8, (mean_8, model_8)
    assert mean_8 < 0.95 * rate_1, (mean_8, rate_1)
    assert max(rates_8) < rate_1
    assert agg_8 > 3 * agg_1, (agg_8, agg_1)


def test_queueing_beyond_max_num_seqs(launch_sim: Any) -> None:
    """With max-num-seqs 2, the 3rd and 4th of 4 simultaneous requests wait for a free slot."""
    proc = launch_sim(time_scale=0.2, extra_args=["--max-num-seqs", "2"])
    body = {"messages": MSG, "stream": True, "max_tokens": 40, "ignore_eos": True}
    jobs = [gevent.spawn(chat, proc.url, body) for _ in range(4)]
    gevent.joinall(jobs, timeout=20, raise_error=True)
    ttfts = sorted(
        next(e.t for e in j.value.chunks if e.delta.get("reasoning") or e.delta.get("content")) - j.value.t_sent
        for j in jobs
    )
    e2e_first = min(j.value.t_end - j.value.t_sent for j in jobs)
    assert ttfts[1] < 0.5 * e2e_first  # two start at once
    assert ttfts[2] > 0.8 * e2e_first  # the others wait for a slot
