"""harness.locust.options: llmload's options on Locust's parser and the checks of the --metrics-* values."""

from __future__ import annotations

import subprocess
import sys
from argparse import Namespace
from pathlib import Path
from typing import Any

import pytest

from harness.exporter import DEFAULT_ADDR, DEFAULT_PORT
from harness.locust.options import MetricsOptions, metrics_options

ROOT = Path(__file__).resolve().parents[2]


def opts(**kw: Any) -> Namespace:
    """Locust's parsed options as far as llmload reads them (metrics_linger absent unless given)."""
    return Namespace(**{"no_metrics": False, "metrics_port": None, "metrics_addr": None, **kw})


def test_metrics_options_defaults_and_explicit_values() -> None:
    assert metrics_options(opts(no_metrics=True)) is None
    assert metrics_options(opts()) == MetricsOptions(DEFAULT_ADDR, DEFAULT_PORT, explicit=False, linger=0.0)
    assert metrics_options(opts(metrics_port=0, metrics_linger=30.0)) == MetricsOptions(
        DEFAULT_ADDR, 0, explicit=True, linger=30.0
    )
    assert metrics_options(opts(metrics_addr="0.0.0.0")) == MetricsOptions("0.0.0.0", DEFAULT_PORT, True, 0.0)
    assert DEFAULT_PORT == 9646 and DEFAULT_ADDR == "127.0.0.1"


def test_bad_metrics_options_exit_2_with_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    for bad in (70000, -1):  # not a TCP port: one line, exit 2 (was an OverflowError traceback)
        with pytest.raises(SystemExit) as ei:
            metrics_options(opts(metrics_port=bad))
        assert ei.value.code == 2
        err = capsys.readouterr().err
        assert err == f"llmload: --metrics-port {bad}: not a TCP port (0-65535; 0 picks a free one)\n"
    for linger in (-5.0, float("nan")):  # a negative linger was silently accepted
        with pytest.raises(SystemExit) as ei:
            metrics_options(opts(metrics_linger=linger))
        assert ei.value.code == 2
        assert "--metrics-linger" in capsys.readouterr().err


def test_locust_parses_the_options() -> None:
    """The options are Locust options (locust --help does not list a locustfile's own options)."""
    proc = subprocess.run(
        [sys.executable, "-m", "locust", "-f", str(ROOT / "locustfiles" / "k26.py"), "--headless",
         "--metrics-port", "x"],
        capture_output=True, text=True, timeout=60, cwd=ROOT,
    )  # fmt: skip
    assert proc.returncode == 2 and "argument --metrics-port: invalid int value: 'x'" in proc.stderr
