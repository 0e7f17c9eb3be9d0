"""The LLM view's routes on a Flask app (no browser): its JSON is the report's, downloads only known files of
known runs, every route goes through the web UI's auth decorator, Locust's stats answer gets the LLM tab rows."""

from __future__ import annotations

import gzip
import io
import json
import shutil
import zipfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from flask import Flask, jsonify

from harness.records import read_records
from harness.report.build import build_report
from harness.report.catalogue import label_text
from harness.report.model import Report
from harness.report.stats import mean
from harness.webui import routes
from harness.webui.cache import ReportCache, current_row
from harness.webui.downloads import FILES, figures_zip, files_of, find_run
from harness.webui.runs import RunDirs
from harness.webui.view import ROW_KEYS, row_view
from tests.report.oracle import latency_sample  # the per-record reference implementation (tests only)

DEMO = Path(__file__).resolve().parents[1] / "data" / "demo-run"


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("runs") / "20260101-000000-demo"
    d.mkdir()
    for name in ("run.json", "phases.jsonl"):
        shutil.copy(DEMO / name, d / name)
    (d / "records.jsonl").write_bytes(gzip.decompress((DEMO / "records.jsonl.gz").read_bytes()))
    (d / "figures").mkdir()
    (d / "figures" / "throughput.png").write_bytes(b"\x89PNG fake")
    return d


class FakeWebUI:
    """What the routes use of ``locust.web.WebUI``: the Flask app, the auth decorator, the template args."""

    def __init__(self, deny: bool = False) -> None:
        self.app = Flask("test")
        self.template_args: dict[str, Any] = {}
        self.deny = deny

        @self.app.route("/stats/requests")
        def stats() -> Any:
            return jsonify({"stats": []})

    def auth_required_if_enabled(self, view: Any) -> Any:
        def wrapper(*a: Any, **k: Any) -> Any:
            return ("login required", 401) if self.deny else view(*a, **k)

        wrapper.__name__ = view.__name__
        return wrapper


def _client(run_dir: Path, monkeypatch: pytest.MonkeyPatch, deny: bool = False) -> Any:
    monkeypatch.setattr(routes, "run_dirs", lambda: RunDirs(None, (run_dir,), "finished"))
    ui = FakeWebUI(deny)
    env = SimpleNamespace(parsed_options=SimpleNamespace(web_base_path=None), runner=None)
    routes.install_routes(env, ui)
    return ui, ui.app.test_client()


