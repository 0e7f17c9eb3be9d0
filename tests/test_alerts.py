"""prometheus/alerts.yml: ``promtool check rules`` and ``promtool test rules`` (tests/prometheus/alerts_test.yml, every
alert firing and not firing), the rules' shape (for:, severity, annotations, doc anchor), the series they read are
exported, their thresholds are the report's own constants, and the promtool tests fail when a threshold moves.

The promtool tests skip when ``promtool`` is missing, unless ``LLMLOAD_REQUIRE_PROMETHEUS=1`` (CI) makes them fail.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.catalogue import FAMILIES
from harness.clientlag import CLIENT_LAG_LIMIT_S, CLIENT_STARVED_PCT
from harness.report.figures import OPEN_LOOP_SHORTFALL
from harness.report.soak import DRIFT_MIN_ABS_CHANGE
from tests.integration.test_prometheus import prometheus_tool

ROOT = Path(__file__).resolve().parents[1]
RULES = ROOT / "prometheus" / "alerts.yml"
UNIT_TESTS = ROOT / "tests" / "prometheus" / "alerts_test.yml"
GUIDE = ROOT / "docs" / "guides" / "alerts.md"

#: Every alert of prometheus/alerts.yml, in file order.
ALERTS = (
    "LlmloadThroughputDrift",
    "LlmloadTTFTDrift",
    "LlmloadErrorRate",
    "LlmloadClientStarved",
    "LlmloadOpenLoopTargetMissed",
    "LlmloadWorkerLost",
    "LlmloadNoData",
    "LlmloadNoCompletions",
)


def promtool() -> str:
    """Path of ``promtool``; skips (or fails with LLMLOAD_REQUIRE_PROMETHEUS=1) when it is missing."""
    return prometheus_tool("promtool")


def rules() -> list[dict[str, Any]]:
    """Every rule of prometheus/alerts.yml."""
    doc = yaml.safe_load(RULES.read_text())
    return [r for g in doc["groups"] for r in g["rules"]]


def rule(name: str) -> dict[str, Any]:
    (r,) = [r for r in rules() if r.get("alert") == name]
    return r


def test_promtool_checks_the_rules() -> None:
    proc = subprocess.run([promtool(), "check", "rules", str(RULES)], capture_output=True, text=True, timeout=60)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0 and f"SUCCESS: {len(ALERTS)} rules found" in out, out
    assert "WARNING" not in out.upper(), out


def test_promtool_unit_tests_pass() -> None:
    """tests/prometheus/alerts_test.yml: each alert fires for the model meeting its condition and for no other."""
    proc = subprocess.run([promtool(), "test", "rules", str(UNIT_TESTS)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "SUCCESS" in proc.stdout, proc.stdout + proc.stderr


def test_every_alert_is_tested_firing_and_not_firing() -> None:
    doc = yaml.safe_load(UNIT_TESTS.read_text())
    assert doc["rule_files"] == ["../../prometheus/alerts.yml"]
    cases: dict[str, list[list[dict[str, Any]]]] = {}
    for t in doc["tests"]:
        for c in t["alert_rule_test"]:
            cases.setdefault(c["alertname"], []).append(c["exp_alerts"])
    assert set(cases) == set(ALERTS)
    for name, exp in cases.items():
        assert [] in exp, f"{name}: no case where it does not fire"
        assert any(e for e in exp), f"{name}: no case where it fires"
        for e in exp:
            for alert in e:  # every firing case also lists the other models of its group as not firing
                assert alert["exp_labels"]["model"] == "a", (name, alert)


def test_rule_shape_and_doc_anchor() -> None:
    """Each rule: an alert with a for: duration, a severity, a summary that shows the value, a description, and a
    doc anchor that is a heading of docs/guides/alerts.md; the names are :data:`ALERTS`."""
    assert tuple(r["alert"] for r in rules()) == ALERTS
    headings = {
        re.sub(r"[^\w-]", "", h.strip().lower().replace(" ", "-"))
        for h in re.findall(r"^#+ (.+)$", GUIDE.read_text(), flags=re.M)
    }
    for r in rules():
        assert re.fullmatch(r"\d+[smh]", r["for"]), r["alert"]
        assert r["labels"]["severity"] in ("warning", "critical"), r["alert"]
        ann = r["annotations"]
        assert "$value" in ann["summary"] and "$labels.model" in ann["summary"], r["alert"]
        assert len(ann["description"]) > 80, r["alert"]
        page, anchor = ann["doc"].split("#")
        assert page == "docs/guides/alerts.md" and anchor == r["alert"].lower(), ann["doc"]
        assert anchor in headings, f"{r['alert']}: no heading for #{anchor} in {GUIDE.name}"
        section = _section(r["alert"])
        assert f"`{r['for']}`" in section, f"{r['alert']}: the guide does not state its for: duration"
        quoted = "```promql\n" + r["expr"].rstrip("\n") + "\n```"
        assert quoted in section, f"{r['alert']}: the guide's expression is not the rule's"


def _section(alert: str) -> str:
    """The guide's section about ``alert`` (from its heading to the next heading)."""
    text = GUIDE.read_text()
    m = re.search(rf"^### {alert}\n(.*?)(?=^#)", text, flags=re.M | re.S)
    assert m, alert
    return m.group(1)


