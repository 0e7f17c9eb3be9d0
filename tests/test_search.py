"""The SLO capacity search (:mod:`harness.search`): the bisection, the per-step measurement, the percentile
intervals, the profile section, and the shape's search driver."""

from __future__ import annotations

import random
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from harness.config import Profile, ProfileError, load_profile
from harness.result import RequestResult
from harness.search import CapacitySearch, Probe, measure_step, percentile_interval

PROFILES = Path(__file__).resolve().parent.parent / "profiles"


def run_search(search: CapacitySearch, capacity: float) -> list[float]:
    """Drive ``search`` against a server whose settings pass up to ``capacity``; the settings probed."""
    seen = []
    while (s := search.next_setting()) is not None:
        seen.append(s)
        search.observe(Probe(s, len(seen), s <= capacity))
    return seen


def test_bisection_over_concurrency_finds_the_boundary_within_the_tolerance() -> None:
    s = CapacitySearch("concurrency", 1, 64, 1, 20)
    assert run_search(s, 23) == [1, 64, 32, 16, 24, 20, 22, 23]
    r = s.result()
    assert r["highest_pass"]["setting"] == 23 and r["lowest_fail"]["setting"] == 24 and r["converged"]
    assert r["verdict"] == "capacity between 23 (meets the SLOs) and 24 users (fails them)"


def test_bisection_over_rate_stops_at_the_tolerance() -> None:
    s = CapacitySearch("rate", 0.5, 16.0, 0.5, 20)
    probed = run_search(s, 5.2)
    r = s.result()
    lo, hi = r["highest_pass"]["setting"], r["lowest_fail"]["setting"]
    assert lo <= 5.2 < hi and hi - lo <= 0.5 and r["converged"]
    assert probed[:3] == [0.5, 16.0, 8.25]


def test_outside_the_bounds_and_max_steps() -> None:
    below = CapacitySearch("concurrency", 4, 64, 1, 10)
    assert run_search(below, 2) == [4] and "below it" in below.result()["verdict"]
    above = CapacitySearch("concurrency", 4, 64, 1, 10)
    assert run_search(above, 100) == [4, 64] and "at least that" in above.result()["verdict"]
    short = CapacitySearch("concurrency", 1, 1024, 1, 4)
    assert run_search(short, 300) == [1, 1024, 512, 256]
    r = short.result()
    assert not r["converged"] and "not within the tolerance 1 after 4 steps" in r["verdict"]


def test_percentile_interval_covers_the_true_percentile_about_95_percent_of_the_time() -> None:
    rng = random.Random(4)
    hits = 0
    trials = 400
    for _ in range(trials):
        xs = [rng.expovariate(1.0) for _ in range(200)]
        lo, hi = percentile_interval(xs, 90)
        assert lo is not None and hi is not None and lo <= hi
        hits += lo <= 2.302585 <= hi  # the exponential's 90th percentile: ln 10
    assert 0.91 <= hits / trials <= 0.99


def test_percentile_interval_is_unbounded_where_the_sample_is_too_small() -> None:
    assert percentile_interval([1.0, 2.0, 3.0], 99)[1] is None
    assert percentile_interval([], 50) == (None, None)


S = 1_800_000_000.0


def _rec(user: str, start: float, e2e: float, ttft: float, tpot: float, step: int = 1,
         sched: float | None = None) -> RequestResult:
    return RequestResult("p", "p", user, "step", step, 4, None, start_wall=start, scheduled_wall=sched, ttft=ttft,
                         e2e=e2e, tpot=tpot, ok=True)


def _closed_loop(n_users: int, seconds: float, e2e: float, ttft: float, tpot: float) -> list[RequestResult]:
    out = []
    for u in range(n_users):
        t = S + 0.01 * u
        while t < S + seconds:
            out.append(_rec(f"u{u}", t, e2e, ttft, tpot))
            t += e2e
    return out


def test_measure_step_applies_each_slo_to_its_percentile_over_the_steady_window() -> None:
    recs = _closed_loop(4, 20.0, 1.0, 0.2, 0.01)
    p = measure_step(4, 1, S, S + 20.0, recs, {"ttft_p99_s": 0.25, "tpot_p50_s": 0.02})
    assert p.passed and p.sample > 50 and 17 < p.window_s < 20
    assert p.figures["ttft_p99_s"]["value"] == pytest.approx(0.2) and p.figures["ttft_p99_s"]["ok"]
    fail = measure_step(4, 1, S, S + 20.0, recs, {"ttft_p99_s": 0.1})
    assert not fail.passed and fail.figures["ttft_p99_s"]["ok"] is False


