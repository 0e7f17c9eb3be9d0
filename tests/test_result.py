"""harness.result: one record type both ways (to_record -> from_record), the schema defined once, schema 1 read."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from dataclasses import MISSING, fields
from pathlib import Path

import orjson
import pytest

from harness.histogram import LogHistogram
from harness.result import (
    READABLE_SCHEMAS,
    RECORD_FIELDS,
    RECORD_SCHEMA,
    RequestIdentity,
    RequestResult,
    decode_chunks,
    encode_chunks,
    main,
    records_markdown,
)

ROOT = Path(__file__).resolve().parents[1]
SCHEMA1_LINE = ROOT / "tests" / "data" / "record-schema1.jsonl"  # a real line of a demo run before `schema` existed


def _every_field_set() -> RequestResult:
    """A result whose every field differs from its default (optional lists, histograms and extra included)."""
    return RequestResult(
        prompt_id="quicksort", prompt_class="code", user="w1:3", phase="single", step=2, concurrency=16,
        max_tokens=2048, setting="thinking=off", conversation="w1:3/2", turn=1,
        start_wall=1_796_133_184.75, scheduled_wall=1_796_133_184.5, connect=0.0004, time_source="kernel",
        read_lag_max=0.002,
        t_headers=0.003, ttft=0.025, ttfat=1.5, t_first_reasoning=0.025, t_last_token=6.5, e2e=6.6,
        chunks=3, reasoning_chunks=2, answer_chunks=1, sse_comments=4,
        gap_hist=LogHistogram.of([0.01, 0.02]).to_json(), itl_hist=LogHistogram.of([0.005, 0.01]).to_json(),
        chunk_times=[0.025, 0.035, 0.055], chunk_tokens=[1, 2, 2],
        output_tokens=5, token_source="usage", estimated_output_tokens=6, reasoning_tokens=3, answer_tokens=2,
        reasoning_source="chunk_usage", prompt_tokens=14, cached_tokens=12, reasoning_chars=11, answer_chars=7,
        ok=True, error_class="aborted", error_detail="detail", retry_after_s=2.5, error_code="500", http_status=200,
        finish_reason="length",
        done_seen=True, truncated=True, truncated_in_reasoning=True, suspect_truncation=True, usable=True,
        usable_reason="regex", hidden_reasoning=True,
        tpot=0.01, decode_rate=80.0, reasoning_rate=70.0, answer_rate=90.0, extra={"request_id": "q1", "n": [1]},
    )  # fmt: skip


def test_every_field_round_trips_through_json() -> None:
    res = _every_field_set()
    defaults = RequestResult("x")
    for f in fields(RequestResult):  # the fixture really sets every field, so equality checks them all
        assert getattr(res, f.name) != getattr(defaults, f.name), f.name
    rec = res.to_record()
    assert rec["schema"] == RECORD_SCHEMA == 3
    assert list(rec) == ["schema", *(f.name for f in fields(RequestResult))]  # record order = declaration order
    assert rec["chunk_times"] == [25_000, 10_000, 20_000] and rec["chunk_tokens"] == [1, 2, 2]  # µs deltas
    line = orjson.dumps(rec)
    back = RequestResult.from_record(orjson.loads(line))
    assert back.chunk_times == pytest.approx(res.chunk_times, abs=1e-9)
    back.chunk_times = res.chunk_times
    assert back == res
    assert orjson.dumps(RequestResult.from_record(orjson.loads(line)).to_record()) == line


def test_empty_optional_fields_are_left_out_and_read_back_as_defaults() -> None:
    res = RequestResult("p", user="u1", step=3)
    rec = res.to_record()
    assert not {"chunk_times", "chunk_tokens", "itl_hist", "extra"} & rec.keys()
    assert "gap_hist" in rec and rec["gap_hist"] is None  # nullable but always written
    back = RequestResult.from_record(json.loads(json.dumps(rec)))
    assert back == res and back.extra == {} and back.chunk_times is None


def test_schema_1_record_reads_with_the_right_values() -> None:
    (line,) = SCHEMA1_LINE.read_bytes().splitlines()
    raw = orjson.loads(line)
    assert "schema" not in raw
    r = RequestResult.from_record(raw)
    assert (r.prompt_id, r.prompt_class, r.user, r.phase, r.step, r.concurrency, r.max_tokens) == (
        "redis-guide", "redis-guide", "local:7", "step", 1, 8, 512)
    assert r.start_wall == 1796133184.7719069 and r.time_source == "kernel"
    assert r.read_lag_max == 0.005774259567260742 and r.t_headers == 0.003856512286461111
    assert r.ttft == r.t_first_reasoning == 0.02487759847764437 and r.ttfat is None
    assert r.e2e == r.t_last_token == 6.623747553445071
    assert (r.chunks, r.reasoning_chunks, r.answer_chunks, r.sse_comments) == (512, 512, 0, 0)
    assert r.gap_hist is not None and r.gap_hist["n"] == 511 and r.itl_hist is not None
    assert (r.output_tokens, r.token_source, r.estimated_output_tokens) == (512, "usage", 613)
    assert (r.reasoning_tokens, r.answer_tokens, r.reasoning_source, r.prompt_tokens) == (512, 0, "usage", 14)
    assert (r.ok, r.error_class, r.http_status, r.finish_reason, r.done_seen) == (True, None, 200, "length", True)
    assert (r.truncated, r.truncated_in_reasoning, r.suspect_truncation, r.usable) == (True, True, False, False)
    assert r.tpot == 0.012913639833595747 and r.answer_rate is None
    assert r.chunk_times is None and r.extra == {}
    assert r.retry_after_s is None and r.error_code is None  # fields schema 1 did not have
    assert r.usable_reason is None and r.hidden_reasoning is False  # nor these (read as their defaults)
    # written again it is the same line plus the schema version and the newer fields (null / their defaults)
    assert r.to_record() == {"schema": 3, **raw, "retry_after_s": None, "error_code": None, "usable_reason": None,
                             "hidden_reasoning": False, "setting": None, "conversation": None, "turn": None,
                             "cached_tokens": None}
    assert r.end_wall == pytest.approx(1796133184.7719069 + 6.623747553445071)


def test_reader_tolerates_missing_null_and_unknown_keys_and_refuses_newer_schemas() -> None:
    r = RequestResult.from_record({"step": None, "user": None, "ok": True, "request_id": "q7", "extra": {"a": 1}})
    assert (r.prompt_id, r.step, r.user, r.ok) == ("", 0, "", True)
    assert r.extra == {"a": 1, "request_id": "q7"}  # unknown keys are kept in extra
    a, b = RequestResult.from_record({}), RequestResult.from_record({})
    a.extra["x"] = 1
    assert b.extra == {}  # no shared default
    assert READABLE_SCHEMAS == {1, 2, 3}
    assert RequestResult.from_record({"schema": 1, "prompt_id": "p"}).prompt_id == "p"
    with pytest.raises(ValueError, match="record schema 4 is not readable"):
        RequestResult.from_record({"schema": 4, "prompt_id": "p"})


@pytest.mark.parametrize("seed", range(5))
def test_compact_chunk_times_round_trip_within_half_a_microsecond(seed: int) -> None:
    """Schema 3 writes chunk times as integer µs deltas (and equal per-chunk counts as one value): read back they are
    within 0.5 µs of the measured times (plus a float rounding), rounding never accumulates over a long stream, the
    counts are exact, and writing the read-back record again gives the same line."""
    rng = random.Random(seed)
    t, times = 0.0, []
    for _ in range(rng.randrange(1, 3000)):
        t += rng.choice((0.0, rng.expovariate(90.0), rng.uniform(0, 5)))
        times.append(1e3 + t if seed == 4 else t)  # seed 4: large times, where float steps are coarse
    for tokens in ([1] * len(times), [rng.randrange(0, 4) for _ in times], [0] * len(times)):
        res = RequestResult("p", ok=True, chunk_times=list(times), chunk_tokens=list(tokens))
        rec = res.to_record()
        assert all(isinstance(d, int) and d >= 0 for d in rec["chunk_times"])
        assert len(rec["chunk_tokens"]) == (1 if len(set(tokens)) == 1 and len(tokens) > 1 else len(tokens))
        line = orjson.dumps(rec)
        back = RequestResult.from_record(orjson.loads(line))
        assert back.chunk_tokens == tokens
        assert back.chunk_times is not None and len(back.chunk_times) == len(times)
        assert max(abs(a - b) for a, b in zip(back.chunk_times, times, strict=True)) <= 0.5e-6 + 1e-9
        assert back.chunk_times == decode_chunks(*encode_chunks(times, tokens))[0]
        assert orjson.dumps(back.to_record()) == line


def test_schema_2_float_chunk_times_still_read_as_written() -> None:
    rec = {"schema": 2, "prompt_id": "p", "ok": True, "chunk_times": [0.0223, 0.0337], "chunk_tokens": [1, 1]}
    r = RequestResult.from_record(rec)
    assert r.chunk_times == [0.0223, 0.0337] and r.chunk_tokens == [1, 1]
    assert r.to_record()["chunk_times"] == [22_300, 11_400] and r.to_record()["chunk_tokens"] == [1]


def test_identity_is_the_results_first_fields() -> None:
    """RequestIdentity repeats the names, types and defaults of RequestResult's fields of the same names (its first
    six are RequestResult's first six, then max_tokens), and a result is created with all of them: nothing of the
    request's identity is patched on after the request."""
    ident = [(f.name, f.type, f.default) for f in fields(RequestIdentity)]
    by_name = {f.name: (f.name, f.type, f.default) for f in fields(RequestResult)}
    assert ident == [by_name[name] for name, _t, _d in ident]
    assert [f.name for f in fields(RequestResult)][:7] == [n for n, _t, _d in ident[:6]] + ["max_tokens"]
    assert {"setting", "conversation", "turn", "scheduled_wall"} <= {n for n, _t, _d in ident}
    i = RequestIdentity("p", "cls", "w:2", "step", 4, 32)
    r = RequestResult.for_request(i, 256)
    assert r.identity == i and r.max_tokens == 256 and r == RequestResult("p", "cls", "w:2", "step", 4, 32, 256)
    whole = RequestIdentity("p", "cls", "w:2", "step", 4, 32, setting="thinking=off", conversation="w:2/3", turn=1,
                            scheduled_wall=1_796_133_184.5)
    r = RequestResult.for_request(whole, 256)
    assert r.identity == whole
    assert (r.setting, r.conversation, r.turn, r.scheduled_wall) == ("thinking=off", "w:2/3", 1, 1_796_133_184.5)
    with pytest.raises(AttributeError):
        i.step = 5  # type: ignore[misc]


