"""Start the simulator as a subprocess (``sys.executable -m harness.sim serve ...``) and wait for it.

Works with or without gevent monkey-patching (Locust patches everything): readiness is read from
the child's stdout with ``select`` + ``os.read``; the child's stderr goes to a temporary file so it
can never block on a full pipe, and its tail is quoted when the child fails to start.

Extra simulator options can come from the environment: ``LLMLOAD_SIM_ARGS`` (shell-quoted, e.g.
``LLMLOAD_SIM_ARGS="--truth-log /tmp/truth.jsonl --fault-drop 0.05 --fault-grace 1"``) is appended to the
command line of every simulator this module starts, including the one the harness starts when a profile has
no target. The profile's ``simulator`` section only carries preset, flavour, time scale, seed and model.
"""

from __future__ import annotations

import atexit
import os
import select
import shlex
import signal
import subprocess
import sys
import tempfile
import time
import weakref
from collections.abc import Iterable
from pathlib import Path
from types import TracebackType
from typing import IO

from harness.sim.cli import READY_PREFIX

#: Default time to wait for the readiness line, seconds.
DEFAULT_START_TIMEOUT = 20.0
#: Environment variable whose (shell-quoted) value is appended to every simulator command line.
ENV_EXTRA_ARGS = "LLMLOAD_SIM_ARGS"
_live: weakref.WeakSet[SimProcess] = weakref.WeakSet()


class SimStartError(RuntimeError):
    """The simulator process exited or did not become ready in time."""


class SimProcess:
    """A running simulator subprocess.

    Attributes: ``url`` (``http://HOST:PORT``), ``model`` (served model id), ``port``, ``popen``.
    Use as a context manager or call :meth:`stop`.
    """

    def __init__(self, popen: subprocess.Popen[bytes], url: str, model: str, stderr_file: IO[bytes],
                 args: list[str]) -> None:
        self.popen = popen
        self.url = url
        self.model = model
        self.args = args
        self._stderr_file = stderr_file
        _live.add(self)

    @property
    def port(self) -> int:
        """Bound TCP port."""
        return int(self.url.rsplit(":", 1)[1])

    @property
    def pid(self) -> int:
        """Process id of the simulator."""
        return self.popen.pid

    def alive(self) -> bool:
        """Whether the process is still running."""
        return self.popen.poll() is None

    def stderr_tail(self, max_bytes: int = 4000) -> str:
        """Last ``max_bytes`` bytes of the child's stderr, decoded."""
        return _tail(self._stderr_file, max_bytes)

    def stop(self, timeout: float = 5.0) -> int | None:
        """Terminate (SIGTERM), wait up to ``timeout`` seconds, then kill.  Idempotent; returns the exit code."""
        p = self.popen
        if p.poll() is None:
            try:
                p.send_signal(signal.SIGTERM)
                p.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=timeout)
            except ProcessLookupError:
                pass
        for stream in (p.stdin, p.stdout):
            if stream is not None:
                try:
                    stream.close()
                except OSError:
                    pass
        try:
            self._stderr_file.close()
        except OSError:
            pass
        _live.discard(self)
        return p.returncode

    def __enter__(self) -> SimProcess:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"SimProcess(url={self.url!r}, model={self.model!r}, pid={self.popen.pid})"


def _tail(f: IO[bytes], max_bytes: int) -> str:
    try:
        fd = f.fileno()
        size = os.fstat(fd).st_size
        start = max(0, size - max_bytes)
        # pread: never move the file offset the child shares with us
        return os.pread(fd, size - start, start).decode("utf-8", "replace")
    except (OSError, ValueError):
        return ""


def _project_root() -> str:
    """Directory that contains the ``harness`` package (put on the child's ``PYTHONPATH``)."""
    return str(Path(__file__).resolve().parents[2])


def env_extra_args() -> list[str]:
    """The words of ``$LLMLOAD_SIM_ARGS`` (:data:`ENV_EXTRA_ARGS`), split as a shell would; [] when unset.

    Raises:
        SimStartError: the value is not shell-quoted words (e.g. an unclosed quote), naming the variable.
    """
    raw = os.environ.get(ENV_EXTRA_ARGS, "")
    try:
        return shlex.split(raw)
    except ValueError as e:  # e.g. "No closing quotation"
        raise SimStartError(f"{ENV_EXTRA_ARGS}={raw!r}: {e} (shell-quoted simulator options, e.g. \"--truth-log "
                            "/tmp/truth.jsonl --fault-drop 0.05\")") from None


