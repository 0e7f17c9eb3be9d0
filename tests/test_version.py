"""``harness.__version__`` comes from the package metadata (pyproject.toml is its one source) and is what
``llmload --version`` prints and the client's User-Agent carries."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import harness
from harness.cli import main
from harness.client import ChatClient
from harness.result import RequestIdentity
from tests.replay_server import ReplayServer

ROOT = Path(__file__).resolve().parent.parent


def test_version_is_the_installed_distributions_and_pyprojects() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert harness.__version__ == importlib.metadata.version("llmload") == pyproject["project"]["version"]


def test_version_falls_back_when_the_distribution_is_not_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing(dist: str) -> str:
        raise importlib.metadata.PackageNotFoundError(dist)

    monkeypatch.setattr(harness, "version", missing)
    assert harness._installed_version() == "0+unknown"


@pytest.mark.parametrize("flag", ["--version", "-V"])
def test_cli_version_prints_the_version(flag: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([flag]) == 0
    assert capsys.readouterr().out == f"llmload {harness.__version__}\n"


def test_console_script_version() -> None:
    exe = Path(sys.executable).with_name("llmload")
    if not exe.exists():
        pytest.skip(f"no llmload console script next to {sys.executable}")
    out = subprocess.run([str(exe), "--version"], capture_output=True, text=True, timeout=60, check=True).stdout
    assert out == f"llmload {harness.__version__}\n"


def test_user_agent_carries_the_version() -> None:
    with ReplayServer(framing="chunked") as srv:
        srv.queue.append("C05/a_role_only_chunk_first")
        client = ChatClient(srv.url)
        try:
            assert client.stream_chat({"model": "m", "messages": []}, RequestIdentity("p")).ok
        finally:
            client.close()
    head = srv.requests[0]["head"]
    agents = [ln.split(":", 1)[1].strip() for ln in head.split("\r\n") if ln.lower().startswith("user-agent:")]
    assert agents == [f"llmload/{harness.__version__}"]
