"""harness.locust as a package: one import registers everything; no module-level import cycle in harness."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _module_graph() -> dict[str, set[str]]:
    """harness module -> the harness modules it imports at module level (function-level imports excluded)."""
    files = {".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__"): p
             for p in (ROOT / "harness").rglob("*.py")}  # fmt: skip
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        deps: set[str] = set()
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("harness"):
                deps.add(node.module)
                deps |= {f"{node.module}.{a.name}" for a in node.names}
            elif isinstance(node, ast.Import):
                deps |= {a.name for a in node.names if a.name.startswith("harness")}
        graph[name] = {d for d in deps if d in files and d != name}
    return graph


def test_no_module_level_import_cycle() -> None:
    graph = _module_graph()
    assert "harness.locust.listeners" in graph and "harness.runtime" in graph
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(n: str) -> None:
        state[n] = 1
        path.append(n)
        for d in sorted(graph[n]):
            if d.startswith(n + "."):  # a package importing its own submodules (harness.locust's __init__)
                continue
            assert state.get(d) != 1, "import cycle: " + " -> ".join([*path[path.index(d) :], d])
            if d not in state:
                visit(d)
        path.pop()
        state[n] = 2

    for n in sorted(graph):
        if n not in state:
            visit(n)


def test_each_wiring_module_imports_first() -> None:
    """Importing any module of the package first (as a test or a custom locustfile may) works."""
    mods = ["options", "setup", "drain", "signals", "live", "end", "webrun", "listeners"]
    code = "; ".join(f"import harness.locust.{m}" for m in mods)
    for m in mods:
        proc = subprocess.run([sys.executable, "-c", f"import harness.locust.{m}; {code}"],
                              capture_output=True, text=True, timeout=60, cwd=ROOT)  # fmt: skip
        assert proc.returncode == 0, proc.stderr
