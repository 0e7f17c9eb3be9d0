"""Server flavours, byte for byte where the public stream cases (and the servers' own output) show the framing.

The public cases use the synthetic envelope ``E`` below; our events are compared with the case bytes after
replacing our envelope (id, created, model) with it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import pytest

from harness.client import ChatClient
from harness.result import RequestIdentity
from harness.sim import SimProcess
from tests.sim.sseclient import RawStream, raw_stream

MSG = [{"role": "user", "content": "Explain why the sky is blue, briefly."}]
#: The public cases' envelope (stream-cases.md, "⟨E⟩").
E = b'"id":"chatcmpl-synthetic-0001","object":"chat.completion.chunk","created":1700000000,"model":"test-model",'
_OUR_ENVELOPE = re.compile(rb'"id":"chatcmpl-[0-9a-f]{32}","object":"chat\.completion\.chunk","created":\d+,'
                           rb'"model":"sim-reasoner",')
# Case lines (public stream cases C05/a, C04/a, C04/b, C07/b), with their text.
CASE_ROLE = b'data: {' + E + b'"choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,' \
    b'"finish_reason":null}]}\n\n'
CASE_REASONING_CONTENT = b'data: {' + E + b'"choices":[{"index":0,"delta":{"reasoning_content":"Think"},' \
    b'"logprobs":null,"finish_reason":null}]}\n\n'
CASE_REASONING = b'data: {' + E + b'"choices":[{"index":0,"delta":{"reasoning":"Think"},"logprobs":null,' \
    b'"finish_reason":null}]}\n\n'
CASE_CONTENT = b'data: {' + E + b'"choices":[{"index":0,"delta":{"content":"OK"},"logprobs":null,' \
    b'"finish_reason":null}]}\n\n'
CASE_USAGE_ONLY = b'data: {' + E + b'"choices":[],"usage":'


def normalise(event: bytes) -> bytes:
    """Our event with the case envelope in place of ours."""
    return _OUR_ENVELOPE.sub(E, event, count=1)


def body(**kw: Any) -> dict[str, Any]:
    b: dict[str, Any] = {"model": "sim-reasoner", "messages": MSG, "stream": True, "max_tokens": 8, "seed": 5}
    b.update(kw)
    return b


@pytest.fixture(scope="module")
def sims() -> Any:
    from harness.sim import launch

    procs: dict[str, SimProcess] = {}

    def get(flavour: str, *extra: str) -> SimProcess:
        key = flavour + " ".join(extra)
        if key not in procs:
            procs[key] = launch(preset="demo", time_scale=0.05, flavour=flavour, seed=2, extra_args=list(extra))
        return procs[key]

    yield get
    for p in procs.values():
        p.stop()


def test_vllm_framing_matches_public_cases(sims: Callable[..., SimProcess]) -> None:
    r = raw_stream(sims("vllm").url, body(max_tokens=600, stream_options={"include_usage": True}))
    assert r.status == 200 and r.complete
    assert r.headers["content-type"] == "text/event-stream; charset=utf-8"
    ev = r.events
    assert normalise(ev[0]) == CASE_ROLE
    assert normalise(ev[1]) == CASE_REASONING.replace(b'"Think"', b'" r0"')
    answer = next(e for e in ev if b'"content":" a0"' in e)
    assert normalise(answer) == CASE_CONTENT.replace(b'"OK"', b'" a0"')
    # finish chunk: empty delta + stop_reason (vLLM), then the usage-only chunk and [DONE]
    assert re.fullmatch(rb'data: \{.*"choices":\[\{"index":0,"delta":\{\},"logprobs":null,"finish_reason":"stop",'
                        rb'"stop_reason":null\}\]\}\n\n', ev[-3])
    assert normalise(ev[-2]).startswith(CASE_USAGE_ONLY)
    assert re.fullmatch(rb'.*"usage":\{"prompt_tokens":\d+,"total_tokens":\d+,"completion_tokens":\d+,'
                        rb'"completion_tokens_details":\{"reasoning_tokens":\d+\}\}\}\n\n', ev[-2])
    assert ev[-1] == b"data: [DONE]\n\n"


def test_vllm_old_reasoning_content_matches_case(sims: Callable[..., SimProcess]) -> None:
    r = raw_stream(sims("vllm-old").url, body())
    assert normalise(r.events[0]) == CASE_ROLE
    assert normalise(r.events[1]) == CASE_REASONING_CONTENT.replace(b'"Think"', b'" r0"')


def test_continuous_usage_chunk_shape(sims: Callable[..., SimProcess]) -> None:
    r = raw_stream(sims("vllm").url, body(stream_options={"include_usage": True, "continuous_usage_stats": True}))
    first = normalise(r.events[1])
    assert first == CASE_REASONING.replace(b'"Think"', b'" r0"').replace(
        b"]}\n\n", b'],"usage":{"prompt_tokens":10,"total_tokens":11,"completion_tokens":1}}\n\n')


def test_sglang_reasoning_content_with_nulls(sims: Callable[..., SimProcess]) -> None:
    r = raw_stream(sims("sglang").url, body(max_tokens=600, stream_options={"include_usage": True}))
    d = r.data
    assert d[0]["choices"][0]["delta"] == {"role": "assistant", "content": "", "reasoning_content": None,
                                           "tool_calls": None}
    assert d[1]["choices"][0]["delta"] == {"role": None, "content": None, "reasoning_content": " r0",
                                           "tool_calls": None}
    assert d[1]["usage"] is None and d[1]["choices"][0]["matched_stop"] is None
    assert all("reasoning" not in c["choices"][0]["delta"] for c in d[:-2] if c["choices"])
    assert d[-3]["choices"][0]["finish_reason"] == "stop" and d[-3]["choices"][0]["matched_stop"] == 151645
    assert d[-2]["choices"] == [] and d[-2]["usage"]["completion_tokens_details"]["reasoning_tokens"] > 0


def test_llamacpp_framing_and_unasked_usage(sims: Callable[..., SimProcess]) -> None:
    r = raw_stream(sims("llamacpp").url, body())  # no stream_options: llama-server b6xxx sends usage anyway
    assert r.headers["content-type"] == "text/event-stream"
    env = rb',"created":\d+,"id":"chatcmpl-[A-Za-z0-9]{32}","model":"sim-reasoner","system_fingerprint":' \
          rb'"b6497-cd08fc3e","object":"chat\.completion\.chunk"'
    ev = r.events
    assert re.fullmatch(rb'data: \{"choices":\[\{"finish_reason":null,"index":0,"delta":\{"role":"assistant",'
                        rb'"content":null\}\}\]' + env + rb'\}\n\n', ev[0])
    assert re.fullmatch(rb'data: \{"choices":\[\{"finish_reason":null,"index":0,"delta":\{"reasoning_content":'
                        rb'" r0"\}\}\]' + env + rb'\}\n\n', ev[1])
    assert re.fullmatch(rb'data: \{"choices":\[\{"finish_reason":"length","index":0,"delta":\{\}\}\]' + env
                        + rb'\}\n\n', ev[-3])
    m = re.fullmatch(rb'data: \{"choices":\[\]' + env + rb',"usage":\{"completion_tokens":8,"prompt_tokens":10,'
                     rb'"total_tokens":18\},"timings":(\{.*\})\}\n\n', ev[-2])
    assert m, ev[-2]
    timings = json.loads(m.group(1))
    assert list(timings) == ["cache_n", "prompt_n", "prompt_ms", "prompt_per_token_ms", "prompt_per_second",
                             "predicted_n", "predicted_ms", "predicted_per_token_ms", "predicted_per_second"]
    assert timings["prompt_n"] == 10 and timings["predicted_n"] == 8 and timings["predicted_ms"] > 0
    assert ev[-1] == b"data: [DONE]\n\n"
    # the same request to vLLM sends no usage when not asked
    plain = raw_stream(sims("vllm").url, body())
    assert all(not (isinstance(d, dict) and d.get("usage")) for d in plain.data)


def test_llamacpp_keepalive_comments_while_silent(sims: Callable[..., SimProcess]) -> None:
    # ping every 0.5 simulated s (25 ms real); the first token is held back 4 simulated s (200 ms real)
    proc = sims("llamacpp", "--sse-ping-interval", "0.5")
    r = raw_stream(proc.url, body(sim_fault={"type": "stall_first", "seconds": 4}))
    pings = [i for i, e in enumerate(r.events) if e == b":\n\n"]
    assert len(pings) >= 4, r.events[:6]
    assert pings == list(range(len(pings)))  # all before the first data event (the role chunk comes with a token)
    # the harness skips them: TTFT is the first token, not a comment
    res = ChatClient(proc.url).stream_chat(body(sim_fault={"type": "stall_first", "seconds": 4}), RequestIdentity("p"))
    assert res.ok and res.sse_comments >= 4 and res.ttft is not None and res.ttft > 0.15


def test_openai_hidden_reasoning(sims: Callable[..., SimProcess]) -> None:
    r = raw_stream(sims("openai").url, body(max_tokens=2000, stream_options={"include_usage": True}))
    d = r.data
    chunks = [c for c in d if isinstance(c, dict)]
    for c in chunks:
        assert c["service_tier"] == "default" and c["system_fingerprint"].startswith("fp_")
        for ch in c["choices"]:
            assert "reasoning" not in ch["delta"] and "reasoning_content" not in ch["delta"]
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": "", "refusal": None}
    assert all(c["usage"] is None for c in chunks[:-1])
    usage = chunks[-1]["usage"]
    n_answer = sum(1 for c in chunks if c["choices"] and c["choices"][0]["delta"].get("content"))
    assert usage["completion_tokens"] == usage["completion_tokens_details"]["reasoning_tokens"] + n_answer
    assert usage["completion_tokens_details"]["reasoning_tokens"] >= 100
    assert set(usage["completion_tokens_details"]) == {"reasoning_tokens", "audio_tokens",
                                                       "accepted_prediction_tokens", "rejected_prediction_tokens"}
    # the harness: TTFT = first answer chunk (the reasoning took its time but was never streamed)
    res = ChatClient(sims("openai").url).stream_chat(body(max_tokens=2000), RequestIdentity("p"))
    assert res.ok and res.reasoning_chunks == 0 and res.reasoning_source == "usage"
    assert res.reasoning_tokens == usage["completion_tokens_details"]["reasoning_tokens"]
    assert res.ttft == res.ttfat and res.ttft is not None
    assert res.ttft > 100 * 0.05 / 120  # at least ~100 hidden decode steps (demo: >= 10 ms each, x0.05)


def test_openai_truncated_inside_hidden_reasoning(sims: Callable[..., SimProcess]) -> None:
    res = ChatClient(sims("openai").url).stream_chat(body(max_tokens=20), RequestIdentity("p"))
    assert res.ok and res.finish_reason == "length" and res.output_tokens == 20
    assert res.chunks == 0 and res.ttft is None and res.truncated_in_reasoning


@pytest.mark.parametrize("flavour", ["vllm", "vllm-old", "sglang", "openai", "llamacpp"])
def test_harness_reads_every_flavour(sims: Callable[..., SimProcess], flavour: str) -> None:
    proc = sims(flavour)
    res = ChatClient(proc.url).stream_chat(
        body(max_tokens=2000, stream_options={"include_usage": True, "continuous_usage_stats": True}),
        RequestIdentity("p"), keep_chunk_times=True)
    truth = raw_stream(proc.url, body(max_tokens=2000, stream_options={"include_usage": True}))
    usage = [d for d in truth.data if isinstance(d, dict) and d.get("usage")][-1]["usage"]
    assert res.ok, res.error_detail
    assert res.token_source == "usage" and res.output_tokens == usage["completion_tokens"]
    if flavour == "llamacpp":  # no reasoning_tokens in llama.cpp's usage: the harness estimates them
        assert res.reasoning_source == "estimate"
    elif flavour == "openai":
        assert res.reasoning_source == "usage" and res.reasoning_chunks == 0
    else:
        assert res.reasoning_source == "usage"
        assert res.reasoning_tokens == usage["completion_tokens_details"]["reasoning_tokens"]
    if flavour in ("vllm", "vllm-old", "sglang"):  # per-chunk usage: one token per chunk
        assert res.chunk_tokens == [1] * res.chunks


@pytest.mark.parametrize("flavour", ["vllm", "sglang", "openai", "llamacpp"])
def test_non_streaming_per_flavour(sims: Callable[..., SimProcess], flavour: str) -> None:
    r: RawStream = raw_stream(sims(flavour).url, body(stream=False, max_tokens=2000))
    d = json.loads(r.body)
    assert d["object"] == "chat.completion"
    msg = d["choices"][0]["message"]
    usage = d["usage"]
    answer = len(msg["content"].split())
    if flavour == "openai":
        assert set(msg) == {"role", "content", "refusal", "annotations"}
        assert usage["completion_tokens"] == answer + usage["completion_tokens_details"]["reasoning_tokens"]
    elif flavour == "llamacpp":
        assert list(d)[:5] == ["choices", "created", "model", "system_fingerprint", "object"]
        assert usage["completion_tokens"] == answer + len(msg["reasoning_content"].split())
        assert d["timings"]["predicted_n"] == usage["completion_tokens"]
    else:
        key = "reasoning" if flavour == "vllm" else "reasoning_content"
        assert usage["completion_tokens"] == answer + len(msg[key].split())