def test_data_json_is_the_reports_rows(run_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _ui, c = _client(run_dir, monkeypatch)
    d = c.get("/llm/data.json").get_json()
    rep = build_report(run_dir).as_dict()
    assert d["error"] is None and d["run"]["run_id"] == rep["run_id"]
    assert [r["label"] for r in d["steps"]] == [r["label"] for r in rep["steps"]]
    for got, want in zip(d["steps"], rep["steps"], strict=True):
        assert {k: got[k] for k in ROW_KEYS} == {k: want.get(k) for k in ROW_KEYS}
    assert d["current"] is None  # a finished run has no step in progress
    names = [f["name"] for f in d["runs"][0]["files"]]
    assert names[:3] == ["records.jsonl", "phases.jsonl", "run.json"] and names[-1] == "figures.zip"


def test_data_json_carries_the_phase_tok_s_as_report_json(run_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Reasoning and answer tok/s of every step: in the view's JSON as in report.json, summing to output tok/s."""
    _ui, c = _client(run_dir, monkeypatch)
    d = c.get("/llm/data.json").get_json()
    rep = json.loads(json.dumps(build_report(run_dir).as_dict()))  # as report.json holds it
    assert d["steps"]
    for got, want in zip(d["steps"], rep["steps"], strict=True):
        for k in ("output_tps", "output_tps_reasoning", "output_tps_answer"):
            assert got[k] == want[k] and want[k] is not None, k
        assert got["output_tps_reasoning"] + got["output_tps_answer"] == pytest.approx(got["output_tps"], rel=1e-12)


def test_token_means_are_the_latency_samples(run_dir: Path) -> None:
    """The one assembled value: the request-weighted mean over by_finish_reason = the mean over the row's sample."""
    rep = build_report(run_dir)
    recs = [r for r in read_records(run_dir) if r.phase != "warmup" and r.step >= 0]
    for row in rep.steps:
        sample = latency_sample(recs, row.step, row.steady, row.window_start_wall, row.window_end_wall)
        v = row_view(row)
        want_r = mean(float(r.reasoning_tokens) for r in sample)
        want_a = mean(float(r.answer_tokens) for r in sample)
        assert v["mean_reasoning_tokens"] == pytest.approx(want_r) and v["mean_answer_tokens"] == pytest.approx(want_a)


def test_downloads_only_known_runs_and_names(run_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _ui, c = _client(run_dir, monkeypatch)
    r = c.get(f"/llm/download/{run_dir.name}/records.jsonl")
    assert r.status_code == 200 and r.data == (run_dir / "records.jsonl").read_bytes()
    assert "attachment" in r.headers["Content-Disposition"]
    z = zipfile.ZipFile(io.BytesIO(c.get(f"/llm/download/{run_dir.name}/figures.zip").data))
    assert z.namelist() == ["figures/throughput.png"]
    for bad in (f"/llm/download/{run_dir.name}/report.md",  # known name, not written
                f"/llm/download/{run_dir.name}/secret.txt", f"/llm/download/{run_dir.name}/..%2Frun.json",
                f"/llm/download/..%2F{run_dir.name}/run.json", "/llm/download/other-run/run.json",
                "/llm/static/llm.html", "/llm/static/..%2F__init__.py"):
        assert c.get(bad).status_code == 404, bad
    assert find_run([run_dir], "..") is None and find_run([run_dir], run_dir.name) == run_dir
    assert [f["name"] for f in files_of(run_dir, "/llm")][-1] == "figures.zip"
    assert set(FILES) >= {"records.jsonl", "report.md", "report.json", "report.html"}
    assert zipfile.ZipFile(io.BytesIO(figures_zip(run_dir))).namelist() == ["figures/throughput.png"]


def test_every_route_is_behind_the_login(run_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ui, c = _client(run_dir, monkeypatch, deny=True)
    rules = [r for r in ui.app.url_map.iter_rules() if r.rule.startswith("/llm")]
    assert len(rules) == 4
    for path in ("/llm/", "/llm/data.json", "/llm/static/llm.js", f"/llm/download/{run_dir.name}/run.json"):
        assert c.get(path).status_code == 401, path


def test_page_and_locust_tab(run_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ui, c = _client(run_dir, monkeypatch)
    page = c.get("/llm/").data.decode()
    assert 'data-base="/llm"' in page and "/llm/static/llm.js" in page and "http" not in page.split("<body")[1]
    assert c.get("/llm/static/llm.js").status_code == 200
    assert ui.template_args["extended_tabs"] == [{"title": "LLM", "key": "llm"}]
    assert ui.template_args["extended_csv_files"][0]["href"] == "/llm/"
    c.get("/llm/data.json")  # fills the cache
    body = json.loads(c.get("/stats/requests").data)
    rows = body["extended_stats"][0]["data"]
    rep = build_report(run_dir).as_dict()
    # labels keep the report's † / ‡ marks (the tab used to drop ‡): the catalogue's label text of each step
    assert [r["label"] for r in rows[:-1]] == [label_text(r) for r in rep["steps"]]
    assert any("‡" in r["label"] for r in rows[:-1])  # the demo run has low-confidence steps
    assert rows[-1]["label"].startswith(f"run {rep['run_id']} measured {rep['target']['base_url']} ")


def test_current_row_is_the_running_last_step() -> None:
    running = {"status": "running", "steps": [{"label": "C=2", "end_source": "next_phase"},
                                              {"label": "C=4", "end_source": "last_record"}]}
    row = current_row(Report.model_validate(running))
    assert row is not None and (row.label, row.end_source) == ("C=4", "last_record")
    assert current_row(Report.model_validate({**running, "status": "finished"})) is None
    last = {"status": "running", "steps": [{"label": "C=4", "end_source": "load_end"}]}
    assert current_row(Report.model_validate(last)) is None


def test_cache_computes_in_the_child_and_rate_limits(run_dir: Path) -> None:
    cache = ReportCache()
    try:
        e = cache.get(run_dir)
        assert e.error is None and e.report is not None and e.report.run_dir == str(run_dir)
        assert e.interval() >= 2.0 and e.compute_s > 0
        first = e.computed_at
        assert cache.get(run_dir).computed_at == first  # fresh: not recomputed
    finally:
        cache.child.stop()


def _login_ui(run_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """A real ``locust.web.WebUI`` started with ``--web-login`` (not serving), the harness's login and routes on it."""
    from locust import HttpUser
    from locust.env import Environment

    from harness.webui.auth import install_login

    monkeypatch.setattr(routes, "run_dirs", lambda: RunDirs(None, (run_dir,), "finished"))
    monkeypatch.setenv("LLMLOAD_WEB_USER", "alice")
    monkeypatch.setenv("LLMLOAD_WEB_PASSWORD", "s3cret")
    monkeypatch.setattr("sys.argv", ["locust", "--web-login"])  # Locust's template args parse sys.argv

    class _U(HttpUser):
        host = "http://127.0.0.1:9"

    from locust.argument_parser import parse_options

    env = Environment(user_classes=[_U], parsed_options=parse_options(args=["--web-login"]))
    env.create_local_runner()
    ui = env.create_web_ui("127.0.0.1", 0, web_login=True, delayed_start=True)
    install_login(ui, "")
    routes.install_routes(SimpleNamespace(parsed_options=SimpleNamespace(web_base_path=None), runner=None), ui)
    return ui


def test_web_login_guards_locust_and_the_view(run_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ui = _login_ui(run_dir, monkeypatch)
    c = ui.app.test_client()
    run_id = run_dir.name
    for path in ("/", "/llm/", "/llm/data.json", f"/llm/download/{run_id}/run.json"):
        r = c.get(path)
        assert r.status_code == 302 and "/login" in r.headers["Location"], path  # not the page, not 200
    assert c.get("/login").status_code == 200  # Locust's login page renders (no "no secret key" exception)
    assert ui.auth_args["username_password_callback"] == "/llm/login"
    bad = c.post("/llm/login", data={"username": "alice", "password": "nope"})
    assert bad.status_code == 302 and bad.headers["Location"].endswith("/login")
    assert c.get("/llm/data.json").status_code == 302
    ok = c.post("/llm/login", data={"username": "alice", "password": "s3cret"})
    assert ok.status_code == 302 and not ok.headers["Location"].endswith("/login")
    page = c.get("/llm/")
    assert page.status_code == 200 and b"<html" in page.data.lower()
    assert c.get("/llm/data.json").get_json()["run"]["run_id"]
    dl = c.get(f"/llm/download/{run_id}/run.json")
    assert dl.status_code == 200 and json.loads(dl.data) == json.loads((run_dir / "run.json").read_text())
    index = c.get("/")  # Locust's own page too, with the script that shows a refused Edit's answer
    assert index.status_code == 200 and (b'<script src="/llm/static/locust-ui.js"></script><script '
                                         b'src="/llm/static/llm-link.js" data-href="/llm/"></script></body>'
                                         in index.data)
    assert c.get("/llm/static/locust-ui.js").status_code == 200


def test_web_login_without_credentials_refuses(monkeypatch: pytest.MonkeyPatch) -> None:
    from harness.webui.auth import AuthSetupError, credentials

    with pytest.raises(AuthSetupError, match="LLMLOAD_WEB_PASSWORD"):
        credentials({"LLMLOAD_WEB_USER": "alice"})
    with pytest.raises(AuthSetupError, match="LLMLOAD_WEB_USER and LLMLOAD_WEB_PASSWORD"):
        credentials({})
    assert credentials({"LLMLOAD_WEB_USER": "a", "LLMLOAD_WEB_PASSWORD": "b"}) == ("a", "b")


def _live_report(run_dir: Path) -> Report:
    """The demo run's report as a report of that run while it was still going (status running, no run_end)."""
    rep = build_report(run_dir)
    return rep.model_copy(update={
        "status": "running",
        "notes": ["INTERRUPTED RUN (no run_end event). Figures cover only what was recorded.", "other note"]})


def test_live_run_is_in_progress_not_interrupted(run_dir: Path) -> None:
    from harness.webui.cache import Entry
    from harness.webui.view import IN_PROGRESS_NOTE, payload

    entry = Entry(report=_live_report(run_dir))
    d = payload(RunDirs(run_dir, (), "running"), entry, run_dir, [], "/llm")
    assert d["run"]["status"] == "running" and d["run"]["notes"] == [IN_PROGRESS_NOTE, "other note"]
    assert d["steps"] and all(r["provisional"] for r in d["steps"])
    stop = {"stage": "writing_report"}
    d = payload(RunDirs(run_dir, (), "stopping"), entry, run_dir, [], "/llm", stop)
    assert d["run"]["status"] == "writing_report" and d["state"] == "stopping"
    assert payload(RunDirs(run_dir, (), "stopping"), entry, run_dir, [], "/llm", None)["run"]["status"] == "stopping"
    done = Entry(report=build_report(run_dir))  # recorded: the report's own status and notes, rows final
    d = payload(RunDirs(None, (run_dir,), "finished"), done, run_dir, [], "/llm")
    assert done.report is not None
    assert d["run"]["status"] == done.report.status and d["run"]["notes"] == done.report.notes
    assert not any(r["provisional"] for r in d["steps"])


def test_cache_takes_the_written_report_at_once(run_dir: Path, tmp_path: Path) -> None:
    """A cached report of the run in progress is replaced by report.json as soon as the ended run has one (not
    after the recompute interval), and a compute that started before is not let to put the old status back."""
    d = tmp_path / run_dir.name
    shutil.copytree(run_dir, d)
    cache = ReportCache()
    try:
        e = cache.entry(d)
        e.report, e.started_at, e.compute_s = _live_report(d), 1e12, 10.0  # fresh for a long while: no recompute
        assert cache.get(d).report.status == "running"  # type: ignore[union-attr]  # no report.json yet
        final = build_report(d)
        (d / "report.json").write_text(final.to_json())
        assert cache.get(d).report.status == final.status != "running"  # type: ignore[union-attr]
        assert e.job is None
        cache.child.report = lambda _p: _live_report(d)  # type: ignore[method-assign]  # a compute begun before
        cache._run(d, e)
        assert e.report.status == final.status
    finally:
        cache.child.stop()


def _in_progress(run_dir: Path) -> Report:
    """The live demo report with its last step (C=64) as the step in progress (ended at the latest record)."""
    rep = _live_report(run_dir)
    last = rep.steps[-1].model_copy(update={"end_source": "last_record"})
    return rep.model_copy(update={"steps": [*rep.steps[:-1], last]})


def test_headline_strip_of_the_step_in_progress(run_dir: Path) -> None:
    """The headline strip: the step in progress (i of n by the plan, time left in the step and the run), users,
    and the report's display text of its output tok/s, TTFT p50/p99, the run's errors, hours to the first N with
    its interval, the interval's method and its cross-check."""
    from harness.report.catalogue import cross_check_text, display, hours_text, interval_text
    from harness.webui.cache import Entry
    from harness.webui.runs import Live
    from harness.webui.view import payload

    rep = _in_progress(run_dir)
    row = rep.steps[-1]
    assert row.start_wall is not None and row.planned_duration_s == 30.0
    plan = (("single", 0, 15.0), *(("step", r.step, 30.0) for r in rep.steps[1:]), ("step", 9, 60.0))
    now = row.start_wall + 10.0
    entry = Entry(report=rep)
    d = payload(RunDirs(run_dir, (), "running"), entry, run_dir, [], "/llm", None, Live(users=64, plan=plan), now)
    h = {c["key"]: c for c in d["headline"]}
    assert h["status"]["text"] == "running"
    assert h["step"]["text"] == f"{label_text(row)} (5 of 6)"
    assert h["time_left"]["text"] == "20 s · 1 min 20 s"  # 30 - 10 s of this step, then the last step's 60 s
    assert h["users"]["text"] == "64"
    assert h["output_tps"]["text"] == display(row, "output_tps")
    assert h["ttft"]["text"] == f"{display(row, 'ttft_p50_s')} / {display(row, 'ttft_p99_s')}"
    assert h["ttft"]["label"] == "TTFT p50/p99 (s)"
    assert h["errors"]["text"] == display(rep.totals, "errors")
    assert h["hours"]["text"] == hours_text(row.hours[0]) and "N=100,000" in h["hours"]["label"]
    assert h["interval"]["text"] == interval_text(row) and "renewal-reward" in h["interval"]["text"]
    assert h["cross_check"]["text"] == cross_check_text(row)
    # without a plan (a capacity search): the step's own length, i of n and the run's time left unknown
    d = payload(RunDirs(run_dir, (), "running"), entry, run_dir, [], "/llm", None, Live(users=None, plan=None), now)
    h = {c["key"]: c for c in d["headline"]}
    assert h["step"]["text"].endswith("(?)") and h["time_left"]["text"] == "20 s · –"
    assert h["users"]["text"] == "64"  # the row's users seen
    # a finished run: its last step, no time left
    done = build_report(run_dir)
    d = payload(RunDirs(None, (run_dir,), "finished"), Entry(report=done), run_dir, [], "/llm")
    h = {c["key"]: c for c in d["headline"]}
    assert h["status"]["text"] == done.status and h["step"]["label"] == "last step" and "time_left" not in h


def test_duration_text() -> None:
    from harness.webui.view import duration_text

    assert [duration_text(v) for v in (None, float("inf"), 0.4, 42.0, 725.0, 6000.0)] == \
        ["–", "until Stop", "0 s", "42 s", "12 min 05 s", "1 h 40 min"]


def test_table_columns_answer_first_details_rest_and_chart_units() -> None:
    """The row shows the key figures and hours (and US$ to the first N) to every N; every other figure is in the
    row's details; the charts' units and factors are the catalogue's (TTFT in ms, TTFAT in s)."""
    from harness.report.catalogue import CONVERSIONS, Unit
    from harness.webui.view import MAIN_KEYS, TABLE_KEYS, charts, columns

    cols = columns([100_000, 900_000], priced=True)
    main = [c["key"] for c in cols if c["main"]]
    assert main == ["label", *MAIN_KEYS, "hours_100000", "usd_100000", "hours_900000"]
    rest = {c["key"] for c in cols if not c["main"]}
    assert set(TABLE_KEYS) - set(MAIN_KEYS) <= rest and {"usd_900000", "interval", "cross_check"} <= rest
    assert {c["key"] for c in cols if c.get("answer")} == {"hours_100000", "usd_100000", "hours_900000",
                                                             "usd_900000"}
    by = {c["id"]: c for c in charts()}
    assert by["ttft"]["unit"] == "ms" and by["ttft"]["factor"] == CONVERSIONS[(Unit.S, Unit.MS)]
    assert by["ttfat"]["unit"] == "s" and by["ttfat"]["factor"] == 1.0
    assert [s["key"] for s in by["ttft"]["series"]] == ["ttft_p50_s", "ttft_p99_s"]


def test_headline_prices_the_answer_with_a_cost(run_dir: Path) -> None:
    """With a price (the profile's ``cost``), the strip shows US$ to the first N with its interval beside the hours
    (the catalogue's :func:`harness.report.catalogue.usd_text` of the row's entry)."""
    from harness.report.catalogue import usd_text
    from harness.webui.cache import Entry
    from harness.webui.view import payload

    rep = build_report(run_dir)
    last = rep.steps[-1]
    h0 = last.hours[0].model_copy(update={"usd": 66.3, "usd_low": 47.3, "usd_high": 111.0})
    last = last.model_copy(update={"hours": [h0, *last.hours[1:]]})
    rep = rep.model_copy(update={"cost_usd_per_hour": 10.0, "steps": [*rep.steps[:-1], last]})
    d = payload(RunDirs(None, (run_dir,), "finished"), Entry(report=rep), run_dir, [], "/llm")
    h = {c["key"]: c for c in d["headline"]}
    assert h["usd"]["text"] == usd_text(66.3, 47.3, 111.0) == "$66.3 ($47.3–$111)"
    assert h["usd"]["label"] == "US$ to N=100,000 (95 %)"
    main = [c["key"] for c in d["columns"] if c["main"]]
    assert main[-5:] == ["hours_100000", "usd_100000", "hours_200000", "hours_500000", "hours_900000"], main


def test_compressed_time_rows_and_headline_are_real_time_equivalents(run_dir: Path) -> None:
    """Issue 17 item 6: a compressed-time run's view shows the same real-time hours as the terminal and report.md
    (compression stated once, in the banner); counts as measured."""
    from harness.report.catalogue import hours_text
    from harness.webui.cache import Entry
    from harness.webui.view import payload

    rep = build_report(run_dir).model_copy(update={"time_scale": 0.5})
    d = payload(RunDirs(None, (run_dir,), "finished"), Entry(report=rep), run_dir, [], "/llm")
    (banner,) = d["banners"]
    assert "time_scale = 0.5" in banner and "real-time equivalents" in banner
    steps = [r for r in rep.steps if r.hours and r.hours[0].hours is not None]
    assert steps
    for mine, row in zip(d["steps"], rep.steps, strict=True):
        assert mine["completed"] == row.completed
        if row.ttft_p50_s is not None:
            assert mine["ttft_p50_s"] == pytest.approx(row.ttft_p50_s / 0.5)
        if row.output_tps is not None:
            assert mine["output_tps"] == pytest.approx(row.output_tps * 0.5)
    last = steps[-1]
    real = last.model_copy(update={"hours": [h.model_copy(update={
        "hours": h.hours / 0.5 if h.hours is not None else None,
        "hours_low": h.hours_low / 0.5 if h.hours_low is not None else None,
        "hours_high": h.hours_high / 0.5 if h.hours_high is not None else None}) for h in last.hours]})
    head = {h["key"]: h["text"] for h in d["headline"]}
    assert head["hours"] == hours_text(real.hours[0])
    # the live trace and the slices' dots on the charts: real-time values too (they were compressed beside
    # real-time bars); their wall timestamps as measured
    from harness.webui.routes import tab_rows

    point = {"t": 99.0, "output_tps": 30.0, "ttft_p50_s": 0.01}
    d = payload(RunDirs(run_dir, (), "running"), Entry(report=rep, history=[point]), run_dir, [], "/llm")
    assert d["history"] == [{"t": 99.0, "output_tps": 15.0, "ttft_p50_s": 0.02}]
    # once the run is recorded the trace of its last step is gone (its final rows are the figures)
    assert payload(RunDirs(None, (run_dir,), "finished"), Entry(report=rep, history=[point]), run_dir, [],
                   "/llm")["history"] == []
    # Locust's LLM tab: the same real-time hours, and the compression said once in its last row
    tab = tab_rows(rep)
    assert tab[len(rep.steps) - 1]["hours"] == f"N={real.hours[0].n:,}: {hours_text(real.hours[0])}"
    assert "COMPRESSED TIME (simulator time_scale = 0.5): real-time equivalents" in tab[-1]["label"]
    assert tab[-1]["label"].lower().count("compressed time") == 1, tab[-1]["label"]  # said once, not "X X"
    assert not any("compressed" in r["label"] for r in tab_rows(build_report(run_dir))), "not for a real run"
    # the compression said once: the banner; the report's own note (about report.md's compressed tables) is not
    # repeated under Notes, where it contradicted the real-time rows above it
    noted = rep.model_copy(update={"notes": [*rep.notes, "COMPRESSED TIME: ... compressed wall time ...", "kept"]})
    d = payload(RunDirs(None, (run_dir,), "finished"), Entry(report=noted), run_dir, [], "/llm")
    assert "kept" in d["run"]["notes"]
    assert not any(str(n).startswith("COMPRESSED TIME:") for n in d["run"]["notes"]), d["run"]["notes"]