def test_schema_table_covers_every_field_once() -> None:
    names = [f.name for f in RECORD_FIELDS]
    assert names == ["schema", *(f.name for f in fields(RequestResult))]
    for f in RECORD_FIELDS:
        assert f.doc and f.type, f.name
        assert f.nullable == ("None" in f.type)
    by = {f.name: f for f in RECORD_FIELDS}
    assert by["ttft"].unit == "s" and by["ttft"].nullable and by["start_wall"].unit == "epoch s"
    assert by["output_tokens"].unit == "tokens" and not by["output_tokens"].nullable
    assert by["tpot"].unit == "s/token" and by["decode_rate"].unit == "tokens/s"
    omitted = {"scheduled_wall", "itl_hist", "chunk_times", "chunk_tokens", "extra"}
    assert {f.name for f in RECORD_FIELDS if f.omit_empty} == omitted
    assert all(f.default is not MISSING or f.default_factory is not MISSING for f in fields(RequestResult)[1:])


def test_committed_doc_is_the_generated_one(capsys: pytest.CaptureFixture[str]) -> None:
    committed = (ROOT / "docs" / "records.md").read_text()
    assert committed == records_markdown(), "regenerate: python -m harness.result --markdown > docs/records.md"
    assert main(["--markdown"]) == 0
    assert capsys.readouterr().out == committed
    for f in RECORD_FIELDS:
        assert f"| `{f.name}` |" in committed


def test_python_m_entry_point() -> None:
    done = subprocess.run([sys.executable, "-m", "harness.result", "--markdown"], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout == records_markdown()
    bad = subprocess.run([sys.executable, "-m", "harness.result"], cwd=ROOT, capture_output=True, text=True,
                         timeout=60)
    assert bad.returncode == 2


