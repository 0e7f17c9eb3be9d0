"""Issue 11's workloads headless against vLLM's own OpenAI server serving the scripted model: an open-loop rate
sweep, a prompt data-set profile and the thinking on/off axis.

The scripted model streams exactly K reasoning tokens, ``</think>``, M answer tokens and EOS (K + M + 2
completion tokens) for any prompt, and with ``chat_template_kwargs.enable_thinking: false`` (its chat template then
closes the think block in the prompt, as Qwen3's does) M answer tokens and EOS, no reasoning. So counts are exact
and checked against the server's own: every run's records are the requests vLLM served (``/metrics``
``vllm:request_success_total``), with its prompt and generation token totals. The report's figures are recomputed
here from ``records.jsonl``. Each run is a few seconds per step (~0.7 s per full request at C = 1 on 2 cores).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from harness.rate import LEAD_S
from harness.report.rate import LATE_S
from tests.procs import records

ROOT = Path(__file__).resolve().parents[2]
LOCUST = [sys.executable, "-m", "locust", "-f", str(ROOT / "locustfiles" / "k26.py"), "--headless", "--no-metrics"]
CHAT = "/v1/chat/completions"
TIMEOUTS = "timeouts: {{connect: 5, first_byte: 60, first_token: 60, idle: 30, total: 120}}"  # .format-escaped
#: vLLM counters compared with the records: requests served, prompt tokens, generated tokens.
COUNTERS = ("vllm:request_success_total", "vllm:prompt_tokens_total", "vllm:generation_tokens_total")


def server_counters(base_url: str) -> dict[str, float]:
    """The :data:`COUNTERS` from vLLM's ``/metrics``, each summed over its series."""
    with urllib.request.urlopen(base_url + "/metrics", timeout=30) as resp:
        text = resp.read().decode()
    out = dict.fromkeys(COUNTERS, 0.0)
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            if s.name in out:
                out[s.name] += s.value
    return out


def run_profile(tmp_path: Path, target: Any, profile: str, base_url: str | None = None) -> tuple[Path, float]:
    """Write ``profile`` (``{base_url}``, ``{model}`` and ``{out}`` filled in), run it headless against vLLM (or
    ``base_url``, e.g. a recording proxy) with the load generator off the server's CPUs; return (run dir, wall s).

    Also checks the run's records are exactly what vLLM served (:data:`COUNTERS` moved by the records' counts)."""
    out = tmp_path / "runs"
    prof = tmp_path / "p.yaml"
    prof.write_text(profile.format(base_url=base_url or target.base_url, model=target.model, out=out))
    before = server_counters(target.base_url)
    t0 = time.monotonic()
    proc = subprocess.run(
        [*LOCUST, "--profile", str(prof)],
        cwd=tmp_path, env={**os.environ, "PYTHONUNBUFFERED": "1"}, capture_output=True, text=True, timeout=240,
        preexec_fn=target.pin_client(),
    )
    wall = time.monotonic() - t0
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (run,) = [p for p in out.iterdir() if p.is_dir()]
    after = server_counters(target.base_url)
    recs = records(run)
    served = {k: after[k] - before[k] for k in COUNTERS}
    assert served["vllm:request_success_total"] == len(recs), served
    assert served["vllm:prompt_tokens_total"] == sum(r["prompt_tokens"] for r in recs), served
    assert served["vllm:generation_tokens_total"] == sum(r["output_tokens"] for r in recs), served
    return run, wall


def report(run: Path) -> dict[str, Any]:
    """``report.json`` of the run."""
    out: dict[str, Any] = json.loads((run / "report.json").read_text())
    return out


