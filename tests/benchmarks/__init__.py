"""Tests of the on-demand benchmarks (``benchmarks/``), and :func:`load_benchmark`, which imports one of them."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def load_benchmark(stem: str, name: str | None = None) -> ModuleType:
    """Import ``benchmarks/<stem>.py`` (not a package) as module ``name`` (default ``stem``), registered in
    ``sys.modules`` so its dataclasses and pickling find it."""
    name = name or stem
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{stem}.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod
