"""docs/architecture.md cannot silently rot: every path, module, name, metric, record field and test it cites exists.

Rules (the page's own notation):

* a repository path (``harness/...``, ``tests/...``, ``docs/...``...) anywhere on the page exists; a pytest node id
  ``tests/x.py::test_name`` names a test function defined in that file;
* a dotted ``harness.x.y`` name anywhere on the page imports (the longest importable prefix, then attributes);
* a code name in backticks outside code blocks (``ChatClient.stream_chat()``, ``RequestResult``, ``MSG_RECORDS``,
  ``step_row()``) resolves in one of the modules (``harness/...``, ``tests/...``) named in the same paragraph, list
  item or table row, or, when that block names none, in those of the last block that did;
* a backticked ``llmload_*`` name is a family of :data:`harness.catalogue.FAMILIES`;
* in the metric table, every backticked name of the "record field(s)" column is a record field.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
import re
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from harness.catalogue import FAMILIES
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