def pctl(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0..100), linear between closest ranks (the report's definition)."""
    xs = sorted(values)
    pos = q / 100 * (len(xs) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def mean(values: Sequence[float]) -> float:
    """Arithmetic mean of a non-empty sequence."""
    return sum(values) / len(values)


def end_of(r: dict[str, Any]) -> float:
    """A successful record's end (epoch s): sent + E2E."""
    return float(r["start_wall"] + r["e2e"])


def md_section(run: Path, section: str) -> str:
    """The body of report.md's ``## section`` (up to the next ``## ``)."""
    text = (run / "report.md").read_text()
    assert f"\n## {section}\n" in text, section
    return text.split(f"\n## {section}\n", 1)[1].split("\n## ", 1)[0]


def md_row(run: Path, section: str, first_cells: str) -> str:
    """The one line of report.md's ``## section`` starting with ``| first_cells |``."""
    lines = [x for x in md_section(run, section).splitlines() if x.startswith(f"| {first_cells} |")]
    assert len(lines) == 1, (section, first_cells, lines)
    return lines[0]


def sig3(x: float) -> str:
    """As the rate table prints a figure."""
    return f"{x:.3g}"


#: max_tokens of the rate sweep's requests (below K: each reply is cut in its reasoning).
RATE_CAP = 24
#: The rate sweep's rate.max_concurrency (users held per step).
CAP = 8

RATE_PROFILE = """
name: vllm-rate
target: {{base_url: "{base_url}", model: {model}}}
request: {{continuous_usage_stats: true}}
prompts:
  - {{id: hello, text: "Say hello", max_tokens: %(cap)d}}
warmup: {{max_tokens: 16, timeout: 120}}
single_stream: {{duration: 0}}
rate: {{arrival: constant, rates: [1, 2], max_concurrency: %(max_c)d, seed: 5}}
steps: {{duration: 8, drain_timeout: 60}}
""" + TIMEOUTS + """
output: {{dir: "{out}"}}
"""


def test_rate_sweep_against_vllm(vllm_server: Any, tmp_path: Path) -> None:
    """Two constant rates far below capacity: every arrival of the schedule is sent once, on time, and the
    report's rate figures are the records'.

    Short requests (RATE_CAP tokens, cut in the reasoning: E2E p50 0.3-0.4 s on a loaded machine) keep the rates
    below capacity even when other work shares the 2 cores: with full 290-token replies a contended server took
    2.5-7 s per request, 8 were in flight at 2 req/s and the harness rightly reported the target rate not achieved."""
    run, wall = run_profile(tmp_path, vllm_server, RATE_PROFILE % {"cap": RATE_CAP, "max_c": CAP})
    recs = records(run)
    steps = [r for r in recs if r["phase"] == "step"]
    assert all(r["phase"] == "warmup" for r in recs if r["phase"] != "step")
    for r in steps:
        assert r["scheduled_wall"] is not None, r
        assert r["ok"] and r["finish_reason"] == "length" and r["output_tokens"] == RATE_CAP, r
        # schedule-relative latency >= service latency: never sent before its scheduled time
        assert r["start_wall"] >= r["scheduled_wall"], (r["start_wall"], r["scheduled_wall"])
    events = [json.loads(x) for x in (run / "phases.jsonl").read_text().splitlines()]
    starts = {e["step"]: e for e in events if e["event"] == "phase_start" and e.get("rate") is not None}
    rep = report(run)
    rows = [s for s in rep["steps"] if s["phase"] == "step"]
    assert [row["rate"]["target_rate"] for row in rows] == [1, 2]
    measured: dict[str, Any] = {"wall_s": round(wall, 1)}
    for row in rows:
        f, rate, step = row["rate"], float(row["rate"]["target_rate"]), int(row["step"])
        a, e = float(row["start_wall"]) + LEAD_S, float(row["end_wall"])
        assert starts[step]["wall"] == pytest.approx(row["start_wall"], abs=1e-6)
        span = e - a
        mine = [r for r in steps if r["step"] == step]
        # the constant schedule: arrival j at a + j / rate, each due one sent exactly once
        js = sorted(round((r["scheduled_wall"] - a) * rate) for r in mine)
        assert all(abs((r["scheduled_wall"] - a) * rate - round((r["scheduled_wall"] - a) * rate)) < 1e-4
                   for r in mine)
        due = sum(1 for j in range(10_000) if j / rate < span)
        sent = [r for r in mine if a <= r["start_wall"] < e]
        assert js[:due] == list(range(due)), js  # every arrival due in the window was sent, none twice
        assert f["scheduled"] == due and f["sent"] == len(sent) == due, (f["scheduled"], f["sent"], due)
        # achieved vs target: below capacity, within one arrival over the window (|achieved - target| < 1 / span)
        assert f["achieved_rate"] == pytest.approx(len(sent) / span, rel=1e-9)
        assert abs(f["achieved_rate"] - rate) < 1 / span, (f["achieved_rate"], rate, span)
        assert f["scheduled_rate"] == pytest.approx(due / span, rel=1e-9) and f["shortfall"] == 0
        delays = [max(r["start_wall"] - r["scheduled_wall"], 0.0) for r in mine]
        ok = [r for r in mine if r["ok"]]
        ok_delays = [max(r["start_wall"] - r["scheduled_wall"], 0.0) for r in ok]
        se2e = [d + r["e2e"] for d, r in zip(ok_delays, ok, strict=True)]
        sttft = [d + r["ttft"] for d, r in zip(ok_delays, ok, strict=True)]
        expect = {
            "requests": len(mine),
            "late": sum(1 for d in delays if d > LATE_S),
            "dispatch_delay_p50_s": pctl(delays, 50), "dispatch_delay_p99_s": pctl(delays, 99),
            "dispatch_delay_max_s": max(delays),
            "ttft_p50_s": pctl([r["ttft"] for r in ok], 50), "e2e_p50_s": pctl([r["e2e"] for r in ok], 50),
            "e2e_p99_s": pctl([r["e2e"] for r in ok], 99),
            "sched_ttft_p50_s": pctl(sttft, 50), "sched_ttft_p99_s": pctl(sttft, 99),
            "sched_e2e_p50_s": pctl(se2e, 50), "sched_e2e_p99_s": pctl(se2e, 99), "sched_e2e_mean_s": mean(se2e),
        }
        for key, value in expect.items():
            assert f[key] == pytest.approx(value, rel=1e-9, abs=1e-12), (key, f[key], value)
        assert f["sched_e2e_p50_s"] >= f["e2e_p50_s"] and f["sched_ttft_p50_s"] >= f["ttft_p50_s"]
        # on time: a client on its own CPU dispatches within a few ms (late = over LATE_S) ...
        assert f["dispatch_delay_p50_s"] < LATE_S, f["dispatch_delay_p50_s"]
        # ... and below capacity no arrival waited for the cap: at each scheduled time fewer than CAP were in flight,
        # so a request that was late anyway (a busy client CPU) is the client's, as the report says
        in_flight = [sum(1 for q in recs if q["phase"] != "warmup" and q["start_wall"] <= r["scheduled_wall"]
                         < end_of(q)) for r in mine]
        assert max(in_flight) < CAP, in_flight
        assert f["late_free_user"] == f["late"] == expect["late"], (f["late_free_user"], f["late"])
        # the Markdown table shows the same figures
        line = md_row(run, "Open-loop rates", f"{rate:g} req/s")
        cells = [c.strip() for c in line.strip("|").split("|")]
        assert cells[1:4] == [sig3(rate), sig3(due / span), sig3(len(sent) / span)], cells
        measured[f"{rate:g}"] = {key: f[key] for key in ("achieved_rate", "dispatch_delay_p50_s",
                                                          "dispatch_delay_p99_s", "late", "e2e_p50_s",
                                                          "sched_e2e_p50_s")}
        measured[f"{rate:g}"]["max_in_flight"] = max(in_flight)
    assert not [n for n in rep["notes"] if "NOT ACHIEVED" in n]
    print(md_section(run, "Open-loop rates"))
    print(json.dumps(measured))


DATASET_PROFILE = """
name: vllm-dataset
target: {{base_url: "{base_url}", model: {model}}}
request: {{continuous_usage_stats: true, max_tokens: 1024}}
dataset: {{path: "%(path)s", format: jsonl, sampling: uniform, replacement: false, seed: 0, class: seeds}}
warmup: {{prompt: "Say just OK", max_tokens: 16, timeout: 120}}
single_stream: {{duration: 0}}
steps: {{concurrency: [2], duration: 10, drain_timeout: 60}}
report: {{hours_to_n: [1000]}}
cost: {{hour_usd: 2.0}}
""" + TIMEOUTS + """
output: {{dir: "{out}"}}
"""


def tokenize_count(base_url: str, model: str, messages: list[dict[str, str]]) -> int:
    """Prompt tokens vLLM counts for ``messages`` with the chat template and generation prompt (``POST /tokenize``)."""
    body = json.dumps({"model": model, "messages": messages, "add_generation_prompt": True}).encode()
    req = urllib.request.Request(base_url + "/tokenize", data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as resp:
        return int(json.loads(resp.read())["count"])


def test_dataset_profile_against_vllm(vllm_server: Any, recording_proxy: Any, tmp_path: Path) -> None:
    """A 4-row JSONL file with per-row max_tokens (above K + M + 2, between K and it, below K), drawn without
    replacement: the prompts sent are the file's rows with their own caps, each cap honoured by vLLM and read
    right by the harness, prompt tokens as vLLM counts them, and the hours-to-N row in the report."""
    k, m = vllm_server.reasoning, vllm_server.answer
    full = k + m + 2
    rows = {  # line number -> row (line 3 is blank: line numbers are the file's)
        1: {"messages": [{"role": "user", "content": "Say hello"}], "max_tokens": 1024},
        2: {"messages": [{"role": "system", "content": "You are terse."},
                         {"role": "user", "content": "Explain the scripted model"}], "max_tokens": full + 10},
        4: {"messages": [{"role": "user", "content": "Count to three"}], "max_tokens": k // 2},
        5: {"messages": [{"role": "user", "content": "Write a longer answer about open-loop arrival processes"}],
            "max_tokens": k + 20},
    }
    path = tmp_path / "seeds.jsonl"
    path.write_text("".join((json.dumps(rows[i]) if i in rows else "") + "\n" for i in range(1, 6)))
    run, wall = run_profile(tmp_path, vllm_server, DATASET_PROFILE % {"path": path}, recording_proxy.base_url)
    recs = records(run)
    steps = [r for r in recs if r["phase"] != "warmup"]
    assert len(steps) >= len(rows)
    ids = {f"seeds:{i}": i for i in rows}
    prompt_tokens = {i: tokenize_count(vllm_server.base_url, vllm_server.model, row["messages"])
                     for i, row in rows.items()}
    for r in steps:
        row = rows[ids[r["prompt_id"]]]
        cap = row["max_tokens"]
        assert r["prompt_class"] == "seeds" and r["max_tokens"] == cap, r
        assert r["ok"] and r["output_tokens"] == min(cap, full) and r["token_source"] == "usage", r
        assert r["prompt_tokens"] == prompt_tokens[ids[r["prompt_id"]]], (r["prompt_id"], r["prompt_tokens"])
        if cap < k:  # truncated in reasoning: no answer at all
            assert r["finish_reason"] == "length" and r["truncated"] and r["truncated_in_reasoning"], r
            assert r["answer_chunks"] == 0 and r["ttfat"] is None and not r["usable"], r
        elif cap < full:  # truncated in the answer
            assert r["finish_reason"] == "length" and r["truncated"] and not r["truncated_in_reasoning"], r
            assert r["answer_chunks"] >= 1 and not r["usable"], r
        else:
            assert r["finish_reason"] == "stop" and not r["truncated"] and r["usable"], r
    # the bodies sent: exactly the file's rows (messages and their own max_tokens), as often as the records say
    sent: Counter[str] = Counter()
    warm = 0
    for body in recording_proxy.bodies(CHAT):
        match = [i for i, row in rows.items() if body["messages"] == row["messages"]]
        if not match:
            assert body["messages"] == [{"role": "user", "content": "Say just OK"}], body
            warm += 1
            continue
        (i,) = match
        assert body["max_tokens"] == rows[i]["max_tokens"], body
        sent[f"seeds:{i}"] += 1
    assert sent == Counter(r["prompt_id"] for r in steps)
    assert warm == sum(1 for r in recs if r["phase"] == "warmup")
    # without replacement: every row once per pass (the order is per process, shared by its users)
    assert max(sent.values()) - min(sent.values()) <= 1 and set(sent) == set(ids), sent
    rep = report(run)
    (row,) = [s for s in rep["steps"] if s["phase"] == "step"]
    (h,) = row["hours"]
    assert h["n"] == 1000 and h["hours"] is not None and h["hours"] > 0, h
    # hours to N = N / (usable completions ending in the window / window) / 3600
    w0, w1 = row["window_start_wall"], row["window_end_wall"]
    usable = sum(1 for r in steps if r["ok"] and r["usable"] and w0 < end_of(r) < w1)
    assert h["hours"] == pytest.approx(1000 / (usable / (w1 - w0)) / 3600, rel=1e-9)
    assert "N=1,000" in (run / "report.md").read_text()
    src = json.loads((run / "run.json").read_text())["prompt_source"]
    print(md_section(run, "Hours to N usable samples"))
    print(json.dumps({"wall_s": round(wall, 1), "sent": dict(sent), "prompt_tokens": prompt_tokens,
                      "hours_n1000": h["hours"], "usable_share": row["usable_share"], "prompt_source": src}))


THINKING_PROFILE = """
name: vllm-thinking
target: {{base_url: "{base_url}", model: {model}}}
request: {{continuous_usage_stats: true}}
prompts:
  - {{id: hello, text: "Say hello", max_tokens: 1024}}
axes: {{thinking: [on, off]}}
warmup: {{max_tokens: 16, timeout: 120}}
single_stream: {{duration: 0}}
steps: {{concurrency: [2], duration: 10, drain_timeout: 60}}
report: {{hours_to_n: [1000]}}
""" + TIMEOUTS + """
output: {{dir: "{out}"}}
"""


def test_thinking_axis_against_vllm(vllm_server: Any, recording_proxy: Any, tmp_path: Path) -> None:
    """Thinking on/off x one step: the bodies carry ``chat_template_kwargs.enable_thinking``, vLLM applies it (one
    more prompt token, ``</think>``, and no reasoning with thinking off), each record has its setting, and the
    per-setting table is the records'."""
    k, m = vllm_server.reasoning, vllm_server.answer
    run, wall = run_profile(tmp_path, vllm_server, THINKING_PROFILE, recording_proxy.base_url)
    recs = records(run)
    steps = [r for r in recs if r["phase"] == "step"]
    by_setting = {s: [r for r in steps if r["setting"] == s] for s in ("thinking=on", "thinking=off")}
    assert len(steps) == sum(len(v) for v in by_setting.values()) and all(by_setting.values())
    assert {r["step"] for r in by_setting["thinking=on"]} == {1}
    assert {r["step"] for r in by_setting["thinking=off"]} == {2}
    for r in by_setting["thinking=on"]:
        assert r["ok"] and r["finish_reason"] == "stop" and r["output_tokens"] == k + m + 2, r
        assert r["reasoning_chunks"] >= 1 and r["answer_chunks"] >= 1, r
    for r in by_setting["thinking=off"]:
        assert r["ok"] and r["finish_reason"] == "stop" and not r["truncated"], r
        assert r["output_tokens"] == m + 1 and r["reasoning_tokens"] == 0 and r["reasoning_chunks"] == 0, r
        assert r["answer_chunks"] >= 1 and r["usable"], r
    # vLLM applied enable_thinking=false: its template closed the think block in the prompt (one token more)
    (p_on,) = {r["prompt_tokens"] for r in by_setting["thinking=on"]}
    (p_off,) = {r["prompt_tokens"] for r in by_setting["thinking=off"]}
    assert p_off == p_on + 1, (p_on, p_off)
    # the bodies: the setting's chat_template_kwargs, as often as the records say
    flags: Counter[object] = Counter()
    for body in recording_proxy.bodies(CHAT):
        if body["max_tokens"] == 16:  # the warm-up (no setting)
            continue
        ctk = body["chat_template_kwargs"]
        assert ctk["enable_thinking"] is ctk["thinking"], body
        flags[ctk["enable_thinking"]] += 1
    assert flags == {True: len(by_setting["thinking=on"]), False: len(by_setting["thinking=off"])}, flags
    rep = report(run)
    settings = {row["setting"]: row for row in rep["settings"]}
    assert list(settings) == ["thinking=on", "thinking=off"]
    steprows = {row["step"]: row for row in rep["steps"] if row["phase"] == "step"}
    measured: dict[str, Any] = {"wall_s": round(wall, 1)}
    for name, srow in settings.items():
        row = steprows[srow["step"]]
        w0, w1 = row["window_start_wall"], row["window_end_wall"]
        sample = ([r for r in recs if r["phase"] != "warmup" and r["ok"] and w0 < end_of(r) < w1] if row["steady"]
                  else [r for r in steps if r["step"] == srow["step"] and r["ok"]])
        assert sample and all(r["setting"] == name for r in sample), name
        expect = {
            "completed": len(sample),
            "mean_reasoning_tokens": mean([r["reasoning_tokens"] or 0 for r in sample]),
            "mean_answer_tokens": mean([r["answer_tokens"] or 0 for r in sample]),
            "mean_output_tokens": mean([r["output_tokens"] for r in sample]),
            "e2e_p50_s": pctl([r["e2e"] for r in sample], 50),
            "ttft_p50_s": pctl([r["ttft"] for r in sample], 50),
            "usable_share": sum(1 for r in sample if r["usable"]) / len(sample),
            "truncated_pct": 0.0,
        }
        for key, value in expect.items():
            assert srow[key] == pytest.approx(value, rel=1e-9), (name, key, srow[key], value)
        if name == "thinking=off":
            assert srow["mean_reasoning_tokens"] == 0 and srow["mean_output_tokens"] == m + 1
        else:
            assert k <= srow["mean_reasoning_tokens"] <= k + 1
        assert srow["n"] == 1000 and srow["hours"] is not None and srow["hours"] > 0
        # the Markdown row: C with the flags the JSON row implies (a 6 s step of a CPU-run model can be low
        # confidence: ‡), then the completed count
        flags = ("" if srow["steady"] else " †") + (" ‡" if srow.get("low_confidence") else "") + (
            " STARVED" if srow.get("client_starved") else "")
        cells = [c.strip() for c in md_row(run, "Settings (sweep axes)", name).strip("|").split("|")]
        assert cells[1:3] == [f"2{flags}", str(len(sample))], (cells, srow)
        measured[name] = {key: srow[key] for key in ("completed", "e2e_p50_s", "mean_reasoning_tokens",
                                                     "mean_output_tokens", "output_tps", "hours")}
    print(md_section(run, "Settings (sweep axes)"))
    print(json.dumps(measured))
