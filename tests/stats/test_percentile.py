"""The one percentile of a sample: numpy's default (linear between closest ranks), the same in polars, and every
polars ``quantile`` of the package uses that interpolation (the histogram estimate aside)."""

from __future__ import annotations

import ast
import random
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from harness.report import stats as report_stats
from harness.report.exprs import pctl
from harness.stats.percentile import POLARS_INTERPOLATION, percentile

PKG = Path(__file__).resolve().parents[2] / "harness"

#: ``.quantile(...)`` calls that are the histogram estimate (:meth:`harness.histogram.LogHistogram.quantile`,
#: nearest rank over log buckets), not the percentile of a sample: (file, receiver).
HISTOGRAM_ESTIMATES = {("report/columns.py", "gaps"), ("quantiles.py", "h")}


@pytest.mark.parametrize("n", [1, 2, 3, 10, 101])
def test_percentile_is_numpys_linear_percentile(n: int) -> None:
    rng = random.Random(n)
    xs = [rng.lognormvariate(0, 1) for _ in range(n)]
    for q in (0, 1, 25, 50, 90, 95, 99, 99.9, 100):
        assert percentile(xs, q) == pytest.approx(float(np.percentile(xs, q)), rel=1e-12)


def test_percentile_edges() -> None:
    assert percentile([], 50) is None
    assert percentile([3.0, 1.0, 2.0], 50) == 2.0
    assert percentile([1.0, 2.0], 25) == 1.25
    assert percentile([1.0, 2.0], -5) == 1.0 and percentile([1.0, 2.0], 120) == 2.0  # q clamped to 0..100
    assert report_stats.percentile is percentile  # one definition, re-exported where the report used to keep it


def test_polars_percentile_is_the_same_definition() -> None:
    rng = random.Random(7)
    xs = [rng.expovariate(1.0) for _ in range(257)]
    df = pl.DataFrame({"x": [*xs, None]})
    for q in (50, 90, 99):
        got = df.select(pctl("x", q)).item()
        assert got == pytest.approx(percentile(xs, q), rel=1e-12)
        assert df.select(pctl(pl.col("x").filter(pl.col("x") > 0.5), q)).item() == pytest.approx(
            percentile([x for x in xs if x > 0.5], q), rel=1e-12)


def _quantile_calls() -> list[tuple[str, int, str, ast.Call]]:
    out = []
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(PKG).as_posix()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "quantile":
                out.append((rel, node.lineno, ast.unparse(node.func.value), node))
    return out


def test_every_polars_quantile_uses_the_one_interpolation() -> None:
    calls = _quantile_calls()
    assert len(calls) >= 3
    for rel, line, receiver, call in calls:
        if (rel, receiver) in HISTOGRAM_ESTIMATES:
            continue
        interp = [k.value for k in call.keywords if k.arg == "interpolation"]
        assert interp and isinstance(interp[0], ast.Name) and interp[0].id == "POLARS_INTERPOLATION", (
            f"harness/{rel}:{line}: {receiver}.quantile(...) without interpolation=POLARS_INTERPOLATION: use "
            "harness.report.exprs.pctl (or harness.stats.percentile.percentile in Python)")
    assert POLARS_INTERPOLATION == "linear"


def test_the_check_finds_a_quantile_without_the_interpolation(tmp_path: Path) -> None:
    tree = ast.parse("import polars as pl\ne = pl.col('x').quantile(0.5)\n")
    (call,) = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "attr", "") == "quantile"]
    assert not [k for k in call.keywords if k.arg == "interpolation"]
