"""The CPU split that keeps the vLLM test server off the load generator's CPUs (no server needed)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

_spec = importlib.util.spec_from_file_location("_server_for_cpus", Path(__file__).with_name("server.py"))
assert _spec is not None and _spec.loader is not None
server = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(server)


@pytest.mark.parametrize(
    ("avail", "want_server", "want_client"),
    [
        ({0}, None, None),  # one CPU: nothing to split
        ({0, 1}, {0}, {1}),
        ({0, 1, 2, 3}, {0, 1, 2}, {3}),
        ({2, 5, 7, 9, 11, 12, 13, 14}, {2, 5, 7, 9, 11, 12}, {13, 14}),
    ],
)
def test_auto_split(
    monkeypatch: pytest.MonkeyPatch, avail: set[int], want_server: set[int] | None, want_client: set[int] | None
) -> None:
    monkeypatch.delenv(server.CPUS_ENV, raising=False)
    s, c = server.split_cpus(frozenset(avail))
    assert (s, c) == (want_server and frozenset(want_server), want_client and frozenset(want_client))
    if s is not None and c is not None:
        assert not s & c and s | c == avail


def test_env_override(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(server.CPUS_ENV, "all")
    assert server.split_cpus(frozenset({0, 1})) == (None, None)
    monkeypatch.setenv(server.CPUS_ENV, "0-2,5")
    assert server.split_cpus(frozenset(range(8))) == (frozenset({0, 1, 2, 5}), frozenset({3, 4, 6, 7}))
    monkeypatch.setenv(server.CPUS_ENV, "0,1")
    assert server.split_cpus(frozenset({0, 1})) == (frozenset({0, 1}), None)
    monkeypatch.setenv(server.CPUS_ENV, "3")
    with pytest.raises(ValueError, match=r"LLMLOAD_VLLM_CPUS='3': CPUs \[3\] are not available"):
        server.split_cpus(frozenset({0, 1}))
    monkeypatch.setenv(server.CPUS_ENV, "zero")
    with pytest.raises(ValueError):
        server.split_cpus(frozenset({0, 1}))


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs 2 CPUs")
def test_pin_to_restricts_a_child() -> None:
    cpu = min(os.sched_getaffinity(0))
    out = subprocess.run(
        [sys.executable, "-c", "import os; print(sorted(os.sched_getaffinity(0)))"],
        capture_output=True,
        text=True,
        check=True,
        preexec_fn=server.pin_to(frozenset({cpu})),
    ).stdout
    assert out.strip() == f"[{cpu}]"
    assert server.pin_to(None) is None
