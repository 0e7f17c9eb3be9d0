"""harness.docs_ref: the reference pages are generated from the code's own definitions, and every docs page that
asks for a generated block gets it."""

from __future__ import annotations

import re
import typing
from pathlib import Path

import pytest
from pydantic import BaseModel

from harness import docs_ref
from harness.catalogue import markdown_table
from harness.config import Profile
from harness.report.build import DEFINITIONS
from harness.result import RECORD_FIELDS, records_markdown

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"


def _table_keys(md: str) -> list[str]:
    """The first cell's backticked text of every body row of the Markdown tables in ``md``."""
    return [m.group(1) for m in re.finditer(r"^\| `([^`]+)` \|", md, re.M)]


def test_every_generator_is_asked_for_by_a_page() -> None:
    asked = {m.group(1) for p in DOCS.rglob("*.md") for m in docs_ref.MARKER.finditer(p.read_text(encoding="utf-8"))}
    # record fields are the committed docs/records.md (tests/test_result.py keeps it current)
    assert asked | {"record-fields"} == set(docs_ref.GENERATORS)


@pytest.mark.parametrize("page", sorted(p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md")))
def test_every_page_expands(page: str) -> None:
    text = (DOCS / page).read_text(encoding="utf-8")
    out = docs_ref.expand(text)
    assert not docs_ref.MARKER.search(out)
    if docs_ref.MARKER.search(text):
        assert len(out) > len(text)


def test_an_unknown_marker_fails() -> None:
    with pytest.raises(KeyError, match="no-such"):
        docs_ref.expand("a\n<!-- generated: no-such -->\nb\n")


def test_a_marker_is_replaced_in_place() -> None:
    out = docs_ref.expand("a\n<!-- generated: prometheus-metrics -->\nb\n")
    assert out == "a\n" + docs_ref.md_safe(markdown_table()) + "b\n"


def _all_profile_fields(model: type[BaseModel], prefix: str = "") -> set[str]:
    written = getattr(model, "WRITTEN_KEYS", None)
    if written is not None:  # a section whose written keys are not its fields (slo): those are documented
        return {prefix + row[0] for row in written}
    keys = set()
    for name, info in model.model_fields.items():
        key = prefix + (info.alias or name)
        keys.add(key)
        for arg in (info.annotation, *typing.get_args(info.annotation)):
            for sub in (arg, *typing.get_args(arg)):
                if isinstance(sub, type) and issubclass(sub, BaseModel):
                    list_of = typing.get_origin(arg) is list or typing.get_origin(info.annotation) is list
                    keys |= _all_profile_fields(sub, key + ("[]." if list_of else "."))
    return keys


def test_profile_keys_cover_every_field_of_the_models() -> None:
    md = docs_ref.profile_keys_markdown()
    keys = _table_keys(md)
    assert len(keys) == len(set(keys))
    assert set(keys) == _all_profile_fields(Profile)
    for must in ("steps.concurrency", "prompts[].class", "rate.rates", "slo.<ttft|ttfat|tpot|e2e>_p<q>_s",
                 "dataset.path"):
        assert must in keys


def test_profile_keys_show_defaults_types_and_descriptions() -> None:
    rows = {k: (tp, d, desc) for k, tp, d, desc in docs_ref.profile_keys()}
    assert rows["steps.duration"][1] == "`600.0`" and rows["steps.duration"][2] == (
        "seconds per step (at least 1: the load shape ticks once a second)")
    assert rows["steps.concurrency"][1] == "`[8, 16, 32, 64]`"
    assert rows["name"][1] == "the file's stem"  # required by the model, filled in by load_profile()
    assert "'poisson'" in rows["rate.arrival"][0] and rows["rate.arrival"][1] == "`poisson`"
    assert rows["target"][2]  # a section's description: its docstring's first paragraph


def test_profile_keys_have_descriptions() -> None:
    missing = [k for k, _, _, desc in docs_ref.profile_keys() if not desc]
    assert not missing, f"add Field(description=...) in harness/config/ (or the section's model): {missing}"


def test_locust_options_are_the_parsers_additions() -> None:
    actions = docs_ref.llmload_locust_actions()
    names = {s for a in actions for s in a.option_strings}
    for must in ("--steps", "--step-duration", "--max-tokens", "--prompt-mix", "--output-dir", "--metrics-port"):
        assert must in names
    assert "--host" not in names and "--profile" not in names  # Locust's own
    md = docs_ref.locust_options_markdown()
    for a in actions:
        assert a.help, f"{a.option_strings}: no help text"
        assert f"`{a.option_strings[0]}" in md


def test_cli_pages_hold_every_subcommands_help() -> None:
    texts = docs_ref.cli_help_texts()
    assert set(texts) == {"llmload", "llmload report", "llmload compare", "llmload sim serve", "llmload fidelity",
                          "llmload panels"}
    assert "--time-scale" in texts["llmload sim serve"]
    assert "--n N" in texts["llmload report"]
    md = docs_ref.cli_markdown()
    assert md.count("```text") == len(texts)


def test_report_figures_are_the_catalogues_figures_and_definitions() -> None:
    from harness.report.catalogue import FIGURES, Flag

    md = docs_ref.report_figures_markdown()
    assert not md.startswith("# "), "the page has its own title"
    assert set(FIGURES) <= set(_table_keys(md))  # every catalogued figure has a row
    for topic in DEFINITIONS:  # every definition the report carries is on the page, under its own heading
        assert f"### {topic}\n" in md
    for flag in Flag:
        assert flag.text in md
    assert "## Compare (`compare.json` `definitions`)" in md


def test_record_fields_are_the_result_modules() -> None:
    md = docs_ref.record_fields_markdown()
    assert md == records_markdown()
    assert set(_table_keys(md)) >= {f.name for f in RECORD_FIELDS}


def test_main_prints_one_generator(capsys: pytest.CaptureFixture[str]) -> None:
    assert docs_ref.main(["prometheus-metrics"]) == 0
    assert capsys.readouterr().out == markdown_table()
    with pytest.raises(SystemExit):
        docs_ref.main(["nope"])


def test_md_safe_keeps_placeholders_visible_and_pipes_in_code_clean() -> None:
    md = docs_ref.md_safe("| `slo.<a|b>_p<q>_s` | `str \\| None` | x <metric>_p<q>_s -> s; :mod:`~harness.x.y` |")
    assert "&lt;metric&gt;_p&lt;q&gt;_s -&gt; s" in md  # not an HTML tag the browser drops
    assert "<code>slo.&lt;a&#124;b&gt;_p&lt;q&gt;_s</code>" in md and "<code>str &#124; None</code>" in md
    assert "`harness.x.y`" in md and ":mod:" not in md
    kept = "```text\n<run> a|b\n```\n<!-- generated: x -->"
    assert docs_ref.md_safe(kept) == kept  # fenced blocks and comments untouched


def test_every_generated_page_is_md_safe() -> None:
    for name in docs_ref.GENERATORS:
        page = docs_ref.expand(f"<!-- generated: {name} -->")
        assert ":mod:`" not in page and ":class:`" not in page, name
        page = re.sub(r"```.*?```|<code>.*?</code>", "", page, flags=re.S)
        outside = "\n".join(docs_ref._CODE_SPAN.sub("", line) for line in page.split("\n"))  # per line, as md_safe
        tags = re.findall(r".{0,20}<(?!!--|/?code>|br>)[a-z].{0,20}", outside)
        assert not tags, (name, tags[:3])


def test_profile_keys_document_the_written_slo_spelling() -> None:
    rows = {k: (tp, default, desc) for k, tp, default, desc in docs_ref.profile_keys()}
    assert "slo.<ttft|ttfat|tpot|e2e>_p<q>_s" in rows
    assert not any(k in rows for k in ("slo.ttft_s", "slo.target_share"))  # the old spelling only as a note
    assert "still read" in rows["slo.<ttft|ttfat|tpot|e2e>_p<q>_s"][2]
    assert rows["name"][1] == "the file's stem" and rows["description"][1] == "empty"
