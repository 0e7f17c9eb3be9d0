"""Profile loading: the shipped profiles validate, and bad input names the file, the key and the problem."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.config import PROFILES_DIR, Profile, ProfileError, load_profile, resolve_profile_path

ROOT = Path(__file__).resolve().parent.parent


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "p.yaml"
    p.write_text(text)
    return p


def test_shipped_profiles_load() -> None:
    k26 = load_profile(ROOT / "profiles" / "k26.yaml")
    assert [p.id for p in k26.prompts] == ["quicksort", "quantum", "redis-guide"]
    assert all(p.max_tokens == 4096 for p in k26.prompts)
    assert k26.steps.concurrency == [8, 16, 32, 64]
    assert (k26.warmup.prompt, k26.warmup.max_tokens, k26.warmup.timeout) == ("Say just 'OK'", 16, 300)
    assert k26.report.hours_to_n == [100_000, 200_000, 500_000, 900_000]
    demo = load_profile(ROOT / "profiles" / "demo.yaml")
    total = demo.single_stream.duration + demo.steps.duration * len(demo.steps.concurrency)
    assert total < 150  # the demo must finish in under 3 minutes with warm-up and report


def test_body_precedence_and_thinking(tmp_path: Path) -> None:
    p = load_profile(
        write(
            tmp_path,
            """
name: t
request: {max_tokens: 100, temperature: 0.5, thinking: true, continuous_usage_stats: true,
          extra_body: {top_k: 20, chat_template_kwargs: {x: 1}}}
prompts:
  - {id: a, text: hi}
  - {id: b, messages: [{role: system, content: s}, {role: user, content: u}], max_tokens: 7, thinking: false,
     extra_body: {top_k: 5}}
