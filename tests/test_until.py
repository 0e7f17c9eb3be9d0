"""The live margin check of ``steps.until`` (harness/until.py) and its profile section."""

from __future__ import annotations

import random

import polars as pl
import pytest

from harness.config import ProfileError
from harness.config.sections import UntilSpec
from harness.report.interval import cycle_frame, renewal_reward
from harness.result import RequestResult
from harness.until import MarginChecker


def req(user: str, start: float, e2e: float, step: int = 1, usable: bool = True) -> RequestResult:
    r = RequestResult(prompt_id="p", user=user, phase="step", step=step, concurrency=4)
    r.start_wall, r.e2e, r.ok, r.usable = start, e2e, True, usable
    return r


def closed_loop(users: int, t0: float, t1: float, seed: int = 1, step: int = 1) -> list[RequestResult]:
    """Every request a closed loop of ``users`` users sends from ``t0`` to ``t1`` (E2E uniform 0.5-1.5 s, 1 in 5
    not usable), in end order."""
    rng = random.Random(seed)
    out = []
    for u in range(users):
        t = t0
        while t < t1:
            e = rng.uniform(0.5, 1.5)
            out.append(req(f"u{u}", t, e, step, usable=rng.random() > 0.2))
            t += e
    return sorted(out, key=lambda r: r.end_wall)


def test_the_window_opens_when_every_user_ended_a_request_and_the_halfwidth_is_the_reports_estimator() -> None:
    chk = MarginChecker(UntilSpec(margin=0.1, min=0, max=100))
    chk.begin(1, 1000.0, 4)
    recs = closed_loop(4, 1000.0, 1060.0)
    firsts: dict[str, float] = {}
    for r in recs:
        if r.end_wall < 1030.0:
            chk.add(r)
            firsts.setdefault(r.user, r.end_wall)
    assert chk.window_start() == max(firsts.values())  # the report's rule: the first wave's last end
    h, w, n = chk.estimate(1030.0)
    frame = pl.DataFrame({"s": [r.start_wall for r in recs if r.end_wall < 1030.0],
                          "e": [r.end_wall for r in recs if r.end_wall < 1030.0],
                          "u": [r.user for r in recs if r.end_wall < 1030.0],
                          "y": [r.usable for r in recs if r.end_wall < 1030.0]})
    ref = renewal_reward(cycle_frame(frame, "s", "e", "u", "y"), max(firsts.values()), 1030.0)
    assert h == ref.rel_halfwidth() and h is not None and w == pytest.approx(1030.0 - max(firsts.values()))
    assert n == ref.cycles > 50


def test_no_interval_before_the_first_wave_ends_and_earlier_steps_are_ignored() -> None:
    chk = MarginChecker(UntilSpec(margin=0.1, min=0, max=100))
    chk.begin(2, 1000.0, 3)
    chk.add(req("a", 990.0, 5.0, step=1))  # ended before the step: not in it
    chk.add(req("a", 995.0, 10.0, step=1))  # in flight at the start: ends the first wave of user a
    chk.add(req("b", 1000.0, 1.0, step=2))
    assert chk.window_start() is None  # user c has not ended a request yet
    assert chk.estimate(1010.0) == (None, 0.0, 0)
    chk.add(req("c", 1000.0, 2.0, step=2))
    assert chk.window_start() == 1005.0
    d = chk.decide(10.0, 1010.0)
    assert not d.end and d.halfwidth is None  # too few requests in the window for an interval


def test_decide_ends_at_the_margin_after_min_and_at_max_without_it() -> None:
    spec = UntilSpec(margin=0.15, min=20, max=40)
    chk = MarginChecker(spec)
    chk.begin(1, 1000.0, 8)
    for r in closed_loop(8, 1000.0, 1040.0):
        if r.end_wall < 1030.0:
            chk.add(r)
    h, _, _ = chk.estimate(1030.0)
    assert h is not None and h < 0.15  # ~200 cycles, 80 % usable: within 15 %
    early = chk.decide(10.0, 1030.0)
    assert not early.end  # under min
    d = chk.decide(30.0, 1030.0)
    assert d.end and d.reached and d.halfwidth == h and chk.last == h
    ev = d.event(1, 0.15, 1030.0)
    assert ev["event"] == "until" and ev["reached"] is True and ev["at_s"] == 30.0 and ev["halfwidth"] == h
    tight = MarginChecker(UntilSpec(margin=0.001, min=0, max=40))
    tight.begin(1, 1000.0, 8)
    for r in closed_loop(8, 1000.0, 1040.0):
        if r.end_wall < 1030.0:
            tight.add(r)
    assert not tight.decide(30.0, 1030.0).end
    at_max = tight.decide(40.0, 1030.0)
    assert at_max.end and not at_max.reached and at_max.halfwidth == h


@pytest.mark.parametrize(("until", "problem"), [
    ("{margin: 0, max: 60}", "margin"),
    ("{margin: 1.5, max: 60}", "margin"),
    ("{margin: 0.05}", "max"),
    ("{margin: 0.05, min: 100, max: 60}", "until.min (100 s) must be at most until.max (60 s)"),
    ("{margin: 0.05, max: 60, check_every: 0}", "check_every"),
    ("{margin: 0.05, max: 60, every: 3}", "every"),
])
def test_bad_until_sections_name_the_key_and_problem(tmp_path, until: str, problem: str) -> None:  # type: ignore[no-untyped-def]
    from harness.config import load_profile

    p = tmp_path / "p.yaml"
    p.write_text(f"name: x\nprompts: [{{id: a, text: hi}}]\nsteps: {{concurrency: [4], until: {until}}}\n")
    with pytest.raises(ProfileError) as e:
        load_profile(p)
    assert str(p) in str(e.value) and "until" in str(e.value) and problem in str(e.value)


def test_until_is_for_concurrency_steps_only(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from harness.config import load_profile

    p = tmp_path / "p.yaml"
    p.write_text("name: x\nprompts: [{id: a, text: hi}]\nrate: {rates: [1.0]}\n"
                 "steps: {until: {margin: 0.1, max: 60}}\n")
    with pytest.raises(ProfileError, match=r"steps\.until: ends closed-loop concurrency steps only"):
        load_profile(p)
    p.write_text("name: x\nprompts: [{id: a, text: hi}]\nsteps: {concurrency: [4], until: {margin: 0.1, max: 60}}\n")
    prof = load_profile(p)
    assert prof.steps.until == UntilSpec(margin=0.1, min=0.0, max=60.0, check_every=5.0)