def test_a_step_with_too_few_requests_or_no_window_is_inconclusive_not_a_fail() -> None:
    few = _closed_loop(1, 5.0, 1.0, 0.2, 0.01)
    p = measure_step(1, 1, S, S + 5.0, few, {"ttft_p99_s": 1.0})
    assert not p.passed and p.inconclusive and p.reason == "inconclusive (4 requests < 10)"
    assert p.figures["ttft_p99_s"]["ok"]  # the figures are still shown
    none = measure_step(1, 1, S, S + 5.0, [_rec("u", S, 10.0, 0.2, 0.01)], {"ttft_p99_s": 1.0})
    assert not none.passed and none.inconclusive and "inconclusive (no steady window" in str(none.reason)
    # enough requests ended, but most failed: a fail (the errors are the answer), not inconclusive
    bad = _closed_loop(1, 20.0, 1.0, 0.2, 0.01)
    for r in bad[5:]:
        r.ok = False
    f = measure_step(1, 1, S, S + 20.0, bad, {"ttft_p99_s": 1.0})
    assert not f.passed and not f.inconclusive and "only 5 successful of 19 requests" in str(f.reason)


def _probe(setting: float, outcome: str) -> Probe:
    return Probe(setting, 0, outcome == "pass", inconclusive=outcome == "?",
                 reason="inconclusive (7 requests < 10)" if outcome == "?" else None)


def drive(search: CapacitySearch, outcome: dict[float, str]) -> list[float]:
    """Drive ``search``: ``outcome[setting]`` is "pass", "fail" or "?" (inconclusive); the settings probed."""
    seen = []
    while (s := search.next_setting()) is not None:
        seen.append(s)
        search.observe(_probe(s, outcome[s]))
    return seen


def test_an_inconclusive_lowest_setting_never_claims_a_capacity_below_it() -> None:
    # issue 16: C=1 met both SLOs on 7 requests; the report said "even the lowest setting fails the SLOs"
    s = CapacitySearch("concurrency", 1, 128, 4, 8)
    assert drive(s, {1: "?", 128: "pass"}) == [1, 128]
    r = s.result()
    assert r["verdict"] == "the highest setting (128 users) meets the SLOs: the capacity is at least that"
    assert r["lowest_fail"] is None and r["inconclusive"] == [1]
    # low inconclusive, high fails: bisect down from the lowest failing setting; never "below the lowest"
    s = CapacitySearch("concurrency", 1, 128, 4, 8)
    assert drive(s, {1: "?", 128: "fail", 64: "fail", 32: "pass", 48: "pass", 56: "fail", 52: "pass"}) == [
        1, 128, 64, 32, 48, 56, 52]
    assert s.result()["verdict"].startswith("capacity between 52 (meets the SLOs) and 56 users")
    s = CapacitySearch("concurrency", 1, 128, 4, 8)
    assert drive(s, {1: "?", 128: "fail", 64: "fail", 32: "fail", 16: "fail", 8: "fail", 4: "fail"}) == [
        1, 128, 64, 32, 16, 8, 4]
    v = s.result()["verdict"]
    assert "below it" not in v and v.startswith("inconclusive: the lowest setting (1 users) had too few requests")
    assert "the lowest failing setting is 4 users: the capacity is below that, not shown to be below 1 users" in v
    s = CapacitySearch("concurrency", 1, 128, 4, 8)
    assert drive(s, {1: "?", 128: "?"}) == [1, 128]
    assert s.result()["verdict"] == ("inconclusive: the lowest setting (1 users) had too few requests to decide (7 "
                                     "requests < 10 after 0 extension(s)) and no setting met the SLOs; inconclusive "
                                     "(too few requests) at 128 users")
    # a definite fail at low is still "below it"
    s = CapacitySearch("concurrency", 1, 128, 4, 8)
    assert drive(s, {1: "fail"}) == [1]
    assert s.result()["verdict"] == "even the lowest setting (1 users) fails the SLOs: the capacity is below it"
    # an inconclusive midpoint ends the bisection and is named
    s = CapacitySearch("concurrency", 1, 128, 4, 8)
    assert drive(s, {1: "pass", 128: "fail", 64: "?"}) == [1, 128, 64]
    assert s.result()["verdict"] == ("capacity between 1 (meets the SLOs) and 128 users (fails them); inconclusive "
                                     "(too few requests) at 64 users")


def test_a_rate_search_measures_latency_from_the_scheduled_time() -> None:
    recs = [_rec(f"u{i % 3}", S + 0.5 * i + 0.3, 0.4, 0.1, 0.01, sched=S + 0.5 * i) for i in range(40)]
    svc = measure_step(2.0, 1, S, S + 20.0, recs, {"ttft_p50_s": 0.2})
    sched = measure_step(2.0, 1, S, S + 20.0, recs, {"ttft_p50_s": 0.2}, schedule_relative=True)
    assert svc.passed and svc.figures["ttft_p50_s"]["value"] == pytest.approx(0.1)
    assert not sched.passed and sched.figures["ttft_p50_s"]["value"] == pytest.approx(0.4)


