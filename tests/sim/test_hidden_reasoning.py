"""Hidden reasoning (the simulator's ``openai`` flavour: reasoning tokens counted in usage, never streamed): TPOT and
the decode rate follow the answer chunks actually streamed, checked against the simulator's ground-truth log; a
vLLM-flavour stream (reasoning streamed) keeps the output-token definition."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness.client import ChatClient
from harness.result import RequestIdentity, RequestResult
from harness.sim import launch
from harness.sim.truth import read_truth

MSG = [{"role": "user", "content": "Explain why the sky is blue, briefly."}]


def _measure(tmp_path: Path, flavour: str) -> list[tuple[RequestResult, dict[str, Any]]]:
    """Three requests to a demo simulator of ``flavour`` at time_scale 0.2, each with its ground-truth line."""
    truth = tmp_path / f"truth-{flavour}.jsonl"
    with launch(preset="demo", time_scale=0.2, flavour=flavour, seed=3, extra_args=["--truth-log", str(truth)]) as p:
        client = ChatClient(p.url)
        body: dict[str, Any] = {"model": "sim-reasoner", "messages": MSG, "max_tokens": 3000}
        results = [client.stream_chat({**body, "seed": i}, RequestIdentity("p")) for i in range(3)]
        client.close()
    _, reqs, _ = read_truth(truth)
    assert len(reqs) == 3
    return list(zip(results, reqs, strict=True))


def _true_pace(t: dict[str, Any]) -> tuple[float, float]:
    """(seconds per token between the first and the last streamed chunk, streamed tokens per second from the first
    streamed chunk to the end of the stream), from the simulator's own chunk log."""
    chunks = t["chunks"]
    tokens = sum(c[2] for c in chunks)
    return (chunks[-1][0] - chunks[0][0]) / (tokens - chunks[0][2]), tokens / (t["end_at"] - chunks[0][0])


def test_hidden_reasoning_tpot_and_decode_rate_follow_the_streamed_answer(tmp_path: Path) -> None:
    for res, t in _measure(tmp_path, "openai"):
        assert res.ok and res.hidden_reasoning and res.reasoning_chunks == 0 and res.reasoning_tokens > 100
        assert [c[3] for c in t["chunks"]] == ["a"] * res.answer_chunks  # only the answer was streamed
        tpot, rate = _true_pace(t)
        assert res.tpot == pytest.approx(tpot, rel=0.03)
        assert res.decode_rate == pytest.approx(rate, rel=0.03)
        assert res.reasoning_rate is None
        # the old definition (every usage token over the answer chunks) was several times too fast
        assert res.t_last_token is not None and res.ttft is not None
        assert (res.t_last_token - res.ttft) / (res.output_tokens - 1) < tpot / 3


def test_streamed_reasoning_keeps_the_output_token_definition(tmp_path: Path) -> None:
    for res, t in _measure(tmp_path, "vllm"):
        assert res.ok and not res.hidden_reasoning and res.reasoning_chunks > 0
        tpot, rate = _true_pace(t)
        assert res.t_last_token is not None and res.ttft is not None and res.e2e is not None
        assert res.tpot == pytest.approx((res.t_last_token - res.ttft) / (res.output_tokens - 1))
        assert res.decode_rate == pytest.approx(res.output_tokens / (res.e2e - res.ttft))
        assert res.tpot == pytest.approx(tpot, rel=0.03) and res.decode_rate == pytest.approx(rate, rel=0.03)
