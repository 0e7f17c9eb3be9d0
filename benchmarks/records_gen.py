"""Generate a realistic run directory of N request records, fast, for benchmarking the report.

The records are schema 3 (``"schema": 3``, docs/records.md; 2 with ``--chunk-times float``), keys in the
order and with every field :meth:`harness.result.RequestResult.to_record` writes (``tests/report/test_columns.py``
checks that), with the distributions of
a demo run (``locust -f locustfiles/k26.py --headless`` against the built-in simulator, demo preset): three
prompts (two capped at 1024 tokens, ~310 tokens mean; one capped at 512 that always truncates in reasoning),
TTFT ~22 ms, a per-token gap (TPOT) of ~10.8 ms at C=1 growing by ~0.29 ms per concurrent stream, kernel-stamped
read lags of a few ms, per-record ``gap_hist`` / ``itl_hist`` log histograms of ~35 buckets, plus a small
share (0.2 %) of failed requests (idle timeouts; HTTP 503s, half of them with a Retry-After, and in-band
server errors with an error ``code``) so error figures are exercised.

So the report's newer figures are exercised too: 10 % of the successful requests that reach an answer have
hidden reasoning (OpenAI style: usage counts the reasoning tokens, no reasoning text is streamed, so TTFT is the
first answer chunk and ``tpot`` / ``decode_rate`` count answer tokens only; ``hidden_reasoning`` true), and the
profile in ``run.json`` has a ``usable:`` rule (``min_answer_tokens`` 40, an ``answer_regex``, ``answer_json``)
that successful untruncated requests fail as ``min_answer_tokens`` (answers under 40 tokens, a few %), ``regex``
(1 %) or ``json`` (0.5 %); ``usable_reason`` is ``error`` / ``truncated`` / one of those / null. The profile also
has a ``cost:`` section (8 GPUs at US$ 2.50 per GPU-hour), so the cost figures are computed.

Timing is a closed-loop simulation: each Locust user sends its next request as soon as its previous one ends
(1 ms think time); the sweep is warm-up (1 request), single stream (C=1, half a step), then the load steps
(default C = 8/16/32/64). A request belongs to the step it *started* in; a step change adds users at its start
and in-flight requests carry over, as in a real run. Records are written in completion order (as the harness
writes them). The last step runs until exactly N requests (warm-up included) have been sent, then the load ends
(``load_end``) and in-flight requests drain, so ``records.jsonl`` holds exactly N records and ``phases.jsonl``
matches them. ``run.json`` says the built-in simulator (time scale 1) was the target.

    .venv/bin/python benchmarks/records_gen.py --records 1000000 --out /tmp/llmload-1m
    .venv/bin/python benchmarks/records_gen.py --records 20000 --out /tmp/small --concurrency 4,8 --seed 3
    .venv/bin/python benchmarks/records_gen.py --records 1000000 --out /tmp/llmload-1m-ct --chunk-times compact

Size: ~2 KB a record, like the demo run (schema 2 with ``usable_reason`` / ``hidden_reasoning``: 200k records
394 MB, so ~2.0 GB per million; 382 MB before those two fields, 1.87 GB per million before the other schema-2
fields); speed ~48 s per million records on one core (200k: 9.6 s). With ``--chunk-times`` (demo-like: one
token a chunk, ~310 chunks a record on average, gaps jittered around the TPOT): ``float`` ~9.4 KB a record (the
demo run's 9.5 KB), ``compact`` ~4.2 KB (20k records: 188 MB and 84 MB).
"""

from __future__ import annotations

import argparse
import heapq
import json
import math
import random
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import orjson

__all__ = ["GenSpec", "generate", "main"]

