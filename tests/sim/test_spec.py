"""Speculative decoding: a chunk carries 1 + accepted draft tokens, cumulative usage stays exact, spec metrics."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gevent
import pytest

from harness.client import ChatClient
from harness.result import RequestIdentity
from harness.sim import SimProcess, launch
from harness.sim.engine import Engine, Sequence
from harness.sim.lengths import LengthPlan, PromptClass
from harness.sim.presets import DEMO
from harness.sim.truth import read_truth
from tests.sim.sseclient import raw_stream, request

K, P = 3, 0.6
#: Expected accepted drafts per step: P + P^2 + P^3 (accepted until the first rejection, at most K).
MEAN_ACCEPTED = sum(P**i for i in range(1, K + 1))
MSG = [{"role": "user", "content": "Describe speculative decoding in a few paragraphs."}]


@pytest.fixture(scope="module")
def spec(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[SimProcess, Path]]:
    truth = tmp_path_factory.mktemp("spec") / "truth.jsonl"
    with launch(preset="demo", time_scale=0.05, seed=4,
                extra_args=["--spec-tokens", str(K), "--spec-acceptance", str(P), "--truth-log", str(truth)]) as p:
        yield p, truth


def words(delta: dict[str, Any]) -> int:
    return len((delta.get("reasoning") or delta.get("content") or "").split())


def test_chunks_carry_one_plus_accepted_tokens(spec: tuple[SimProcess, Path]) -> None:
    proc, _ = spec
    r = raw_stream(proc.url, {"messages": MSG, "stream": True, "max_tokens": 3000, "ignore_eos": True,
                              "stream_options": {"include_usage": True, "continuous_usage_stats": True}})
    chunks = [d for d in r.data if isinstance(d, dict) and d["choices"] and words(d["choices"][0]["delta"])]
    sizes = [words(c["choices"][0]["delta"]) for c in chunks]
    assert sum(sizes) == 3000 and all(1 <= s <= K + 1 for s in sizes)
    # cumulative usage stays exact: it grows by exactly the tokens each chunk carries
    cum = [c["usage"]["completion_tokens"] for c in chunks]
    assert cum == [sum(sizes[: i + 1]) for i in range(len(sizes))]
    # token text stays contiguous across multi-token chunks
    text = "".join((c["choices"][0]["delta"].get("reasoning") or "") for c in chunks).split()
    assert text[:5] == ["r0", "r1", "r2", "r3", "r4"] and len(set(text)) == len(text)
    # one prefill token, then steps of 1 + accepted (a reasoning/answer boundary may split one step in two)
    mean = (sum(sizes) - 1) / (len(sizes) - 2)
    assert abs(mean - (1 + MEAN_ACCEPTED)) < 0.15, mean


def test_harness_counts_tokens_not_chunks(spec: tuple[SimProcess, Path]) -> None:
    proc, _ = spec
    res = ChatClient(proc.url).stream_chat(
        {"messages": MSG, "max_tokens": 600, "ignore_eos": True,
         "stream_options": {"continuous_usage_stats": True}}, RequestIdentity("p"), keep_chunk_times=True)
    assert res.ok and res.output_tokens == 600 and res.chunks < 450
    assert res.chunk_tokens is not None and sum(res.chunk_tokens) == 600 and max(res.chunk_tokens) > 1


def test_spec_metrics(spec: tuple[SimProcess, Path]) -> None:
    proc, _ = spec
    raw_stream(proc.url, {"messages": MSG, "stream": True, "max_tokens": 2000, "ignore_eos": True})
    text = request(proc.url, "GET", "/metrics").body.decode()

    def value(name: str) -> float:
        m = re.search(rf'^{re.escape(name)}\{{model_name="sim-reasoner"\}} (\S+)$', text, re.M)
        assert m, name
        return float(m.group(1))

    drafts = value("vllm:spec_decode_num_drafts_total")
    draft_tokens = value("vllm:spec_decode_num_draft_tokens_total")
    accepted = value("vllm:spec_decode_num_accepted_tokens_total")
    assert drafts > 100 and draft_tokens == K * drafts
    assert abs(accepted / draft_tokens - MEAN_ACCEPTED / K) < 0.05
    pos = [float(m) for m in re.findall(r'^vllm:spec_decode_num_accepted_tokens_per_pos_total\{model_name='
                                        r'"sim-reasoner",position="\d"\} (\S+)$', text, re.M)]
    assert len(pos) == K and sum(pos) == accepted and pos == sorted(pos, reverse=True)
    gen = float(re.search(r'^vllm:generation_tokens_total\{model_name="sim-reasoner"\} (\S+)$', text, re.M)
                .group(1))  # type: ignore[union-attr]
    assert gen - accepted == pytest.approx(drafts, abs=10 * 3)  # one verified token per draft (+ prefill tokens)


def test_truth_log_has_multi_token_chunks(spec: tuple[SimProcess, Path]) -> None:
    proc, truth = spec
    raw_stream(proc.url, {"messages": MSG, "stream": True, "max_tokens": 300, "ignore_eos": True, "seed": 77})
    _, reqs, _ = read_truth(truth)
    last = reqs[-1]
    assert sum(c[2] for c in last["chunks"]) == 300 == last["sent_tokens"]
    assert max(c[2] for c in last["chunks"]) > 1


@pytest.mark.parametrize(("acceptance", "tokens_per_step"), [(1.0, K + 1), (0.0, 1)])
def test_engine_acceptance_extremes(acceptance: float, tokens_per_step: int) -> None:
    engine = Engine(DEMO.with_overrides(decode_base=0.002, decode_per_seq=0.0, prefill_base=0.0,
                                        prefill_per_token=0.0), spec_tokens=K, spec_acceptance=acceptance)
    engine.start()
    try:
        seq = Sequence("x", 10, LengthPlan(PromptClass.NORMAL, 30, 0, "stop", 30, 0))
        engine.submit(seq)
        with gevent.Timeout(5):
            while not seq.finished:
                seq.event.wait()
                seq.event.clear()
        assert seq.marks is not None and seq.marks[0] == 1 and seq.marks[-1] == 30
        steps = [b - a for a, b in zip(seq.marks, seq.marks[1:], strict=False)]
        assert all(s == tokens_per_step for s in steps[:-1]) and 1 <= steps[-1] <= tokens_per_step
    finally:
        engine.stop()
