"""harness.panels.series: series display names from legendFormat."""

from __future__ import annotations

from harness.panels import legend_name


def test_legend_format_substitution() -> None:
    metric = {"__name__": "llmload_x", "n": "1000", "concurrency": "8"}
    assert legend_name("N={{n}} at C={{ concurrency }}", metric) == "N=1000 at C=8"
    assert legend_name("{{error_class}}", metric) == ""  # a label the series lacks: empty, as in Grafana
    assert legend_name("", metric) == 'llmload_x{concurrency="8", n="1000"}'
    assert legend_name("__auto", {}, "sum(rate(x[5m]))") == "sum(rate(x[5m]))"