#: Epoch start of every generated run (a fixed date keeps the output reproducible for a seed).
T0 = 1_800_000_000.0
#: (prompt id, max_tokens, prompt tokens, always truncates in reasoning).
_PROMPTS: tuple[tuple[str, int, int, bool], ...] = (
    ("quicksort", 1024, 20, False),
    ("quantum", 1024, 14, False),
    ("redis-guide", 512, 14, True),
)
_TPOT_C1_S = 0.0108
_TPOT_PER_STREAM_S = 0.000294
_THINK_S = 0.001
_ERROR_SHARE = 0.002
#: Share of successful requests with an answer whose reasoning is hidden (not streamed).
_HIDDEN_SHARE = 0.10
#: The generated profile's ``usable:`` rule, and the shares of the remaining requests failing its text checks.
_MIN_ANSWER_TOKENS = 40
_USABLE = {"min_answer_tokens": _MIN_ANSWER_TOKENS, "answer_regex": r"\w", "answer_json": True}
_REGEX_FAIL_SHARE = 0.01
_JSON_FAIL_SHARE = 0.005
#: The generated profile's ``cost:`` section (US$ 20 per hour).
_COST = {"gpu_hour_usd": 2.5, "gpus": 8}
_HIST_BASE_S = 1e-6
_LOG_GROWTH = math.log(1.01)
#: The record layout written (``schema`` of every record; :data:`harness.result.RECORD_SCHEMA`). ``--chunk-times
#: float`` writes schema 2 (float seconds, one count per chunk), the layout before the compact chunk times.
RECORD_SCHEMA_VERSION = 3
#: Forms of per-chunk arrival times: none (``output.chunk_times: false``), the schema-2 float seconds, or the
#: schema-3 compact integer µs deltas (what the harness writes now).
CHUNK_FORMS = ("none", "float", "compact")


class GenSpec:
    """What to generate.

    Args:
        records: exact number of records (warm-up included), >= 2.
        concurrency: the load steps' concurrencies (after the single-stream phase).
        step_s: planned seconds of each load step; None derives it from ``records`` so the last step lasts
            about as long as the others (the single-stream phase lasts half a step).
        seed: seed of the random draws (same seed, same files).
        chunk_times: ``none``, ``float`` or ``compact`` (:data:`CHUNK_FORMS`): write each successful request's
            chunk arrival times and per-chunk tokens (one token a chunk, as the demo's simulator streams), as the
            demo profile does (``output.chunk_times: true``), in the schema-2 float form or the schema-3 compact
            form. The other fields and draws are the same in all three.
    """

    def __init__(self, records: int, concurrency: Sequence[int] = (8, 16, 32, 64), step_s: float | None = None,
                 seed: int = 0, chunk_times: str = "none") -> None:
        if chunk_times not in CHUNK_FORMS:
            raise ValueError(f"chunk_times must be one of {', '.join(CHUNK_FORMS)}, got {chunk_times!r}")
        self.chunk_times = chunk_times
        if records < 2:
            raise ValueError("records must be >= 2 (one warm-up request and one measured request)")
        if not concurrency or any(c < 1 for c in concurrency):
            raise ValueError("concurrency must list positive integers")
        self.records = records
        self.concurrency = [int(c) for c in concurrency]
        self.seed = seed
        self.step_s = step_s if step_s is not None else self._derived_step_s()

    def _derived_step_s(self) -> float:
        """Step length (s) that gives about ``records`` requests: N = D/2 * rate(1) + Σ D * rate(C)."""
        mean_tokens = (2 * 310 + 512) / 3

        def rate(c: int) -> float:
            return c / (0.022 + (mean_tokens - 1) * _tpot(c) + _THINK_S)

        per_step_s = rate(1) / 2 + sum(rate(c) for c in self.concurrency)
        return max(1.0, self.records / per_step_s)


def _tpot(c: int) -> float:
    """Mean per-token gap (s) at ``c`` concurrent streams."""
    return _TPOT_C1_S + _TPOT_PER_STREAM_S * c