def build_command(
    host: str = "127.0.0.1",
    port: int = 0,
    preset: str = "demo",
    flavour: str = "vllm",
    time_scale: float = 1.0,
    seed: int = 0,
    model: str = "sim-reasoner",
    extra_args: Iterable[str] = (),
) -> list[str]:
    """The argv that :func:`launch` runs."""
    return [
        sys.executable, "-m", "harness.sim", "serve",
        "--host", host, "--port", str(port), "--preset", preset, "--flavour", flavour,
        "--time-scale", repr(float(time_scale)), "--seed", str(seed), "--model", model,
        "--exit-on-stdin-eof", *[str(a) for a in extra_args],
    ]


def launch(
    host: str = "127.0.0.1",
    port: int = 0,
    preset: str = "demo",
    flavour: str = "vllm",
    time_scale: float = 1.0,
    seed: int = 0,
    model: str = "sim-reasoner",
    extra_args: Iterable[str] = (),
    timeout: float = DEFAULT_START_TIMEOUT,
) -> SimProcess:
    """Start ``python -m harness.sim serve`` and return once it prints its readiness line.

    ``port=0`` lets the child pick a free port (reported in ``SimProcess.url``).  ``extra_args`` are
    appended to the command line (e.g. ``["--max-num-seqs", "8", "--api-key", "k"]``), then the words of
    ``$LLMLOAD_SIM_ARGS``.  ``timeout`` is in seconds.  Raises :class:`SimStartError` with the child's
    stderr tail if it exits or stays silent, or naming ``LLMLOAD_SIM_ARGS`` when it is not shell-quoted words.
    The child exits by itself when this process dies (its stdin pipe closes).
    """
    extra = [*extra_args, *env_extra_args()]
    args = build_command(host, port, preset, flavour, time_scale, seed, model, extra)
    env = dict(os.environ)
    root = _project_root()
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["PYTHONUNBUFFERED"] = "1"
    stderr_file = tempfile.TemporaryFile(prefix="harness-sim-", suffix=".stderr")
    # Its own session: a terminal's Ctrl-C (or `timeout`'s SIGTERM) reaches the whole process group; the simulator
    # must keep serving the requests in flight while the harness drains them. It still dies with this process
    # (--exit-on-stdin-eof), and SimProcess.stop() ends it at the end of the run.
    popen = subprocess.Popen(
        args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr_file, env=env, close_fds=True,
        start_new_session=True,
    )
    try:
        url = _wait_ready(popen, stderr_file, timeout)
    except SimStartError as e:
        _discard(popen, stderr_file)
        extra_env = os.environ.get(ENV_EXTRA_ARGS, "")
        if extra_env.strip():  # say where options the user did not put in the profile came from
            raise SimStartError(f"{e} [{ENV_EXTRA_ARGS}={extra_env!r} was added to its command line]") from None
        raise
    except BaseException:
        _discard(popen, stderr_file)
        raise
    return SimProcess(popen, url, model, stderr_file, args)


def _discard(popen: subprocess.Popen[bytes], stderr_file: IO[bytes]) -> None:
    """Kill a simulator that did not start and close its pipes and stderr file."""
    if popen.poll() is None:
        popen.kill()
        popen.wait()
    for stream in (popen.stdin, popen.stdout):
        if stream is not None:
            stream.close()
    stderr_file.close()


def _wait_ready(popen: subprocess.Popen[bytes], stderr_file: IO[bytes], timeout: float) -> str:
    assert popen.stdout is not None
    fd = popen.stdout.fileno()
    deadline = time.monotonic() + timeout
    buf = b""
    while True:
        nl = buf.find(b"\n")
        while nl >= 0:
            line = buf[:nl].decode("utf-8", "replace").strip()
            buf = buf[nl + 1:]
            if line.startswith(READY_PREFIX):
                return line[len(READY_PREFIX):].strip()
            nl = buf.find(b"\n")
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise SimStartError(
                f"simulator did not report readiness within {timeout:.1f} s; stderr tail:\n"
                f"{_tail(stderr_file, 4000)}"
            )
        readable, _, _ = select.select([fd], [], [], min(remaining, 0.5))
        eof = False
        if readable:
            try:
                chunk = os.read(fd, 4096)
            except BlockingIOError:
                chunk = None
            if chunk:
                buf += chunk
                continue
            eof = chunk == b""
        if eof or popen.poll() is not None:
            code = popen.wait()
            tail = _tail(stderr_file, 4000)
            usage = [ln for ln in tail.splitlines() if ": error: " in ln]
            if code == 2 and usage:  # argparse refused an option: its one line, not the whole usage text
                raise SimStartError(f"simulator options refused: {usage[-1].split(': error: ', 1)[1]} "
                                    "(python -m harness.sim serve --help lists them)")
            raise SimStartError(f"simulator exited with code {code} before it was ready; stderr tail:\n{tail}")


@atexit.register
def _stop_all() -> None:
    """Stop simulators that the program forgot to stop."""
    for proc in list(_live):
        try:
            proc.stop(timeout=2.0)
        except Exception:
            pass
