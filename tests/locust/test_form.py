"""harness.locust.form and the web-run form readers: the start form's defaults, what a submitted form changes in
the profile, and the checks that answer the UI with one line instead of a traceback."""

from __future__ import annotations

from argparse import Namespace
from pathlib import Path

import pytest

from harness.config import PROFILES_DIR, SHAPE_TICK_S, Profile, ProfileError, load_profile
from harness.locust.form import Knobs, apply_knobs, form_defaults, profile_choices, steps_note
from harness.locust.webrun import StartError, parse_fixed
from harness.runtime import FixedLoad

DEMO = PROFILES_DIR / "demo.yaml"


def test_profile_choices_are_the_profiles_directory() -> None:
    assert profile_choices() == sorted(p.stem for p in PROFILES_DIR.glob("*.yaml"))
    assert "demo" in profile_choices() and "k26" in profile_choices()


def test_form_defaults_show_the_profiles_values(tmp_path: Path) -> None:
    d = form_defaults(load_profile(DEMO), DEMO)
    assert d == {
        "web_profile": "demo",
        "mode": "sweep",
        "prompt_mix": "quicksort:1,quantum:1,redis-guide:1",
        "prompts_file": "",
        "max_tokens": "quicksort=1024,quantum=1024,redis-guide=384",  # not one value: per prompt
        "thinking": "on",
        "steps": "8,16,32,64",
        "step_duration": "30",
    }
    other = tmp_path / "x.yaml"
    other.write_text("name: x\nprompts: [{id: a, text: hi, max_tokens: 7}]\n")
    d = form_defaults(load_profile(other), other)
    assert d["web_profile"] == str(other) and d["max_tokens"] == "7" and d["thinking"] == "unset"


def test_apply_knobs_changes_only_what_is_given(tmp_path: Path) -> None:
    demo = load_profile(DEMO)
    assert apply_knobs(demo, Knobs()) == demo
    p = apply_knobs(demo, Knobs(prompt_mix="quantum:3, quicksort", max_tokens="200", thinking="off", steps="2,4",
                                step_duration="12.5"))  # fmt: skip
    assert [(q.id, q.weight, q.max_tokens) for q in p.prompts] == [("quantum", 3.0, 200), ("quicksort", 1.0, 200)]
    assert p.request.thinking is False and p.steps.concurrency == [2, 4] and p.steps.duration == 12.5
    assert p.warmup == demo.warmup and p.simulator == demo.simulator  # the rest as in the profile
    per = apply_knobs(demo, Knobs(max_tokens="quantum=99"))
    assert [q.max_tokens for q in per.prompts] == [1024, 99, 384]
    assert apply_knobs(demo, Knobs(thinking="unset")).request.thinking is None
    f = tmp_path / "prompts.yaml"
    f.write_text("- {id: one, text: hello, weight: 2}\n- {id: two, text: bye}\n")
    fp = apply_knobs(demo, Knobs(prompts_file=str(f), prompt_mix="two:5"))
    assert [(q.id, q.weight) for q in fp.prompts] == [("two", 5.0)]
    rel = apply_knobs(demo, Knobs(prompts_file="prompts.yaml"), base=tmp_path)  # relative to the profile's dir
    assert [q.id for q in rel.prompts] == ["one", "two"]


