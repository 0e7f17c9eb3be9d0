"""Every public stream case through the pure path (SSE decoder + chunk interpreter) with exact times.

The writes of each case are fed at their exact offsets, so every timing must match the reference to the
microsecond; the loopback replay of the same cases (``test_client.py``) checks the network path.
"""

from __future__ import annotations

import re

import pytest

from harness.interpret import StreamInterpreter, estimate_tokens
from harness.result import RequestResult
from harness.usable import UsableRule
from tests.chunk_paths import PATH_NAMES, chunk_path
from tests.stream_cases import expected, fixtures

SSE_CASES = sorted(k for k, c in fixtures().items() if c["http_status"] == 200)


#: A usable rule whose only check (a regex matching any text) makes the interpreter keep the answer text.
KEEP_ANSWER = UsableRule(answer_regex=re.compile(""))


def replay(name: str, path_name: str = "python") -> tuple[RequestResult, StreamInterpreter]:
    """Feed a case's writes to the decoder and interpreter of the ``path_name`` stream path (compiled or pure
    Python, :mod:`harness.chunkpath`); the stream ends at the last write (close)."""
    path = chunk_path(path_name)
    case = fixtures()[name]
    req = case.get("request") or {}
    # a text check (matching anything) makes the interpreter keep the answer text, for the tests to read
    interp = path.interpreter(req.get("max_tokens"), keep_chunk_times=True, usable=KEEP_ANSWER)
    framing, dec = path.framing(False, None), path.decoder()
    t = 0.0
    for w in case["writes"]:
        t = w["t"]
        if w["bytes"]:
            path.feed_read(framing, dec, interp, t, w["bytes"])
    res = RequestResult(prompt_id=name, http_status=case["http_status"], max_tokens=req.get("max_tokens"))
    interp.finish(res, t, None, None, dec.error_field, dec.comments)
    return res, interp


@pytest.mark.parametrize("path_name", PATH_NAMES)
@pytest.mark.parametrize("name", SSE_CASES)
def test_reference_values(name: str, path_name: str) -> None:
    exp = expected()[name]
    r, _ = replay(name, path_name)
    assert r.ok is (exp["status"] == "ok"), (r.error_class, r.error_detail)
    assert r.ttft == pytest.approx(exp["ttft"], abs=1e-9) if exp["ttft"] is not None else r.ttft is None
    assert r.ttfat == pytest.approx(exp["ttfat"], abs=1e-9) if exp["ttfat"] is not None else r.ttfat is None
    assert r.finish_reason == exp["finish"]
    assert r.chunks == exp["chunks"]
    assert r.done_seen is exp["done_seen"]
    assert r.e2e == pytest.approx(exp["last_write"])
    if exp["completion_tokens"] is None:
        assert r.token_source == "estimate"
    else:
        assert (r.output_tokens, r.token_source) == (exp["completion_tokens"], "usage")
    if exp["gap_min_ms"] is None:
        assert r.gap_hist is None
    else:
        assert r.gap_hist is not None
        assert r.gap_hist["min"] * 1000 == pytest.approx(exp["gap_min_ms"], abs=1e-6)
        assert r.gap_hist["max"] * 1000 == pytest.approx(exp["gap_max_ms"], abs=1e-6)
        assert r.gap_hist["n"] == exp["chunks"] - 1
    if exp["error_object"]:
        assert r.error_class == "server_error_event"


def test_c01_comments_are_counted_not_tokens() -> None:
    r, _ = replay("C01/a_comment_keepalive_during_long_prefill")
    assert r.sse_comments == 3
    assert r.ttft == pytest.approx(62.3) and r.output_tokens == 3
    r, i = replay("C01/b_id_fields_then_comment_then_blank_line")
    assert i.answer_text == "AB" and r.ok


@pytest.mark.parametrize("name", [k for k in SSE_CASES if k.startswith("C02/")])
def test_c02_framings_give_identical_results(name: str) -> None:
    r, i = replay(name)
    assert i.answer_text == "Hello, 世界"
    assert "\ufffd" not in (i.answer_text or "")
    assert (r.ok, r.ttft, r.output_tokens, r.chunks) == (True, 0.25, 3, 3)


