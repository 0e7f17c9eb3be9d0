"""The launcher: port 0, readiness, failures with stderr, stop; also without gevent monkey-patching."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from harness.sim import SimStartError, build_command, launch
from tests.sim.sseclient import request

ROOT = Path(__file__).resolve().parents[2]


def test_launch_port0_and_stop() -> None:
    proc = launch(time_scale=0.1)
    try:
        assert proc.url.startswith("http://127.0.0.1:") and proc.port > 0
        assert proc.alive()
        assert request(proc.url, "GET", "/health").status == 200
    finally:
        code = proc.stop()
    assert not proc.alive() and code is not None
    assert proc.stop() == code  # idempotent


def test_launch_failure_reports_stderr(monkeypatch: pytest.MonkeyPatch) -> None:
    """An option the simulator refuses: argparse's one line, not its usage text; from LLMLOAD_SIM_ARGS, the
    variable is named (fresh-user finding: '--fault-drop abc' gave 20 lines of usage and no source)."""
    monkeypatch.delenv("LLMLOAD_SIM_ARGS", raising=False)
    with pytest.raises(SimStartError) as info:
        launch(extra_args=["--no-such-flag"], timeout=10)
    assert str(info.value) == ("simulator options refused: unrecognized arguments: --no-such-flag "
                               "(python -m harness.sim serve --help lists them)")
    monkeypatch.setenv("LLMLOAD_SIM_ARGS", "--fault-drop abc")
    with pytest.raises(SimStartError) as info:
        launch(timeout=10)
    msg = str(info.value)
    assert msg.startswith("simulator options refused: argument --fault-drop: invalid") and "\n" not in msg, msg
    assert msg.endswith("[LLMLOAD_SIM_ARGS='--fault-drop abc' was added to its command line]"), msg


def test_build_command_shape() -> None:
    cmd = build_command(port=1234, preset="k26", flavour="sglang", time_scale=0.5, seed=7, model="m",
                        extra_args=["--api-key", "k"])
    assert cmd[:4] == [sys.executable, "-m", "harness.sim", "serve"]
    joined = " ".join(cmd)
    for part in ("--port 1234", "--preset k26", "--flavour sglang", "--time-scale 0.5", "--seed 7", "--model m",
                 "--api-key k"):
        assert part in joined


def test_launch_without_monkey_patching() -> None:
    """The harness may call launch() from a plain (unpatched) process too."""
    code = textwrap.dedent(
        """
        import http.client
        from harness.sim import launch
        with launch(time_scale=0.1, port=0) as sim:
            host, port = sim.url[len("http://"):].rsplit(":", 1)
            c = http.client.HTTPConnection(host, int(port), timeout=10)
            c.request("GET", "/v1/models")
            assert c.getresponse().status == 200
        print("ok", sim.popen.returncode is not None)
        """
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["ok", "True"]


def test_cli_help_documents_flags() -> None:
    out = subprocess.run([sys.executable, "-m", "harness.sim", "serve", "--help"], cwd=ROOT, capture_output=True,
                         text=True, timeout=30)
    assert out.returncode == 0
    for flag in ("--host", "--port", "--preset", "--flavour", "--time-scale", "--seed", "--model",
                 "--max-num-seqs", "--api-key", "--decode-base", "--decode-per-seq"):
        assert flag in out.stdout


def test_unquoted_sim_args_from_the_environment_name_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    """LLMLOAD_SIM_ARGS that shlex cannot split: one line naming the variable and its value, no child started
    (it was shlex's bare "No closing quotation")."""
    monkeypatch.setenv("LLMLOAD_SIM_ARGS", "--truth-log '/tmp/a b")
    with pytest.raises(SimStartError) as ei:
        launch(time_scale=0.1)
    msg = str(ei.value)
    assert msg.startswith("LLMLOAD_SIM_ARGS=\"--truth-log '/tmp/a b\": No closing quotation") and "\n" not in msg