@pytest.mark.parametrize(
    ("knobs", "message"),
    [
        (Knobs(prompt_mix="nope:1"), "prompt_mix: no prompt 'nope'"),
        (Knobs(prompt_mix="quantum:x"), "the weight is not a number"),
        (Knobs(prompt_mix="quantum:0"), "the weight must be > 0"),
        (Knobs(max_tokens="lots"), "max_tokens: 'lots' is not an integer"),
        (Knobs(max_tokens="-3"), "max_tokens: -3 must be > 0"),
        (Knobs(max_tokens="zzz=3"), "max_tokens: no prompt 'zzz'"),
        (Knobs(max_tokens="quantum=,quicksort=5"), "max_tokens: quantum: empty (the profile's value is 1024)"),
        (Knobs(thinking="maybe"), "thinking: 'maybe'"),
        (Knobs(steps="8,x"), "steps: 'x' is not an integer"),
        (Knobs(steps=" , "), "steps: no concurrency"),
        (Knobs(steps="8,,16"), "steps: '8,,16' has an empty item"),
        (Knobs(steps="8,16,"), "steps: '8,16,' has an empty item"),
        (Knobs(step_duration="0"), "step_duration: 0 must be > 0"),
        (Knobs(step_duration="soon"), "not a number of seconds"),
        (Knobs(prompts_file="/nonexistent/p.yaml"), "prompts file /nonexistent/p.yaml: cannot read"),
    ],
)
def test_bad_knobs_raise_one_line_profile_errors(knobs: Knobs, message: str) -> None:
    with pytest.raises(ProfileError) as ei:
        apply_knobs(load_profile(DEMO), knobs)
    assert message in str(ei.value) and "\n" not in str(ei.value)


def test_a_typo_in_a_prompts_file_is_an_unknown_key_as_in_a_profile(tmp_path: Path) -> None:
    f = tmp_path / "p.yaml"
    f.write_text("- {id: a, text: hi, wieght: 2}\n")
    with pytest.raises(ProfileError, match=r"prompts file .*p.yaml: the profile they make is invalid: "
                                           r"prompts.0.wieght: unknown key \(typo\?\)$"):
        apply_knobs(load_profile(DEMO), Knobs(prompts_file=str(f)))


def test_an_empty_per_prompt_max_tokens_is_the_forms_way_of_saying_none(tmp_path: Path) -> None:
    """``id=`` is what the form shows for a prompt with no max_tokens anywhere: sending it back runs it unchanged
    (refused only where the profile has a value it would silently run, above)."""
    f = tmp_path / "p.yaml"
    f.write_text("name: p\ntarget: {base_url: 'http://127.0.0.1:9/v1', model: m}\n"
                 "prompts: [{id: a, text: hey, max_tokens: 32}, {id: b, text: ho}]\n")
    prof = load_profile(f)
    shown = form_defaults(prof, f)["max_tokens"]
    assert shown == "a=32,b=", shown
    assert apply_knobs(prof, Knobs(max_tokens=shown)) == prof


def test_a_field_left_as_shown_is_not_applied() -> None:
    """The form shows the launch profile's values: sending them back unchanged leaves the picked profile's own
    values (unless the command line gave one); a changed field is applied."""
    shown = {"steps": "8,16,32,64", "max_tokens": "1024", "thinking": "on"}
    form = {"steps": "8,16,32,64", "max_tokens": "64", "thinking": "on", "prompt_mix": ""}
    assert Knobs.from_form(form, shown, Knobs()) == Knobs(max_tokens="64")
    assert Knobs.from_form(form, shown, Knobs(steps="8,16,32,64")) == Knobs(max_tokens="64", steps="8,16,32,64")
    assert Knobs.from_options(Namespace(steps="4", max_tokens=None)) == Knobs(steps="4")
    assert Knobs(steps="4", thinking="").as_dict() == {"steps": "4"}


def test_parse_fixed_reads_locusts_fields() -> None:
    assert parse_fixed({"user_count": "24", "spawn_rate": "4", "run_time": "10m"}) == FixedLoad(24, 4.0, 600.0)
    assert parse_fixed({"user_count": "3", "spawn_rate": "", "run_time": ""}) == FixedLoad(3, 3.0, None)
    for form, message in [
        ({"user_count": "x"}, "Number of users 'x' is not an integer"),
        ({"user_count": "0"}, "at least 1"),
        ({"user_count": "2", "spawn_rate": "-1"}, "Ramp up must be > 0"),
        ({"user_count": "2", "spawn_rate": "fast"}, "Ramp up 'fast'"),
        ({"user_count": "2", "run_time": "later"}, "Run time 'later'"),
    ]:
        with pytest.raises(StartError, match=message):
            parse_fixed(form)


