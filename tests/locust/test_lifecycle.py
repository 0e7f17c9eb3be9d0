"""One run lifecycle: listeners added by an explicit register(), run state held by the Run (no module globals)."""

from __future__ import annotations

from locust.event import Events

import ast
import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import harness.locust as hl
from harness import rate, webui
from harness.locust import listeners
from harness.metrics import InFlight
from harness.runtime import Run, StopProgress, current, of

ROOT = Path(__file__).resolve().parents[2]

#: Every event of :class:`locust.event.Events` register() may touch.
_EVENTS = ("init_command_line_parser", *listeners.REGISTERED)


def _counts(events: Events) -> dict[str, int]:
    return {name: len(getattr(events, name)._handlers) for name in _EVENTS}


def test_register_adds_one_listener_per_event_bound_to_its_run_once() -> None:
    events, run = Events(), Run()
    before = _counts(events)
    assert set(before.values()) == {0}
    assert hl.register(events, run) is run
    after = _counts(events)
    assert after == {name: 2 if name == "init" else 1 for name in _EVENTS}  # init: the LLM view's, then llmload's
    assert events.init._handlers[0] is webui.on_init
    assert hl.register(events, Run()) is run and _counts(events) == after  # a second call adds nothing


def test_registered_listeners_act_on_their_run_only() -> None:
    """The workers' in-flight reports go to the run register() bound, not to the process's."""
    events, run = Events(), Run()
    hl.register(events, run)
    run.in_flight.inc()
    run.in_flight.inc()
    data: dict[str, object] = {}
    events.report_to_master.fire(client_id="w1", data=data)
    assert data == {"llmload_metrics": {"in_flight": 2}}
    events.worker_report.fire(client_id="w1", data={"llmload_metrics": {"in_flight": 5}})
    assert run.workers.in_flight == {"w1": 5} and "w1" in run.workers.seen
    assert "w1" not in current().workers.in_flight
    events.quit.fire(exit_code=0)  # no run began: nothing to print, nothing to stop (no error)


def test_the_run_is_reachable_from_the_environment() -> None:
    run = Run()
    assert of(SimpleNamespace(llmload=run)) is run
    assert of(SimpleNamespace()) is current()  # an environment llmload did not register (a unit test's)


def test_the_run_owns_the_process_state() -> None:
    """Dispatcher, in-flight count and a stop's progress are the Run's, each Run its own."""
    a, b = Run(), Run()
    assert isinstance(a.dispatch, rate.Dispatcher) and a.dispatch is not b.dispatch
    assert isinstance(a.in_flight, InFlight) and a.in_flight is not b.in_flight
    assert a.progress is None
    a.progress = StopProgress("r", "draining", 1.0, 1.0, 30.0)
    assert a.progress.stage == "draining" and b.progress is None


def test_importing_harness_registers_only_what_register_adds() -> None:
    """In a fresh interpreter: importing every harness module leaves on Locust's ``locust.events`` exactly the
    listeners one register() call adds to a fresh Events (importing a module adds none of its own)."""
    mods = sorted(
        ".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        for p in (ROOT / "harness").rglob("*.py")
        if p.name != "__main__.py"
    )
    code = (
        "import importlib, json, locust\n"
        "from locust.event import Events\n"
        f"names = {list(_EVENTS)!r}\n"
        "count = lambda ev: {n: len(getattr(ev, n)._handlers) for n in names}\n"
        "base = count(locust.events)\n"
        f"for m in {mods!r}:\n"
        "    importlib.import_module(m)\n"
        "import harness.locust as hl\n"
        "fresh = Events()\n"
        "hl.register(fresh)\n"
        "print(json.dumps([base, count(locust.events), count(fresh)]))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    base, imported, fresh = json.loads(proc.stdout.strip().splitlines()[-1])
    added = {n: imported[n] - base[n] for n in _EVENTS}
    assert added == fresh, (added, fresh)


_STATE_CLASSES = {"Run", "Dispatcher", "InFlight", "StopProgress"}
_STATE_NAMES = {"_DISPATCH", "_PROGRESS", "IN_FLIGHT"}


def _module_state(path: Path, root: Path = ROOT) -> list[tuple[str, int, str]]:
    """Module-level assignments in ``path`` that hold run state, as ``(path relative to root, line, what)``: the
    names the issue found (:data:`_STATE_NAMES`), an instance of a run-state class (:data:`_STATE_CLASSES`), and
    every ``global`` statement in a function (state rebound at module level)."""
    rel = path.relative_to(root).as_posix()
    tree = ast.parse(path.read_text())
    found = []
    for node in tree.body:
        targets: list[ast.expr] = []
        value = None
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign):
            targets, value = [node.target], node.value
        for t in targets:
            name = t.id if isinstance(t, ast.Name) else ""
            called = value.func if isinstance(value, ast.Call) else None
            cls = called.id if isinstance(called, ast.Name) else getattr(called, "attr", "")
            if name in _STATE_NAMES or cls in _STATE_CLASSES:
                found.append((rel, node.lineno, f"{name} = {cls}()"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Global):
            found += [(rel, node.lineno, f"global {n}") for n in node.names]
    return found


def test_no_module_level_run_state() -> None:
    """Run state lives in the Run, not in module globals. The one anchor: ``harness.runtime._RUN``, the process's
    Run itself (the web UI's views and the users' context reach it without an environment); ``kstamp``'s
    ``_keeper`` is the process's kernel-timestamp reader (no run state)."""
    found = [f for p in sorted((ROOT / "harness").rglob("*.py")) for f in _module_state(p)]
    allowed = {("harness/runtime.py", "_RUN = Run()"), ("harness/kstamp.py", "global _keeper")}
    assert [f for f in found if (f[0], f[2]) not in allowed] == []
    assert {(f[0], f[2]) for f in found} == allowed  # the scan sees the anchor (it can find what it looks for)


def test_the_scan_finds_planted_state(tmp_path: Path) -> None:
    bad = tmp_path / "planted.py"
    bad.write_text("from harness.metrics import InFlight\nIN_FLIGHT = InFlight()\nx = 1\n"
                   "_PROGRESS: object = None\ndef f() -> None:\n    global x\n    x = 2\n")  # fmt: skip
    assert _module_state(bad, tmp_path) == [("planted.py", 2, "IN_FLIGHT = InFlight()"),
                                            ("planted.py", 4, "_PROGRESS = ()"),
                                            ("planted.py", 6, "global x")]  # fmt: skip
