"""Yield in the report: the per-prompt diagnosis and its notes, the low-confidence hint, the split by finish reason,
hidden reasoning and cost, on hand-computed synthetic runs."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from harness.report import build_report, fmt, render_markdown
from harness.report.catalogue import Flag
from harness.report.diagnosis import low_confidence_fix
from tests.report.rundir import phase, rec, run_end, write_run

PROFILE = {
    "name": "synthetic",
    "request": {"max_tokens": 4096},
    "prompts": [{"id": "quick", "text": "q", "max_tokens": None}, {"id": "guide", "text": "g", "max_tokens": 512}],
}


def _guide(user: str, step: int, start: float, e2e: float, **kw: Any) -> dict[str, Any]:
    """A 'guide' request truncated in reasoning: 512 reasoning tokens of 512, no answer chunk."""
    return rec(user, step, start, e2e, tokens=512, truncated=True, in_reasoning=True, prompt_id="guide",
               max_tokens=512, reasoning_tokens=512, answer_tokens=0, answer_chunks=0, reasoning_chunks=512,
               usable_reason="truncated", **kw)


def _mixed_run(root: Path, meta: dict[str, Any] | None = None) -> Path:
    """Single stream [0, 40), C=2 [40, 100), run end 100 (seconds after T0).

    Single: u1 alternates quick (stop, 100 tokens, 10 s) and guide (length in reasoning, 512 tokens, 10 s).
    C=2: u1 quick requests of 10 s from 40, u2 guide requests of 10 s from 40.
    """
    records = []
    for i in range(4):
        if i % 2 == 0:
            records.append(rec("u1", 0, 10 * i, 10, prompt_id="quick"))
        else:
            records.append(_guide("u1", 0, 10 * i, 10))
    for i in range(6):
        records.append(rec("u1", 1, 40 + 10 * i, 10, prompt_id="quick", concurrency=2))
        records.append(_guide("u2", 1, 40 + 10 * i, 10, concurrency=2))
    phases = [phase("single", 0, 1, 0, 40), phase("step", 1, 2, 40, 60), run_end(100)]
    return write_run(root, records, phases, {"profile": PROFILE, **(meta or {})})


@pytest.fixture
def report(tmp_path: Path) -> dict[str, Any]:
    return build_report(_mixed_run(tmp_path / "run")).as_dict()


def test_prompt_table_counts_every_request_of_a_class(report: dict[str, Any]) -> None:
    guide, quick = report["prompts"]  # sorted by name
    assert (guide["prompt"], guide["requests"], guide["completed"], guide["usable"]) == ("guide", 8, 8, 0)
    assert guide["usable_pct"] == 0.0 and guide["usable_reasons"] == {"truncated": 8}
    assert guide["truncated_pct"] == 100.0 and guide["truncated_in_reasoning_pct"] == 100.0
    assert (guide["max_tokens"], guide["mean_reasoning_tokens"], guide["mean_answer_tokens"]) == (512, 512.0, 0.0)
    assert guide["min_reasoning_tokens_truncated"] == 512 and guide["ttfat_p50_s"] is None
    assert (quick["requests"], quick["usable_pct"], quick["truncated_pct"]) == (8, 100.0, 0.0)
    assert quick["max_tokens"] == 4096
    assert quick["mean_reasoning_tokens"] == 50.0 and quick["mean_answer_tokens"] == 50.0
    assert quick["ttfat_p50_s"] == pytest.approx(1.5)


def test_prompt_note_names_cause_and_key(report: dict[str, Any]) -> None:
    notes = [n for n in report["notes"] if n.startswith("prompt ")]
    assert notes == [
        "prompt guide: 100 % of successful requests truncated in reasoning at max_tokens 512; its reasoning ran ≥ 512 "
        "tokens without reaching an answer: raise prompts[1].max_tokens (id guide). A longer step does not help."
    ]
    md = render_markdown(report)
    per_prompt = md[md.index("## Per prompt\n") : md.index("## Formulas\n")]
    assert "| guide | 8 | 0.0 | 100.0 | 100.0 | 512 | 512 | 0 | – | truncated ×8 |" in per_prompt
    assert "| quick | 8 | 100.0 | 0.0 | 0.0 | 4096 | 50 | 50 | 1.50 | – |" in per_prompt


def test_a_prompt_without_its_own_cap_names_the_request_default(tmp_path: Path) -> None:
    profile = {**PROFILE, "prompts": [{"id": "guide", "text": "g"}]}
    recs = [_guide("u1", 0, 10 * i, 10) for i in range(3)]
    rep = build_report(write_run(tmp_path / "r", recs, [phase("single", 0, 1, 0, 30), run_end(30)],
                                 {"profile": profile})).as_dict()
    assert any("raise request.max_tokens (or give the prompt its own prompts[].max_tokens)." in n
               for n in rep["notes"])


def test_low_confidence_hint_blames_max_tokens_not_the_duration(tmp_path: Path) -> None:
    # every request truncated in reasoning: no usable completion anywhere, whatever the step's length
    recs = [_guide("u1", 0, 5 * i, 5) for i in range(20)]
    recs += [_guide(f"u{u}", 1, 100 + 5 * i, 5, concurrency=2) for u in (1, 2) for i in range(20)]
    rep = build_report(write_run(tmp_path / "r", recs, [phase("single", 0, 1, 0, 100),
                                                        phase("step", 1, 2, 100, 100), run_end(200)],
                                 {"profile": PROFILE})).as_dict()
    single, c2 = rep["steps"]
    for r in (single, c2):
        assert r["low_confidence"] == "0 usable completions in the window (< 10)"
        assert r["low_confidence_fix"].startswith("raise max_tokens: 100 % of successful requests were truncated "
                                                  "(100 % in reasoning")
        assert r["low_confidence_fix"].endswith(": a longer step does not help")
        assert "duration" not in r["low_confidence_fix"]
    md = render_markdown(rep)
    assert "‡ single: low confidence, 0 usable completions in the window (< 10); raise max_tokens" in md
    assert "lengthen" not in md


def test_low_confidence_hint_variants() -> None:
    base = {"phase": "step", "window_s": 100.0, "e2e_p50_s": 10.0, "window_usable_completions": 3, "requests": 20,
            "completed": 20, "truncated_pct": 10.0, "usable_reasons": {}, "error_rate": 0.0}
    assert low_confidence_fix(base) == "lengthen steps.duration"
    assert low_confidence_fix({**base, "phase": "single"}) == "lengthen single_stream.duration"
    short = {**base, "window_s": 20.0, "window_usable_completions": 50}
    assert low_confidence_fix(short) == "lengthen steps.duration"
    checks = {**base, "usable_reasons": {"regex": 15, "truncated": 2}}
    assert low_confidence_fix(checks).startswith("most successful requests failed the usable checks")
    failing = {**base, "completed": 5, "error_rate": 0.75}
    assert low_confidence_fix(failing) == "most requests failed: see the errors"
    both = {**short, "window_usable_completions": 0, "truncated_pct": 90.0}
    assert low_confidence_fix(both).startswith("lengthen steps.duration; raise max_tokens: 90 %")
    # half truncated: more usable completions need a longer step or a higher cap
    half = {**base, "truncated_pct": 50.0, "truncated_in_reasoning_pct": 50.0}
    assert low_confidence_fix(half) == ("raise max_tokens: 50 % of successful requests were truncated (50 % in "
                                        "reasoning; see the per-prompt notes), or lengthen steps.duration")


def test_failed_usable_checks_are_named(tmp_path: Path) -> None:
    recs = [rec("u1", 0, 10 * i, 10, prompt_id="quick", usable=i % 2 == 0,
                usable_reason=None if i % 2 == 0 else "json") for i in range(6)]
    rep = build_report(write_run(tmp_path / "r", recs, [phase("single", 0, 1, 0, 60), run_end(60)],
                                 {"profile": PROFILE})).as_dict()
    (quick,) = rep["prompts"]
    assert quick["usable_reasons"] == {"json": 3} and quick["usable_pct"] == 50.0  # the prompt: every request
    # the step: its sample, the requests that ended in the steady window (10, 60): i = 1..4, two of them json
    assert rep["steps"][0]["usable_reasons"] == {"json": 2}
    assert any(n.startswith("prompt quick: 50 % of successful requests failed the usable check usable.answer_json")
               for n in rep["notes"])


def test_split_by_finish_reason(report: dict[str, Any]) -> None:
    c2 = report["steps"][1]
    split = c2["by_finish_reason"]
    assert list(split) == ["stop", "length"]
    stop, length = split["stop"], split["length"]
    n = c2["latency_n"]
    assert stop["requests"] + length["requests"] == n and stop["requests"] == length["requests"] > 0
    assert (stop["mean_output_tokens"], length["mean_output_tokens"]) == (100.0, 512.0)
    assert (stop["mean_reasoning_tokens"], length["mean_reasoning_tokens"]) == (50.0, 512.0)
    assert (stop["ttfat_p50_s"], length["ttfat_p50_s"]) == (pytest.approx(1.5), None)
    assert stop["e2e_p50_s"] == pytest.approx(10.0) and stop["ttft_p50_s"] == pytest.approx(1.0)
    md = render_markdown(report)
    section = md[md.index("## By finish reason\n") : md.index("## Per prompt\n")]
    assert f"| C=2 ‡ | 2 | length | {length['requests']} | 1.00 | – | 10.0 | 512 | 512 | 0 |" in section
    assert f"| C=2 ‡ | 2 | stop | {stop['requests']} | 1.00 | 1.50 | 10.0 | 100 | 50 | 50 |" in section


def test_suspect_truncations_are_their_own_finish_reason_row(tmp_path: Path) -> None:
    """A request the server ended with 'stop' at max_tokens (suspect truncation) is in neither the 'stop' row
    nor hidden: it has its own 'suspect_truncation' row in report.json and report.md (HTML renders the same
    Markdown), and the caption says so."""
    run = _mixed_run(tmp_path / "run")
    recs = (run / "records.jsonl").read_text().splitlines()
    import json

    out = []
    for line in recs:
        r = json.loads(line)
        # the C=2 guide requests: the server said "stop" although they hit max_tokens
        if r["step"] == 1 and r["prompt_id"] == "guide":
            r.update(finish_reason="stop", suspect_truncation=True)
        out.append(json.dumps(r))
    (run / "records.jsonl").write_text("\n".join(out) + "\n")
    report = build_report(run).as_dict()
    c2 = report["steps"][1]
    split = c2["by_finish_reason"]
    assert list(split) == ["stop", "length", "suspect_truncation"]
    stop, length, suspect = split["stop"], split["length"], split["suspect_truncation"]
    assert length["requests"] == 0 and suspect["requests"] == stop["requests"] > 0
    assert stop["requests"] + suspect["requests"] == c2["latency_n"]
    assert (stop["mean_output_tokens"], suspect["mean_output_tokens"]) == (100.0, 512.0)
    assert c2["suspect_truncations"] == suspect["requests"] and c2["usable"] == stop["requests"]
    md = render_markdown(report)
    section = md[md.index("## By finish reason\n") : md.index("## Per prompt\n")]
    assert f"| C=2 ‡ | 2 | suspect_truncation | {suspect['requests']} | 1.00 | – | 10.0 | 512 | 512 | 0 |" in section
    assert f"| C=2 ‡ | 2 | stop | {stop['requests']} | 1.00 | 1.50 | 10.0 | 100 | 50 | 50 |" in section
    assert "`suspect_truncation` (the server said `stop`" in section
    assert "own group 'suspect_truncation'" in report["definitions"]["by_finish_reason"]


def test_hidden_reasoning_is_counted_and_noted(tmp_path: Path) -> None:
    # 3 requests: 400 hidden reasoning tokens then 100 answer tokens streamed over e2e - ttft = 10 s
    recs = [rec("u1", 0, 12 * i, 12, ttft=2, tokens=500, prompt_id="quick", reasoning_tokens=400, answer_tokens=100,
                reasoning_chunks=0, answer_chunks=100, hidden_reasoning=True) for i in range(3)]
    recs.append(rec("u1", 0, 36, 12, ttft=2, tokens=500, prompt_id="quick"))  # reasoning streamed
    rep = build_report(write_run(tmp_path / "r", recs, [phase("single", 0, 1, 0, 60), run_end(60)],
                                 {"profile": PROFILE})).as_dict()
    row = rep["steps"][0]
    # the step's sample = the requests that ended in the window (12, 60): 2 hidden + 1 streamed, 10 s of decode each
    assert (row["hidden_reasoning"], row["hidden_reasoning_share"]) == (2, 2 / 3)
    assert rep["totals"]["hidden_reasoning"] == 3 and rep["prompts"][0]["hidden_reasoning"] == 3
    assert row["latency_n"] == 3
    assert row["per_stream_tps"] == pytest.approx((2 * 100 + 500) / (3 * 10))  # streamed tokens only
    assert [n for n in rep["notes"] if "HIDDEN" in n] == [
        f"{Flag.HIDDEN_REASONING.glyph} HIDDEN REASONING (usage counted reasoning tokens, no reasoning text was "
        "streamed) in successful requests at single 2 of 3 (67 %): TTFT and TTFAT include the whole reasoning, TPOT "
        "and per-stream tok/s count the streamed answer tokens only, and the reasoning phase's own rate is unknown."
    ]


def _hours_row(md: str) -> dict[str, str]:
    lines = md[md.index("## Hours to N usable samples\n") :].splitlines()
    table = [ln for ln in lines if ln.startswith("| ")]
    header = [c.strip() for c in table[0][2:-2].split(" | ")]
    return dict(zip(header, [c.strip() for c in table[2][2:-2].split(" | ")], strict=True))


def test_cost_per_million_tokens_per_usable_and_to_n(tmp_path: Path) -> None:
    meta = {"profile": {**PROFILE, "cost": {"gpu_hour_usd": 2.5, "gpus": 8}}}
    rep = build_report(_mixed_run(tmp_path / "run", meta), n=[1000, 100_000]).as_dict()
    assert rep["cost_usd_per_hour"] == 20.0
    c2 = rep["steps"][1]
    cost = c2["cost"]
    assert cost["usd_per_hour"] == 20.0
    assert cost["usd_per_1m_output_tokens"] == pytest.approx(20.0 / (c2["output_tps"] * 3600) * 1e6)
    h1k = c2["hours"][0]
    assert h1k["n"] == 1000
    assert cost["usd_per_1k_usable"] == pytest.approx(h1k["hours"] * 20.0)
    for got, hours in ((cost["usd_per_1k_usable_low"], h1k["hours_low"]),
                       (cost["usd_per_1k_usable_high"], h1k["hours_high"])):
        assert got == (None if hours is None else pytest.approx(hours * 20.0))
    for h in c2["hours"]:
        assert h["usd"] == pytest.approx(h["hours"] * 20.0)
        for side in ("low", "high"):  # the interval maps through ($ = hours × $/h); None where hours have none
            hv = h[f"hours_{side}"]
            assert h[f"usd_{side}"] == (None if hv is None else pytest.approx(hv * 20.0))
        assert h["token_usd"] == pytest.approx(h["token_hours"] * 20.0)
    # k usable completions in the window: hours to 1000 = 1000 / (k / W * 3600)
    k, w = c2["window_usable_completions"], c2["window_s"]
    assert cost["usd_per_1k_usable"] == pytest.approx(1000 / (k / w * 3600) * 20.0)
    row = _hours_row(render_markdown(rep))
    assert row["$ / 1M out tok"] == fmt.usd(cost["usd_per_1m_output_tokens"])  # US$: 3 significant digits
    assert row["$ / 1k usable"].startswith(f"{fmt.usd(cost['usd_per_1k_usable'])} (")
    # the hours cell carries the US$ with the same interval (or none when the step has no batch-means interval)
    assert re.search(r" · \$[\d,.]+ (\(\$[\d,.]+–(∞|\$[\d,.]+)\)|\(no interval\))$", row["N=100,000"])
    assert "cost" in rep["definitions"]


def test_cost_flat_price_compressed_time_and_bad_price(tmp_path: Path) -> None:
    meta = {"profile": {**PROFILE, "cost": {"hour_usd": 10.0}}, "simulator": {"preset": "demo", "time_scale": 0.5}}
    rep = build_report(_mixed_run(tmp_path / "fast", meta), n=[1000]).as_dict()
    c2 = rep["steps"][1]
    real = c2["real_time"]
    assert real["cost"]["usd_per_1k_usable"] == pytest.approx(real["hours"][0]["hours"] * 10.0)
    # real durations are compressed ones ÷ time_scale: a real hour costs the same, so real cost = wall cost ÷ 0.5
    assert real["cost"]["usd_per_1k_usable"] == pytest.approx(c2["cost"]["usd_per_1k_usable"] / 0.5)
    assert real["hours"][0]["usd"] == pytest.approx(c2["hours"][0]["usd"] / 0.5)
    assert real["cost"]["usd_per_1m_output_tokens"] == pytest.approx(c2["cost"]["usd_per_1m_output_tokens"] / 0.5)
    plain = build_report(_mixed_run(tmp_path / "plain")).as_dict()
    assert plain["cost_usd_per_hour"] is None and plain["steps"][1]["cost"] is None
    assert "usd" not in plain["steps"][1]["hours"][0]
    assert "$ / 1M out tok" not in render_markdown(plain)
    bad = build_report(_mixed_run(tmp_path / "bad", {"profile": {**PROFILE, "cost": {"gpus": 8}}})).as_dict()
    assert bad["cost_usd_per_hour"] is None
    assert any(n.startswith("run.json: profile.cost is not usable (gpus needs gpu_hour_usd") for n in bad["notes"])


def test_records_without_usable_reason_are_still_explained(tmp_path: Path) -> None:
    old = rec("u1", 0, 0, 10, truncated=True)  # an older record: usable false, no usable_reason
    failed = rec("u1", 0, 10, 10, ok=False)
    rep = build_report(write_run(tmp_path / "r", [old, failed], [phase("single", 0, 1, 0, 20), run_end(20)])).as_dict()
    assert rep["prompts"][0]["usable_reasons"] == {"error": 1, "truncated": 1}
