"""Pytest fixtures for tests against a real vLLM server (CPU build) serving a tiny scripted model.

The session-scoped :func:`vllm_server` fixture

1. builds the scripted model with the vLLM venv's python (``build_model.py``, cached in
   ``$REPO/.cache/vllm-model-K-M``), then
2. starts one vLLM server for the whole session (``server.VLLMServer``) and stops it at the end.

Every chat completion from that server streams exactly ``K`` reasoning tokens (``delta.reasoning``), the
``</think>`` token (no chunk of its own), ``M`` answer tokens (``delta.content``) and the EOS token
``<|im_end|>`` (counted in usage, streamed as an empty final delta with ``finish_reason: "stop"``). With
``chat_template_kwargs: {enable_thinking: false}`` its chat template closes the think block in the prompt (one
prompt token more, as Qwen3's does) and the reply is the M answer tokens and EOS only, streamed as content.

If the vLLM venv (``scripts/setup_vllm.sh``) is missing the tests are skipped, unless the environment sets
``LLMLOAD_REQUIRE_VLLM=1``: then they fail.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]

#: K: reasoning tokens per reply. With M below (K + M + 2 = 290 completion tokens), one request takes
#: about 0.6-0.7 s at concurrency 1 on a 2-core machine (~400-500 completion tokens/s).
REASONING_TOKENS = 240
#: M: answer tokens per reply.
ANSWER_TOKENS = 48
SERVED_MODEL_NAME = "scripted-qwen3"
MODEL_CACHE = REPO / ".cache"
REQUIRE_ENV = "LLMLOAD_REQUIRE_VLLM"
#: Seconds allowed for building the model (normally about 5-10 s).
BUILD_TIMEOUT = 600.0
#: Warm-up rounds: number of simultaneous requests per round. A fresh server stalls for a few tenths of a
#: second the first times it meets new batch shapes (lazy compilation), which would distort timings.
WARMUP_CONCURRENCY = (1, 1, 2, 4, 8, 4, 2, 1)
#: Seconds allowed for one warm-up request.
WARMUP_TIMEOUT = 120.0


def _load_module(file: str, name: str) -> ModuleType:
    """Import ``file`` beside this one by path as module ``name`` (works whatever pytest's import mode)."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, HERE / file)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _load_server_module() -> ModuleType:
    """Import ``server.py`` beside this file by path (works whatever pytest's import mode)."""
    return _load_module("server.py", "_real_vllm_server")


server_module = _load_server_module()
proxy_module = _load_module("recording_proxy.py", "_real_vllm_recording_proxy")


@dataclass(frozen=True)
class VLLMTarget:
    """What the :func:`vllm_server` fixture yields.

    Attributes:
        base_url: server root, e.g. ``http://127.0.0.1:8123`` (no trailing slash).
        model: served model name to put in requests.
        reasoning: K, reasoning tokens (and reasoning deltas) per reply.
        answer: M, answer tokens (and content deltas) per reply.
        expected_reasoning: the concatenated reasoning text of every reply.
        expected_answer: the concatenated answer text of every reply.
        reasoning_pieces: the text of each reasoning token, in order (K strings).
        answer_pieces: the text of each answer token, in order (M strings).
        startup_seconds: seconds from spawning the server to its first ``GET /v1/models`` 200.
        warmup_seconds: seconds spent on warm-up requests after start-up (see :func:`warm_up`).
        log_path: the server's combined stdout/stderr log.
        client_cpus: CPUs left to the load generator when the server is pinned (None: not pinned).
        script: the full ``script.json`` record written by ``build_model.py``.
    """

    base_url: str
    model: str
    reasoning: int
    answer: int
    expected_reasoning: str
    expected_answer: str
    reasoning_pieces: tuple[str, ...]
    answer_pieces: tuple[str, ...]
    startup_seconds: float
    warmup_seconds: float
    log_path: Path
    script: dict[str, Any] = field(repr=False)
    client_cpus: frozenset[int] | None = None

    def pin_client(self) -> Callable[[], None] | None:
        """``preexec_fn`` keeping a load-generator child off the server's CPUs (see ``server.split_cpus``)."""
        return server_module.pin_to(self.client_cpus)

    @property
    def host(self) -> str:
        """Host part of :attr:`base_url`."""
        return self.base_url.split("//", 1)[1].rsplit(":", 1)[0]

    @property
    def port(self) -> int:
        """TCP port of :attr:`base_url`."""
        return int(self.base_url.rsplit(":", 1)[1])


def pytest_configure(config: pytest.Config) -> None:
    """Register the ``real_vllm`` marker."""
    config.addinivalue_line(
        "markers", "real_vllm: needs a real vLLM server (scripts/setup_vllm.sh); slow start-up (~1 min)"
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark every test collected under this directory with ``real_vllm``."""
    for item in items:
        if HERE in Path(str(item.path)).resolve().parents:
            item.add_marker(pytest.mark.real_vllm)


def _venv_missing_reason(venv: Path) -> str | None:
    """Return why the vLLM venv is unusable, or None if ``setup_vllm.sh`` completed there."""
    python = server_module.venv_python(venv)
    if not python.exists():
        return f"vLLM venv not found ({python} missing); run scripts/setup_vllm.sh"
    if not (venv / ".vllm-setup-ok").is_file():
        return f"vLLM venv {venv} is incomplete (no .vllm-setup-ok marker); run scripts/setup_vllm.sh"
    return None


def build_scripted_model(venv: Path, k: int, m: int) -> tuple[Path, dict[str, Any]]:
    """Build (or reuse) the scripted model for (K, M) with the vLLM venv; return (dir, script record)."""
    out_dir = MODEL_CACHE / f"vllm-model-{k}-{m}"
    cmd = [
        str(server_module.venv_python(venv)),
        str(HERE / "build_model.py"),
        str(out_dir),
        "--reasoning",
        str(k),
        "--answer",
        str(m),
    ]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=BUILD_TIMEOUT, check=False)
    if proc.returncode != 0:
        pytest.fail(f"build_model.py failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr[-6000:]}")
    record: dict[str, Any] = json.loads((out_dir / "script.json").read_text(encoding="utf-8"))
    return out_dir, record


def _chat_once(base_url: str, model: str, prompt: str) -> None:
    """Send one non-streaming chat completion and check it answered 200 (raises otherwise)."""
    body = json.dumps({"model": model, "messages": [{"role": "user", "content": prompt}]}).encode()
    req = urllib.request.Request(
        f"{base_url}/v1/chat/completions", data=body, headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=WARMUP_TIMEOUT) as resp:
        resp.read()


def warm_up(base_url: str, model: str, rounds: tuple[int, ...] = WARMUP_CONCURRENCY) -> float:
    """Run rounds of simultaneous full-length requests (same and distinct prompts); return seconds taken."""
    t0 = time.monotonic()
    errors: list[BaseException] = []

    def one(prompt: str) -> None:
        try:
            _chat_once(base_url, model, prompt)
        except BaseException as exc:
            errors.append(exc)

    for r, n in enumerate(rounds):
        prompts = ["Hello" if r % 2 == 0 else f"warm-up {r}.{i}" for i in range(n)]
        threads = [threading.Thread(target=one, args=(p,)) for p in prompts]
        for t in threads:
            t.start()
        for t in threads:
            t.join(WARMUP_TIMEOUT)
        if errors:
            raise RuntimeError(f"warm-up request failed: {errors[0]!r}")
    return time.monotonic() - t0


@pytest.fixture(scope="session")
def vllm_server() -> Iterator[VLLMTarget]:
    """Build the scripted model, start one vLLM server for the session, yield a :class:`VLLMTarget`."""
    venv = Path(server_module.DEFAULT_VENV)
    reason = _venv_missing_reason(venv)
    if reason is not None:
        if os.environ.get(REQUIRE_ENV) == "1":
            pytest.fail(f"{REQUIRE_ENV}=1 but {reason}", pytrace=False)
        pytest.skip(reason)

    model_dir, record = build_scripted_model(venv, REASONING_TOKENS, ANSWER_TOKENS)
    # One log per pytest process: concurrent sessions must not share (or delete) each other's log.
    log_path = MODEL_CACHE / f"vllm-server-{REASONING_TOKENS}-{ANSWER_TOKENS}-{os.getpid()}.log"
    log_path.unlink(missing_ok=True)
    server = server_module.VLLMServer(model_dir, SERVED_MODEL_NAME, venv=venv, log_path=log_path)
    t0 = time.monotonic()
    try:
        server.start()
    except server_module.VLLMServerError as exc:
        pytest.fail(str(exc), pytrace=False)
    try:
        try:
            warmup_seconds = warm_up(server.base_url, server.model)
        except RuntimeError as exc:
            pytest.fail(f"{exc}; server log {log_path}:\n{server_module.tail(log_path)}", pytrace=False)
        yield VLLMTarget(
            base_url=server.base_url,
            model=server.model,
            reasoning=int(record["reasoning_tokens"]),
            answer=int(record["answer_tokens"]),
            expected_reasoning=str(record["expected_reasoning"]),
            expected_answer=str(record["expected_answer"]),
            reasoning_pieces=tuple(record["reasoning_pieces"]),
            answer_pieces=tuple(record["answer_pieces"]),
            startup_seconds=server.startup_seconds or (time.monotonic() - t0),
            warmup_seconds=warmup_seconds,
            log_path=log_path,
            script=record,
            client_cpus=server_module.split_cpus()[1] if server.cpus is not None else None,
        )
    finally:
        server.stop()


@pytest.fixture
def recording_proxy(vllm_server: VLLMTarget) -> Iterator[Any]:
    """A ``recording_proxy.RecordingProxy`` to the session's vLLM server, for one test: point the load generator
    at its ``base_url`` to see the request bodies it sent (``.bodies(path)``)."""
    with proxy_module.RecordingProxy(vllm_server.base_url) as proxy:
        yield proxy
