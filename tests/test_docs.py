"""docs/architecture.md and the "Shipped profiles" docs page cannot silently rot.

docs/architecture.md: every path, module, name, metric, record field and test it cites exists.

Rules (the page's own notation):

* a repository path (``harness/...``, ``tests/...``, ``docs/...``...) anywhere on the page exists; a pytest node id
  ``tests/x.py::test_name`` names a test function defined in that file;
* a dotted ``harness.x.y`` name anywhere on the page imports (the longest importable prefix, then attributes);
* a code name in backticks outside code blocks (``ChatClient.stream_chat()``, ``RequestResult``, ``MSG_RECORDS``,
  ``step_row()``) resolves in one of the modules (``harness/...``, ``tests/...``) named in the same paragraph, list
  item or table row, or, when that block names none, in those of the last block that did;
* a backticked ``llmload_*`` name is a family of :data:`harness.catalogue.FAMILIES`;
* in the metric table, every backticked name of the "record field(s)" column is a record field.

``docs/guides/shipped-profiles.md``: every ``profiles/*.yaml`` has a row in its table; each excerpt of
``scripts/readme_excerpts.py`` sits under a heading naming its profile files, says what was run (the shortened
durations included), and holds the tables that the current report code renders from that run's ``report.json``
(``tests/data/excerpts/``), with the same column headers (numbers are not compared: they vary run to run).
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import importlib.util
import inspect
import itertools
import re
import sys
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from harness.catalogue import FAMILIES
from harness.config import load_profile
from harness.report.model import load_report
from harness.result import RECORD_FIELDS

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "architecture.md"

_TOP = r"(?:harness|tests|docs|scripts|locustfiles|profiles|grafana|prometheus|benchmarks)"
#: A repository path, optionally a pytest node id (``path::test``).
_PATH = re.compile(rf"(?<![\w/.-]){_TOP}/[\w./-]*(?:::\w+)?")
_DOTTED = re.compile(r"(?<![\w/.-])harness(?:\.\w+)+")
_SPAN = re.compile(r"`([^`\n]+)`")
#: Backticked code names that must resolve: CamelCase (``RunDir.write_record()``), CONSTANTS, or ``func()``.
_CODE = re.compile(
    r"^(?:[A-Z][A-Za-z0-9]*[a-z][A-Za-z0-9]*|_?[A-Z][A-Z0-9_]+|_?[a-z]\w*(?=(?:\.\w+)*\(\)$))(?:\.\w+)*(?:\(\))?$"
)
_ITEM = re.compile(r"^\s*(?:\d+\.|[-*])\s")


def _text() -> str:
    return DOC.read_text(encoding="utf-8")


def _prose_blocks(text: str) -> list[str]:
    """Paragraphs, list items and table rows outside fenced code blocks, in order."""
    blocks: list[str] = []
    cur: list[str] = []
    fenced = False

    def close() -> None:
        if cur:
            blocks.append("\n".join(cur))
            cur.clear()

    for line in text.splitlines():
        if line.startswith("```"):
            close()
            fenced = not fenced
            continue
        if fenced:
            continue
        if not line.strip() or line.lstrip().startswith(("|", "#")) or _ITEM.match(line):
            close()
        if line.strip():
            cur.append(line)
            if line.lstrip().startswith(("|", "#")):
                close()
    close()
    return blocks


def _paths(text: str) -> list[str]:
    return sorted({m.group(0).rstrip(".,;:)") for m in _PATH.finditer(text)})


@cache
def _resolve_dotted(name: str) -> str:
    """The module of what ``harness.a.b.C.d`` names (the longest importable prefix, whose attributes follow).

    Raises:
        LookupError: nothing of that name.
    """
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        mod_name = ".".join(parts[:i])
        try:
            module = importlib.import_module(mod_name)
        except ModuleNotFoundError as e:
            if e.name is not None and mod_name.startswith(e.name):
                continue
            raise
        _attrs(module, parts[i:], name)
        return mod_name
    raise LookupError(name)


def _attrs(obj: Any, names: list[str], shown: str) -> Any:
    """Follow ``names`` from ``obj``: attributes, dataclass or pydantic fields, or ``self.x`` assigned in a class."""
    for n in names:
        if hasattr(obj, n):
            obj = getattr(obj, n)
            continue
        if inspect.isclass(obj):
            if dataclasses.is_dataclass(obj) and n in {f.name for f in dataclasses.fields(obj)}:
                return None  # a field without a class attribute (default_factory): nothing to follow
            if n in getattr(obj, "model_fields", {}):
                return None
            if re.search(rf"\bself\.{re.escape(n)}\s*[:=]", inspect.getsource(obj)):
                return None  # an instance attribute set by the class
        raise LookupError(f"{shown}: no {n!r} in {obj!r}")
    return obj


def _module_of_path(path: str) -> str | None:
    """The module a ``harness/...`` or ``tests/...`` path names (a package for a directory), else None."""
    p = path.split("::")[0]
    if not p.startswith(("harness/", "tests/")) or p.startswith("tests/real_vllm/"):
        return None
    if p.endswith(".py"):
        return p.removesuffix(".py").removesuffix("/__init__").replace("/", ".")
    if (ROOT / p).is_dir() and (ROOT / p / "__init__.py").exists():
        return p.rstrip("/").replace("/", ".")
    return None


def _modules_in(block: str) -> list[ModuleType]:
    names = [m for m in (_module_of_path(p) for p in _paths(block)) if m]
    names += [_resolve_dotted(d) for d in _DOTTED.findall(block)]
    return [importlib.import_module(n) for n in dict.fromkeys(names)]


def test_the_page_exists_and_the_readme_links_it() -> None:
    assert DOC.exists()
    assert "docs/architecture.md" in (ROOT / "README.md").read_text(encoding="utf-8")


def test_every_path_and_test_it_names_exists() -> None:
    missing = []
    for p in _paths(_text()):
        path, _, test = p.partition("::")
        f = ROOT / path
        if not f.exists():
            missing.append(p)
        elif test:
            tree = ast.parse(f.read_text(encoding="utf-8"))
            defs = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}
            if test not in defs:
                missing.append(p)
    assert not missing, f"docs/architecture.md names paths or tests that do not exist: {missing}"


def test_every_dotted_harness_name_imports() -> None:
    bad = []
    for d in sorted(set(_DOTTED.findall(_text()))):
        try:
            _resolve_dotted(d)
        except (LookupError, ImportError) as e:
            bad.append(f"{d} ({e})")
    assert not bad, f"docs/architecture.md names what does not exist: {bad}"


def test_every_code_name_resolves_in_a_module_of_its_block() -> None:
    bad = []
    context: list[ModuleType] = []
    checked = 0
    for block in _prose_blocks(_text()):
        modules = _modules_in(block)
        if modules:
            context = modules
        for span in _SPAN.findall(block):
            if not _CODE.match(span) or span.startswith("harness."):
                continue
            parts = span.removesuffix("()").split(".")
            checked += 1
            for m in context:
                try:
                    _attrs(m, parts, span)
                    break
                except LookupError:
                    continue
            else:
                bad.append(f"{span} (looked in {[m.__name__ for m in context]}) in: {block[:80]!r}")
    assert checked > 100, checked  # the rule really applies to the page
    assert not bad, "docs/architecture.md: names not found where the page says they are:\n" + "\n".join(bad)


def test_every_metric_name_is_a_family() -> None:
    known = {f.shown for f in FAMILIES.values()} | set(FAMILIES)
    named = {s for s in _SPAN.findall(_text()) if s.startswith("llmload_")}
    assert named, "the page names no Prometheus family"
    assert named <= known, f"not in harness/catalogue.py: {sorted(named - known)}"


def test_the_metric_tables_record_fields_exist() -> None:
    lines = _text().splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("|") and "record field(s)" in ln)
    rows = [lines[start]]
    for ln in lines[start + 1 :]:
        if not ln.startswith("|"):
            break
        rows.append(ln)
    header = 0
    col = [c.strip() for c in rows[header].strip("|").split("|")].index("record field(s)")
    fields = {f.name for f in RECORD_FIELDS}
    seen, bad = 0, []
    for ln in rows[header + 2 :]:
        cells = [c.strip() for c in ln.strip("|").split("|")]
        for name in _SPAN.findall(cells[col]):
            seen += 1
            if name not in fields:
                bad.append(name)
    assert seen >= 17, seen
    assert not bad, f"not record fields (docs/records.md): {bad}"


@pytest.mark.parametrize("span", ["ChatClient.stream_chat()", "MSG_RECORDS", "step_row()", "RequestResult"])
def test_the_code_name_rule_matches_the_pages_notation(span: str) -> None:
    assert _CODE.match(span)


@pytest.mark.parametrize("span", ["records.jsonl", "ok", "phase", "TTFT p50", "--profile", "docs/records.md"])
def test_the_code_name_rule_skips_plain_words_and_files(span: str) -> None:
    assert not _CODE.match(span)


# --- docs/guides/shipped-profiles.md: every profile documented, every excerpt's headers what the report renders now ---

SHIPPED_PAGE = ROOT / "docs" / "guides" / "shipped-profiles.md"
SHIPPED_HEADING = "# Shipped profiles"
_PAGE = "shipped-profiles.md"


@cache
def _excerpts_script() -> ModuleType:
    """``scripts/readme_excerpts.py`` imported as a module (``scripts/`` is not a package)."""
    spec = importlib.util.spec_from_file_location("readme_excerpts", ROOT / "scripts" / "readme_excerpts.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("readme_excerpts", module)
    spec.loader.exec_module(module)
    return module


def _shipped_section() -> str:
    """The whole shipped-profiles page (it starts with its title, :data:`SHIPPED_HEADING`)."""
    text = SHIPPED_PAGE.read_text(encoding="utf-8")
    assert text.startswith(SHIPPED_HEADING + "\n"), f"{SHIPPED_PAGE} does not start with {SHIPPED_HEADING!r}"
    return text


def _block(name: str) -> str:
    """The page's text between excerpt ``name``'s markers."""
    rx = _excerpts_script()
    text = _shipped_section()
    begin, end = rx.BEGIN.format(name=name), rx.END.format(name=name)
    assert text.count(begin) == 1 and text.count(end) == 1, f"{_PAGE}: excerpt {name}: markers missing or repeated"
    return text[text.index(begin) + len(begin) : text.index(end)]


def _table_headers(text: str) -> list[str]:
    """The header line of every Markdown table in ``text`` (a ``|`` line followed by a ``|---`` line)."""
    lines = text.splitlines()
    return [ln for ln, nxt in itertools.pairwise(lines)
            if ln.startswith("|") and not ln.startswith("|---") and nxt.startswith("|---")]


def _subsection(name: str) -> str:
    """The ``##`` subsection of the shipped-profiles page that holds excerpt ``name``'s markers."""
    rx = _excerpts_script()
    text = _shipped_section()
    i = text.index(rx.BEGIN.format(name=name))
    return text[text.rindex("\n## ", 0, i) : i]