""",
        )
    )
    a = p.build_body(p.prompts[0], "m")
    assert a["model"] == "m" and a["max_tokens"] == 100 and a["temperature"] == 0.5
    assert a["messages"] == [{"role": "user", "content": "hi"}]
    assert a["chat_template_kwargs"] == {"thinking": True, "enable_thinking": True, "x": 1}
    assert a["stream_options"] == {"include_usage": True, "continuous_usage_stats": True}
    assert a["top_k"] == 20
    b = p.build_body(p.prompts[1], "m")
    assert b["max_tokens"] == 7 and b["top_k"] == 5
    assert b["chat_template_kwargs"]["thinking"] is False and b["chat_template_kwargs"]["enable_thinking"] is False
    assert b["messages"][0]["role"] == "system"


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("name: t\nprompts: []\n", "prompts: List should have at least 1 item"),
        ("name: t\nprompts:\n  - {id: a}\n", "prompts.0: give exactly one of 'text' or 'messages'"),
        ("name: t\nprompts:\n  - {id: a, text: x, weight: 0}\n", "prompts.0.weight: Input should be greater than 0"),
        ("name: t\nprompts:\n  - {id: a, text: x}\nsteps: {concurrency: [8, 0]}\n", "steps.concurrency"),
        ("name: t\nprompts:\n  - {id: a, text: x}\nstepz: {}\n", "stepz: unknown key (typo?)"),
        ("name: t\nprompts:\n  - {id: a, text: x}\n  - {id: a, text: y}\n", "prompt id 'a' appears twice"),
        ("name: t\nprompts:\n  - {id: a, text: x}\ntarget: {api_key_env: 'sk-abc 123'}\n", "target.api_key_env"),
        ("name: t\nprompts:\n  - {id: a, text: x, max_tokens: -1}\n", "prompts.0.max_tokens"),
        ("name: t\nprompts:\n  - {id: a, text: x, class: ''}\n", "prompts.0.class: '': a class is"),
        ("name: t\nprompts:\n  - {id: a, text: x, class: '  '}\n", "prompts.0.class: '  ': a class is"),
        ("name: t\nprompts:\n  - {id: a, text: x, class: \"a\\nb\"}\n", "prompts.0.class: 'a\\nb': a class is"),
        ("name: t\nprompts:\n  - {id: a, text: x, class: other}\n", "prompts.0.class: 'other' is reserv"),
        ("name: t\nprompts:\n  - {id: a, text: x, class: [a]}\n", "prompts.0.class: Input should be a valid string"),
        ("name: t\nprompts:\n  - {id: warmup, text: x}\n", "prompts.0: id 'warmup' is reserved"),
        ("name: t\nprompts: [{id: a, text: x}]\nsimulator: {preset: nope}\n", "simulator.preset: unknown simulator"),
        ("name: t\nprompts: [{id: a, text: x}]\nsimulator: {flavour: tgi}\n", "simulator.flavour: unknown simulat"),
        ("name: t\nprompts: [\n", "not valid YAML (line"),
        ("- a\n- b\n", "expected a mapping"),
        # issue 17: silent or unclear before
        ("name: t\nprompts:\n  - {id: a, text: ''}\n", "prompts.0: prompt 'a': text is empty: give the message"),
        ("name: t\nprompts:\n  - {id: a, text: '  '}\n", "prompts.0: prompt 'a': text is empty (only spaces)"),
        ("name: t\nprompts: [{id: a, text: hi}]\nwarmup: {prompt: ''}\n", "warmup.prompt: empty: give the message"),
        ("name: t\nprompts: [{id: a, text: x}]\nsteps: {duration: '30'}\n",
         "steps.duration: '30' is a quoted string, not a number: write it without quotes (30)"),
        ("name: t\nprompts: [{id: a, text: x}]\nsteps:\n  - 8\n  - 16\n",
         "steps: expected a section of keys (key: value lines under it), got a list"),
        ("name: t\nprompts: [{id: a, text: x}]\nreport: {hours_to_n: [1e5]}\n",
         "report.hours_to_n.0: '1e5' is a string, not a number: YAML reads an exponent without a dot and sign (1e5) "
         "as text; write 100000"),
        ("name: t\nprompts: [{id: a, text: x}]\nsteps: {duration: 2.5e1}\n",
         "steps.duration: '2.5e1' is a string, not a number: YAML reads an exponent without a dot and sign (1e5) as "
         "text; write 25"),
        ("name: t\nprompts: [{id: a, text: x}]\nsteps: {concurrency: ['8', 16]}\n",
         "steps.concurrency.0: '8' is a quoted string, not a number: write it without quotes (8)"),
        ("name: t\nprompts: [{id: a, text: x}]\nsteps: {duration: 'soon'}\n",
         "steps.duration: Input should be a valid number"),
    ],
)
def test_bad_profiles_name_file_key_and_problem(tmp_path: Path, text: str, needle: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ProfileError) as e:
        load_profile(path)
    msg = str(e.value)
    assert str(path) in msg
    assert needle in msg


def test_missing_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ProfileError, match="cannot read profile") as e:
        load_profile(tmp_path / "nope.yaml")
    assert "shipped" not in str(e.value)  # a path: no list of names
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ProfileError, match=r"^nope: cannot read profile: No such file or directory \(a file, or one "
                                           r"of the shipped profiles in .*profiles: .*demo, .*k26"):
        load_profile("nope")  # a bare name found nowhere: the shipped names


def test_api_key_comes_from_the_named_variable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    p = load_profile(write(tmp_path, "name: t\ntarget: {api_key_env: MY_KEY}\nprompts:\n  - {id: a, text: x}\n"))
    monkeypatch.setenv("MY_KEY", "sk-secret-value")
    assert p.target.api_key() == "sk-secret-value"
    assert "sk-secret-value" not in str(p.public_dict())


def test_a_profile_must_measure_something(tmp_path: Path) -> None:
    path = write(
        tmp_path, "name: t\nprompts:\n  - {id: a, text: x}\nsingle_stream: {duration: 0}\nsteps: {concurrency: []}\n"
    )
    with pytest.raises(ProfileError, match="nothing to measure"):
        load_profile(path)


def test_prompt_class_groups_prompts(tmp_path: Path) -> None:
    p = load_profile(
        write(tmp_path, "name: t\nprompts:\n  - {id: a1, class: short, text: x}\n  - {id: b, text: y}\n")
    )
    assert [q.label for q in p.prompts] == ["short", "b"]  # the class, else the id
    assert load_profile(write(tmp_path, "name: t\nprompts:\n  - {id: a, class: 7, text: x}\n")).prompts[0].label == "7"
    assert p.public_dict()["prompts"][0]["class"] == "short"  # run.json spells it as the profile does


def test_profile_name_is_not_hidden_by_a_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "demo").mkdir()
    assert resolve_profile_path("demo", None) == PROFILES_DIR / "demo.yaml"
    (tmp_path / "mine.yaml").write_text("name: mine\n")
    assert resolve_profile_path("mine.yaml", None) == Path("mine.yaml")  # a file here still wins
    assert resolve_profile_path("nothing", None) == Path("nothing")  # left for load_profile's error


def test_usable_and_cost_sections(tmp_path: Path) -> None:
    p = load_profile(write(tmp_path, """
