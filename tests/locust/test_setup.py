"""harness.locust.setup: the master's setup of a run, a worker's from the phase messages."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import harness.runtime as runtime
from harness.config import PROFILES_DIR, load_profile
from harness.locust.setup import SimHolder, setup_worker_from_message
from harness.locust.webrun import StartError, headless_launch, start_run
from harness.runtime import RunContext


def setup_master(profile_arg: str, host: str | None, role: str, output_dir: str | None = None,
                 **knobs: str) -> RunContext:
    """A headless process's start (as ``init`` does it): :func:`start_run` with a headless launch and ``knobs``
    as command-line options (``max_tokens="9000"`` for ``--max-tokens 9000``); the original error (the one a
    headless process prints) re-raised."""
    opts = SimpleNamespace(output_dir=output_dir, stop_timeout=None, **knobs)
    launch = headless_launch(opts, host, role, profile_arg, SimHolder())
    env = SimpleNamespace(host=host, parsed_options=opts, stop_timeout=None)
    try:
        return start_run(runtime.Run(), env, {"host": host or ""}, launch)
    except StartError as e:
        assert e.__cause__ is not None
        raise e.__cause__ from None


def test_model_discovery_uses_the_profiles_tls_and_header_settings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """GET /v1/models goes through a client built like the users' (verify_tls: false was ignored there, so a
    self-signed server failed discovery while the chat requests would have worked)."""
    seen: list[dict[str, Any]] = []

    class FakeClient:
        def __init__(self, base_url: str, **kw: Any) -> None:
            seen.append({"base_url": base_url, **kw})

        def list_models(self) -> list[str]:
            return ["m1"]

        def model_entries(self) -> list[dict[str, Any]]:  # the max_model_len check (none reported here)
            return [{"id": "m1"}]

    monkeypatch.setattr(runtime, "ChatClient", FakeClient)
    prof = tmp_path / "p.yaml"
    prof.write_text(
        """