def test_c02d_event_time_is_arrival_of_its_end() -> None:
    r, _ = replay("C02/d_fragmented_writes_and_split_utf8")
    assert r.chunk_times == pytest.approx([0.25, 0.28, 0.312])


def test_c03_usage_only_chunk_and_missing_usage() -> None:
    r, _ = replay("C03/a_usage_only_final_chunk_with_timings")
    assert (r.output_tokens, r.token_source, r.chunks, r.prompt_tokens) == (2, "usage", 2, 75)
    assert r.chunk_times == pytest.approx([0.18, 0.21])
    r, _i = replay("C03/b_no_usage_at_all")
    assert r.token_source == "estimate" and r.ok
    assert r.output_tokens == estimate_tokens("Hi there") == 2


@pytest.mark.parametrize("name", [k for k in SSE_CASES if k.startswith("C04/")])
def test_c04_every_reasoning_field_counts_once(name: str) -> None:
    r, i = replay(name)
    # reasoning text is counted, never kept: its length and bytes say it was taken once, not twice
    assert r.reasoning_chars == len("Think hard") and r.estimated_output_tokens == estimate_tokens("Think hardOK")
    assert i.answer_text == "OK"
    assert (r.reasoning_chunks, r.answer_chunks, r.ttft, r.ttfat, r.output_tokens) == (2, 1, 0.4, 0.44, 3)
    assert r.t_first_reasoning == 0.4


def test_c05_ttft_not_anchored_on_role_chunk() -> None:
    r, _ = replay("C05/a_role_only_chunk_first")
    assert r.ttft == pytest.approx(0.214)
    r, _ = replay("C05/b_whole_answer_in_first_chunk")
    assert (r.ttft, r.chunks, r.gap_hist, r.tpot, r.output_tokens, r.ok) == (0.18, 1, None, None, 2, True)


def test_c06_reasoning_then_answer_and_budget_in_reasoning() -> None:
    r, _ = replay("C06/a_reasoning_then_answer")
    assert (r.ttft, r.ttfat) == (pytest.approx(0.35), pytest.approx(40.35))
    assert (r.output_tokens, r.reasoning_tokens, r.answer_tokens) == (2010, 2000, 10)
    assert r.reasoning_source == "estimate"
    assert not r.truncated and r.usable
    r, _ = replay("C06/b_budget_exhausted_inside_reasoning")
    assert r.ok and r.truncated and r.truncated_in_reasoning and not r.usable
    assert (r.ttft, r.ttfat, r.answer_chunks) == (pytest.approx(0.35), None, 0)


@pytest.mark.parametrize("name", ["C07/a_4_tokens_per_chunk_usage_at_end", "C07/b_4_tokens_per_chunk_continuous_usage"])
def test_c07_multi_token_chunks(name: str) -> None:
    r, _ = replay(name)
    assert r.tpot == pytest.approx((0.788 - 0.200) / 199)  # 2.955 ms, not 12 ms
    assert 1 / r.tpot == pytest.approx(338.4, abs=0.1)
    assert r.output_tokens == 200 and r.chunks == 50
    if name.startswith("C07/b"):
        assert r.itl_hist is not None and r.itl_hist["n"] == 49
        assert r.itl_hist["min"] == pytest.approx(0.003) and r.itl_hist["max"] == pytest.approx(0.003)
        assert r.chunk_tokens == [4] * 50
    else:
        assert r.itl_hist is None


def test_c08_token_counts() -> None:
    r, _ = replay("C08/a_4_tokens_per_chunk_no_usage")
    assert r.token_source == "estimate" and r.output_tokens != 50
    assert abs(r.output_tokens - 200) / 200 < 0.15  # the estimate is within 15 % of the true 200
    r, _ = replay("C08/b_token_split_across_chunks")
    assert (r.output_tokens, r.token_source) == (2, "usage")
    r, _ = replay("C08/c_100_whitespace_tokens")
    assert (r.output_tokens, r.token_source) == (100, "usage")