prompts: [{id: a, text: hi}]
usable: {min_answer_tokens: 5, answer_regex: 'ANSWER: \\d+', answer_json: true, buffer_chars: 4096}
cost: {gpu_hour_usd: 2.5, gpus: 8}
"""))
    rule = p.usable_rule()
    assert rule is not None and rule.min_answer_tokens == 5 and rule.answer_json and rule.buffer_chars == 4096
    assert rule.answer_regex is not None and rule.answer_regex.search("x ANSWER: 42") and rule.needs_text
    assert p.cost is not None and p.cost.usd_per_hour == 20.0
    flat = load_profile(write(tmp_path, "prompts: [{id: a, text: hi}]\ncost: {hour_usd: 12.5}\n"))
    assert flat.cost is not None and flat.cost.usd_per_hour == 12.5 and flat.usable_rule() is None
    assert flat.public_dict()["cost"] == {"gpu_hour_usd": None, "gpus": None, "hour_usd": 12.5}


@pytest.mark.parametrize(
    ("section", "needle"),
    [
        ("usable: {answer_regex: '(unclosed'}", "usable.answer_regex: not a valid regular expression"),
        ("usable: {min_answer_tokens: 0}", "usable.min_answer_tokens: Input should be greater than or equal to 1"),
        ("usable: {answer_jsn: true}", "usable.answer_jsn: unknown key (typo?)"),
        ("usable: {buffer_chars: 0}", "usable.buffer_chars: Input should be greater than or equal to 1"),
        ("cost: {gpu_hour_usd: 2.5}", "cost: gpu_hour_usd needs gpus"),
        ("cost: {gpus: 8}", "cost: gpus needs gpu_hour_usd"),
        ("cost: {hour_usd: 3, gpus: 2}", "cost: give either hour_usd, or gpu_hour_usd with gpus, not both"),
        ("cost: {}", "cost: give hour_usd, or gpu_hour_usd with gpus"),
        ("cost: {hour_usd: -1}", "cost.hour_usd: Input should be greater than 0"),
    ],
)
def test_bad_usable_and_cost_name_file_and_key(tmp_path: Path, section: str, needle: str) -> None:
    path = write(tmp_path, f"prompts: [{{id: a, text: hi}}]\n{section}\n")
    with pytest.raises(ProfileError) as e:
        load_profile(path)
    assert f"{path}: {needle}" in str(e.value)


def test_soak_profile_and_slo_section(tmp_path: Path) -> None:
    soak = load_profile(ROOT / "profiles" / "soak.yaml")
    assert soak.steps.concurrency == [16] and soak.single_stream.duration == 0
    assert soak.target.base_url is None and soak.report.slice_s == 120
    assert soak.steps.duration >= 10 * soak.report.slice_s
    assert load_profile(ROOT / "profiles" / "k26.yaml").report.slice_s == 300.0  # the default
    p = load_profile(write(tmp_path, """
