"""The profile's max_tokens against the server's max_model_len (:mod:`harness.context_check`)."""

from __future__ import annotations

from pathlib import Path

from harness.config import load_profile
from harness.context_check import context_problems, max_model_len


def test_max_model_len_of_the_model_or_none() -> None:
    entries = [{"id": "a", "max_model_len": 4096}, {"id": "b"}, {"id": "c", "max_model_len": True}]
    assert max_model_len(entries, "a") == 4096
    assert max_model_len(entries, "b") is None  # OpenAI / SGLang: not reported
    assert max_model_len(entries, "c") is None and max_model_len(entries, "zz") is None


def test_every_max_tokens_setting_at_or_above_the_limit_is_named(tmp_path: Path) -> None:
    p = tmp_path / "p.yaml"
    p.write_text("name: t\nrequest: {max_tokens: 4096}\nprompts: [{id: x, text: hi, max_tokens: 10}, "
                 "{id: y, text: yo, max_tokens: 5000}]\n")
    probs = context_problems(load_profile(p), p, 4096)
    assert [q.split(": max_tokens")[0] for q in probs] == [f"{p}: request.max_tokens",
                                                           f"{p}: prompts[1].max_tokens (id y)"]
    assert context_problems(load_profile(p), p, 5001) == []


def test_values_from_the_max_tokens_knob_name_the_knob_once(tmp_path: Path) -> None:
    """--max-tokens 9000 (or the form's Max tokens) set every prompt's value: one line naming the knob and the
    prompts, not one line per prompt blaming the profile file."""
    from harness.locust.form import Knobs, apply_knobs

    p = tmp_path / "p.yaml"
    p.write_text("name: t\nprompts: [{id: x, text: hi, max_tokens: 10}, {id: y, text: yo, max_tokens: 20}]\n")
    prof = apply_knobs(load_profile(p), Knobs(max_tokens="9000"))
    probs = context_problems(prof, p, 4096, given="9000")
    assert len(probs) == 1 and str(p) not in probs[0], probs
    assert probs[0].startswith("--max-tokens / the form's Max tokens '9000' (prompts x, y): max_tokens 9,000 >= "
                               "the server's max_model_len 4,096"), probs
    same = tmp_path / "q.yaml"  # the same value written in the file: one line naming both prompts in it
    same.write_text("name: t\nprompts: [{id: x, text: hi, max_tokens: 9000}, {id: y, text: yo, max_tokens: 9000}]\n")
    assert [q.split(": max_tokens")[0] for q in context_problems(load_profile(same), same, 4096)] == [
        f"{same}: prompts[0].max_tokens (id x), prompts[1].max_tokens (id y)"]
