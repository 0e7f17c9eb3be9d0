"""Continuous batching: per-stream speed falls and aggregate throughput rises with concurrency."""

from __future__ import annotations

import time
from typing import Any

import gevent

from harness.sim.presets import DEMO
from tests.sim.sseclient import Reply, chat

SCALE = 0.5
#: Step model for this test (simulated seconds): 19 ms + 2 ms per sequence -> at scale 0.5,
#: 95 tok/s at C=1 and 57 tok/s per stream (457 tok/s aggregate) at C=8: per-stream ratio 0.6,
#: aggregate ratio 4.8, so contention noise cannot flip either comparison.
DECODE_BASE, DECODE_PER_SEQ = 0.019, 0.002
TOKENS = 100
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
    proc = launch_sim(preset="demo", time_scale=SCALE,
                      extra_args=["--decode-base", str(DECODE_BASE), "--decode-per-seq", str(DECODE_PER_SEQ)])
    chat(proc.url, {"messages": MSG, "max_tokens": 2})  # warm the connection path
    one, wall_1 = run_wave(proc.url, 1)
    eight, wall_8 = run_wave(proc.url, 8)
    rate_1 = per_stream_rate(one[0])
    rates_8 = [per_stream_rate(r) for r in eight]
    mean_8 = sum(rates_8) / len(rates_8)
    agg_1 = TOKENS / wall_1
    agg_8 = 8 * TOKENS / wall_8
    model = DEMO.with_overrides(decode_base=DECODE_BASE, decode_per_seq=DECODE_PER_SEQ)
    model_1 = model.per_stream_rate(1) / SCALE  # 95.2 tok/s
    # CPU contention can only slow the simulator or the client down, never speed them up
    assert 0.7 * model_1 < rate_1 < 1.1 * model_1, (rate_1, model_1)
    assert mean_8 < 0.85 * rate_1, (mean_8, rate_1)  # model: 0.6
    assert max(rates_8) < 0.95 * rate_1, (rates_8, rate_1)
    assert agg_8 > 3 * agg_1, (agg_8, agg_1)  # model: 4.8


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