class _Hists:
    """Pool of histogram shapes (bucket -> share of gaps) by per-token gap, built once."""

    def __init__(self, rng: random.Random) -> None:
        self.shapes: dict[int, list[tuple[str, float]]] = {}
        self.rng = rng

    def shape(self, tpot: float) -> list[tuple[str, float]]:
        key = int(math.log(tpot / _HIST_BASE_S) / _LOG_GROWTH)
        got = self.shapes.get(key)
        if got is None:
            counts: dict[int, int] = {}
            for _ in range(600):
                v = tpot * self.rng.lognormvariate(0.0, 0.075)
                k = int(math.log(v / _HIST_BASE_S) / _LOG_GROWTH)
                counts[k] = counts.get(k, 0) + 1
            got = sorted(((str(k), n / 600.0) for k, n in counts.items()), key=lambda kv: -kv[1])
            self.shapes[key] = got
        return got

    def hist(self, n: int, tpot: float) -> dict[str, Any]:
        """A ``LogHistogram.to_json()`` dict of ``n`` gaps around ``tpot`` seconds."""
        shape = self.shape(tpot)
        buckets: dict[str, int] = {}
        left = n
        for k, share in shape:
            c = int(share * n)
            if c:
                buckets[k] = c
                left -= c
        if left:
            top = shape[0][0]
            buckets[top] = buckets.get(top, 0) + left
        ks = [int(k) for k in buckets]
        lo = _HIST_BASE_S * math.exp(min(ks) * _LOG_GROWTH)
        hi = _HIST_BASE_S * math.exp((max(ks) + 1) * _LOG_GROWTH)
        return {"n": n, "sum": n * tpot, "min": lo * 1.002, "max": hi * 0.998, "buckets": buckets}


def _chunks(nrng: np.random.Generator, first: float, last: float, n: int, form: str) -> tuple[Any, Any, Any]:
    """``(chunk_times, chunk_tokens, times)``: the record values of ``n`` one-token chunks from ``first`` to ``last``
    (s from request sent), evenly spaced, each gap jittered by a lognormal factor (sigma 0.15) and rescaled so the
    last chunk is at ``last``, in the ``float`` (schema 2) or ``compact`` (schema 3, as
    :func:`harness.result.encode_chunks` writes them) form; and the times (s, a numpy array)."""
    if n == 1:
        times = np.array([first])
    else:
        gaps = nrng.lognormal(0.0, 0.15, n - 1)
        times = np.concatenate(([first], first + np.cumsum(gaps) * ((last - first) / gaps.sum())))
    if form == "float":
        return times.tolist(), [1] * n, times
    us = np.rint(times * 1e6).astype(np.int64)
    return np.diff(us, prepend=0).tolist(), [1] if n >= 2 else [1] * n, times