SHIPPED = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "profiles").glob("*.yaml"))


@pytest.mark.parametrize("profile", SHIPPED)
def test_every_shipped_profile_has_a_row_in_the_shipped_profiles_table(profile: str) -> None:
    rows = [ln for ln in _shipped_section().splitlines() if ln.startswith("| `profiles/")]
    assert any(ln.startswith(f"| `{profile}` |") for ln in rows), f"{_PAGE}: no row for {profile}"


@pytest.mark.parametrize("profile", SHIPPED)
def test_every_shipped_profile_loads(profile: str) -> None:
    assert load_profile(ROOT / profile).name == Path(profile).stem


def test_the_six_profiles_of_issue_11_each_have_an_excerpt() -> None:
    rx = _excerpts_script()
    documented = {f for ex in rx.EXCERPTS for f in ex.files()}
    wanted = {"profiles/k26.yaml", "profiles/soak.yaml", "profiles/rate-sweep.yaml", "profiles/synthetic-data.yaml",
              "profiles/slo-search.yaml", "profiles/thinking-sweep.yaml"}
    assert wanted <= documented
    assert documented <= set(SHIPPED), sorted(documented - set(SHIPPED))


@pytest.mark.parametrize("name", [e.name for e in _excerpts_script().EXCERPTS])
def test_each_excerpt_sits_under_a_heading_naming_its_profiles_and_says_what_ran(name: str) -> None:
    ex = _excerpts_script().BY_NAME[name]
    heading = _subsection(name).strip().splitlines()[0]
    for f in ex.files():
        assert f"`{f}`" in heading, f"{_PAGE}: the heading {heading!r} does not name {f}"
    body = _block(name)
    ran = " ".join(body.strip().split("\n\n")[0].split())  # the first paragraph, unwrapped
    assert ran.startswith(f"Simulator run of `{ex.profile}`") and f"readme_excerpts.py {name}`" in ran, ran
    for key, sub in ex.overrides.items():  # every shortened duration is stated
        for k, v in sub.items():
            assert f"`{key}.{k}: {v}`" in ran, (key, k, v, ran)
    assert _table_headers(body), f"{_PAGE}: excerpt {name} holds no table"


