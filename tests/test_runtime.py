"""harness.runtime: the master's setup of a run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import harness.runtime as runtime


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
    ctx = runtime.setup_master(str(prof), None, "local")
    try:
        assert ctx.model == "m1"
        assert seen and seen[0]["verify_tls"] is False and seen[0]["headers"] == {"X-Team": "bench"}
    finally:
        assert ctx.run_dir is not None
        ctx.run_dir.close()

