"""harness.panels.variables: template variable values and their substitution."""

from __future__ import annotations

import pytest

from harness.panels import resolve_variables, substitute
from tests.panels.fake_prometheus import DASHBOARD


def test_substitute_every_variable_form() -> None:
    v = {"model": "m1", "window": "30s", "__rate_interval": "4s"}
    assert substitute('rate(x{model=~"$model"}[$window])', v) == 'rate(x{model=~"m1"}[30s])'
    assert substitute("${model} [[window]] ${model:regex} $__rate_interval", v) == "m1 30s m1 4s"
    assert substitute("$windowed $unknown", v) == "$windowed $unknown"  # whole names only; unknown left alone


def test_resolve_variables_from_caller_dashboard_and_all_value() -> None:
    got = resolve_variables(DASHBOARD, {})
    assert got == {"model": ".*", "window": "5m"}  # model: includeAll's allValue; window: its current value
    assert resolve_variables(DASHBOARD, {"$model": "k26", "window": "30s"}) == {"model": "k26", "window": "30s"}
    dash = {"templating": {"list": [{"name": "x", "type": "custom", "current": {}}]}}
    with pytest.raises(ValueError, match="x"):
        resolve_variables(dash, {})
