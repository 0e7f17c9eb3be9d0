"""Which per-read stream path runs (harness/chunkpath.py): the compiled one when built, the pure one when forced
by LLMLOAD_PURE_PYTHON=1 or when the extension is missing; run.json says which."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness import chunkpath
from harness.chunkpath import PATHS, PURE_ENV, PYTHON, active
from harness.records import RunDir
from tests.chunk_paths import chunk_path


def _path_in_a_fresh_process(env_value: str | None) -> str:
    env = {k: v for k, v in os.environ.items() if k != PURE_ENV}
    if env_value is not None:
        env[PURE_ENV] = env_value
    out = subprocess.run([sys.executable, "-c", "from harness.chunkpath import CLIENT_PATH; print(CLIENT_PATH)"],
                         env=env, capture_output=True, text=True, timeout=60, check=True)
    return out.stdout.strip()


def test_the_env_var_forces_the_pure_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(PURE_ENV, "1")
    assert active() is PYTHON
    assert _path_in_a_fresh_process("1") == "python"


def test_the_native_path_runs_by_default_when_built(monkeypatch: pytest.MonkeyPatch) -> None:
    native = chunk_path("native")  # skips (fails under LLMLOAD_REQUIRE_NATIVE=1) when not built
    monkeypatch.delenv(PURE_ENV, raising=False)
    assert active() is native and chunkpath.native_available()
    assert _path_in_a_fresh_process(None) == "native"
    assert _path_in_a_fresh_process("0") == "native"
    assert _path_in_a_fresh_process(" False ") == "native"


@pytest.mark.parametrize("value", ["1", "true", "YES", " on "])
def test_the_usual_true_spellings_force_the_pure_path(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv(PURE_ENV, value)
    assert active() is PYTHON


def test_an_unknown_value_forces_the_pure_path_with_a_warning(monkeypatch: pytest.MonkeyPatch,
                                                              caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setenv(PURE_ENV, "2")
    monkeypatch.setattr(chunkpath, "_WARNED", set())
    with caplog.at_level("WARNING", logger="llmload.chunkpath"):
        assert active() is PYTHON
    assert "LLMLOAD_PURE_PYTHON='2' is not one of 1/true/yes/on or 0/false/no/off" in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING", logger="llmload.chunkpath"):  # said once per process, not at every look
        assert active() is PYTHON and active() is PYTHON
    assert "LLMLOAD_PURE_PYTHON" not in caplog.text


def test_without_the_extension_the_pure_path_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """An install without a C compiler has no harness._fastchunk: the pure path, and nothing else changes."""
    monkeypatch.setattr(chunkpath, "NATIVE", None)
    monkeypatch.delenv(PURE_ENV, raising=False)
    assert active() is PYTHON and not chunkpath.native_available()
    assert "python" in PATHS


def test_run_json_records_the_client_path(tmp_path: Path) -> None:
    rd = RunDir.create(tmp_path, "demo", {})
    try:
        meta = json.loads((rd.path / "run.json").read_text())
    finally:
        rd.close("completed")
    assert meta["client_path"] == chunkpath.CLIENT_PATH
    assert meta["client_path"] in ("native", "python")