name: tls
target: {base_url: "https://127.0.0.1:8443", verify_tls: false, headers: {X-Team: bench}}
prompts: [{id: a, text: hi}]
output: {dir: "%s"}
"""
        % (tmp_path / "runs")
    )
    ctx = setup_master(str(prof), None, "local")
    try:
        assert ctx.model == "m1"
        assert seen and seen[0]["verify_tls"] is False and seen[0]["headers"] == {"X-Team": "bench"}
    finally:
        assert ctx.run_dir is not None
        ctx.run_dir.close()


def test_worker_context_comes_from_phase_messages(monkeypatch: pytest.MonkeyPatch) -> None:
    """The first phase message builds the worker's context (held by the process's Run); later ones move it to the
    new step; a message for another target builds a new one."""
    run = runtime.Run()
    monkeypatch.setattr(runtime, "_RUN", run)
    profile = load_profile(PROFILES_DIR / "demo.yaml")
    msg = runtime.RunContext(profile, "http://127.0.0.1:1/v1", "m", "master").phase_message()
    ctx = setup_worker_from_message(msg, "abc123")
    assert runtime.context() is ctx and run.ctx is ctx
    assert (ctx.role, ctx.worker_id, ctx.run_dir, ctx.model) == ("worker", "abc123", None, "m")
    assert ctx.state == runtime.PhaseState("warmup", -1, 0)
    assert setup_worker_from_message({**msg, "phase": "step", "step": 2, "concurrency": 16}, "abc123") is ctx
    assert ctx.state == runtime.PhaseState("step", 2, 16)
    other = setup_worker_from_message({**msg, "base_url": "http://127.0.0.1:2/v1"}, "abc123")
    assert other is not ctx and runtime.context() is other


def test_a_malformed_host_is_a_clear_error_before_anything_starts(tmp_path: Path) -> None:
    """``--host notaurl`` used to end in a traceback from the client (exit 1); now a RuntimeError (exit 2)."""
    prof = tmp_path / "p.yaml"
    prof.write_text("name: h\nprompts: [{id: a, text: hi}]\noutput: {dir: '%s'}\n" % (tmp_path / "runs"))
    with pytest.raises(RuntimeError, match=r"^--host: base URL 'notaurl': expected http://host"):
        setup_master(str(prof), "notaurl", "local")
    prof.write_text("name: h\ntarget: {base_url: 'ftp://x'}\nprompts: [{id: a, text: hi}]\n")
    with pytest.raises(RuntimeError, match=r"p\.yaml: target\.base_url: base URL 'ftp://x'"):
        setup_master(str(prof), None, "local")
    assert not (tmp_path / "runs").exists()


def test_an_unwritable_output_dir_is_a_clear_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    prof = tmp_path / "p.yaml"
    prof.write_text("name: h\ntarget: {base_url: 'http://127.0.0.1:9', model: m}\nprompts: [{id: a, text: hi}]\n")
    with pytest.raises(RuntimeError, match=r"^--output-dir: cannot create a run directory under .*file/sub"):
        setup_master(str(prof), None, "local", str(blocker / "sub"))
    with pytest.raises(RuntimeError, match=r"under .*/file: it is a file, not a directory$"):
        setup_master(str(prof), None, "local", str(blocker))


def _start_messages(prof: Path, caplog: pytest.LogCaptureFixture, level: str, **knobs: str) -> list[str]:
    """The 'llmload' log messages at ``level`` and above of a headless start of ``prof`` with ``knobs`` (its run
    directory closed)."""
    caplog.clear()
    with caplog.at_level(level, logger="llmload"):
        ctx = setup_master(str(prof), None, "local", **knobs)
    assert ctx.run_dir is not None
    ctx.run_dir.close()
    return list(caplog.messages)


def test_an_empty_steps_list_says_the_run_is_single_stream_only(tmp_path: Path,
                                                                 caplog: pytest.LogCaptureFixture) -> None:
    """``steps.concurrency: []`` is a single-stream-only run (a supported plan), said in one line at the start
    (it ran silently before)."""
    prof = tmp_path / "p.yaml"
    prof.write_text("name: h\ntarget: {base_url: 'http://127.0.0.1:9', model: m}\nprompts: [{id: a, text: hi}]\n"
                    "single_stream: {duration: 12}\nsteps: {concurrency: []}\noutput: {dir: '%s'}\n"
                    % (tmp_path / "runs"))
    messages = _start_messages(prof, caplog, "INFO")
    assert any(m.endswith("p.yaml: steps.concurrency is empty: this run measures the single stream only (12 s); "
                          "give steps, e.g. [8, 16, 32, 64], to measure concurrent load") for m in messages)
    prof.write_text(prof.read_text().replace("concurrency: []", "concurrency: [8]"))
    messages = _start_messages(prof, caplog, "INFO")
    assert not any("single stream only" in m for m in messages)


def test_max_tokens_at_or_above_the_servers_context_length_is_said_before_the_run(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The built-in simulator reports max_model_len 32,768 in GET /v1/models (as vLLM does): a max_tokens that
    reaches it fails every request of it (HTTP 400), so the start says so in one line naming the key, before any
    load; the run goes on (a mix may hold a prompt meant to fail). Before: nothing was said until the failures."""
    prof = tmp_path / "p.yaml"
    prof.write_text("name: h\nprompts: [{id: a, text: hi, max_tokens: 40000}, {id: b, text: yo}]\n"
                    "request: {max_tokens: 100}\nsingle_stream: {duration: 1}\noutput: {dir: '%s'}\n"
                    % (tmp_path / "runs"))
    messages = _start_messages(prof, caplog, "WARNING")
    assert (f"{prof}: prompts[0].max_tokens (id a): max_tokens 40,000 >= the server's max_model_len 32,768 (GET "
            "/v1/models): every request with it will fail (HTTP 400, context length exceeded); set it below 32,768 "
            "minus the prompt's tokens") in messages
    prof.write_text(prof.read_text().replace("40000", "30000"))
    messages = _start_messages(prof, caplog, "WARNING")
    assert not any("max_model_len" in m for m in messages)
    # --max-tokens 50000 sets both prompts: one line naming the option, not two blaming the profile file
    messages = [m for m in _start_messages(prof, caplog, "WARNING", max_tokens="50000") if "max_model_len" in m]
    assert messages == ["--max-tokens / the form's Max tokens '50000' (prompts a, b): max_tokens 50,000 >= the "
                        "server's max_model_len 32,768 (GET /v1/models): every request with it will fail (HTTP 400, "
                        "context length exceeded); set it below 32,768 minus the prompt's tokens"], messages


