"""In-process unit tests: presets, length model, wire format, engine timing, HTTP details."""

from __future__ import annotations

import json
import socket

import gevent
import pytest

from harness.sim import SimProcess
from harness.sim.engine import Engine, Sequence
from harness.sim.lengths import LengthModel, LengthPlan, PromptClass, classify, estimate_prompt_tokens
from harness.sim.presets import DEMO, K26, PRESETS, get_preset
from harness.sim.protocol import ApiError, StreamFormatter, completion_body, parse_chat_request
from tests.sim.sseclient import hostport

USER = [{"role": "user", "content": "Tell me about the history of the printing press."}]


# -- presets ---------------------------------------------------------------------------------
def test_demo_preset_targets() -> None:
    assert 80 <= DEMO.per_stream_rate(1) <= 100
    aggs = [DEMO.aggregate_rate(n) for n in (1, 8, 16, 32, 64)]
    assert aggs == sorted(aggs) and aggs[-1] > 1.3 * aggs[-2]
    mean_tokens = DEMO.reasoning_mean + DEMO.answer_mean
    assert mean_tokens / DEMO.per_stream_rate(64) < 15.0


def test_k26_preset_targets() -> None:
    assert K26.per_stream_rate(1) == pytest.approx(26.5, rel=0.01)
    for n in (8, 16, 32):
        assert 16.5 <= K26.per_stream_rate(n) <= 19.5


def test_get_preset_and_overrides() -> None:
    assert set(PRESETS) >= {"demo", "k26", "bench"}
    assert get_preset("demo").with_overrides(decode_base=0.0, decode_per_seq=None).decode_base == 0.0
    with pytest.raises(KeyError):
        get_preset("nope")
    with pytest.raises(ValueError):
        DEMO.with_overrides(bogus=1)


# -- length model ----------------------------------------------------------------------------
def test_prompt_tokens_and_classes() -> None:
    assert estimate_prompt_tokens([{"role": "user", "content": "x" * 400}]) == 100
    parts = [{"role": "user", "content": [{"type": "text", "text": "abcd" * 10}, {"type": "image_url"}]}]
    assert estimate_prompt_tokens(parts) == 10
    assert classify([{"role": "user", "content": "hi"}]) is PromptClass.SHORT
    ok_prompt = [{"role": "user", "content": "Please say just 'OK' to confirm you are alive."}]
    assert classify(ok_prompt) is PromptClass.SHORT
    assert classify([{"role": "user", "content": "Write a comprehensive overview of TCP."}]) is PromptClass.LONG
    assert classify([{"role": "system", "content": "guide"}, *USER]) is PromptClass.NORMAL


def test_length_model_deterministic_per_occurrence() -> None:
    a, b = LengthModel(DEMO, seed=5), LengthModel(DEMO, seed=5)
    other = [{"role": "user", "content": "A different question about mountains and rivers."}]
    draws_a = [a.plan(USER, 10_000).total_tokens for _ in range(5)]
    b.plan(other, 10_000)  # interleaved other prompts do not shift this prompt's sequence
    draws_b = [b.plan(USER, 10_000).total_tokens for _ in range(5)]
    assert draws_a == draws_b
    assert len(set(draws_a)) > 1  # the n-th repeat gets a new draw
    assert LengthModel(DEMO, seed=6).plan(USER, 10_000) != LengthModel(DEMO, seed=5).plan(USER, 10_000)
    # an explicit request seed pins the draw
    assert a.plan(USER, 10_000, request_seed=9) == a.plan(USER, 10_000, request_seed=9)


def test_length_model_ranges_and_caps() -> None:
    m = LengthModel(DEMO, seed=0)
    for i in range(50):
        p = m.plan(USER, 10_000, request_seed=i)
        assert DEMO.reasoning_min <= p.reasoning_tokens <= DEMO.reasoning_max
        assert DEMO.answer_min <= p.answer_tokens <= DEMO.answer_max
        assert p.finish_reason == "stop"
    cut = m.plan(USER, 10, request_seed=1)
    assert (cut.reasoning_tokens, cut.answer_tokens, cut.finish_reason) == (10, 0, "length")
    off = m.plan(USER, 10_000, thinking=False, request_seed=1)
    assert off.reasoning_tokens == 0 and off.answer_tokens > 0
    eos = m.plan(USER, 1000, ignore_eos=True, request_seed=1)
    assert eos.total_tokens == 1000 and eos.finish_reason == "length"
    assert m.plan(USER, 10_000, min_tokens=2000, request_seed=1).total_tokens == 2000


def test_long_prompts_usually_hit_max_tokens() -> None:
    m = LengthModel(DEMO, seed=0)
    msgs = [{"role": "user", "content": "Write a beginner's guide to kernel development."}]
    hits = sum(m.plan(msgs, 1024, request_seed=i).finish_reason == "length" for i in range(100))
    assert hits >= 80


# -- wire format -----------------------------------------------------------------------------
def test_parse_request_fields() -> None:
    body = json.dumps({
        "messages": USER, "stream": True, "max_tokens": 50, "max_completion_tokens": 20,
        "stream_options": {"include_usage": True, "continuous_usage_stats": True},
        "chat_template_kwargs": {"enable_thinking": False}, "seed": 3,
    }).encode()
    req = parse_chat_request(body, "sim-reasoner")
    assert req.model == "sim-reasoner" and req.stream and req.include_usage and req.continuous_usage
    assert req.max_tokens == 20 and req.thinking is False and req.seed == 3
    with pytest.raises(ApiError) as info:
        parse_chat_request(json.dumps({"model": "x", "messages": USER}).encode(), "sim-reasoner")
    assert info.value.status == 404
    assert json.loads(info.value.body())["error"]["type"] == "NotFoundError"


