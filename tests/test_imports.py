"""The package's import graph: acyclic, and the settings (``harness.config``) a leaf.

The graph is built from the AST of every module under ``harness/``, so it sees every import statement wherever it
is written: at module level, inside functions (the "lazy" imports that hide a cycle from the interpreter) and under
``if TYPE_CHECKING:``. An edge ``a -> b`` means module ``a`` imports module ``b``. Importing ``harness.x.y`` from
outside the package ``harness.x`` also runs ``harness/x/__init__.py``, so that is an edge too (a module importing
a sibling from inside its own package does not add one: the package is already being imported).
"""

from __future__ import annotations

import ast
import itertools
from collections.abc import Iterable, Mapping
from pathlib import Path

import pytest

PKG_DIR = Path(__file__).resolve().parent.parent / "harness"

#: The only package modules ``harness.config`` (a module or a package of modules) may import: vocabulary modules
#: (names and small value types) and the models of the profile sections a feature owns, none of which imports
#: anything from the package beyond this list.
CONFIG_ALLOWED = frozenset({
    "harness.axes",  # Setting: a sweep setting (value type)
    "harness.prompts",  # (an empty package __init__)
    "harness.prompts.files",  # DataFileError, raised by a length histogram's reader
    "harness.prompts.lengths",  # LengthSpec: the synthetic section's length distributions
    "harness.prompts.spec",  # DatasetSpec, SyntheticSpec, resolve_paths
    "harness.redact",  # secret names and redact_text (imports nothing from the package)
    "harness.timeouts",  # Timeouts
    "harness.usable",  # UsableRule
    "harness.vocab",  # preset, flavour and reserved names, the SLO key grammar
})

def module_name(path: Path, root: Path) -> str:
    """``harness/report/build.py`` -> ``harness.report.build``; a package's ``__init__.py`` -> the package."""
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def package_modules(root: Path) -> dict[str, Path]:
    """Every module of the package rooted at ``root``: dotted name -> file."""
    return {module_name(p, root): p for p in sorted(root.rglob("*.py"))}


def _targets(node: ast.Import | ast.ImportFrom, importer: str, is_pkg: bool, known: Mapping[str, Path]) -> list[str]:
    """The package modules one import statement names (absolute and relative forms)."""
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    else:
        if node.level:
            base = importer.split(".")
            if not is_pkg:
                base = base[:-1]
            base = base[: len(base) - (node.level - 1)]
            stem = ".".join([*base, node.module] if node.module else base)
        else:
            stem = node.module or ""
        # `from pkg import name`: name is a submodule when such a module exists, else an attribute of pkg
        names = [f"{stem}.{a.name}" if f"{stem}.{a.name}" in known else stem for a in node.names]
    out = []
    for name in names:
        while name and name not in known:  # `import harness.x.attr`-like forms resolve to the module
            name = name.rpartition(".")[0]
        if name:
            out.append(name)
    return out


def import_graph(root: Path = PKG_DIR) -> dict[str, set[str]]:
    """The package's import graph: module -> the package modules it imports (itself excluded)."""
    known = package_modules(root)
    graph: dict[str, set[str]] = {m: set() for m in known}
    for mod, path in known.items():
        is_pkg = path.name == "__init__.py"
        own_pkg = mod if is_pkg else mod.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            for target in _targets(node, mod, is_pkg, known):
                graph[mod].add(target)
                parent = target.rpartition(".")[0]
                while parent and not (own_pkg == parent or own_pkg.startswith(parent + ".")):
                    graph[mod].add(parent)  # the parent package's __init__ runs first
                    parent = parent.rpartition(".")[0]
    for mod, deps in graph.items():
        deps.discard(mod)
    return graph


