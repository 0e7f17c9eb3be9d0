"""Sweep axes: the settings of ``axes:``, their request bodies, their stages and their phase state."""

from __future__ import annotations

import random
from types import SimpleNamespace
from typing import Any

import pytest

from harness.axes import Setting, settings
from harness.config import Profile
from harness.runtime import PhaseState, RunContext
from harness.shapes import Stage, plan_stages
from tests.test_config import write as write_profile


def _profile(axes: dict[str, Any] | None, **over: Any) -> Profile:
    data: dict[str, Any] = {
        "name": "axes",
        "prompts": [{"id": "p", "text": "hello there, tell me something", "max_tokens": 500}],
        "single_stream": {"duration": 5},
        "steps": {"concurrency": [2, 4], "duration": 10},
        "request": {"thinking": True},
        **over,
    }
    if axes is not None:
        data["axes"] = axes
    return Profile.model_validate(data)


def test_settings_cross_product_in_order_and_thinking_off_drops_effort() -> None:
    got = settings([True, False], ["low", "high"], [256, 1024])
    assert [s.label for s in got] == [
        "thinking=on,effort=low,max_tokens=256", "thinking=on,effort=low,max_tokens=1024",
        "thinking=on,effort=high,max_tokens=256", "thinking=on,effort=high,max_tokens=1024",
        "thinking=off,max_tokens=256", "thinking=off,max_tokens=1024",
    ]  # fmt: skip
    assert [s.label for s in settings(None, ["medium"], None)] == ["effort=medium"]
    assert settings(None, None, None) == [] and settings([], [], []) == []


def test_setting_apply_overrides_the_prompt_and_copies() -> None:
    body = {"model": "m", "messages": [], "max_tokens": 500, "chat_template_kwargs": {"x": 1}}
    out = Setting(False, None, 64).apply(body)
    assert out == {"model": "m", "messages": [], "max_tokens": 64,
                   "chat_template_kwargs": {"x": 1, "thinking": False, "enable_thinking": False}}
    assert body["max_tokens"] == 500 and body["chat_template_kwargs"] == {"x": 1}  # the original is untouched
    top = Setting(True, "low").apply({"messages": []})
    assert top["reasoning_effort"] == "low" and top["chat_template_kwargs"]["thinking"] is True
    ctk = Setting(None, "high", effort_param="chat_template_kwargs").apply({"max_completion_tokens": 9})
    assert ctk == {"max_completion_tokens": 9, "chat_template_kwargs": {"reasoning_effort": "high"}}
    assert Setting(max_tokens=7).apply({"max_completion_tokens": 9}) == {"max_completion_tokens": 7, "max_tokens": 7}


def test_axes_section_validation(tmp_path: Any) -> None:
    # booleans (YAML's on/off become booleans: test_yaml_on_off_are_thinking_values); the strings are refused
    p = _profile({"thinking": [True, False], "reasoning_effort": ["low"], "effort_param": "chat_template_kwargs"})
    assert [s.label for s in p.settings()] == ["thinking=on,effort=low", "thinking=off"]
    assert _profile(None).settings() == []
    for bad in ({}, {"thinking": []}, {"reasoning_effort": ["extreme"]}, {"max_tokens": [0]},
                {"max_tokens": [5, 5]}, {"effort_param": "header", "thinking": [True]}, {"other": [1]},
                {"thinking": ["on", "off"]}):
        with pytest.raises(ValueError):
            _profile(bad)


def test_axes_errors_name_file_and_key(tmp_path: Any) -> None:
    from harness.config import ProfileError, load_profile

    path = write_profile(tmp_path, "name: a\nprompts: [{id: p, text: hi}]\naxes: {reasoning_effort: [max]}\n")
    with pytest.raises(ProfileError, match=r"p\.yaml: axes\.reasoning_effort\.0: "):
        load_profile(path)


def test_yaml_on_off_are_thinking_values(tmp_path: Any) -> None:
    from harness.config import load_profile

    path = write_profile(tmp_path, "name: a\nprompts: [{id: p, text: hi}]\naxes: {thinking: [on, off]}\n")
    assert load_profile(path).axes.thinking == [True, False]  # type: ignore[union-attr]


def test_plan_stages_runs_every_step_per_setting_numbered_on() -> None:
    ctx = SimpleNamespace(profile=_profile({"thinking": [True, False]}))
    assert plan_stages(ctx) == [  # type: ignore[arg-type]
        Stage("single", 0, 1, 5.0, "thinking=on"),
        Stage("step", 1, 2, 10.0, "thinking=on"),
        Stage("step", 2, 4, 10.0, "thinking=on"),
        Stage("step", 3, 2, 10.0, "thinking=off"),
        Stage("step", 4, 4, 10.0, "thinking=off"),
    ]
    plain = plan_stages(SimpleNamespace(profile=_profile(None)))  # type: ignore[arg-type]
    assert [s.setting for s in plain] == [None, None, None]


def test_pick_sends_the_current_settings_body() -> None:
    ctx = RunContext(_profile({"reasoning_effort": ["low", "high"], "max_tokens": [64]}), "http://127.0.0.1:9/v1",
                     "m", "local")
    rng = random.Random(1)
    _, plain = ctx.pick(rng)
    assert plain["max_tokens"] == 500 and "reasoning_effort" not in plain
    ctx.state = PhaseState("step", 1, 2, "effort=high,max_tokens=64")
    _, body = ctx.pick(rng)
    assert body["reasoning_effort"] == "high" and body["max_tokens"] == 64
    assert body["chat_template_kwargs"]["thinking"] is True  # the profile's request default stays
    assert ctx.phase_message()["setting"] == "effort=high,max_tokens=64"


def test_duplicate_axis_value_is_named_as_written(tmp_path: Any) -> None:
    """YAML's on/off are booleans: the error names them on/off, as the user wrote them, not True/False."""
    from harness.config import ProfileError, load_profile

    path = write_profile(tmp_path, "name: a\nprompts: [{id: p, text: hi}]\naxes: {thinking: [on, on]}\n")
    with pytest.raises(ProfileError, match=r"axes\.thinking: .*a value appears twice: \[on, on\]"):
        load_profile(path)
    path = write_profile(tmp_path, "name: a\nprompts: [{id: p, text: hi}]\naxes: {max_tokens: [5, 5]}\n")
    with pytest.raises(ProfileError, match=r"a value appears twice: \[5, 5\]"):
        load_profile(path)
