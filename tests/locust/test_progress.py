"""Headless progress (:mod:`harness.locust.progress`): the line from a plan, records and phase events on a fake
clock; one line per step off a terminal."""

from __future__ import annotations

import io
from types import SimpleNamespace
from typing import Any

from harness.locust.progress import RATE_WINDOW_S, Progress, clock_text, start_progress, step_clock_text
from harness.shapes import Stage

STAGES = [Stage("single", 0, 1, 30.0), Stage("step", 1, 8, 60.0), Stage("step", 2, 16, 60.0)]


def _rec(end: float, tokens: int, ok: bool = True, phase: str = "step") -> Any:
    return SimpleNamespace(phase=phase, ok=ok, start_wall=end - 5.0, e2e=5.0, output_tokens=tokens)


def test_clock_text() -> None:
    assert [clock_text(x) for x in (0, 59.6, 61, 3600 + 62, -3)] == ["0:00", "1:00", "1:01", "1:01:02", "0:00"]


def test_the_line_says_step_i_of_n_time_left_counts_and_live_rate() -> None:
    now = [1000.0]
    p = Progress(STAGES, clock=lambda: now[0])
    assert p.line().startswith("progress: warm-up · run 0:00 · 0 completed · 0 errors")
    p.on_phase({"event": "phase_start", "phase": "warmup", "step": -1, "concurrency": 1, "wall": 1000.0})
    p.on_phase({"event": "phase_start", "phase": "single", "step": 0, "concurrency": 1, "wall": 1002.0})
    p.on_phase({"event": "phase_start", "phase": "step", "step": 1, "concurrency": 8, "wall": 1032.0})
    p.on_record(_rec(1010.0, 999, phase="warmup"))  # not counted
    p.on_record(_rec(1040.0, 100))
    p.on_record(_rec(1045.0, 300))
    p.on_record(_rec(1046.0, 50, ok=False))
    now[0] = 1052.0
    # step 2 of 3, 20 s of 60; left: 40 s of this step + 60 s; tokens ended in (1042, 1052]: 300 + 50
    assert p.line() == ("progress: step 2/3 (C=8) · 0:20/1:00 · run 0:52, ~1:40 left · 2 completed · 1 error · 35 "
                        "tok/s")
    # against the simulator at time_scale 0.25: tok/s as its real-time equivalent, as the end-of-run summary
    # shows it (it printed compressed tok/s above a real-time table); the clocks stay wall time
    p.time_scale = 0.25
    assert p.line().endswith("0:20/1:00 · run 0:52, ~1:40 left · 2 completed · 1 error · 9 tok/s (real time)")
    p.time_scale = 1.0
    p.on_phase({"event": "load_end", "wall": 1100.0})
    assert p.line().endswith("load ended, draining") and "left" not in p.line()  # a drain has no planned length


def test_a_step_clock_past_its_plan_says_so_instead_of_elapsed_over_planned() -> None:
    """The last step of a 6 s plan, 7 s in while the load drains, read ``0:07/0:06``: now it says it is past the
    plan and why; within the plan (rounded as shown) it stays ``elapsed/planned``."""
    assert step_clock_text(5.6, 6.0, False) == "0:06/0:06"
    assert step_clock_text(6.4, 6.0, True) == "0:06/0:06"
    assert step_clock_text(7.0, 6.0, True) == "0:07 (planned 0:06, draining)"
    assert step_clock_text(7.0, 6.0, False) == "0:07 (planned 0:06, ending)"
    now = [1000.0]
    p = Progress([Stage("step", 1, 8, 6.0)], clock=lambda: now[0])
    p.on_phase({"event": "phase_start", "phase": "step", "step": 1, "concurrency": 8, "wall": 1000.0})
    p.on_phase({"event": "load_end", "wall": 1006.0})
    now[0] = 1007.0
    line = p.line()
    assert "0:07/0:06" not in line and " · 0:07 (planned 0:06, draining) · " in line, line
    assert line.count("draining") == 1, line  # not said twice