def find_cycles(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each as a sorted list, largest first."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    comps: list[list[str]] = []
    counter = 0

    def visit(v: str) -> None:
        nonlocal counter
        index[v] = low[v] = counter
        counter += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                comps.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(comps, key=lambda c: (-len(c), c))


def one_cycle(graph: Mapping[str, Iterable[str]], comp: list[str]) -> list[str]:
    """One closed path through a strongly connected component (``[a, b, ..., a]``), for the failure message."""
    members = set(comp)
    start = comp[0]
    prev: dict[str, str] = {}
    frontier = [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(graph[v]):
                if w == start:
                    path = [v]
                    while path[-1] != start:
                        path.append(prev[path[-1]])
                    return [start, *reversed(path[:-1]), start]
                if w in members and w not in prev:
                    prev[w] = v
                    nxt.append(w)
        frontier = nxt
    return comp  # unreachable for a real component


def describe(graph: Mapping[str, Iterable[str]], cycles: list[list[str]]) -> str:
    """Each cycle as its modules and one path round it."""
    return "\n".join(
        f"cycle of {len(c)} modules: {', '.join(c)}\n  e.g. {' -> '.join(one_cycle(graph, c))}" for c in cycles
    )


def test_the_package_import_graph_has_no_cycle() -> None:
    graph = import_graph()
    assert len(graph) > 100  # the walk found the package
    cycles = find_cycles(graph)
    assert not cycles, "import cycles (imports inside functions included):\n" + describe(graph, cycles)


def test_config_is_a_leaf() -> None:
    graph = import_graph()
    config = {m for m in graph if m == "harness.config" or m.startswith("harness.config.")}
    assert config
    imported = set().union(*(graph[m] for m in config)) - config
    assert imported <= CONFIG_ALLOWED, f"harness.config imports {sorted(imported - CONFIG_ALLOWED)}"
    # and the vocabulary it may import is itself a leaf within that list
    reach = set(imported)
    todo = list(imported)
    while todo:
        for dep in graph[todo.pop()]:
            if dep not in reach:
                reach.add(dep)
                todo.append(dep)
    assert reach <= CONFIG_ALLOWED | {"harness"}, f"config reaches {sorted(reach - CONFIG_ALLOWED)}"


# -- the checker itself can fail ---------------------------------------------------------------------------------


def _tree(tmp_path: Path, files: Mapping[str, str]) -> Path:
    root = tmp_path / "pkg"
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return root


def test_a_cycle_through_a_function_level_import_is_found(tmp_path: Path) -> None:
    root = _tree(tmp_path, {
        "__init__.py": "",
        "a.py": "from pkg.b import x\n",
        "b.py": "def f():\n    from pkg import a\n    return a\nx = 1\n",
        "c.py": "import pkg.a\n",
    })
    graph = import_graph(root)
    assert graph["pkg.a"] == {"pkg.b"} and graph["pkg.b"] == {"pkg.a"} and graph["pkg.c"] == {"pkg.a"}
    cycles = find_cycles(graph)
    assert cycles == [["pkg.a", "pkg.b"]]
    assert "pkg.a -> pkg.b -> pkg.a" in describe(graph, cycles)


def test_relative_imports_and_package_inits_are_edges(tmp_path: Path) -> None:
    root = _tree(tmp_path, {
        "__init__.py": "",
        "sub/__init__.py": "from .inner import y\n",
        "sub/inner.py": "from ..top import z\ny = 1\n",
        "top.py": "from pkg.sub.inner import y\nz = 2\n",
    })
    graph = import_graph(root)
    assert graph["pkg.sub"] == {"pkg.sub.inner"}
    assert graph["pkg.sub.inner"] == {"pkg.top"}
    assert graph["pkg.top"] == {"pkg.sub.inner", "pkg.sub"}
    assert find_cycles(graph) == [["pkg.sub", "pkg.sub.inner", "pkg.top"]]


def test_an_acyclic_tree_has_no_cycle(tmp_path: Path) -> None:
    root = _tree(tmp_path, {"__init__.py": "", "a.py": "import pkg.b\n", "b.py": "import os\n"})
    assert find_cycles(import_graph(root)) == []


@pytest.mark.parametrize("graph", [{"a": {"b"}, "b": {"c"}, "c": {"a"}}, {"a": {"a", "b"}, "b": {"a"}}])
def test_find_cycles_on_plain_graphs(graph: dict[str, set[str]]) -> None:
    comps = find_cycles(graph)
    assert len(comps) == 1 and comps[0] == sorted(graph)
    path = one_cycle(graph, comps[0])
    assert path[0] == path[-1] and all(b in graph[a] for a, b in itertools.pairwise(path))
