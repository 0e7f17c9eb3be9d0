"""harness.locust.webrun.start_run: the one start of a run, for the web UI's Start and a headless run alike; what
each writes to ``run.json`` is pinned here."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from harness.config import load_profile
from harness.locust.form import Knobs
from harness.locust.setup import SimHolder
from harness.locust.webrun import (
    FORM_PATH,
    SHOWN_FIELD,
    StartError,
    form_values,
    headless_launch,
    install,
    launch_of,
    output_dir_of,
    start_run,
)
from harness.runtime import Run

#: ``run.json``'s keys when a run starts, written by :class:`harness.records.RunDir` for every run.
_COMMON = {"run_id", "status", "start_wall", "end_wall", "hostname", "argv", "versions", "client_path",
           "profile_path", "profile", "target", "simulator", "prompt_source"}


def _profile(tmp_path: Path) -> Path:
    prof = tmp_path / "p.yaml"
    prof.write_text("name: s\ntarget: {base_url: 'http://127.0.0.1:9/v1', model: m}\n"
                    "prompts: [{id: a, text: hi}, {id: b, text: ho}]\n"
                    "steps: {concurrency: [1, 2], duration: 5, drain_timeout: 7}\n"
                    "output: {dir: '%s'}\n" % (tmp_path / "runs"))
    return prof


def _opts(**kw: Any) -> SimpleNamespace:
    base: dict[str, Any] = dict(output_dir=None, stop_timeout=None, profile="", web_profile="", mode="sweep")
    base.update(kw)
    return SimpleNamespace(**base)


def _env(opts: SimpleNamespace) -> SimpleNamespace:
    return SimpleNamespace(host=None, parsed_options=opts, stop_timeout=None)


def _meta(run: Run) -> dict[str, Any]:
    assert run.ctx is not None and run.ctx.run_dir is not None
    meta = json.loads((run.ctx.run_dir.path / "run.json").read_text())
    run.ctx.run_dir.close()
    return meta


def test_a_headless_start_writes_todays_run_json_keys(tmp_path: Path) -> None:
    """A headless run goes through the web UI's start; its run.json keeps the headless keys: no ``mode``, ``form``,
    ``fixed``, and ``knobs`` only when the command line gave some."""
    prof = _profile(tmp_path)
    run, opts = Run(), _opts()
    env = _env(opts)
    ctx = start_run(run, env, {"host": ""}, headless_launch(opts, None, "local", str(prof), SimHolder()))
    assert (ctx.web, ctx.mode, ctx.fixed, run.state) == (False, "sweep", None, "running")
    assert (env.host, opts.host, env.stop_timeout) == ("http://127.0.0.1:9/v1", "http://127.0.0.1:9/v1", 7)
    assert set(_meta(run)) == _COMMON

    run, opts = Run(), _opts(steps="3", stop_timeout=2)
    env = _env(opts)
    env.stop_timeout = 2
    start_run(run, env, {"host": "", "mode": "fixed"}, headless_launch(opts, None, "local", str(prof), SimHolder()))
    assert run.ctx is not None and run.ctx.mode == "sweep"  # headless: always the profile's sweep
    assert run.ctx.profile.steps.concurrency == [3] and env.stop_timeout == 2  # --stop-timeout given: kept
    meta = _meta(run)
    assert set(meta) == _COMMON | {"knobs"} and meta["knobs"] == {"steps": "3"}


def test_a_headless_fixed_run_holds_the_command_lines_users_for_its_run_time(tmp_path: Path) -> None:
    """``--headless --mode fixed -u N -r R -t T``: the web UI's fixed mode from the command line; run.json holds the
    mode and the fixed load (no form); a missing or bad value is refused naming the option."""
    prof = _profile(tmp_path)
    run, opts = Run(), _opts(mode="fixed", num_users=3, spawn_rate=1.5, run_time=20)
    ctx = start_run(run, _env(opts), {"host": ""}, headless_launch(opts, None, "local", str(prof), SimHolder()))
    assert (ctx.web, ctx.mode) == (False, "fixed")
    assert ctx.fixed is not None and (ctx.fixed.users, ctx.fixed.spawn_rate, ctx.fixed.run_time) == (3, 1.5, 20.0)
    meta = _meta(run)
    assert set(meta) == _COMMON | {"mode", "fixed"}
    assert meta["mode"] == "fixed" and meta["fixed"] == {"users": 3, "spawn_rate": 1.5, "run_time_s": 20.0}

    run, opts = Run(), _opts(mode="fixed", num_users=4, spawn_rate=None, run_time=None)  # until Ctrl-C, ramp 4/s
    ctx = start_run(run, _env(opts), {"host": ""}, headless_launch(opts, None, "local", str(prof), SimHolder()))
    assert ctx.fixed is not None and (ctx.fixed.users, ctx.fixed.spawn_rate, ctx.fixed.run_time) == (4, 4.0, None)
    _meta(run)

    for users, run_time, message in ((None, None, "fixed mode needs -u N: the number of users to hold"),
                                     (0, None, "fixed mode: -u/--users must be at least 1 (give -u N)"),
                                     (2, 0, "fixed mode: -t/--run-time must be > 0 (leave -t out: until Ctrl-C)")):
        opts = _opts(mode="fixed", num_users=users, spawn_rate=None, run_time=run_time)
        with pytest.raises(StartError, match=message.replace("(", r"\(").replace(")", r"\)")):
            start_run(Run(), _env(opts), {"host": ""}, headless_launch(opts, None, "local", str(prof), SimHolder()))
    assert not (tmp_path / "runs").exists() or len(list((tmp_path / "runs").iterdir())) == 2


def test_a_web_start_writes_the_mode_form_and_knobs(tmp_path: Path) -> None:
    prof = _profile(tmp_path)
    opts = _opts(profile=str(prof))
    launch = launch_of(opts, None, "local", prof, load_profile(prof), SimHolder())
    run = Run()
    form = {"mode": "sweep", "host": "http://127.0.0.1:9/v1", "api_key": "sk-x", "steps": "4"}
    ctx = start_run(run, _env(opts), form, launch)
    assert (ctx.web, ctx.mode) == (True, "sweep")
    meta = _meta(run)
    assert set(meta) == _COMMON | {"mode", "form", "knobs"}
    assert meta["form"]["api_key"] == "***" and meta["knobs"] == {"steps": "4"}

    run = Run()
    form = {"mode": "fixed", "host": "", "user_count": "3", "spawn_rate": "1", "run_time": "20s"}
    ctx = start_run(run, _env(opts), form, launch)
    meta = _meta(run)
    assert set(meta) == _COMMON | {"mode", "form", "knobs", "fixed"}
    assert meta["fixed"] == {"users": 3, "spawn_rate": 1.0, "run_time_s": 20.0} and ctx.fixed is not None


def test_a_bad_start_is_one_line_with_its_cause_and_leaves_no_run(tmp_path: Path) -> None:
    """A headless process prints the cause (:func:`harness.locust.listeners._on_init`), the web UI the one line."""
    prof = _profile(tmp_path)
    opts = _opts(max_tokens="many")
    run = Run()
    with pytest.raises(StartError) as err:
        start_run(run, _env(opts), {"host": ""}, headless_launch(opts, None, "local", str(prof), SimHolder()))
    assert "--max-tokens" in str(err.value) and "\n" not in str(err.value)
    assert err.value.__cause__ is not None and run.ctx is None and not (tmp_path / "runs").exists()
    assert Knobs.from_options(opts).max_tokens == "many"


@pytest.mark.parametrize(("knob", "value", "option"), [("max_tokens", "many", "--max-tokens: 'many'"),
                                                       ("step_duration", "-5", "--step-duration: -5 must be > 0"),
                                                       ("prompt_mix", "nope:1", "--prompt-mix: no prompt 'nope'")])
def test_a_headless_start_names_the_command_line_option_not_the_form_field(tmp_path: Path, knob: str, value: str,
                                                                           option: str) -> None:
    prof = _profile(tmp_path)
    opts = _opts(**{knob: value})
    with pytest.raises(StartError) as err:
        start_run(Run(), _env(opts), {"host": ""}, headless_launch(opts, None, "local", str(prof), SimHolder()))
    assert str(err.value).startswith(option) and str(err.value.__cause__).startswith(option)


def test_a_knob_option_given_empty_on_the_command_line_is_refused(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """``--prompt-mix ''`` used to run the profile's mix without a word (Locust's default is "" too): now the start
    is refused naming the option, before any run directory (issue 17, an empty --prompt-mix)."""
    from harness.locust.webrun import blank_knob_options

    assert blank_knob_options(["--prompt-mix", "", "--steps=", "--step-duration", " ", "--max-tokens", "9",
                               "--prompt-mix", ""]) == ("--prompt-mix", "--steps", "--step-duration")
    assert blank_knob_options(["--steps", "8,16", "--prompt-mix"]) == ()  # a value, or none at all (argparse's)
    prof = _profile(tmp_path)
    opts = _opts()
    monkeypatch.setattr("sys.argv", ["locust", "-f", "k26.py", "--headless", "--prompt-mix", ""])
    run = Run()
    with pytest.raises(StartError) as err:
        start_run(run, _env(opts), {"host": ""}, headless_launch(opts, None, "local", str(prof), SimHolder()))
    assert str(err.value) == "--prompt-mix: empty: give a value or leave the option out (the profile's applies)"
    assert run.ctx is None and not (tmp_path / "runs").exists()


def _other(tmp_path: Path) -> Path:
    """A second profile (other prompts, steps and duration) to pick in the form instead of the launch profile."""
    prof = tmp_path / "q.yaml"
    prof.write_text("name: q\ntarget: {base_url: 'http://127.0.0.1:9/v1', model: m}\n"
                    "prompts: [{id: c, text: hey, max_tokens: 32}]\n"
                    "steps: {concurrency: [6], duration: 9}\n"
                    "output: {dir: '%s'}\n" % (tmp_path / "runs"))
    return prof


def _web_launch(tmp_path: Path, **kw: Any) -> tuple[Any, SimpleNamespace]:
    prof = _profile(tmp_path)
    opts = _opts(profile=str(prof), **kw)
    return launch_of(opts, None, "local", prof, load_profile(prof), SimHolder()), opts


def test_the_form_values_of_a_picked_profile_are_its_own_and_a_changed_field_overrides(tmp_path: Path) -> None:
    """The form's script fills the picked profile's values (:func:`form_values`); sent back unchanged they run that
    profile as it is (no knobs, the command line's ``--steps`` of the launch profile not applied); a field changed
    after picking is applied and recorded in run.json's knobs."""
    launch, opts = _web_launch(tmp_path, steps="3")
    other = _other(tmp_path)
    path, _, shown, given = form_values(launch, {"profile": str(other)})
    assert path == other and given == Knobs()
    assert {k: shown[k] for k in ("prompt_mix", "max_tokens", "steps", "step_duration")} == {
        "prompt_mix": "c:1", "max_tokens": "32", "steps": "6", "step_duration": "9"}
    # the launch profile: what the form showed at launch, the command line's knobs
    _, _, shown0, given0 = form_values(launch, {})
    assert shown0["steps"] == "3" and given0 == Knobs(steps="3")

    run = Run()
    start_run(run, _env(opts), {"mode": "sweep", "host": "", "profile": str(other), **shown}, launch)
    assert run.ctx is not None and run.ctx.profile.steps.concurrency == [6] and run.ctx.profile.name == "q"
    assert _meta(run)["knobs"] == {}

    run = Run()
    start_run(run, _env(opts), {"mode": "sweep", "host": "", "profile": str(other), **shown, "steps": "2,4"},
              launch)
    assert run.ctx is not None and run.ctx.profile.steps.concurrency == [2, 4]
    assert run.ctx.profile.steps.duration == 9 and _meta(run)["knobs"] == {"steps": "2,4"}


def test_output_dir_is_honoured_or_refused_in_one_line(tmp_path: Path) -> None:
    launch, opts = _web_launch(tmp_path)
    run = Run()
    start_run(run, _env(opts), {"mode": "sweep", "host": "", "output_dir": str(tmp_path / "a" / "b")}, launch)
    assert run.ctx is not None and run.ctx.run_dir is not None
    assert run.ctx.run_dir.path.parent == tmp_path / "a" / "b"
    meta = _meta(run)
    assert meta["form"]["output_dir"] == str(tmp_path / "a" / "b")
    a_file = tmp_path / "f"
    a_file.write_text("x")
    for bad, why in ((a_file, "not a directory"), (a_file / "sub", f"{a_file} is not a directory")):
        run = Run()
        with pytest.raises(StartError) as err:
            start_run(run, _env(opts), {"mode": "sweep", "host": "", "output_dir": str(bad)}, launch)
        assert str(err.value) == f"Output Dir {str(bad)!r}: {why}" and run.ctx is None
    assert not (tmp_path / "runs").exists()
    # a directory that passes the checks but cannot be made (/proc refuses it): named as the form's field, not as
    # the command line's --output-dir (fresh-user finding)
    if Path("/proc").is_dir():
        run = Run()
        with pytest.raises(StartError) as err:
            start_run(run, _env(opts), {"mode": "sweep", "host": "", "output_dir": "/proc/nope/sub"}, launch)
        assert str(err.value).startswith("Output Dir '/proc/nope/sub'"), err.value
    # blank: --output-dir, else the profile's output.dir
    assert output_dir_of({"output_dir": " "}, launch) is None


@pytest.mark.parametrize(("users", "message"), [
    ("-3", "Number of users -3 must be at least 1"), ("0", "Number of users 0 must be at least 1"),
    ("'5'", "Number of users \"'5'\" is not an integer"),
])
def test_sweep_mode_refuses_a_bad_number_of_users(tmp_path: Path, users: str, message: str) -> None:
    """Sweep mode does not use Number of users (the form hides it) but no longer starts with -3 silently."""
    launch, opts = _web_launch(tmp_path)
    run = Run()
    with pytest.raises(StartError) as err:
        start_run(run, _env(opts), {"mode": "sweep", "host": "", "user_count": users}, launch)
    assert str(err.value).startswith(message) and run.ctx is None and not (tmp_path / "runs").exists()


@pytest.mark.parametrize("rate", ["abc", "0", "-1", "inf"])
def test_sweep_mode_refuses_a_bad_ramp_up_before_any_run_directory(tmp_path: Path, rate: str) -> None:
    """Locust refused spawn_rate 'abc' itself only after llmload had opened the run (an empty interrupted run left
    in runs/ and the downloads: fresh-user finding); now refused first, in one line naming the field."""
    launch, opts = _web_launch(tmp_path)
    run = Run()
    with pytest.raises(StartError) as err:
        start_run(run, _env(opts), {"mode": "sweep", "host": "", "user_count": "1", "spawn_rate": rate}, launch)
    assert str(err.value) == (f"Ramp up {rate!r} is not a number of users per second > 0 (sweep mode does not "
                              "use it: leave it at 1)")
    assert run.ctx is None and not (tmp_path / "runs").exists()


def test_sweep_mode_refuses_a_bad_run_time_before_any_run_directory(tmp_path: Path) -> None:
    """Locust refused "5x" itself only after llmload had opened a run directory (an empty "interrupted" run in
    the downloads: fresh-user finding); now the Start is refused first, in one line naming the field."""
    launch, opts = _web_launch(tmp_path)
    run = Run()
    with pytest.raises(StartError) as err:
        start_run(run, _env(opts), {"mode": "sweep", "host": "", "run_time": "5x"}, launch)
    assert str(err.value) == "Run time '5x': use 20, 20s, 3m, 2h, 1h20m... (empty: the sweep's own length)"
    assert run.ctx is None and not (tmp_path / "runs").exists()


@pytest.mark.parametrize(("form", "message"), [
    ({"prompt_mix": ""}, "prompt_mix: empty (the profile's value is 'a:1,b:1')"),
    ({"steps": ""}, "steps: empty (the profile's value is '1,2')"),
    ({"steps": " , "}, "steps: no concurrency given"),
    ({"step_duration": "'30'"}, "step_duration: '30' is in quotes"),
])
def test_a_web_start_refuses_silent_inputs_in_one_line(tmp_path: Path, form: dict[str, str], message: str) -> None:
    launch, opts = _web_launch(tmp_path)
    run = Run()
    with pytest.raises(StartError) as err:
        start_run(run, _env(opts), {"mode": "sweep", "host": "", **form}, launch)
    assert str(err.value).startswith(message) and "\n" not in str(err.value) and run.ctx is None


def test_the_form_json_route_answers_a_profiles_values_or_one_line(tmp_path: Path) -> None:
    from flask import Flask

    launch, opts = _web_launch(tmp_path)
    web_ui = SimpleNamespace(app=Flask(__name__))
    install(web_ui, _env(opts), Run(), launch)
    client = web_ui.app.test_client()
    r = client.get(FORM_PATH, query_string={"profile": str(_other(tmp_path))})
    assert r.status_code == 200 and r.json["values"]["steps"] == "6" and r.json["profile"].endswith("q.yaml")
    assert "mode" not in r.json["values"] and "web_profile" not in r.json["values"]
    r = client.get(FORM_PATH, query_string={"profile": str(tmp_path / "nope.yaml")})
    assert r.status_code == 400 and r.json["error"].startswith("llmload: ") and "nope.yaml" in r.json["error"]


def test_the_form_json_route_says_where_a_dataset_profiles_prompts_come_from(tmp_path: Path) -> None:
    """synthetic-data takes its prompts from a dataset: the Prompt mix and Max tokens fields are empty (no prompt
    ids to weigh) and their placeholders name the file and the max_tokens rule instead of a blank field."""
    from flask import Flask

    from harness.config import PROFILES_DIR

    launch, opts = _web_launch(tmp_path)
    web_ui = SimpleNamespace(app=Flask(__name__))
    install(web_ui, _env(opts), Run(), launch)
    r = web_ui.app.test_client().get(FORM_PATH, query_string={"profile": str(PROFILES_DIR / "synthetic-data.yaml")})
    assert r.status_code == 200 and r.json["values"]["prompt_mix"] == "" and r.json["values"]["max_tokens"] == ""
    notes = r.json["placeholders"]
    assert notes["prompt_mix"] == ("the dataset's rows: seed-prompts.jsonl (weighted, without replacement; dataset: "
                                   "in the profile)")
    assert notes["max_tokens"] == "each row's max_tokens, else 1024 (request.max_tokens)"
    r = web_ui.app.test_client().get(FORM_PATH, query_string={"profile": str(_other(tmp_path))})
    assert set(r.json["placeholders"]) == {"steps"}  # a prompts: profile: its ids fill the fields


def test_a_start_whose_fields_show_another_profile_is_refused(tmp_path: Path) -> None:
    """The form's script sends which profile the fields show (``llmload_shown``): values filled for the launch
    profile are not run under another picked profile; matching, the start goes on and the marker is not in run.json."""
    launch, opts = _web_launch(tmp_path)
    other = _other(tmp_path)
    run = Run()
    with pytest.raises(StartError) as err:
        start_run(run, _env(opts), {"mode": "sweep", "host": "", "profile": str(other),
                                    SHOWN_FIELD: f"\n{launch.profile_arg}"}, launch)
    assert str(err.value) == ("the form shows the values of p.yaml, not of q.yaml: pick the profile again, check its "
                              "values, then Start") and run.ctx is None
    start_run(run, _env(opts), {"mode": "sweep", "host": "", "profile": str(other), SHOWN_FIELD: f"\n{other}"},
              launch)
    assert run.ctx is not None and run.ctx.profile.name == "q"
    assert SHOWN_FIELD not in _meta(run)["form"]


def test_a_start_locust_refuses_after_llmload_opened_its_run_is_logged_and_dropped(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Locust's own /swarm answers success: false after llmload opened the run: the refusal is logged as every
    other start refusal ("Start refused: ..."), and the run is closed."""
    from flask import Flask, jsonify

    launch, opts = _web_launch(tmp_path)
    app = Flask(__name__)
    app.add_url_rule("/swarm", "swarm", lambda: jsonify({"success": False, "message": "Locust said no"}),
                     methods=["POST"])
    run = Run()
    env = SimpleNamespace(host=None, parsed_options=opts, stop_timeout=None, runner=None, shape_class=None)
    install(SimpleNamespace(app=app), env, run, launch)
    with caplog.at_level("ERROR", logger="llmload"):
        r = app.test_client().post("/swarm", data={"mode": "sweep", "host": ""})
    assert r.json["success"] is False
    refused = [m for m in caplog.messages if m.startswith("Start refused: Locust said no (Locust's answer; run ")]
    assert len(refused) == 1, caplog.messages
    assert not run.active()