def _record(rng: random.Random, hists: _Hists, user: str, phase: str, step: int, conc: int, start: float,
            first: bool, nrng: np.random.Generator | None = None, form: str = "none") -> dict[str, Any]:
    """One record of a request sent at ``start`` (epoch s) by ``user`` at ``conc`` concurrent streams."""
    if phase == "warmup":
        pid, cap, ptok, always_trunc = "warmup", 16, 4, False
        tokens = 13
    else:
        pid, cap, ptok, always_trunc = _PROMPTS[rng.randrange(3)]
        tokens = cap if always_trunc else min(cap, max(2, int(rng.lognormvariate(5.66, 0.35))))
    tpot = _tpot(conc) * rng.lognormvariate(0.0, 0.05)
    ttft = 0.022 * rng.lognormvariate(0.0, 0.08) + 0.0002 * conc
    failed = phase != "warmup" and rng.random() < _ERROR_SHARE
    truncated = not failed and tokens >= cap
    if always_trunc:
        reasoning = tokens
    else:
        reasoning = min(tokens - 1, max(1, int(tokens * rng.uniform(0.65, 0.85))))
    answer = tokens - reasoning
    error_class: str | None = None
    error_detail: str | None = None
    retry_after_s: float | None = None
    error_code: str | None = None
    http_status: int | None = 200
    if failed:
        kind = rng.random()
        if kind < 0.4:
            error_class, tokens = "timeout_idle", max(2, tokens // 2)
            reasoning, answer = min(reasoning, tokens), max(0, tokens - reasoning)
            error_detail = "no token for 30.0 s"
        elif kind < 0.8:
            error_class, http_status, tokens, reasoning, answer = "http_5xx", 503, 0, 0, 0
            error_detail = "HTTP 503"
            retry_after_s = float(rng.choice((1, 2, 5))) if rng.random() < 0.5 else None
        else:  # an in-band error object after some tokens
            error_class, tokens = "server_error_event", max(2, tokens // 3)
            reasoning, answer = min(reasoning, tokens), max(0, tokens - reasoning)
            error_code = rng.choice(("500", "overloaded"))
            error_detail = f"server error event (code {error_code})"
    # hidden reasoning: generated before the first (answer) chunk, counted in usage, never streamed
    hidden = error_class is None and answer > 0 and reasoning > 0 and rng.random() < _HIDDEN_SHARE
    streamed = answer if hidden else tokens  # the tokens the stream's chunks carry
    if tokens:
        t_last = ttft + (tokens - 1) * tpot
        e2e = t_last + (30.0 if error_class == "timeout_idle" else 0.0)
        ttfat: float | None = ttft + reasoning * tpot if answer else None
        first = ttft + reasoning * tpot if hidden else ttft  # the first visible chunk (an answer one if hidden)
        gap = hists.hist(streamed - 1, tpot) if streamed > 1 else None
        decode = t_last - first
        ttft_v: float | None = first
        t_first_reasoning: float | None = None if hidden else ttft
        t_last_v: float | None = t_last
    else:
        e2e = 0.003 * rng.lognormvariate(0.0, 0.2)
        ttfat = ttft_v = t_first_reasoning = t_last_v = None
        gap = None
        decode = 0.0
    ok = error_class is None
    finish = ("length" if truncated else "stop") if ok else None
    usable_reason = _usable_reason(rng, ok, truncated, answer)
    rchars = 0 if hidden else int(reasoning * rng.uniform(4.3, 4.9))
    achars = int(answer * rng.uniform(4.6, 5.3))
    rec: dict[str, Any] = {
        "schema": 2 if form == "float" else RECORD_SCHEMA_VERSION,
        "prompt_id": pid, "prompt_class": None if phase == "warmup" else pid, "user": user, "phase": phase,
        "step": step, "concurrency": conc, "max_tokens": cap,
        "setting": None, "conversation": None, "turn": None, "start_wall": start,
        "connect": 0.007 * rng.lognormvariate(0.0, 0.3) if first else 0.0, "time_source": "kernel",
        "read_lag_max": 0.003 * rng.lognormvariate(0.0, 0.4) * (1.0 + conc / 32.0),
        "t_headers": 0.00045 * rng.lognormvariate(0.0, 0.3) if http_status else None,
        "ttft": ttft_v, "ttfat": ttfat, "t_first_reasoning": t_first_reasoning, "t_last_token": t_last_v,
        "e2e": e2e, "chunks": streamed, "reasoning_chunks": 0 if hidden else reasoning, "answer_chunks": answer,
        "sse_comments": 0,
        "gap_hist": gap,
    }
    if gap is not None:
        rec["itl_hist"] = gap
    if nrng is not None and form != "none" and streamed and t_last_v is not None and ttft_v is not None:
        rec["chunk_times"], rec["chunk_tokens"], times = _chunks(nrng, ttft_v, t_last_v, streamed, form)
        if ttfat is not None and not hidden and 0 < reasoning < streamed:  # as the client measures it: the
            rec["ttfat"] = float(times[reasoning])  # arrival of the first chunk with answer text
    rec.update({
        "output_tokens": tokens, "token_source": "usage" if ok else "estimate",
        "estimated_output_tokens": int(tokens * rng.uniform(1.0, 1.25)), "reasoning_tokens": reasoning,
        "answer_tokens": answer, "reasoning_source": "usage" if ok else "estimate",
        "prompt_tokens": ptok if ok else None,
        "cached_tokens": None, "reasoning_chars": rchars, "answer_chars": achars, "ok": ok,
        "error_class": error_class, "error_detail": error_detail, "retry_after_s": retry_after_s,
        "error_code": error_code, "http_status": http_status, "finish_reason": finish, "done_seen": ok,
        "truncated": truncated,
        "truncated_in_reasoning": truncated and reasoning == tokens, "suspect_truncation": False,
        "usable": usable_reason is None, "usable_reason": usable_reason, "hidden_reasoning": hidden,
        "tpot": decode / (streamed - 1) if ok and streamed > 1 and decode > 0 else None,
        "decode_rate": streamed / decode if ok and decode > 0 else None,
        "reasoning_rate": reasoning / (reasoning * tpot) if ok and reasoning and not hidden else None,
        "answer_rate": answer / (answer * tpot) if ok and answer else None,
    })
    return rec


def _usable_reason(rng: random.Random, ok: bool, truncated: bool, answer: int) -> str | None:
    """The record's ``usable_reason`` under the generated profile's rule (:data:`_USABLE`), None when usable."""
    if not ok:
        return "error"
    if truncated:
        return "truncated"
    if answer < _MIN_ANSWER_TOKENS:
        return "min_answer_tokens"
    draw = rng.random()
    if draw < _REGEX_FAIL_SHARE:
        return "regex"
    if draw < _REGEX_FAIL_SHARE + _JSON_FAIL_SHARE:
        return "json"
    return None


def generate(out: Path, spec: GenSpec) -> dict[str, Any]:
    """Write ``run.json``, ``records.jsonl`` and ``phases.jsonl`` of a generated run into ``out``.

    Returns:
        ``{"records", "bytes", "seconds", "phases"}``: records written, size of records.jsonl (bytes),
        generation wall time (s) and the number of phase_start events.

    Raises:
        OSError: when ``out`` cannot be written.
    """
    t_begin = time.perf_counter()
    rng = random.Random(spec.seed)
    nrng = np.random.default_rng(spec.seed)  # chunk times only: the other draws do not depend on the form
    form = spec.chunk_times
    hists = _Hists(rng)
    out.mkdir(parents=True, exist_ok=True)
    events: list[dict[str, Any]] = []
    plan: list[tuple[str, int, int, float]] = [("single", 0, 1, spec.step_s / 2)]
    plan += [("step", i + 1, c, spec.step_s) for i, c in enumerate(spec.concurrency)]

    buf: list[bytes] = []
    written = 0
    sent = 0
    with open(out / "records.jsonl", "wb") as f:

        def emit(rec: dict[str, Any]) -> None:
            nonlocal written
            buf.append(orjson.dumps(rec))
            written += 1
            if len(buf) >= 20_000:
                f.write(b"\n".join(buf) + b"\n")
                buf.clear()

        # warm-up: one request, alone
        events.append({"event": "phase_start", "phase": "warmup", "step": -1, "concurrency": 1, "wall": T0,
                       "planned_duration": None})
        warm = _record(rng, hists, "warmup", "warmup", -1, 1, T0 + 0.005, True, nrng, form)
        sent += 1
        emit(warm)
        t = T0 + 0.005 + float(warm["e2e"]) + 0.03
        # heap of in-flight requests: (end wall, seq, user index, record)
        heap: list[tuple[float, int, int, dict[str, Any]]] = []
        seq = 0
        users = 0
        load_end: float | None = None
        for i, (phase, step, conc, planned) in enumerate(plan):
            if sent >= spec.records and not any(h[3]["step"] == step for h in heap):
                break  # N requests sent before this step began: the run ends here
            s = t
            last = i == len(plan) - 1
            events.append({"event": "phase_start", "phase": phase, "step": step, "concurrency": conc, "wall": s,
                           "planned_duration": planned})
            while users < conc and sent < spec.records:  # the step's new users start at its start
                users += 1
                start = s + 0.0005 * users
                rec = _record(rng, hists, f"local:{users}", phase, step, conc, start, True, nrng, form)
                heapq.heappush(heap, (start + float(rec["e2e"]), seq, users, rec))
                seq, sent = seq + 1, sent + 1
            end = math.inf if last else s + planned
            while heap and heap[0][0] < end:
                done, _, u, rec = heapq.heappop(heap)
                emit(rec)
                if sent >= spec.records:
                    continue  # draining
                nxt = done + _THINK_S
                ph = plan[i + 1] if nxt >= end else plan[i]  # sent after the step end: the next step's request
                nrec = _record(rng, hists, f"local:{u}", ph[0], ph[1], ph[2], nxt, False, nrng, form)
                heapq.heappush(heap, (nxt + float(nrec["e2e"]), seq, u, nrec))
                seq, sent = seq + 1, sent + 1
                if sent >= spec.records:
                    load_end = nxt + 1e-4
            t = end
        while heap:  # in-flight requests drain after the load ended
            emit(heapq.heappop(heap)[3])
        if buf:
            f.write(b"\n".join(buf) + b"\n")
    if load_end is None:
        load_end = t
    run_end = load_end + 0.1
    events.append({"event": "load_end", "wall": load_end})
    events.append({"event": "run_end", "wall": run_end})
    (out / "phases.jsonl").write_bytes(b"".join(orjson.dumps(e) + b"\n" for e in events))
    meta = {
        "run_id": out.name, "status": "finished", "start_wall": T0, "end_wall": run_end, "hostname": "generated",
        "argv": ["benchmarks/records_gen.py"], "records": written,
        "profile": {"name": "generated", "report": {"hours_to_n": [100000, 200000, 500000, 900000]},
                    "usable": _USABLE, "cost": _COST},
        "target": {"base_url": "http://127.0.0.1:0/v1", "model": "sim-reasoner", "simulator": True},
        "simulator": {"preset": "demo", "flavour": "vllm", "time_scale": 1.0, "seed": spec.seed},
        "generator": {"records": spec.records, "concurrency": spec.concurrency, "step_s": spec.step_s,
                      "seed": spec.seed, "record_schema": RECORD_SCHEMA_VERSION, "chunk_times": form},
    }
    (out / "run.json").write_text(json.dumps(meta, indent=2) + "\n")
    return {"records": written, "bytes": (out / "records.jsonl").stat().st_size,
            "seconds": time.perf_counter() - t_begin, "phases": len(events) - 2}


def main(argv: list[str] | None = None) -> int:
    """Command line: generate one run directory and print what was written."""
    p = argparse.ArgumentParser(description="Generate a realistic llmload run directory of N records.")
    p.add_argument("--records", type=int, default=1_000_000, help="number of records (default 1000000)")
    p.add_argument("--out", type=Path, required=True, help="run directory to write (created)")
    p.add_argument("--concurrency", default="8,16,32,64", help="load steps' concurrencies (default 8,16,32,64)")
    p.add_argument("--step-s", type=float, default=None, help="planned seconds per load step (default: from N)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--chunk-times", choices=CHUNK_FORMS, default="none",
                   help="write per-chunk arrival times as the demo profile does: float (schema 2) or compact "
                        "(schema 3, what the harness writes now); default none")
    args = p.parse_args(argv)
    try:
        spec = GenSpec(args.records, [int(c) for c in args.concurrency.split(",") if c.strip()], args.step_s,
                       args.seed, args.chunk_times)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    got = generate(args.out, spec)
    print(f"{args.out}: {got['records']} records, {got['bytes'] / 1e6:.0f} MB, {got['phases']} phases, "
          f"step {spec.step_s:.0f} s, generated in {got['seconds']:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