@pytest.mark.parametrize(
    ("name", "cls", "detail", "code"),
    [
        ("C10/a_inband_error_object_then_done", "server_error_event", "code=500", "500"),
        ("C10/b_toplevel_object_error", "server_error_event", "code=400", "400"),
        ("C10/c_nonstandard_error_field_then_done", "no_finish_reason", "request exceeds context", None),
        ("C10/d_finish_reason_abort_then_done", "aborted", "abort", None),
        ("C10/e_connection_closed_mid_stream", "stream_truncated", "", None),
    ],
)
def test_c10_failures_inside_200_streams(name: str, cls: str, detail: str, code: str | None) -> None:
    r, _ = replay(name)
    assert not r.ok and not r.usable
    assert r.error_class == cls
    assert detail in (r.error_detail or "")
    assert r.error_code == code  # only an in-band error object carries one (the ``error:`` SSE field does not)


@pytest.mark.parametrize(
    ("event", "code"),
    [
        (b'{"error":{"code":"overloaded","type":"server_error","message":"busy"}}', "overloaded"),
        (b'{"object":"error","code":503,"message":"down"}', "503"),
        (b'{"error":{"message":"no code here"}}', None),
        (b'{"error":"just a string"}', None),
    ],
)
def test_error_code_is_the_in_band_objects_code_as_text(event: bytes, code: str | None) -> None:
    i = StreamInterpreter()
    i.on_payload(0.1, event)
    i.on_payload(0.2, b'{"error":{"code":"later","message":"second error"}}')  # the first error object wins
    i.on_payload(0.3, b"[DONE]")
    r = i.finish(RequestResult(prompt_id="p", http_status=200), 0.3)
    assert (r.error_class, r.error_code) == ("server_error_event", code)
    assert f"code={code}" in (r.error_detail or "")  # the human detail keeps its form


def test_c11_truncation() -> None:
    a, _ = replay("C11/a_truncated_all_reasoning")
    b, _ = replay("C11/b_complete")
    c, _ = replay("C11/c_server_says_stop_but_hit_cap")
    assert a.truncated and a.truncated_in_reasoning and a.ttfat is None and a.output_tokens == 4096
    assert a.e2e == pytest.approx(82.272)
    assert not b.truncated and b.usable and b.output_tokens == 1500 and b.e2e == pytest.approx(30.352)
    assert c.truncated and c.suspect_truncation and c.finish_reason == "stop" and not c.usable
    mix = [a] * 4 + [b] * 6
    assert sum(r.truncated for r in mix) / len(mix) == pytest.approx(0.40)


def test_c12_long_streams() -> None:
    r, _ = replay("C12/a_350s_stream")
    assert r.ok and (r.ttft, r.ttfat) == (pytest.approx(0.3), pytest.approx(349.8))
    assert r.output_tokens == 14000 and r.e2e == pytest.approx(350.302)
    r, _ = replay("C12/b_90s_silent_gap_before_first_token")
    assert r.ok and r.ttft == pytest.approx(90.05) and r.ttfat == pytest.approx(99.55)


def test_c16_tpot() -> None:
    r, _ = replay("C16/a_headers_at_5ms_first_token_800ms")
    assert r.ttft == pytest.approx(0.8)
    assert r.tpot == pytest.approx(0.020)
    assert r.output_tokens == 1001


def test_record_has_no_text() -> None:
    r, _ = replay("C04/b_reasoning")
    rec = r.to_record()
    assert "Think" not in str(rec) and "OK" not in str(rec)