@pytest.mark.parametrize("name", [e.name for e in _excerpts_script().EXCERPTS])
def test_each_excerpts_headers_are_what_the_current_report_renders(name: str) -> None:
    """The run behind the excerpt (its report.json, tests/data/excerpts/) rendered by the current report code:
    the same parts cut from it hold the same tables, with the same column headers, as the page's excerpt, and
    every table row of the page's excerpt has as many cells as its header. Numbers are not compared (they vary
    run to run)."""
    from harness.report.render import render_markdown

    rx = _excerpts_script()
    ex = rx.BY_NAME[name]
    fixture = ROOT / "tests" / "data" / "excerpts" / f"{name}.report.json"
    assert fixture.exists(), f"{fixture} missing: run scripts/readme_excerpts.py --write {name}"
    rep = load_report(fixture)
    assert rep.profile_name == load_profile(ROOT / ex.profile).name  # the fixture is a run of that profile
    md = render_markdown(rep)
    rendered: list[str] = []
    for part in ex.parts:
        assert part.section in rx.sections(md), f"the report no longer has a section {part.section!r}"
        rendered += [b[0] for b in rx.cut(md, part) if rx.is_table(b)]
    body = _block(name)
    assert _table_headers(body) == rendered, f"{_PAGE} excerpt {name}: headers differ from the current report's"
    for table in (b for b in rx.blocks(body.splitlines()) if rx.is_table(b)):
        width = table[0].count(" | ")
        assert all(row.count(" | ") == width for row in table[2:]), f"{_PAGE} excerpt {name}: ragged table"
    for part in ex.parts:
        assert f'From the report\'s "{part.section}":' in body