def test_a_launch_profile_outside_profiles_is_the_pickers_default_and_is_run(tmp_path: Path) -> None:
    """``--profile PATH`` outside ``profiles/``: the picker lists PATH and selects it (Locust's UI selects its
    first choice when the default is not one of them, and that choice replaced the launch profile), and a Start
    with the form as shown runs the launch profile."""
    from locust.argument_parser import ui_extra_args_dict

    from harness.locust.form import set_form_defaults
    from harness.locust.setup import SimHolder
    from harness.locust.webrun import _profile_arg, launch_of

    other = tmp_path / "mine.yaml"
    other.write_text("name: mine\nprompts: [{id: a, text: hi, max_tokens: 7}]\n")
    opts = Namespace(profile=str(other), web_profile="", mode="sweep", prompt_mix="", prompts_file="", max_tokens="",
                     thinking="", steps="", step_duration="", output_dir=None, stop_timeout=None)
    try:
        launch = launch_of(opts, None, "local", other, load_profile(other), SimHolder())
        picker = ui_extra_args_dict([])["web_profile"]
        assert picker["default_value"] == str(other) and str(other) in picker["choices"]
        assert picker["choices"][0] != str(other)  # the first choice is another profile: the default must be PATH
        form = {"profile": str(other), "web_profile": picker["default_value"], "mode": "sweep"}
        assert _profile_arg(form, launch) == str(other)
        assert _profile_arg({**form, "web_profile": "demo"}, launch) == str(PROFILES_DIR / "demo.yaml")  # picked
    finally:
        set_form_defaults({})


def test_repeated_steps_are_kept_as_the_profile_format_keeps_them() -> None:
    """``8,8`` is two C=8 steps, as ``steps: {concurrency: [8, 8]}`` in a profile is (both validate alike)."""
    assert apply_knobs(load_profile(DEMO), Knobs(steps="8,8")).steps.concurrency == [8, 8]
    d = load_profile(DEMO).public_dict()
    d["steps"]["concurrency"] = [8, 8]
    assert Profile.model_validate(d).steps.concurrency == [8, 8]


@pytest.mark.parametrize("field", ["prompt_mix", "steps", "step_duration", "max_tokens"])
def test_a_cleared_field_is_refused_not_silently_the_profiles(field: str) -> None:
    """A field the form showed a value in, sent back blank, is refused naming the field (it used to run the
    profile's value silently); a field the form showed blank may stay blank, and an absent field is left as shown."""
    shown = {"prompt_mix": "a:1,b:2", "steps": "8,16", "step_duration": "30", "max_tokens": "64", "prompts_file": ""}
    with pytest.raises(ProfileError) as ei:
        Knobs.from_form({field: "  "}, shown, Knobs())
    assert str(ei.value).startswith(f"{field}: empty (the profile's value is {shown[field]!r})")
    assert Knobs.from_form({"prompts_file": ""}, shown, Knobs()) == Knobs()
    assert Knobs.from_form({}, shown, Knobs(steps="4")) == Knobs(steps="4")


@pytest.mark.parametrize(("knobs", "field"), [
    (Knobs(step_duration="'30'"), "step_duration"), (Knobs(steps='"8,16"'), "steps"),
    (Knobs(max_tokens="'64'"), "max_tokens"), (Knobs(prompt_mix="'quicksort:1'"), "prompt_mix"),
])
def test_a_quoted_value_is_refused_naming_the_field(knobs: Knobs, field: str) -> None:
    """The form's fields are text: a number typed in quotes (as in YAML, ``'30'``) is refused, not read."""
    with pytest.raises(ProfileError) as ei:
        apply_knobs(load_profile(DEMO), knobs)
    assert str(ei.value) == f"{field}: {getattr(knobs, field)} is in quotes: type the value without quotes"