def _chunk(delta: dict, usage: int | None = None, finish: str | None = None) -> bytes:
    import json

    obj: dict = {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    if usage is not None:
        obj["usage"] = {"prompt_tokens": 5, "completion_tokens": usage}
    return json.dumps(obj).encode()


def test_chunk_usage_gives_exact_reasoning_tokens() -> None:
    it = StreamInterpreter(100)
    it.on_payload(0.1, _chunk({"reasoning": "a b"}, 2))
    it.on_payload(0.2, _chunk({"reasoning": "c"}, 3))
    it.on_payload(0.3, _chunk({"content": "X"}, 5))  # + the delimiter token
    it.on_payload(0.4, _chunk({}, 6, "stop"))  # + EOS
    r = it.finish(RequestResult(prompt_id="p", http_status=200), 0.4)
    assert (r.output_tokens, r.reasoning_tokens, r.reasoning_source, r.answer_tokens) == (6, 3, "chunk_usage", 3)
    assert r.itl_hist is not None and r.itl_hist["n"] == 2  # 0.1 s / 1 token, 0.1 s / 2 tokens


def test_chunk_spanning_end_of_reasoning_is_not_called_exact() -> None:
    it = StreamInterpreter(100)
    it.on_payload(0.1, _chunk({"reasoning": "a"}, 1))
    it.on_payload(0.2, _chunk({"reasoning": "b", "content": "X"}, 4))
    it.on_payload(0.3, _chunk({}, 4, "stop"))
    r = it.finish(RequestResult(prompt_id="p", http_status=200), 0.3)
    assert r.reasoning_source == "estimate" and r.output_tokens == 4
    assert (r.reasoning_chunks, r.answer_chunks, r.chunks) == (2, 1, 2)


@pytest.mark.parametrize("payload", [b"{not json", b"[1, 2]", b'"text"'])
def test_malformed_chunk_fails_the_request_but_keeps_partial_counts(payload: bytes) -> None:
    it = StreamInterpreter(100)
    it.on_payload(0.1, _chunk({"content": "A"}))
    it.on_payload(0.2, payload)
    it.on_payload(0.3, _chunk({"content": "B"}))
    it.on_payload(0.4, _chunk({}, 2, "stop"))
    r = it.finish(RequestResult(prompt_id="p", http_status=200), 0.4)
    assert (r.ok, r.error_class, r.chunks) == (False, "malformed_chunk", 2)
    assert payload[:5].decode() in r.error_detail


def _usage_chunk(completion: int, reasoning: int) -> bytes:
    import json

    usage = {"prompt_tokens": 5, "completion_tokens": completion,
             "completion_tokens_details": {"reasoning_tokens": reasoning}}
    return json.dumps({"choices": [], "usage": usage}).encode()


def test_hidden_reasoning_per_token_figures_count_the_streamed_answer_only() -> None:
    # OpenAI-style: 300 reasoning tokens counted in usage, never streamed; 11 answer chunks 10 ms apart from 3.0 s
    it = StreamInterpreter(1000)
    for k in range(11):
        it.on_payload(3.0 + 0.01 * k, _chunk({"content": f" a{k}"}, finish="stop" if k == 10 else None))
    it.on_payload(3.11, _usage_chunk(311, 300))
    r = it.finish(RequestResult(prompt_id="p", http_status=200), 3.11)
    assert r.ok and r.hidden_reasoning
    assert (r.reasoning_tokens, r.answer_tokens, r.reasoning_source) == (300, 11, "usage")
    assert r.streamed_tokens == 11
    assert r.tpot == pytest.approx(0.10 / 10)  # (t_last - ttft) / (answer tokens - 1)
    assert r.decode_rate == pytest.approx(11 / 0.11)  # answer tokens / (e2e - ttft)
    assert r.reasoning_rate is None and r.answer_rate == pytest.approx(11 / 0.11)


def test_streamed_reasoning_is_not_hidden() -> None:
    it = StreamInterpreter(1000)
    it.on_payload(0.1, _chunk({"reasoning": "r"}))
    it.on_payload(0.2, _chunk({"content": "a"}))
    it.on_payload(0.3, _chunk({"content": "b"}, finish="stop"))
    it.on_payload(0.3, _usage_chunk(5, 2))
    r = it.finish(RequestResult(prompt_id="p", http_status=200), 0.3)
    assert not r.hidden_reasoning and r.streamed_tokens == 5
    assert r.tpot == pytest.approx(0.2 / 4) and r.decode_rate == pytest.approx(5 / 0.2)


def _answer(text: str, rule: UsableRule | None, *, finish: str = "stop", answer_tokens: int = 10) -> RequestResult:
    it = StreamInterpreter(100, usable=rule)
    half = len(text) // 2
    it.on_payload(0.1, _chunk({"content": text[:half]}))
    it.on_payload(0.2, _chunk({"content": text[half:]}, finish=finish))
    it.on_payload(0.2, _usage_chunk(answer_tokens, 0) if answer_tokens else b"[DONE]")
    return it.finish(RequestResult(prompt_id="p", http_status=200), 0.2)


@pytest.mark.parametrize(
    ("rule", "text", "reason"),
    [
        (None, "anything", None),
        (UsableRule(min_answer_tokens=10), "x", None),
        (UsableRule(min_answer_tokens=11), "x", "min_answer_tokens"),
        (UsableRule(answer_regex=re.compile(r"ANSWER: \d+")), "so... ANSWER: 42.", None),
        (UsableRule(answer_regex=re.compile(r"ANSWER: \d+")), "so... ANSWER: forty-two", "regex"),
        (UsableRule(answer_json=True), ' {"a": [1, 2]} ', None),
        (UsableRule(answer_json=True), '```json\n{"a": 1}\n```', None),
        (UsableRule(answer_json=True), '```\n[1, 2]\n```\n', None),
        (UsableRule(answer_json=True), '{"a": 1', "json"),
        (UsableRule(answer_json=True), 'Here it is: {"a": 1}', "json"),
        # checked in order: min tokens before the text checks
        (UsableRule(min_answer_tokens=50, answer_json=True), "{}", "min_answer_tokens"),
        # the buffer is bounded: only its first buffer_chars characters are checked
        (UsableRule(answer_regex=re.compile("END"), buffer_chars=8), "0123456789 END", "regex"),
        (UsableRule(answer_regex=re.compile("^0123"), buffer_chars=4), "0123456789 END", None),
    ],
)
def test_usable_checks(rule: UsableRule | None, text: str, reason: str | None) -> None:
    r = _answer(text, rule)
    assert (r.usable, r.usable_reason) == (reason is None, reason)
    assert "ANSWER" not in str(r.to_record()) and '"a"' not in str(r.to_record())  # only the verdict is kept


def test_usable_reason_error_and_truncated_come_first() -> None:
    strict = UsableRule(answer_json=True)
    assert _answer("{}", strict, finish="length").usable_reason == "truncated"
    it = StreamInterpreter(100, usable=strict)
    it.on_payload(0.1, _chunk({"content": "{}"}))
    r = it.finish(RequestResult(prompt_id="p", http_status=200), 0.1, "stream_truncated", "cut")
    assert (r.ok, r.usable, r.usable_reason) == (False, False, "error")


def test_no_answer_text_is_kept_without_a_text_check() -> None:
    it = StreamInterpreter(100, usable=UsableRule(min_answer_tokens=1))
    it.on_payload(0.1, _chunk({"content": "secret"}))
    assert it.answer_buf is None and it.answer_text is None
    assert StreamInterpreter(100).answer_text is None


@pytest.mark.parametrize(
    ("details", "cached"),
    [({"cached_tokens": 48}, 48), ({"cached_tokens": 0}, 0), (None, None), ({}, None), ({"cached_tokens": True}, None),
     ("x", None)],
)
def test_cached_tokens_from_prompt_tokens_details(details: object, cached: int | None) -> None:
    import json

    usage: dict = {"prompt_tokens": 64, "completion_tokens": 1}
    if details is not None:
        usage["prompt_tokens_details"] = details
    it = StreamInterpreter(100)
    it.on_payload(0.1, _chunk({"content": "A"}, finish="stop"))
    it.on_payload(0.1, json.dumps({"choices": [], "usage": usage}).encode())
    r = it.finish(RequestResult(prompt_id="p", http_status=200), 0.1)
    assert r.ok and r.prompt_tokens == 64 and r.cached_tokens == cached