def test_the_recent_requests_held_stay_within_the_rate_window_off_a_terminal() -> None:
    """No line is drawn between records (off a terminal: once a step), yet the requests kept for the live rate are
    only those of the last RATE_WINDOW_S seconds (a soak's master held one pair per record: +90 MB a million)."""
    now = [1000.0]
    p = Progress(STAGES, clock=lambda: now[0])
    for i in range(10_000):  # 100 records a second for 100 s
        now[0] = 1000.0 + i / 100
        p.on_record(_rec(now[0], 10))
    assert len(p._recent) <= 100 * RATE_WINDOW_S + 1
    assert p.completed == 10_000
    # an out-of-order old request behind newer ones is kept until they go, but not counted in the rate
    p.on_record(_rec(now[0] - 2 * RATE_WINDOW_S, 10_000))
    assert abs(p.tok_s(now[0]) - 1000.0) <= 10.0  # 100 requests/s x 10 tokens; the old one's 10,000 not in


def test_a_search_has_no_plan_length_and_until_shows_the_margin() -> None:
    now = [0.0]
    hw: list[float | None] = [None]
    p = Progress(STAGES[:1], search=True, margin=0.1, halfwidth=lambda: hw[0], clock=lambda: now[0])
    p.on_phase({"event": "phase_start", "phase": "step", "step": 1, "concurrency": 24, "wall": 0.0})
    now[0] = 5.0
    assert "step ?/? (C=24) · 0:05 in step · run 0:05 · " in p.line()
    assert p.line().endswith("rate ± – (margin 10 %)")
    hw[0] = 0.0812
    assert p.line().endswith("rate ±8.1 % (margin 10 %)")


def test_off_a_terminal_one_line_per_step() -> None:
    hooks: dict[str, list[Any]] = {"rec": [], "phase": []}
    rd = SimpleNamespace(on_record=SimpleNamespace(add_listener=hooks["rec"].append),
                         on_phase=SimpleNamespace(add_listener=hooks["phase"].append),
                         meta={"simulator": {"time_scale": 0.5}})
    profile = SimpleNamespace(steps=SimpleNamespace(until=None), search=None, single_stream=SimpleNamespace(
        duration=30.0), rate=None, settings=list, )
    profile.steps.concurrency, profile.steps.duration = [8, 16], 60.0
    ctx = SimpleNamespace(profile=profile, run_dir=rd, fixed=None)
    out = io.StringIO()
    prog = start_progress(SimpleNamespace(active=lambda: True), ctx, out, tty=False)
    assert len(prog.stages) == 3 and prog.time_scale == 0.5  # run.json's simulator time scale
    (on_phase,) = hooks["phase"]
    for ev in ({"event": "phase_start", "phase": "warmup", "step": -1, "wall": 1.0},
               {"event": "phase_start", "phase": "single", "step": 0, "concurrency": 1, "wall": 2.0},
               {"event": "phase_start", "phase": "step", "step": 1, "concurrency": 8, "wall": 32.0},
               {"event": "phase_start", "phase": "step", "step": 2, "concurrency": 16, "wall": 92.0},
               {"event": "load_end", "wall": 152.0}):
        on_phase(ev)
    lines = out.getvalue().splitlines()
    assert [x.split(" · ")[0] for x in lines] == ["progress: single stream 1/3 (C=1)", "progress: step 2/3 (C=8)",
                                                  "progress: step 3/3 (C=16)"]


def test_a_line_wider_than_the_terminal_breaks_between_its_parts() -> None:
    """At 100 columns the line (about 125 characters) wrapped mid-part ("0\n errors"); with a width it breaks
    between parts, every line within it, and says the same thing."""
    p = Progress(STAGES, clock=lambda: 1052.0)
    p.on_phase({"event": "phase_start", "phase": "step", "step": 1, "concurrency": 8, "wall": 1032.0})
    p.on_record(_rec(1045.0, 300))
    whole = p.line(now=1052.0)
    wrapped = p.line(now=1052.0, width=60)
    assert len(whole) > 60 and "\n" not in whole
    assert all(len(x) <= 60 for x in wrapped.splitlines()), wrapped
    assert wrapped.replace("\n  · ", " · ") == whole
    assert p.line(now=1052.0, width=500) == whole