def _profile(**search: Any) -> dict[str, Any]:
    return {"name": "s", "prompts": [{"id": "p", "text": "hi"}],
            "search": {"low": 1, "high": 16, "tolerance": 1, "slo": {"ttft_p99_s": 1.0}, **search}}


@pytest.mark.parametrize(("over", "msg"), [
    ({"slo": {"ttft_p98_s": 1.0}}, "an SLO is <ttft|ttfat|tpot|e2e>_p"),
    ({"slo": {"ttft_p99_s": 0}}, "threshold must be > 0"),
    ({"low": 8, "high": 8}, "low must be below high"),
    ({"low": 1.5}, "whole numbers of users"),
    ({"tolerance": 0.5}, "tolerance is at least 1 user"),
    ({"axis": "rate"}, "search.axis rate needs a rate: section"),
])  # fmt: skip
def test_bad_search_sections_are_refused_with_the_key(tmp_path: Path, over: dict[str, Any], msg: str) -> None:
    import yaml

    f = tmp_path / "p.yaml"
    f.write_text(yaml.safe_dump(_profile(**over)))
    with pytest.raises(ProfileError) as e:
        load_profile(f)
    assert msg in str(e.value) and str(f) in str(e.value)


def test_a_search_profile_round_trips_to_the_workers() -> None:
    p = Profile.model_validate(_profile(axis="rate", low=0.5, high=8, tolerance=0.25) | {"rate": {"pool": 32}})
    assert Profile.model_validate(p.public_dict()) == p


def test_shipped_slo_search_profile_loads() -> None:
    p = load_profile(PROFILES / "slo-search.yaml")
    assert p.search is not None and p.search.slo


# -- the shape's search driver --------------------------------------------------------------------------------


@contextmanager
def _search_shape(monkeypatch: pytest.MonkeyPatch, search: dict[str, Any]) -> Iterator[tuple[Any, Any, Any, Any]]:
    """(shape, clock, run_dir, ctx) of a search profile with ``search`` and 10 s steps on a fake clock, whose run
    directory fires ``on_record`` for each record written (the search measures them); the run context is this
    process's until the block ends."""
    from dataclasses import dataclass, field

    from harness import shapes
    from harness.records import EventHook
    from harness.runtime import RunContext, current
    from tests.test_shapes import FakeClock, FakeRunDir, FakeRunner, new_shape

    @dataclass
    class HookedRunDir(FakeRunDir):
        on_record: Any = field(default_factory=EventHook)

        def write_record(self, record: RequestResult) -> None:
            super().write_record(record)
            self.on_record.fire(record)

    clock = FakeClock()
    monkeypatch.setattr(shapes, "time", clock)
    profile = Profile.model_validate({
        "name": "s", "prompts": [{"id": "p", "text": "hi"}], "warmup": {"enabled": False},
        "single_stream": {"duration": 0}, "steps": {"duration": 10, "drain_timeout": 5}, "search": search,
    })
    run_dir = HookedRunDir()
    ctx = RunContext(profile, "http://127.0.0.1:9/v1", "m", "local", run_dir=run_dir)  # type: ignore[arg-type]
    current().ctx = ctx
    try:
        yield new_shape(FakeRunner(stop_timeout=5)), clock, run_dir, ctx
    finally:
        current().ctx = None


