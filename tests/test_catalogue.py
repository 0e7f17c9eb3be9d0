"""harness.catalogue: the one table of metric families; the exporter serves exactly it, the docs are generated
from it."""

from __future__ import annotations

from pathlib import Path

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

import harness.exporter as exporter
from harness import catalogue
from harness.catalogue import (
    FAMILIES,
    HIST_LABELS,
    HISTOGRAMS,
    PERCENTILE_GAUGES,
    PERCENTILE_LABELS,
    RECORD_COUNTERS,
    TIME_BUCKETS,
    markdown_table,
    rst_list,
)
from tests.test_exporter import collector

ROOT = Path(__file__).resolve().parent.parent


def test_the_exporter_serves_exactly_the_table() -> None:
    """Every family served is in the table with its type, help and labels, in table order, and every family of
    the table is served (the collector of tests/test_exporter.py has a sample in each)."""
    reg = CollectorRegistry()
    reg.register(collector())  # type: ignore[arg-type]
    served = list(text_string_to_metric_families(generate_latest(reg).decode()))
    assert [f.name for f in served] == [f.name + ("_info" if f.type == "info" else "") for f in FAMILIES.values()]
    for got in served:
        want = FAMILIES[got.name.removesuffix("_info")]
        assert got.documentation == want.help, got.name
        assert got.type == ("gauge" if want.type == "info" else want.type), got.name  # info: a gauge in text
        assert got.samples, got.name
        for s in got.samples:
            assert set(s.labels) - {"le"} == set(want.labels), (got.name, s.labels)
            assert s.name in want.samples, s.name


def test_derived_views() -> None:
    assert set(RECORD_COUNTERS) | set(HISTOGRAMS) | set(PERCENTILE_GAUGES) == {
        f.name for f in FAMILIES.values() if f.source == "records"
    }
    # A percentile gauge for every time histogram but the read lag's, over the same record field.
    timed = {n: h[0] for n, h in HISTOGRAMS.items() if h[1] == TIME_BUCKETS}
    assert {n.removesuffix("_seconds") + "_percentile_seconds": fld for n, fld in timed.items()} == PERCENTILE_GAUGES
    assert all(FAMILIES[g].labels == PERCENTILE_LABELS and FAMILIES[g].unit == "seconds" for g in PERCENTILE_GAUGES)
    assert all(f.labels[0] == "model" for f in FAMILIES.values())
    assert all(FAMILIES[h].labels == HIST_LABELS and FAMILIES[h].buckets for h in HISTOGRAMS)
    units = {"seconds", "tokens", "requests", "requests/s", "users", "workers", "scrapes", "1"}
    assert {f.unit for f in FAMILIES.values()} <= units
    assert all(f.name.endswith("_seconds") == (f.unit == "seconds") for f in FAMILIES.values())


def test_the_docs_metric_table_is_generated_from_the_catalogue() -> None:
    """docs/reference/prometheus-metrics.md holds no copy of the table: the site build fills it from
    :func:`markdown_table` (one row per family)."""
    from harness.docs_ref import expand, md_safe

    text = (ROOT / "docs" / "reference" / "prometheus-metrics.md").read_text(encoding="utf-8")
    assert "<!-- generated: prometheus-metrics -->" in text
    assert "llmload_" not in text  # no hand-copied rows
    built = expand(text)
    assert md_safe(markdown_table()) in built  # as the site shows it (placeholders escaped)
    for f in FAMILIES.values():
        assert f"| `{f.shown}` |" in built


def test_exporter_docstring_lists_every_family() -> None:
    doc = exporter.__doc__ or ""
    assert doc.endswith(rst_list())
    for f in FAMILIES.values():
        assert f"``{f.shown}{{" in doc, f.name
    assert "``llmload_client_read_lag_seconds{" in doc  # the one the hand-written list missed


def test_main_rewrites_only_the_table(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    readme.write_text(f"intro\n{catalogue.BEGIN}\n| stale |\n{catalogue.END}\nrest\n")
    assert catalogue.main([str(readme)]) == 0
    assert readme.read_text() == f"intro\n{catalogue.BEGIN}\n{markdown_table()}{catalogue.END}\nrest\n"
    readme.write_text("no markers\n")
    assert catalogue.main([str(readme)]) == 1
    assert catalogue.main([]) == 1


def test_bucket_ranges_in_the_docs() -> None:
    rows = {r.split(" | ")[0].strip("| `"): r for r in markdown_table().splitlines()[2:]}
    assert "| histogram, 1 ms to 2 h |" in rows["llmload_request_duration_seconds"]
    assert "| histogram, 0.1 ms to 60 s |" in rows["llmload_client_read_lag_seconds"]
    assert "| histogram, 1 to 131072 |" in rows["llmload_request_output_tokens"]
    assert "| counter |" in rows["llmload_requests_total"] and "| info |" in rows["llmload_run_info"]
