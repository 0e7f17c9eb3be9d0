"""Stream framing, flavours, truncation and thinking switches of the simulator."""

from __future__ import annotations

from typing import Any

import pytest

from harness.sim import SimProcess
from tests.sim.sseclient import Reply, chat

PROMPT = [{"role": "user", "content": "Explain why the sky is blue, briefly."}]


def body(**kw: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"model": "sim-reasoner", "messages": PROMPT, "stream": True}
    base.update(kw)
    return base


def assert_envelope(reply: Reply, model: str = "sim-reasoner") -> None:
    ids = {c.data["id"] for c in reply.chunks}
    assert len(ids) == 1 and ids.pop().startswith("chatcmpl-")
    for c in reply.chunks:
        d = c.data
        assert d["object"] == "chat.completion.chunk"
        assert d["model"] == model
        assert isinstance(d["created"], int)
        for choice in d["choices"]:
            assert set(choice) >= {"index", "delta", "logprobs", "finish_reason"}
            assert choice["index"] == 0 and choice["logprobs"] is None


def test_vllm_stream_framing(sim: SimProcess) -> None:
    r = chat(sim.url, body(stream_options={"include_usage": True}))
    assert r.status == 200
    assert r.headers["content-type"].startswith("text/event-stream")
    assert r.headers["transfer-encoding"] == "chunked"
    assert r.headers["x-sim-time-scale"] == "0.05"
    assert_envelope(r)
    chunks = r.chunks
    # role chunk first
    assert chunks[0].data["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert chunks[0].data["choices"][0]["finish_reason"] is None
    # reasoning (delta.reasoning) strictly before the answer (delta.content), one token per chunk
    kinds = []
    for c in chunks[1:-2]:
        delta = c.delta
        assert len(delta) == 1, delta
        (key,) = delta
        kinds.append(key)
    assert kinds == sorted(kinds, key=lambda k: k != "reasoning")
    n_reason, n_answer = kinds.count("reasoning"), kinds.count("content")
    assert n_reason >= 100 and n_answer >= 30
    assert r.text("reasoning").startswith(" r0 r1 r2")
    assert r.text("content").startswith(" a0 a1")
    assert "reasoning_content" not in r.text("content")
    # finish chunk: empty delta + finish_reason
    finish = chunks[-2].data["choices"][0]
    assert finish["delta"] == {} and finish["finish_reason"] == "stop"
    # usage chunk: choices == [] and exact counts
    usage_chunk = chunks[-1].data
    assert usage_chunk["choices"] == []
    usage = usage_chunk["usage"]
    assert usage["completion_tokens"] == n_reason + n_answer
    assert usage["completion_tokens_details"] == {"reasoning_tokens": n_reason}
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    assert usage["prompt_tokens"] == (len(PROMPT[0]["content"]) + 3) // 4
    # [DONE] last; no usage in ordinary chunks
    assert r.events[-1].data == "[DONE]"
    assert all("usage" not in c.data for c in chunks[:-1])


def test_no_usage_chunk_unless_asked(sim: SimProcess) -> None:
    r = chat(sim.url, body())
    assert r.events[-1].data == "[DONE]"
    assert r.chunks[-1].data["choices"][0]["finish_reason"] == "stop"
    assert all(c.data["choices"] for c in r.chunks)


@pytest.mark.parametrize("flavour", ["vllm-old", "sglang"])
def test_reasoning_content_flavours(launch_sim: Any, flavour: str) -> None:
    proc = launch_sim(flavour=flavour)
    r = chat(proc.url, body(stream_options={"include_usage": True}))
    assert r.status == 200
    assert_envelope(r)
    assert r.chunks[0].delta["role"] == "assistant"
    assert r.token_events("reasoning_content") and not r.token_events("reasoning")
    assert r.text("reasoning_content").startswith(" r0 r1")
    assert r.text("content").startswith(" a0")
    assert r.chunks[-2].data["choices"][0]["finish_reason"] == "stop"
    assert r.chunks[-1].data["choices"] == []
    n_reason = len(r.token_events("reasoning_content"))
    assert r.chunks[-1].data["usage"]["completion_tokens_details"]["reasoning_tokens"] == n_reason
    if flavour == "sglang":  # SGLang lists unset delta fields as null
        assert r.chunks[1].delta["content"] is None


def test_continuous_usage_stats(sim: SimProcess) -> None:
    r = chat(sim.url, body(stream_options={"include_usage": True, "continuous_usage_stats": True}))
    chunks = r.chunks
    assert chunks[0].data["usage"]["completion_tokens"] == 0
    token_chunks = [c for c in chunks if c.delta.get("reasoning") or c.delta.get("content")]
    counts = [c.data["usage"]["completion_tokens"] for c in token_chunks]
    assert counts == list(range(1, len(token_chunks) + 1))
    prompt = chunks[0].data["usage"]["prompt_tokens"]
    assert all(c.data["usage"]["total_tokens"] == prompt + c.data["usage"]["completion_tokens"]
               for c in token_chunks)
    assert chunks[-1].data["choices"] == [] and chunks[-1].data["usage"]["completion_tokens"] == counts[-1]


def test_max_tokens_inside_reasoning(sim: SimProcess) -> None:
    r = chat(sim.url, body(max_tokens=7, stream_options={"include_usage": True}))
    assert len(r.token_events("reasoning")) == 7
    assert r.token_events("content") == []
    assert r.chunks[-2].data["choices"][0]["finish_reason"] == "length"
    usage = r.chunks[-1].data["usage"]
    assert usage["completion_tokens"] == 7
    assert usage["completion_tokens_details"]["reasoning_tokens"] == 7


def test_max_completion_tokens_alias(sim: SimProcess) -> None:
    r = chat(sim.url, body(max_completion_tokens=4))
    assert len(r.token_events("reasoning")) == 4
    assert r.chunks[-1].data["choices"][0]["finish_reason"] == "length"


def test_max_tokens_inside_answer(sim: SimProcess) -> None:
    # a request seed makes the draw repeatable: learn the natural lengths, then cap 2 tokens into the answer
    full = chat(sim.url, body(seed=42, stream_options={"include_usage": True}))
    n_reason = len(full.token_events("reasoning"))
    assert full.chunks[-2].data["choices"][0]["finish_reason"] == "stop"
    again = chat(sim.url, body(seed=42, stream_options={"include_usage": True}))
    assert len(again.token_events("reasoning")) == n_reason
    assert again.chunks[-1].data["usage"] == full.chunks[-1].data["usage"]
    cut = chat(sim.url, body(seed=42, max_tokens=n_reason + 2, stream_options={"include_usage": True}))
    assert len(cut.token_events("reasoning")) == n_reason
    assert cut.text("content") == " a0 a1"
    assert cut.chunks[-2].data["choices"][0]["finish_reason"] == "length"
    assert cut.chunks[-1].data["usage"]["completion_tokens"] == n_reason + 2


@pytest.mark.parametrize("kwargs", [{"thinking": False}, {"enable_thinking": False}])
def test_thinking_off(sim: SimProcess, kwargs: dict[str, bool]) -> None:
    r = chat(sim.url, body(chat_template_kwargs=kwargs, stream_options={"include_usage": True}))
    assert r.token_events("reasoning") == [] and r.token_events("reasoning_content") == []
    assert len(r.token_events("content")) >= 30
    assert r.chunks[-1].data["usage"]["completion_tokens_details"]["reasoning_tokens"] == 0


def test_short_prompt_class(sim: SimProcess) -> None:
    msgs = [{"role": "user", "content": "Say just 'OK' and nothing else, please, thank you."}]
    r = chat(sim.url, body(messages=msgs))
    assert 5 <= len(r.token_events("reasoning")) <= 20
    assert 1 <= len(r.token_events("content")) <= 3


def test_long_prompt_runs_into_max_tokens(sim: SimProcess) -> None:
    msgs = [{"role": "user", "content": "Write a comprehensive guide to sourdough baking for beginners."}]
    for seed in range(3):
        r = chat(sim.url, body(messages=msgs, max_tokens=600, seed=seed))
        assert r.chunks[-1].data["choices"][0]["finish_reason"] == "length"


def test_tokens_per_chunk(launch_sim: Any) -> None:
    proc = launch_sim(extra_args=["--tokens-per-chunk", "4"])
    r = chat(proc.url, body(seed=3, stream_options={"include_usage": True, "continuous_usage_stats": True}))
    usage = r.chunks[-1].data["usage"]
    n_reason = usage["completion_tokens_details"]["reasoning_tokens"]
    sizes = [len(e.delta["reasoning"].split()) for e in r.token_events("reasoning")]
    assert sum(sizes) == n_reason and all(s == 4 for s in sizes[:-1]) and 1 <= sizes[-1] <= 4
    answer = [len(e.delta["content"].split()) for e in r.token_events("content")]
    assert sum(answer) == usage["completion_tokens"] - n_reason
    assert r.token_events("content")[0].delta["content"].startswith(" a0 a1")


def test_non_streaming_shape(sim: SimProcess) -> None:
    r = chat(sim.url, {"model": "sim-reasoner", "messages": PROMPT, "max_tokens": 2000})
    assert r.status == 200
    assert r.headers["content-type"] == "application/json"
    assert r.headers["x-sim-time-scale"] == "0.05"
    d = r.json()
    assert d["object"] == "chat.completion" and d["id"].startswith("chatcmpl-") and d["model"] == "sim-reasoner"
    (choice,) = d["choices"]
    assert choice["finish_reason"] == "stop" and choice["index"] == 0
    msg = choice["message"]
    assert msg["role"] == "assistant"
    assert msg["reasoning"].startswith(" r0 r1") and msg["content"].startswith(" a0 a1")
    usage = d["usage"]
    assert usage["completion_tokens_details"]["reasoning_tokens"] == len(msg["reasoning"].split())
    assert usage["completion_tokens"] == len(msg["reasoning"].split()) + len(msg["content"].split())


def test_non_streaming_truncated_in_reasoning(sim: SimProcess) -> None:
    d = chat(sim.url, {"messages": PROMPT, "max_tokens": 3}).json()
    choice = d["choices"][0]
    assert choice["finish_reason"] == "length"
    assert choice["message"]["content"] is None and choice["message"]["reasoning"] == " r0 r1 r2"