def test_rules_read_only_exported_series() -> None:
    """Every llmload series an expression reads is one the exporter serves (harness/catalogue.py), and every rule
    keeps the ``model`` label (the dashboard's firing-alerts panel filters on $model)."""
    exported = {s for f in FAMILIES.values() for s in f.samples}
    for r in rules():
        names = set(re.findall(r"\b(llmload_\w+)", r["expr"]))
        assert names and names <= exported, (r["alert"], names - exported)
        for agg in re.findall(r"\b(?:sum|max|min|avg) by \(([^)]*)\)", r["expr"]):
            assert agg == "model", (r["alert"], agg)


def test_thresholds_are_the_reports_own() -> None:
    """Client-starved is the report's STARVED rule (read lag above CLIENT_LAG_LIMIT_S for more than
    CLIENT_STARVED_PCT % of requests); the open-loop shortfall is the report's OPEN_LOOP_SHORTFALL."""
    starved = rule("LlmloadClientStarved")["expr"]
    assert f'le="{CLIENT_LAG_LIMIT_S:g}"' in starved
    assert re.search(rf"\) > {CLIENT_STARVED_PCT / 100:g}\s*$", starved), starved
    open_loop = rule("LlmloadOpenLoopTargetMissed")["expr"]
    assert f") < {1 - OPEN_LOOP_SHORTFALL:g}\n" in open_loop, open_loop


def test_ttft_drift_floor_is_the_reports_own() -> None:
    """LlmloadTTFTDrift's absolute floor (the median's change over its hour, seconds) is the report's drift floor
    for TTFT p50 (harness.report.soak.DRIFT_MIN_ABS_CHANGE): both must be exceeded there as in the report."""
    expr = rule("LlmloadTTFTDrift")["expr"]
    assert f"\n) > {DRIFT_MIN_ABS_CHANGE['ttft_p50_s']:g}\n" in expr, expr


#: One mutation per alert that moves its threshold (or drops a guard) so that a promtool case must fail.
MUTATIONS = {
    "LlmloadThroughputDrift": (") > 0.1\n          and on", ") > 0.3\n          and on"),
    "LlmloadTTFTDrift": (") > 0.2\n", ") > 0.4\n"),
    "LlmloadErrorRate": (") > 0.01\n", ") > 0.001\n"),
    "LlmloadClientStarved": (") > 0.1\n        for: 5m", ") > 0.01\n        for: 5m"),
    "LlmloadOpenLoopTargetMissed": (") < 0.95\n", ") < 0.99\n"),
    "LlmloadWorkerLost": ("for: 1m\n", "for: 0s\n"),
    "LlmloadNoData": ("[30m])) > 0\n", "[30m])) >= 0\n"),
    "LlmloadNoCompletions": ("for: 10m\n", "for: 1m\n"),
}


#: Further mutations (alert, old, new): guards beside an alert's main threshold that a promtool case must also catch.
EXTRA_MUTATIONS = (
    ("LlmloadTTFTDrift", ") > 0.005\n", ") > 0.001\n"),  # the absolute floor beside the 20 %
)


@pytest.mark.parametrize("alert", ALERTS)
def test_the_unit_tests_catch_a_moved_threshold(tmp_path: Path, alert: str) -> None:
    """The promtool cases are tight: a copy of the rules with this alert's threshold moved fails them."""
    _assert_mutation_fails(tmp_path, alert, *MUTATIONS[alert])


@pytest.mark.parametrize(("alert", "old", "new"), EXTRA_MUTATIONS)
def test_the_unit_tests_catch_a_moved_guard(tmp_path: Path, alert: str, old: str, new: str) -> None:
    """The same for each of :data:`EXTRA_MUTATIONS`."""
    _assert_mutation_fails(tmp_path, alert, old, new)


def _assert_mutation_fails(tmp_path: Path, alert: str, old: str, new: str) -> None:
    """The promtool unit tests fail (naming ``alert``) on a copy of the rules with ``old`` -> ``new`` in ``alert``."""
    tool = promtool()
    text = RULES.read_text()
    start = text.index(f"- alert: {alert}\n")
    end = text.find("- alert: ", start + 1)
    end = len(text) if end < 0 else end
    assert text[start:end].count(old) == 1, (alert, old)
    (tmp_path / "prometheus").mkdir()
    (tmp_path / "prometheus" / "alerts.yml").write_text(text[:start] + text[start:end].replace(old, new) + text[end:])
    (tmp_path / "tests" / "prometheus").mkdir(parents=True)
    (tmp_path / "tests" / "prometheus" / "alerts_test.yml").write_text(UNIT_TESTS.read_text())
    proc = subprocess.run([tool, "test", "rules", str(tmp_path / "tests" / "prometheus" / "alerts_test.yml")],
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert proc.returncode != 0, f"{alert}: {old!r} -> {new!r} passed the unit tests"
    assert f"alertname: {alert}," in proc.stdout + proc.stderr, proc.stdout + proc.stderr
