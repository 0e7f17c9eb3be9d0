"""The profile's usable rule end to end: profile -> RunContext.new_client -> ChatClient -> the record's verdict."""

from __future__ import annotations

from pathlib import Path

from harness.config import load_profile
from harness.result import RequestIdentity
from harness.runtime import RunContext
from harness.sim import launch

MSG = [{"role": "user", "content": "Explain why the sky is blue, briefly."}]


def test_usable_rule_reaches_the_client(tmp_path: Path) -> None:
    prof = tmp_path / "p.yaml"
    # the simulator's answer text is " a0 a1 a2 ...": the first rule matches it, the second cannot
    prof.write_text("prompts: [{id: a, text: hi}]\nusable: {answer_regex: '^ a0 a1', min_answer_tokens: 2}\n")
    strict = tmp_path / "q.yaml"
    strict.write_text("prompts: [{id: a, text: hi}]\nusable: {answer_json: true}\n")
    body = {"model": "sim-reasoner", "messages": MSG, "max_tokens": 3000, "seed": 1}
    with launch(preset="demo", time_scale=0.02, seed=1) as proc:
        for path, usable, reason in ((prof, True, None), (strict, False, "json")):
            ctx = RunContext(load_profile(path), proc.url, "sim-reasoner", "local")
            client = ctx.new_client()
            res = client.stream_chat(body, RequestIdentity("a"))
            client.close()
            assert res.ok and not res.truncated and res.answer_tokens > 2
            assert (res.usable, res.usable_reason) == (usable, reason)
