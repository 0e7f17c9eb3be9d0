"""Helpers shared by the tests that start processes (Locust, simulators, web UIs): loopback ports, process groups
that are always reaped, and reading a run's records as its files hold them.

Kept out of the test modules so that each test file does not carry (and drift) its own copy.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def master_port_args() -> list[str]:
    """Locust's master/worker port for a ``--processes`` run: its own free port on 127.0.0.1 (the default
    ``*:5557`` lets other runs' workers join, and forked workers connect to ``--master-port``, not the bind port)."""
    port = str(free_port())
    return ["--master-bind-host", "127.0.0.1", "--master-bind-port", port, "--master-port", port]


@contextmanager
def process_groups(cmds: Sequence[Sequence[str]], logs: Sequence[Path], cwd: Path, env: Mapping[str, str] | None,
                   stdout_to_log: bool = False) -> Iterator[list[subprocess.Popen[str]]]:
    """Start each command of ``cmds`` in its own session (its own process group, as a terminal gives it), its
    stderr to the matching file of ``logs`` and stdout discarded (``stdout_to_log``: stdout and stderr both to
    the log); on leaving, the group of every process still running is killed (SIGKILL) and reaped, whether the
    block ended or raised."""
    procs = [
        subprocess.Popen(list(cmd), cwd=cwd, env=env, text=True, start_new_session=True,
                         stdout=log.open("w") if stdout_to_log else subprocess.DEVNULL,
                         stderr=subprocess.STDOUT if stdout_to_log else log.open("w"))
        for cmd, log in zip(cmds, logs, strict=True)
    ]
    try:
        yield procs
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()


def records(run: Path, live: bool = False) -> list[dict[str, Any]]:
    """Every record of ``run``'s ``records.jsonl`` (warm-up included), in file order, as JSON objects.

    ``live``: the run may still be writing, so a last line not yet complete (not ending in ``}``) is skipped;
    otherwise every non-blank line must be a JSON object (json.JSONDecodeError if not).
    """
    lines = [x for x in (run / "records.jsonl").read_text().splitlines() if x.strip()]
    if live:
        lines = [x for x in lines if x.rstrip().endswith("}")]
    return [json.loads(x) for x in lines]