def test_a_quoted_item_gets_the_quotes_hint() -> None:
    with pytest.raises(ProfileError, match=r"^steps: \"'16'\" is not an integer \(type it without quotes\)$"):
        apply_knobs(load_profile(DEMO), Knobs(steps="8,'16'"))


def test_steps_from_a_search_or_a_rate_sweep_show_empty_with_a_note() -> None:
    """The form never shows a ``steps.concurrency`` that would not run: a search or a rate sweep picks the steps."""
    demo = load_profile(DEMO)
    assert steps_note(demo) == "" and form_defaults(demo, DEMO)["steps"] == "8,16,32,64"
    slo = load_profile(PROFILES_DIR / "slo-search.yaml")
    assert steps_note(slo) == "the SLO search picks the steps (concurrency 1-128, search: in the profile)"
    assert form_defaults(slo, PROFILES_DIR / "slo-search.yaml")["steps"] == ""
    rate = load_profile(PROFILES_DIR / "rate-sweep.yaml")
    assert steps_note(rate) == "rate sweep: 1, 2, 4, 8 requests/s (rate.rates in the profile)"
    assert form_defaults(rate, PROFILES_DIR / "rate-sweep.yaml")["steps"] == ""


def test_a_prompts_file_of_plain_strings_names_the_file_and_the_item(tmp_path: Path) -> None:
    """A prompts file holding a list of strings (not prompt mappings): the file, the item and the expected shape
    in one line (it said "form values make the profile invalid" without naming the file)."""
    f = tmp_path / "list.yaml"
    f.write_text("- Explain quicksort\n- Write a haiku\n")
    with pytest.raises(ProfileError) as ei:
        apply_knobs(load_profile(DEMO), Knobs(prompts_file=str(f)))
    assert str(ei.value) == (f"prompts file {f}: item 0 is str 'Explain quicksort': each prompt is a mapping with "
                             "id and text, e.g. {id: q1, text: 'Explain ...'}")


def test_knobs_that_make_an_invalid_profile_are_named_with_the_key(tmp_path: Path) -> None:
    f = tmp_path / "p.yaml"
    f.write_text("- {id: a}\n")  # no text
    with pytest.raises(ProfileError) as ei:
        apply_knobs(load_profile(DEMO), Knobs(prompts_file=str(f)))
    assert str(ei.value).startswith(f"prompts file {f}: the profile they make is invalid: prompts.0: "), ei.value
    assert "give exactly one of 'text' or 'messages'" in str(ei.value)


@pytest.mark.parametrize("dur", ["0.05", "0.999"])
def test_a_step_shorter_than_the_shapes_tick_is_refused_naming_the_minimum(dur: str) -> None:
    """--step-duration 0.05 ran about 1 s per step (the shape ticks once a second): refused, naming the minimum;
    1 s (the tick) is accepted."""
    with pytest.raises(ProfileError, match=rf"^step_duration: {dur} s is shorter than the load shape's tick: at "
                                           r"least 1 s"):
        apply_knobs(load_profile(DEMO), Knobs(step_duration=dur))
    assert apply_knobs(load_profile(DEMO), Knobs(step_duration="1")).steps.duration == SHAPE_TICK_S == 1.0


def test_an_invalid_knob_is_explained_without_pydantics_prefix() -> None:
    """pydantic prefixes a validator's message with "Value error, "; the profile file's errors drop it, and so do
    the options' / form's."""
    with pytest.raises(ProfileError) as ei:
        apply_knobs(load_profile(PROFILES_DIR / "slo-search.yaml"), Knobs(steps="4,8"))
    assert str(ei.value) == ("the options / form fields steps: the profile they make is invalid: search: the search "
                             "picks the steps; leave out steps.concurrency"), ei.value
