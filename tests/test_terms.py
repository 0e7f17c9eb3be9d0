"""harness.terms: the field's terms are declared once, every one defined, stored in real record fields, linked to
real report-figure topics, and the "Metric definitions" page is generated from them."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from harness import docs_ref
from harness.report.catalogue import TOPICS
from harness.result import RECORD_FIELDS
from harness.terms import INTRO, TERMS, Term, term

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "reference" / "metric-definitions.md"

#: The field's standard terms: each must be defined exactly once.
STANDARD = ("TTFT", "TTFAT", "ITL", "TPOT", "E2E latency", "goodput", "concurrency", "request rate", "steady state",
            "usage")


def _row_names(md: str) -> list[str]:
    """The first cell of every body row of the page's terms table."""
    rows = [ln for ln in md.splitlines() if ln.startswith("| ") and not ln.startswith("| term |")]
    return [ln[2:].split(" | ", 1)[0] for ln in rows]


def test_terms_are_typed_and_named_once() -> None:
    assert TERMS and all(isinstance(t, Term) for t in TERMS)
    names = [t.name.lower() for t in TERMS]
    assert len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)


@pytest.mark.parametrize("t", TERMS, ids=lambda t: t.name)
def test_every_term_has_a_definition(t: Term) -> None:
    assert t.name.strip() and t.definition.strip()
    assert "\n" not in t.definition  # one table cell
    assert t.definition == " ".join(t.definition.split()), "no double spaces or stray whitespace"


def test_every_record_field_named_exists() -> None:
    fields = {f.name for f in RECORD_FIELDS}
    bad = {t.name: [f for f in t.fields if f not in fields] for t in TERMS}
    assert not {k: v for k, v in bad.items() if v}, "not record fields (harness/result.py RECORD_FIELDS)"
    assert sum(len(t.fields) for t in TERMS) >= 30


def test_every_topic_named_is_a_report_figure_topic() -> None:
    bad = {t.name: [k for k in t.topics if k not in TOPICS] for t in TERMS}
    assert not {k: v for k, v in bad.items() if v}, "not topics of harness/report/catalogue.py TOPICS"
    # the rows whose report figure the catalogue defines point to it instead of repeating it
    for name, topic in [("goodput", "goodput"), ("steady-state window", "steady_window"),
                        ("steady-state window", "sample"), ("hours to N samples", "hours"), ("drift", "drift")]:
        assert topic in term(name).topics


def test_a_term_pointing_to_a_topic_does_not_repeat_its_rule() -> None:
    """The formulas live in the topic: the term's text is short and shares no long run of words with it."""
    for t in TERMS:
        for k in t.topics:
            if k in {"latency", "hidden_reasoning", "usable", "client_read_lag", "step", "turns"}:
                continue  # measurement-level terms whose report topic only aggregates them
            words, topic = t.definition.split(), " ".join(TOPICS[k].split())
            runs = [" ".join(words[i : i + 12]) for i in range(len(words) - 11)]
            assert not [r for r in runs if r in topic], (t.name, k)


@pytest.mark.parametrize("name", STANDARD)
def test_each_standard_term_is_defined_exactly_once(name: str) -> None:
    assert [t.name for t in TERMS].count(name) == 1
    md = docs_ref.terms_markdown()
    assert [re.sub(r" \(.*\)$", "", n) for n in _row_names(md)].count(name) == 1


def test_the_generated_table_holds_every_term_in_order() -> None:
    md = docs_ref.terms_markdown()
    assert md.startswith(INTRO + "\n")
    assert _row_names(md) == [t.title for t in TERMS]
    for t in TERMS:
        for k in t.topics:
            assert f"[{k}](report-figures.md#{k})" in md
        for f in t.fields:
            assert f"`{f}`" in md


def test_the_topic_links_reach_a_heading_of_the_report_figures_page() -> None:
    headings = set(re.findall(r"^### (\S+)$", docs_ref.report_figures_markdown(), re.M))
    assert {k for t in TERMS for k in t.topics} <= headings


def test_the_page_is_the_generated_block() -> None:
    text = PAGE.read_text(encoding="utf-8")
    assert "<!-- generated: metric-terms -->" in text
    assert "| term |" not in text, "the terms table is generated from harness/terms.py, not written on the page"
    out = docs_ref.expand(text)
    for t in TERMS:
        assert f"| {t.title} |" in out.replace("\\|", "|")


def test_an_unknown_topic_fails_the_page(monkeypatch: pytest.MonkeyPatch) -> None:
    import harness.terms

    monkeypatch.setattr(harness.terms, "TERMS", (Term("x", "y", topics=("no_such_topic",)),))
    with pytest.raises(KeyError, match="no_such_topic"):
        docs_ref.terms_markdown()


def test_term_lookup() -> None:
    assert term("ttft").fields == ("ttft",)
    with pytest.raises(KeyError):
        term("no such term")


def test_the_module_imports_nothing_heavy() -> None:
    code = ("import sys, harness.terms; heavy = [m for m in ('polars', 'pydantic', 'locust', 'numpy', "
            "'harness.report', 'harness.result', 'harness.config') if m in sys.modules]; print(heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "[]"