def test_the_shape_runs_the_search_step_by_step(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ticks through a concurrency search (fake clock): each step is held 1 s past its time, measured from the
    records written so far, and the next one chosen; the outcome is a ``search`` event before ``load_end``."""
    from tests.test_shapes import WALL0

    search = {"low": 2, "high": 8, "tolerance": 2, "slo": {"ttft_p99_s": 0.5}}
    with _search_shape(monkeypatch, search) as (shape, clock, run_dir, ctx):

        def serve(users: int, t0: float, ttft: float) -> None:
            """Closed-loop records of ``users`` users over 10 s from ``t0`` (1 s requests)."""
            for u in range(users):
                for k in range(10):
                    start = WALL0 + t0 + k + 0.001 * u
                    run_dir.write_record(RequestResult("p", "p", f"u{u}", "step", ctx.state.step, users, None,
                                                       start_wall=start, ttft=ttft, e2e=0.999, ok=True))

        assert shape.tick() == (2, 2.0)  # low first
        serve(2, 0.0, ttft=0.1)
        clock.at(10.2)
        assert shape.tick() == (2, 2.0)  # held while the last records arrive
        clock.at(11.3)
        assert shape.tick() == (8, 8.0)  # 2 passed: high next
        serve(8, 11.3, ttft=0.9)
        clock.at(22.5)
        assert shape.tick() == (8, 8.0)
        clock.at(23.6)
        assert shape.tick() == (5, 5.0)  # 8 failed: bisect
        serve(5, 23.6, ttft=0.2)
        clock.at(34.7)
        shape.tick()
        clock.at(35.8)
        assert shape.tick() == (6, 6.0)  # 5 passed, 8 failed: 6
        serve(6, 35.8, ttft=0.8)
        clock.at(46.9)
        shape.tick()
        clock.at(48.0)
        assert shape.tick() == (0, 6.0)  # 6 failed: 5..6 within the tolerance: done, load ends
        kinds = [e["event"] for e in run_dir.phases]
        assert kinds == ["phase_start"] * 4 + ["search", "load_end"]
        res = run_dir.phases[4]["result"]
        assert [p["setting"] for p in res["probes"]] == [2, 8, 5, 6]
        assert res["highest_pass"]["setting"] == 5 and res["lowest_fail"]["setting"] == 6 and res["converged"]
        assert [e["concurrency"] for e in run_dir.phases[:4]] == [2, 8, 5, 6]
        assert run_dir.phases[1]["wall"] == pytest.approx(WALL0 + 11.3)  # each step starts when it is chosen


def test_the_shape_extends_an_inconclusive_step_instead_of_failing_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """A 10 s probe at C=1 with 1.5 s requests has 5 requests in its steady window (< 10): the same step is held
    another 10 s (no new phase), measured again over 20 s, and passes; then high."""
    from tests.test_shapes import WALL0

    search = {"low": 1, "high": 4, "tolerance": 2, "slo": {"ttft_p99_s": 0.5}}
    with _search_shape(monkeypatch, search) as (shape, clock, run_dir, ctx):

        def serve(users: int, t0: float, t1: float, e2e: float) -> None:
            for u in range(users):
                t = t0 + 0.001 * u
                while t + e2e <= t1:
                    run_dir.write_record(RequestResult("p", "p", f"u{u}", "step", ctx.state.step, users, None,
                                                       start_wall=WALL0 + t, ttft=0.1, e2e=e2e, ok=True))
                    t += e2e

        assert shape.tick() == (1, 1.0)
        serve(1, 0.0, 10.0, 1.5)
        clock.at(10.2)
        assert shape.tick() == (1, 1.0)  # settling
        clock.at(11.3)
        assert shape.tick() == (1, 1.0)  # inconclusive (too few requests): extended, same step
        assert ctx.state.step == 1 and not any(e["event"] == "search" for e in run_dir.phases)
        serve(1, 10.5, 20.0, 1.5)
        clock.at(20.5)
        assert shape.tick() == (1, 1.0)  # the extended step runs to 20 s and settles
        clock.at(21.6)
        assert shape.tick() == (4, 4.0)  # measured over 20 s: passes; high next
        assert [e["event"] for e in run_dir.phases] == ["phase_start", "phase_start"]
        probe = shape._search.search.probes[0]
        assert probe.passed and not probe.inconclusive and probe.extensions == 1 and probe.sample >= 10


def test_a_search_with_sweep_axes_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("prompts: [{id: p, text: hi}]\naxes: {thinking: [on, off]}\n"
                   "search: {low: 1, high: 8, tolerance: 1, slo: {ttft_p99_s: 1}}\n")
    with pytest.raises(ProfileError, match="a capacity search runs one setting"):
        load_profile(bad)


def test_search_numbers_are_finite(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("prompts: [{id: p, text: hi}]\nsearch: {low: 1, high: .inf, tolerance: 1, slo: {ttft_p99_s: 1}}\n")
    with pytest.raises(ProfileError, match=r"search\.high"):
        load_profile(bad)


def test_the_report_section_says_inconclusive_not_fails() -> None:
    """The report's search section of a search whose lowest setting stayed short: the verdict never claims a
    capacity below it, the probe's cell says inconclusive with its request count, its sample cell the extensions."""
    from harness.report.model import SearchResult
    from harness.report.search import search_lines

    s = CapacitySearch("concurrency", 1, 128, 4, 8)
    low = _probe(1, "?")
    low.extensions, low.sample = 3, 7
    s.observe(low)
    s.observe(_probe(128, "fail"))
    md = "\n".join(search_lines(SearchResult.model_validate(s.result())))
    assert "capacity is below it" not in md and "**inconclusive: the lowest setting (1 users)" in md
    assert "| probe | 1 | 0 | 7 (step extended ×3) |" in md and "| inconclusive (7 requests < 10) |" in md