@pytest.mark.parametrize("name", [e.name for e in _excerpts_script().EXCERPTS])
def test_each_shortened_profile_the_script_runs_loads(name: str, tmp_path: Path) -> None:
    rx = _excerpts_script()
    ex = rx.BY_NAME[name]
    prof = load_profile(rx.derived_profile(ex, tmp_path))
    shipped = load_profile(ROOT / ex.profile)
    assert prof.name == shipped.name
    for key, sub in ex.overrides.items():  # the override took; only durations, slices and the search's budget
        assert set(sub) <= {"duration", "slice_s", "max_steps"}, sub
        for k, v in sub.items():
            assert getattr(getattr(prof, key), k) == v


def test_the_cut_keeps_whole_tables_and_matching_paragraphs_in_order() -> None:
    rx = _excerpts_script()
    md = ("# T\n\n## A\n\nintro line\n\n| x | y |\n|---|---|\n| 1 | 2 |\n\n- note one\n  continued\n- Over two\n\n"
          "| z |\n|---|\n| 3 |\n\n## B\n\n| b |\n|---|\n")
    assert rx.cut(md, rx.Part("A")) == [["| x | y |", "|---|---|", "| 1 | 2 |"], ["| z |", "|---|", "| 3 |"]]
    assert rx.cut(md, rx.Part("A", tables=(1,), prose="one")) == [["- note one", "  continued"],
                                                                   ["| z |", "|---|", "| 3 |"]]
    assert rx.cut(md, rx.Part("A", tables=(), prose=r"^- Over")) == [["- Over two"]]
    with pytest.raises(KeyError):
        rx.cut(md, rx.Part("C"))


def test_replace_block_swaps_only_the_text_between_the_markers() -> None:
    rx = _excerpts_script()
    text = f"a\n{rx.BEGIN.format(name='x')}\nold\n{rx.END.format(name='x')}\nb\n"
    new = rx.replace_block(text, "x", "new\n")
    assert new == f"a\n{rx.BEGIN.format(name='x')}\n\nnew\n\n{rx.END.format(name='x')}\nb\n"
    assert rx.replace_block(new, "x", "new\n") == new  # idempotent
    with pytest.raises(KeyError):
        rx.replace_block(text, "y", "z")


@pytest.mark.parametrize("name", [e.name for e in _excerpts_script().EXCERPTS])
def test_each_excerpt_is_verbatim_the_kept_runs_report(name: str) -> None:
    """The page's block is exactly what the script cuts from the kept run's report.json rendered now: no hand
    edits, and no drift of the report's format (the kept run is fixed, so its numbers are too). After a change of
    the report's format: ``scripts/readme_excerpts.py --rerender --write``."""
    rx = _excerpts_script()
    ex = rx.BY_NAME[name]
    rep = load_report(ROOT / "tests" / "data" / "excerpts" / f"{name}.report.json")
    want = rx.excerpt_of_report(ex, rep)
    fix = f"run scripts/readme_excerpts.py --rerender --write {name}"
    assert _block(name).strip() == want.strip(), f"{_PAGE} excerpt {name} is not its kept run's report: {fix}"
