"""Helpers of the browser tests: Debian's chromium driven by Playwright, a Locust web UI on the simulator.

Chromium is ``/usr/bin/chromium`` (``scripts/setup_chromium.sh`` installs Debian's package; Playwright's own
browser download is never used). Without it, or without the ``playwright`` package, the tests skip, unless
``LLMLOAD_REQUIRE_BROWSER=1`` (``.ci/run``) makes them fail.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.procs import records as run_records

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
REQUIRE_ENV = "LLMLOAD_REQUIRE_BROWSER"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
LOCUST = [sys.executable, "-m", "locust", "-f", str(ROOT / "locustfiles" / "k26.py")]

#: A short sweep on the time-scaled simulator: warm-up, 3 s single stream, C=2 and C=4 for 15 s each.
PROFILE = """
name: webui-test
simulator: {preset: demo, time_scale: 0.25, seed: 11}
request: {thinking: true, continuous_usage_stats: true}
prompts:
  - {id: short, text: "Explain X briefly", max_tokens: 400, weight: 2}
  - {id: guide, text: "Write a comprehensive guide to Y", max_tokens: 150, weight: 1}
warmup: {max_tokens: 16, timeout: 60}
single_stream: {duration: 3}
steps: {concurrency: [2, 4], duration: 15, drain_timeout: 30}
timeouts: {connect: 5, first_byte: 30, first_token: 30, idle: 10, total: 120}
output: {dir: %(out)s, chunk_times: true}
"""


def require_browser() -> str:
    """Path of chromium; skips (fails with LLMLOAD_REQUIRE_BROWSER=1) without it or without Playwright."""
    problems = []
    if not os.access(CHROMIUM, os.X_OK):
        problems.append(f"{CHROMIUM} missing (bash scripts/setup_chromium.sh)")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        problems.append("the playwright package is missing (pip install -e '.[dev]')")
    if problems:
        msg = "; ".join(problems)
        if os.environ.get(REQUIRE_ENV) == "1":
            pytest.fail(f"{REQUIRE_ENV}=1 but {msg}")
        pytest.skip(msg)
    return CHROMIUM


def wait_until(cond: Callable[[], Any], timeout: float, what: str, every: float = 0.25) -> Any:
    """Call ``cond`` until it returns a truthy value (returned) or ``timeout`` s pass (AssertionError)."""
    deadline = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(every)


def get_json(url: str) -> Any:
    """GET ``url`` (loopback) as JSON; None when it does not answer."""
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return json.loads(r.read())
    except OSError:
        return None


@contextmanager
def locust(args: list[str], cwd: Path, log: Path, env: dict[str, str] | None = None) -> Iterator[subprocess.Popen]:
    """A Locust process (stdout and stderr to ``log``), sent SIGINT then killed at the end of the block."""
    e = dict(os.environ, PYTHONUNBUFFERED="1", **(env or {}))
    with open(log, "ab") as out:
        proc = subprocess.Popen([*LOCUST, *args], cwd=cwd, env=e, stdout=out, stderr=subprocess.STDOUT)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=40)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)


def records(run_dir: Path) -> list[dict[str, Any]]:
    """The records of ``run_dir`` (complete lines of records.jsonl: the run may still be writing)."""
    return run_records(run_dir, live=True)


def truth_completed(path: Path) -> int:
    """Chat requests the simulator completed (its ground-truth log's ``outcome: completed`` lines)."""
    n = 0
    for line in path.read_text().splitlines():
        if line.strip():
            d = json.loads(line)
            n += d.get("type") == "request" and d.get("outcome") == "completed"
    return n


def set_form_field(page: Any, name: str, value: str) -> bool:
    """Set the start form's field ``name`` (Locust's camelCase form name) to ``value``: a text field is filled, a
    checkbox set (``"true"`` / ``"false"``), a dropdown (MUI select) opened and its option picked. False when the
    form has no such field (the test runs with the fields the harness offers)."""
    loc = page.locator(f'form [name="{name}"]')
    if loc.count() == 0:
        return False
    field = loc.first
    kind = field.evaluate("e => e.type")
    if kind == "checkbox":
        field.set_checked(value == "true")
    elif "MuiSelect-nativeInput" in (field.get_attribute("class") or "") or field.get_attribute("aria-hidden"):
        field.locator("xpath=..").get_by_role("combobox").click()
        page.get_by_role("option", name=value, exact=True).click()
    elif field.evaluate("e => e.tagName") == "SELECT":
        field.select_option(value)
    else:
        field.fill(value)
    return True


def start_from_form(page: Any, base_url: str, fields: dict[str, str]) -> list[str]:
    """Open Locust's UI, set ``fields`` that exist in the start form (its Custom parameters and Advanced options
    expanded when a field is in them), press Start.
    Returns the names that were set."""
    page.goto(base_url + "/")
    page.wait_for_selector("form")
    for section in ("Custom parameters", "Advanced options"):  # the form's collapsed accordions
        hidden = [n for n in fields if page.locator(f'form [name="{n}"]').count()
                  and not page.locator(f'form [name="{n}"]').first.is_visible()]
        button = page.get_by_role("button", name=section)
        if hidden and button.count():
            button.first.click()
            page.wait_for_timeout(400)  # the accordion's animation
    done = [n for n, v in fields.items() if set_form_field(page, n, v)]
    page.get_by_role("button", name="Start").first.click()
    return done


def cell(page: Any, step: str, key: str, current: bool = False) -> str:
    """Text of the LLM view's cell ``key`` of step ``step`` (the current-window row when ``current``): a cell of the
    row, or a figure of its details (shown or not)."""
    body = "#current-row" if current else "#step-rows"
    loc = page.locator(f'{body} tr[data-step="{step}"] td[data-key="{key}"], '
                       f'{body} tr[data-step="{step}"] dd[data-key="{key}"]')
    return str(loc.first.text_content()).strip()


def number(text: str) -> float | None:
    """The first number of a cell (``–`` is None)."""
    t = text.strip().split(" ")[0].replace(",", "")
    return None if t in ("–", "") else float(t)