@pytest.mark.parametrize("flavour", ["vllm", "vllm-old", "sglang"])
def test_formatter_events_are_valid_json(flavour: str) -> None:
    fmt = StreamFormatter(flavour, "chatcmpl-x", 'we"ird', 12, continuous_usage=True, created=1)
    events = [fmt.role_event(), fmt.token_event(True, " r0", 1), fmt.token_event(False, " a0", 2),
              fmt.finish_event("length", 2), fmt.usage_event(2, 1)]
    decoded = []
    for ev in events:
        assert ev.startswith(b"data: {") and ev.endswith(b"}\n\n") and ev.count(b"\n") == 2
        decoded.append(json.loads(ev[6:]))
    assert all(d["model"] == 'we"ird' and d["created"] == 1 for d in decoded)
    key = "reasoning" if flavour == "vllm" else "reasoning_content"
    assert decoded[1]["choices"][0]["delta"][key] == " r0"
    assert decoded[2]["choices"][0]["delta"]["content"] == " a0"
    assert decoded[2]["usage"] == {"prompt_tokens": 12, "total_tokens": 14, "completion_tokens": 2}
    assert decoded[3]["choices"][0]["finish_reason"] == "length"
    assert decoded[4]["choices"] == [] and decoded[4]["usage"]["completion_tokens_details"] == {"reasoning_tokens": 1}
    unary = json.loads(completion_body(flavour, "chatcmpl-x", "m", 12, 2, 0, "length"))
    assert unary["choices"][0]["message"]["content"] is None
    assert unary["choices"][0]["message"][key] == " r0 r1"


# -- engine ----------------------------------------------------------------------------------
def _seq(total: int, prompt: int = 40) -> Sequence:
    return Sequence("chatcmpl-t", prompt, LengthPlan(PromptClass.NORMAL, total, 0, "stop", total, 0))


def _wait_finished(seq: Sequence, timeout: float = 5.0) -> None:
    with gevent.Timeout(timeout):
        while not seq.finished:
            seq.event.wait()
            seq.event.clear()


def test_engine_timing_model() -> None:
    preset = DEMO.with_overrides(decode_base=0.004, decode_per_seq=0.002, prefill_base=0.03, prefill_per_token=0.0)
    engine = Engine(preset, time_scale=1.0)
    engine.start()
    try:
        single = _seq(21)
        engine.submit(single)
        _wait_finished(single)
        assert single.first_token_at is not None and single.finished_at is not None
        assert 0.029 < single.first_token_at - single.arrival < 0.06
        tpot_1 = (single.finished_at - single.first_token_at) / 20
        assert 0.006 * 0.9 < tpot_1 < 0.006 * 1.5  # contention can only make steps longer
        batch = [_seq(21) for _ in range(4)]
        for s in batch:
            engine.submit(s)
        gevent.joinall([gevent.spawn(_wait_finished, s) for s in batch], timeout=5, raise_error=True)
        assert all(s.finished and s.generated == 21 for s in batch)
        tpots = [(s.finished_at - s.first_token_at) / 20 for s in batch]  # type: ignore[operator]
        assert all(0.012 * 0.9 < t < 0.012 * 1.5 for t in tpots), tpots  # model: 4 + 4 x 2 ms
        assert min(tpots) > 1.4 * tpot_1  # model: 2x
    finally:
        engine.stop()


def test_engine_queue_and_abort() -> None:
    engine = Engine(DEMO.with_overrides(decode_base=0.002, decode_per_seq=0.0, prefill_base=0.0,
                                        prefill_per_token=0.0), time_scale=1.0, max_num_seqs=1)
    engine.start()
    try:
        first, second = _seq(10_000), _seq(5)
        engine.submit(first)
        engine.submit(second)
        gevent.sleep(0.02)
        assert engine.num_running == 1 and engine.num_waiting == 1 and second.generated == 0
        engine.abort(first)
        gevent.sleep(0.05)
        assert first.aborted and second.finished and second.generated == 5
        assert engine.num_running == 0 and engine.num_waiting == 0
    finally:
        engine.stop()


# -- HTTP details ----------------------------------------------------------------------------
def test_chunked_request_body_and_expect_continue(sim: SimProcess) -> None:
    body = json.dumps({"messages": USER, "max_tokens": 2}).encode()
    half = len(body) // 2
    head = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
            b"Expect: 100-continue\r\nConnection: close\r\n\r\n")
    with socket.create_connection(hostport(sim.url), timeout=10) as s:
        s.sendall(head)
        assert s.recv(100).startswith(b"HTTP/1.1 100 Continue\r\n\r\n")
        s.sendall(b"%x\r\n%b\r\n%x\r\n%b\r\n0\r\n\r\n" % (half, body[:half], len(body) - half, body[half:]))
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    head_part, _, payload = data.partition(b"\r\n\r\n")
    assert head_part.startswith(b"HTTP/1.1 200 OK")
    assert json.loads(payload)["usage"]["completion_tokens"] == 2