@pytest.mark.parametrize(("case", "status"), [("html404", 404), ("html200", 200)])
def test_a_host_that_is_not_an_llm_server_is_named_in_one_line(tmp_path: Path, case: str, status: int) -> None:
    """A web server answering GET /v1/models with an HTML page (404 or 200): one line saying so, in the headless
    error and the web banner's text (the StartError), never the page and never the advice to set target.model."""
    from tests.failure_server import FailureServer

    prof = tmp_path / "p.yaml"
    prof.write_text(f"name: html\nprompts: [{{id: a, text: hi}}]\noutput: {{dir: \"{tmp_path / 'runs'}\"}}\n")
    with FailureServer() as fs:
        host = fs.url(case)
        with pytest.raises(RuntimeError) as headless:
            setup_master(str(prof), host, "local")
        opts = SimpleNamespace(output_dir=None, stop_timeout=None)
        launch = headless_launch(opts, None, "local", str(prof), SimHolder())
        launch.headless = False  # as the web form's Start: the banner shows the StartError's text
        env = SimpleNamespace(host=None, parsed_options=opts, stop_timeout=None)
        with pytest.raises(StartError) as banner:
            start_run(runtime.Run(), env, {"host": host}, launch)
    # the path actually requested (the base URL's path + /models: here /<case>/v1/models; /v1/models on a bare host)
    line = f"not an OpenAI-compatible server: GET /{case}/v1/models returned an HTML page ({status})"
    assert str(headless.value) == f"{host}: {line}"
    assert str(banner.value) == f"{host}: {line}"
    for text in (str(headless.value), str(banner.value)):
        assert "\n" not in text and "<" not in text and "target.model" not in text
    assert not (tmp_path / "runs").exists()  # refused before any run directory


def test_simulator_options_with_a_server_target_are_said_to_be_ignored(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """LLMLOAD_SIM_ARGS only reaches the built-in simulator: with --host (or target.base_url) it was ignored
    without a word (fresh-user finding), now with a warning naming the variable and the target's source."""
    from harness.locust.setup import resolve_target

    prof = tmp_path / "p.yaml"
    prof.write_text("name: h\ntarget: {model: m}\nprompts: [{id: a, text: hi}]\n")
    monkeypatch.setenv("LLMLOAD_SIM_ARGS", "--drift-per-hour 7")
    with caplog.at_level("WARNING", logger="llmload"):
        resolve_target(load_profile(prof), prof, "http://127.0.0.1:9")
    assert ("LLMLOAD_SIM_ARGS is set but the target is a server (--host), not the built-in simulator: it is "
            "ignored") in caplog.text
    caplog.clear()
    monkeypatch.setenv("LLMLOAD_SIM_ARGS", "  ")
    with caplog.at_level("WARNING", logger="llmload"):
        resolve_target(load_profile(prof), prof, "http://127.0.0.1:9")
    assert "LLMLOAD_SIM_ARGS" not in caplog.text


def test_the_simulators_extra_options_are_recorded_with_secrets_hidden(monkeypatch: pytest.MonkeyPatch) -> None:
    """run.json's ``simulator`` names the words of LLMLOAD_SIM_ARGS (a drift rehearsal read like a clean server:
    fresh-user finding), the value of a secret-looking option hidden in both spellings."""
    from harness.config import SimulatorSpec
    from harness.locust.setup import _sim_meta

    monkeypatch.setenv("LLMLOAD_SIM_ARGS", "--drift-per-hour 0.5 --api-key sk-live-123 --token=abc --fault-drop 0.1")
    meta = _sim_meta(SimulatorSpec(args=["--prefix-cache-tokens", "9"]))
    assert meta["args"] == ["--prefix-cache-tokens", "9"]
    assert meta["env_args"] == ["--drift-per-hour", "0.5", "--api-key", "***", "--token=***", "--fault-drop", "0.1"]
    monkeypatch.delenv("LLMLOAD_SIM_ARGS")
    assert _sim_meta(SimulatorSpec())["env_args"] == []