prompts: [{id: a, text: hi}]
report: {slice_s: 60}
slo: {ttft_s: 2, ttfat_s: 30.5, tpot_s: 0.05, e2e_s: 600}
"""))
    assert p.report.slice_s == 60.0
    assert p.slo is not None and p.slo.target_share == 0.95
    assert p.slo.thresholds() == {"ttft_s": 2.0, "ttfat_s": 30.5, "tpot_s": 0.05, "e2e_s": 600.0}
    one = load_profile(write(tmp_path, "prompts: [{id: a, text: hi}]\nslo: {e2e_s: 60, target_share: 1}\n"))
    assert one.slo is not None and one.slo.thresholds() == {"e2e_s": 60.0} and one.slo.target_share == 1.0
    assert one.public_dict()["slo"]["e2e_s"] == 60.0
    assert load_profile(write(tmp_path, "prompts: [{id: a, text: hi}]\n")).slo is None


@pytest.mark.parametrize(
    ("section", "needle"),
    [
        ("slo: {}", "slo: give at least one SLO: <ttft|ttfat|tpot|e2e>_p<q>_s, seconds (e.g. ttft_p95_s: 2)"),
        ("slo: {target_share: 0.9}", "slo: give at least one SLO"),
        ("slo: {ttft_s: 0}", "slo.ttft_s: Input should be greater than 0"),
        ("slo: {tpot_s: -0.1}", "slo.tpot_s: Input should be greater than 0"),
        ("slo: {e2e_s: soon}", "slo.e2e_s: Input should be a valid number"),
        ("slo: {ttft: 2}", "slo.ttft: unknown key (typo?)"),
        ("slo: {ttft_s: 2, target_share: 1.5}", "slo.target_share: Input should be less than or equal to 1"),
        ("slo: {ttft_s: 2, target_share: 0}", "slo.target_share: Input should be greater than 0"),
        ("report: {slice_s: 0}", "report.slice_s: Input should be greater than 0"),
    ],
)
def test_bad_slo_and_slice_name_file_and_key(tmp_path: Path, section: str, needle: str) -> None:
    path = write(tmp_path, f"prompts: [{{id: a, text: hi}}]\n{section}\n")
    with pytest.raises(ProfileError) as e:
        load_profile(path)
    assert f"{path}: {needle}" in str(e.value)


@pytest.mark.parametrize(
    ("section", "needle"),
    [
        ("cost: {hour_usd: .inf}", "cost.hour_usd: Input should be a finite number"),
        ("cost: {gpu_hour_usd: .nan, gpus: 2}", "cost.gpu_hour_usd: Input should be a finite number"),
        ("slo: {ttft_s: .inf}", "slo.ttft_s: Input should be a finite number"),
        ("slo: {e2e_s: 60, target_share: .nan}", "slo.target_share: Input should be a finite number"),
        ("report: {slice_s: .inf}", "report.slice_s: Input should be a finite number"),
        ("steps: {duration: .inf}", "steps.duration: Input should be a finite number"),
        ("timeouts: {total: .inf}", "timeouts.total: Input should be a finite number"),
        ("request: {temperature: .nan}", "request.temperature: Input should be a finite number"),
        ("simulator: {time_scale: .inf}", "simulator.time_scale: Input should be a finite number"),
        ("request: {max_tokens: true}", "request.max_tokens: Input should be a valid integer"),
        ("steps: {concurrency: [8, true]}", "steps.concurrency.1: Input should be a valid integer"),
        ("cost: {gpu_hour_usd: 2, gpus: true}", "cost.gpus: Input should be a valid integer"),
        ("slo: {ttft_s: true}", "slo.ttft_s: Input should be a valid number"),
        ("warmup: {timeout: false}", "warmup.timeout: Input should be a valid number"),
        ("report: {hours_to_n: [1000, true]}", "report.hours_to_n.1: Input should be a valid integer"),
        ("request: {max_tokens: '512'}", "request.max_tokens: '512' is a quoted string, not a number"),
    ],
)
def test_numbers_must_be_finite_numbers_not_booleans(tmp_path: Path, section: str, needle: str) -> None:
    path = write(tmp_path, f"prompts: [{{id: a, text: hi}}]\n{section}\n")
    with pytest.raises(ProfileError) as e:
        load_profile(path)
    assert f"{path}: {needle}" in str(e.value)
    assert "\n" not in str(e.value)  # one problem, one line


def test_a_prompt_number_must_not_be_a_boolean_or_infinite(tmp_path: Path) -> None:
    for field, value, needle in (("max_tokens", "true", "valid integer"), ("weight", ".inf", "finite number"),
                                 ("weight", "true", "valid number")):
        path = write(tmp_path, f"prompts: [{{id: a, text: hi, {field}: {value}}}]\n")
        with pytest.raises(ProfileError, match=f"prompts.0.{field}: Input should be a {needle}"):
            load_profile(path)
    ok = load_profile(write(tmp_path, "prompts: [{id: a, text: hi, weight: 2, max_tokens: 64}]\nslo: {ttft_s: 2}\n"))
    assert ok.prompts[0].weight == 2.0 and ok.slo is not None and ok.slo.ttft_s == 2.0  # an int is a float


# -- one SLO spelling: <metric>_p<q>_s (the older ttft_s + target_share still read, with a warning) ----------------


def test_slo_percentile_spelling_is_the_same_model_as_the_older_one(tmp_path: Path) -> None:
    new = load_profile(write(tmp_path, "prompts: [{id: a, text: hi}]\n"
                                       "slo: {ttft_p95_s: 2, ttfat_p95_s: 30.5, tpot_p95_s: 0.05, e2e_p95_s: 600}\n"))
    old = load_profile(write(tmp_path, "prompts: [{id: a, text: hi}]\n"
                                       "slo: {ttft_s: 2, ttfat_s: 30.5, tpot_s: 0.05, e2e_s: 600}\n"))
    assert new.slo == old.slo and new.slo is not None
    assert new.slo.target_share == 0.95
    assert new.slo.keys() == {"ttft_p95_s": 2.0, "ttfat_p95_s": 30.5, "tpot_p95_s": 0.05, "e2e_p95_s": 600.0}
    for q, share in (("99.9", 0.999), ("100", 1.0), ("50", 0.5), ("80", 0.8)):
        p = load_profile(write(tmp_path, f"prompts: [{{id: a, text: hi}}]\nslo: {{e2e_p{q}_s: 60}}\n"))
        assert p.slo is not None and p.slo.target_share == share and p.slo.keys() == {f"e2e_p{q}_s": 60.0}
    # a worker rebuilds the model from run.json's form, which stays the attribute form
    assert Profile.model_validate(new.public_dict()).slo == new.slo


@pytest.mark.parametrize(
    ("section", "needle"),
    [
        ("slo: {ttft_p95_s: 2, e2e_p99_s: 60}", "slo: every SLO of this section names the same percentile, the "
         "share of a step's requests that must meet all of them together; got ttft_p95_s (p95), e2e_p99_s (p99)"),
        ("slo: {ttft_p95_s: 2, e2e_s: 60}", "slo: write every SLO as <metric>_p<q>_s; e2e_s is the older spelling: "
         "give ttft_p95_s alone"),
        ("slo: {ttft_p95_s: 2, target_share: 0.9}", "slo: write every SLO as <metric>_p<q>_s; target_share is"),
        ("slo: {ttft_p95_s: 0}", "slo: ttft_p95_s: the threshold must be a number of seconds > 0, got 0"),
        ("slo: {ttft_p95_s: true}", "slo: ttft_p95_s: the threshold must be a number of seconds > 0, got True"),
        ("slo: {ttft_p95_s: .inf}", "slo: ttft_p95_s: the threshold must be a number of seconds > 0, got inf"),
        ("slo: {ttft_p95_s: '2'}", "slo: ttft_p95_s: the threshold must be a number of seconds > 0, got '2'"),
        ("slo: {ttft_p0_s: 2}", "slo: ttft_p0_s: the percentile must be above 0 and at most 100"),
        ("slo: {ttft_p101_s: 2}", "slo: ttft_p101_s: the percentile must be above 0 and at most 100"),
        ("slo: {ttft_p95_s: 2, ttft_p95.0_s: 3}", "slo: ttft_p95.0_s: a second SLO of ttft"),
        ("slo: {ttft_p95_s: 2, itl_p95_s: 1}", "slo.itl_p95_s: unknown key (typo?)"),
    ],
)
def test_bad_percentile_slo_names_file_and_key(tmp_path: Path, section: str, needle: str) -> None:
    path = write(tmp_path, f"prompts: [{{id: a, text: hi}}]\n{section}\n")
    with pytest.raises(ProfileError) as e:
        load_profile(path)
    assert f"{path}: {needle}" in str(e.value)


def test_older_slo_spelling_warns_once_per_file_and_key(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = write(tmp_path, "prompts: [{id: a, text: hi}]\nslo: {ttft_s: 2, e2e_s: 60, target_share: 0.99}\n")
    with caplog.at_level("WARNING", logger="llmload"):
        first = load_profile(path)
        again = load_profile(path)
    assert first == again and first.slo is not None and first.slo.target_share == 0.99
    warned = [r.getMessage() for r in caplog.records if "deprecated" in r.getMessage()]
    assert warned == [
        f"{path}: slo.ttft_s: deprecated spelling, still read; write ttft_p99_s: 2 instead",
        f"{path}: slo.e2e_s: deprecated spelling, still read; write e2e_p99_s: 60 instead",
        f"{path}: slo.target_share: deprecated spelling, still read; write the percentile in each key's name, p99 "
        "instead",
    ]
    caplog.clear()
    with caplog.at_level("WARNING", logger="llmload"):
        load_profile(write(tmp_path, "prompts: [{id: a, text: hi}]\nslo: {ttft_p99_s: 2}\n"))
    assert not [r for r in caplog.records if "deprecated" in r.getMessage()]


# -- secrets: headers_env, secret values, the public (run.json) form --------------------------------------------
_AZ_KEY = "azk-0123456789abcdef"


def test_headers_env_reads_values_from_the_environment_and_they_are_secrets(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AZ_TEST_KEY", _AZ_KEY)
    monkeypatch.setenv("LLMLOAD_TEST_KEY", "sk-test-000111222333")
    p = Profile.model_validate({
        "name": "s", "prompts": [{"id": "a", "text": "hi"}],
        "target": {"base_url": "http://127.0.0.1:9/?api-key=qkey-55556666", "api_key_env": "LLMLOAD_TEST_KEY",
                   "headers": {"x-api-key": "hdr-key-7777", "X-Trace": "plain"},
                   "headers_env": {"api-key": "AZ_TEST_KEY"}},
    })
    assert p.target.all_headers() == {"x-api-key": "hdr-key-7777", "X-Trace": "plain", "api-key": _AZ_KEY}
    assert set(p.target.secret_values()) == {_AZ_KEY, "sk-test-000111222333", "hdr-key-7777", "qkey-55556666"}
    public = str(p.public_dict())
    for secret in ("hdr-key-7777", "qkey-55556666", _AZ_KEY, "sk-test-000111222333"):
        assert secret not in public
    assert p.public_dict()["target"]["headers"] == {"x-api-key": "[redacted]", "X-Trace": "plain"}
    assert p.public_dict()["target"]["headers_env"] == {"api-key": "AZ_TEST_KEY"}


def test_headers_env_with_an_unset_variable_names_key_and_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AZ_TEST_UNSET", raising=False)
    p = Profile.model_validate(
        {"name": "s", "prompts": [{"id": "a", "text": "hi"}], "target": {"headers_env": {"api-key": "AZ_TEST_UNSET"}}}
    )
    assert p.target.missing_header_env() == [("api-key", "AZ_TEST_UNSET")]
    with pytest.raises(ValueError, match=r"target\.headers_env\.api-key: environment variable AZ_TEST_UNSET"):
        p.target.all_headers()


def test_headers_env_value_must_be_a_variable_name(tmp_path: Path) -> None:
    f = tmp_path / "p.yaml"
    f.write_text("name: s\ntarget: {headers_env: {api-key: 'sk-a real key'}}\n")
    with pytest.raises(ProfileError, match="headers_env") as e:
        load_profile(f)
    assert str(f) in str(e.value)


def test_a_step_shorter_than_the_shapes_tick_is_refused(tmp_path: Path) -> None:
    """steps.duration 0.05 ran about 1 s per step (the shape ticks once a second): refused, naming the key and the
    minimum (harness.config.SHAPE_TICK_S); exactly one tick is accepted."""
    with pytest.raises(ProfileError) as e:
        load_profile(write(tmp_path, "prompts: [{id: a, text: hi}]\nsteps: {duration: 0.05}\n"))
    assert "p.yaml: steps.duration: 0.05 s is shorter than the load shape's tick (1 s" in str(e.value)
    assert "give at least 1 s" in str(e.value)
    ok = load_profile(write(tmp_path, "prompts: [{id: a, text: hi}]\nsteps: {duration: 1}\n"))
    assert ok.steps.duration == 1.0


def test_a_temperature_above_openais_range_is_accepted_with_one_warning(tmp_path: Path,
                                                                       caplog: pytest.LogCaptureFixture) -> None:
    """temperature: 7 was accepted silently: vLLM samples at it, OpenAI-style servers refuse it (HTTP 400)."""
    body = "prompts: [{id: a, text: hi}]\nrequest: {temperature: %s}\n"
    with caplog.at_level("WARNING", logger="llmload"):
        p = write(tmp_path, body % "7")
        assert load_profile(p).request.temperature == 7.0
        load_profile(p)  # once per file and value
    warned = [r.getMessage() for r in caplog.records if "request.temperature" in r.getMessage()]
    assert warned == [f"{p}: request.temperature: 7 is above 2, OpenAI's maximum: vLLM and SGLang accept it, servers "
                      "that follow OpenAI's range refuse every request (HTTP 400), and sampling this hot makes outputs "
                      "run to max_tokens; a typo for 0.7?"]
    caplog.clear()
    with caplog.at_level("WARNING", logger="llmload"):
        assert load_profile(write(tmp_path, body % "2")).request.temperature == 2.0
    assert not [r for r in caplog.records if "temperature" in r.getMessage()]
