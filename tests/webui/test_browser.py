"""The web UI in a real browser (Debian's chromium, Playwright): start a sweep from Locust's form, read the LLM
view's figures from the page and check them against the run's records, stop with Stop, download the report.

Single process, master + 2 workers and ``--processes 2``, each against the built-in simulator on 127.0.0.1 (a
short, time-scaled profile; about a minute each); and a fixed run started from the form and ended by Ctrl-C
(SIGINT) with requests in flight (records = requests the simulator completed).
The LLM view is read as a dashboard at 1,366 × 768 and 1,920 × 1,080: its headline strip and per-step table
= report.json's figures in the catalogue's display text, the hours-to-N column (the answer) visible without
horizontal scroll. Screenshots of the LLM view: ``webui-llm-view.png`` (1,366 × 768) and
``webui-llm-view-1920.png`` (1,920 × 1,080) while the last step runs (the web UI guide shows them),
``webui-llm-view-workers.png`` after a worker was killed; written to ``docs/`` only with
``LLMLOAD_UPDATE_SCREENSHOTS=1`` (CI sets it in ``.ci/run``), else under the test's ``tmp_path``.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from harness.report.build import build_report
from harness.report.catalogue import (
    FIGURES,
    Format,
    cross_check_text,
    display,
    group_text,
    hours_header,
    hours_text,
    interval_text,
    label_text,
)
from harness.report.model import load_report
from tests.procs import free_port
from tests.webui.browser import (
    CHROMIUM_ARGS,
    PROFILE,
    ROOT,
    cell,
    get_json,
    locust,
    number,
    records,
    require_browser,
    start_from_form,
    truth_completed,
    wait_until,
)

pytestmark = [pytest.mark.browser, pytest.mark.slow]

#: The start form's fields the test sets when the form offers them (Locust's camelCase names of the options).
#: ``profile`` (the Profile field, a path) gets the test's profile: Locust is launched without ``--profile``, so
#: the run measured is the one picked in the form.
FORM = {"mode": "sweep"}
#: (DOM data-key, report row key) compared within 1 %.
COMPARED = (
    ("completed", "completed"), ("output_tps", "output_tps"),
    ("output_tps_reasoning", "output_tps_reasoning"), ("output_tps_answer", "output_tps_answer"),
    ("per_stream_tps", "per_stream_tps"),
    ("ttft_p50_s", "ttft_p50_s"), ("ttft_p90_s", "ttft_p90_s"), ("ttft_p95_s", "ttft_p95_s"),
    ("ttft_p99_s", "ttft_p99_s"), ("ttfat_p50_s", "ttfat_p50_s"), ("ttfat_p95_s", "ttfat_p95_s"),
    ("ttfat_p99_s", "ttfat_p99_s"), ("gap_p50_s", "gap_p50_s"), ("gap_p95_s", "gap_p95_s"),
    ("gap_p99_s", "gap_p99_s"), ("tpot_mean_s", "tpot_mean_s"), ("truncated_pct", "truncated_pct"),
    ("window_s", "window_s"), ("mean_reasoning_tokens", None), ("mean_answer_tokens", None),
)
REL = 0.01
#: The dashboard's two screen sizes (width, height) and their screenshot names.
SIZES = ((1366, 768, "webui-llm-view.png"), (1920, 1080, "webui-llm-view-1920.png"))


def answer_visible(view: Any) -> dict[str, float]:
    """The page has no horizontal scroll and every hours-to-N header (the answer) lies inside the viewport (its
    right edge ≤ the viewport's width); returns the widths measured (AssertionError otherwise)."""
    m = view.evaluate("""() => {
      const hs = [...document.querySelectorAll('#steps th.answer')].map((e) => e.getBoundingClientRect().right);
      return {scroll: document.documentElement.scrollWidth, client: document.documentElement.clientWidth,
              inner: window.innerWidth, answers: hs.length, right: Math.max(0, ...hs),
              table: document.getElementById('steps').getBoundingClientRect().width};
    }""")
    assert m["answers"] > 0, m
    assert m["scroll"] <= m["client"] and m["right"] <= m["inner"], m
    return m


def _real_time(rep: Any) -> Any:
    """``rep`` as the view shows it: a compressed-time run's rows in real-time equivalents
    (:func:`harness.report.realtime.in_real_time`, the view's one rule)."""
    from harness.report.realtime import in_real_time

    ts = rep.time_scale or 1.0
    return rep if ts == 1.0 else rep.model_copy(update={"steps": [in_real_time(r, ts) for r in rep.steps]})


def check_dashboard(view: Any, run_dir: Path, details: str | None = "C=2") -> dict[str, Any]:
    """The headline strip and the per-step table = report.json (the run's written report), read from the DOM:
    every text is the catalogue's display text of report.json's value; the row labelled ``details`` (the second
    step's) opens its details with ▸ and they show its TTFT p90."""
    rep = _real_time(load_report(run_dir / "report.json"))
    last = rep.steps[-1]
    head = {k: str(view.locator(f'#headline .card[data-key="{k}"] .v').text_content()).strip() for k in
            ("status", "step", "output_tps", "ttft", "errors", "hours", "interval", "cross_check")}
    want = {"status": rep.status, "step": label_text(last), "output_tps": display(last, "output_tps"),
            "ttft": group_text(last, ("ttft_p50_s", "ttft_p99_s")), "errors": display(rep.totals, "errors"),
            "hours": hours_text(last.hours[0]), "interval": interval_text(last), "cross_check": cross_check_text(last)}
    assert head == want, (head, want)
    n = rep.hours_to_n[0]
    assert view.locator(f'#steps th[data-key="hours_{n}"]').inner_text() == hours_header(n)
    for r in rep.steps:
        for key in ("concurrency", "completed", "errors", "output_tps", "ttft_p50_s", "ttft_p99_s", "ttfat_p50_s"):
            assert cell(view, r.label, key) == display(r, key), (r.label, key)
        for h in r.hours:
            assert cell(view, r.label, f"hours_{h.n}") == hours_text(h), (r.label, h.n)
        assert cell(view, r.label, "interval") == interval_text(r), r.label
    if details is not None:
        row = next(r for r in rep.steps if r.label == details)
        box = view.locator(f'#step-rows tr.details[data-step="{details}"]')
        assert not box.is_visible()
        view.locator(f'#step-rows tr[data-step="{details}"]:not(.details) button.more').click()
        assert box.is_visible() and box.locator('dd[data-key="ttft_p90_s"]').inner_text() == display(
            row, "ttft_p90_s")
    return head


def close(got: float | None, want: float | None) -> bool:
    if want is None or got is None:
        return got is None and want is None
    return abs(got - want) <= REL * abs(want) + 1e-9


def _token_means(row: dict[str, Any]) -> tuple[float | None, float | None]:
    groups = [g for g in row["by_finish_reason"].values() if g["requests"]]
    n = sum(g["requests"] for g in groups)
    if not n:
        return None, None
    return (sum(g["requests"] * g["mean_reasoning_tokens"] for g in groups) / n,
            sum(g["requests"] * g["mean_answer_tokens"] for g in groups) / n)


def dom_row(view: Any, label: str) -> bool:
    return bool(view.locator(f'tr[data-step="{label}"]').count())


def check_view_against_records(view: Any, run_dir: Path) -> dict[str, Any]:
    """Every compared figure of every step row on the page = the report engine's over the final records (1 %),
    and one independent check straight from records.jsonl (C=2: completed count and TTFT p50 of its window)."""
    typed = _real_time(build_report(run_dir))
    rep = {**typed.as_dict(), "steps": [r.as_dict() for r in typed.steps]}
    rows = rep["steps"]
    assert [r["label"] for r in rows] == ["single", "C=2", "C=4"], [r["label"] for r in rows]
    diffs = {}
    for row in rows:
        current = view.locator(f'#current-row tr[data-step="{row["label"]}"]').count() > 0
        reasoning, answer = _token_means(row)
        for key, rkey in COMPARED:
            want = row[rkey] if rkey else (reasoning if key == "mean_reasoning_tokens" else answer)
            text = cell(view, row["label"], key, current)
            # the page shows the catalogue's display text of the report's value (TPOT and gaps in ms), as report.md
            assert text == FIGURES[key].text(want), (row["label"], key, text, want)
            if FIGURES[key].format is not Format.SIG3:
                continue  # counts and window lengths: rounded to whole units / one decimal, the text is the check
            got = number(text)
            got = None if got is None else got / (FIGURES[key].scale(1.0) or 1.0)
            assert close(got, want), (row["label"], key, got, want)  # 3 significant digits: within 0.5 %
            if want and got is not None:
                diffs[f"{row['label']}.{key}"] = abs(got - want) / abs(want)
        h = row["hours"][0]
        assert cell(view, row["label"], f"hours_{h['n']}", current) == hours_text(h), (row["label"], "hours")
    # independent of the report engine: the C=2 window straight from records.jsonl
    c2 = rows[1]
    w0, w1 = c2["window_start_wall"], c2["window_end_wall"]
    assert c2["steady"], c2["not_steady_reason"]
    ended = [r for r in records(run_dir) if r["phase"] != "warmup" and w0 < r["start_wall"] + r["e2e"] < w1]
    ok = [r for r in ended if r["ok"]]
    assert number(cell(view, "C=2", "completed")) == len(ok) > 0
    ttft = float(np.percentile([r["ttft"] for r in ok], 50))
    got = number(cell(view, "C=2", "ttft_p50_s"))
    assert close(got, ttft / (typed.time_scale or 1.0)), (got, ttft)  # the view: real-time equivalents
    return {"max_rel_diff": max(diffs.values()), "compared": len(diffs), "c2_completed": len(ok),
            "c2_ttft_p50_s": ttft}


def run_flow(pw: Any, chromium: str, base: str, out: Path, truth: Path, shot: Path | None, profile: Path,
             workers: int = 0) -> Any:
    """Start from the form, wait for the view (screenshot ``shot`` while the last step runs), Stop, check figures
    and counts, download the report. Returns the LLM view's page (still open)."""
    browser = pw.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
    ui = browser.new_page(viewport={"width": 1400, "height": 900})
    view = browser.new_page(viewport={"width": SIZES[0][0], "height": SIZES[0][1]}, accept_downloads=True)
    wide = browser.new_page(viewport={"width": SIZES[1][0], "height": SIZES[1][1]})
    view.goto(base + "/llm/")
    wide.goto(base + "/llm/")
    if workers:
        wait_until(lambda: view.locator('#workers tbody tr[data-dead="0"]').count() == workers, 60,
                   f"{workers} live workers on the LLM view")
    start_from_form(ui, base, {"profile": str(profile), **FORM})
    # the view shows the finished steps and the step in progress as the sweep goes on
    wait_until(lambda: dom_row(view, "single"), 60, "the single-stream row")
    wait_until(lambda: view.locator('#step-rows tr[data-step="C=2"]').count()
               and view.locator('#current-row tr[data-step="C=4"]').count(), 60, "C=2 done, C=4 in progress")
    wait_until(lambda: number(cell(view, "C=4", "completed", current=True)), 30, "C=4 figures so far")
    # a run going is in progress, not interrupted; its finished steps' rows are provisional until it ends
    wait_until(lambda: "RUN IN PROGRESS" in view.locator("#notes").inner_text(), 10, "the in-progress note")
    assert "INTERRUPTED" not in view.locator("#notes").inner_text()
    assert view.locator('body[data-status="running"]').count() == 1
    assert view.locator('#step-rows tr[data-step="C=2"][data-provisional="1"]').count() == 1
    assert cell(view, "C=2", "label").endswith("(provisional)")
    # Locust's Edit of the running test is refused; its dialog closes, the one-line answer is in a banner
    ui.get_by_role("button", name="Edit").first.click()
    ui.get_by_role("button", name="Update").first.click()
    wait_until(lambda: ui.locator("#llmload-refused").count(), 10, "the refused edit's banner")
    text = ui.locator("#llmload-refused").inner_text()
    assert text.startswith("llmload: run ") and "is running: Stop it (or wait) first" in text, text
    ui.locator("#llmload-refused button").click()
    assert ui.locator("#llmload-refused").count() == 0
    for page in (view, wide):  # the answer on screen at both sizes, while the last step runs
        wait_until(lambda p=page: p.locator('#current-row tr[data-step="C=4"]').count(), 10, "the wide page")
        answer_visible(page)
    assert view.locator('#headline .card[data-key="time_left"]').count() == 1
    # charts: each its own axis unit (TTFT in ms beside TTFAT in s), every series its own colour (live ones too)
    charts = view.evaluate("""() => [...document.querySelectorAll('#charts svg')].map((s) => ({id: s.id,
      unit: s.querySelector('text[font-weight="bold"]').textContent,
      series: [...s.querySelectorAll('g.series')].map((g) => [g.dataset.name, g.dataset.color])}))""")
    units = {c["id"]: c["unit"] for c in charts}
    assert units == {"chart-tps": "tok/s", "chart-ttft": "ms", "chart-ttfat": "s"}, units
    for c in charts:
        colors = [col for _, col in c["series"]]
        assert any(name.endswith("(live)") for name, _ in c["series"]), c  # the step in progress is traced
        assert len(colors) == len(set(colors)) >= 4, c
    assert "of 3" in view.locator('#headline .card[data-key="step"] .v').inner_text()
    assert view.locator("#current-hint").is_visible()  # the caption of the step in progress, while there is one
    if shot is not None:
        view.screenshot(path=str(shot), full_page=True)
        wide.screenshot(path=str(shot.with_name(SIZES[1][2])), full_page=True)
    ui.get_by_role("button", name="Stop").first.click()
    run_dir = wait_until(lambda: next(iter(p for p in out.iterdir() if p.is_dir()), None), 5, "the run directory")
    # Stop: in-flight requests drain and are recorded, then the run is closed (run.json's status is final)
    wait_until(lambda: json.loads((run_dir / "run.json").read_text()).get("status") != "running", 90,
               "the run closed after Stop", every=0.5)
    # until the run is recorded the view says it is stopping (draining, writing report), never finished-but-running
    seen_states: set[tuple[str, str]] = set()

    def recorded() -> bool:
        d = get_json(base + "/llm/data.json") or {}
        pair = (str(d.get("state")), str((d.get("run") or {}).get("status")))
        seen_states.add(pair)
        return pair[0] in ("finished", "interrupted")

    wait_until(recorded, 90, "the run recorded (the view's state)", every=0.2)
    assert all(st not in ("finished", "interrupted") or status == st for st, status in seen_states), seen_states
    assert all(status != "running" for st, status in seen_states if st == "stopping"), seen_states
    wait_until(lambda: view.locator('#step-rows tr[data-provisional="1"]').count() == 0, 10,
               "no provisional row once the run is recorded")
    recs = records(run_dir)
    # every request the simulator completed is recorded (its truth line may trail the response by a moment)
    wait_until(lambda: truth_completed(truth) >= len(recs), 10, "the simulator's truth log")
    assert len(recs) == truth_completed(truth) > 0
    main_ok = sum(1 for r in recs if r["ok"] and r["phase"] != "warmup")
    # the view has caught up with every record
    try:
        wait_until(lambda: number(view.locator("#meta-completed b").inner_text()) == main_ok, 30,
                   "the view's completed count = the records'")
    except AssertionError as e:
        d = get_json(base + "/llm/data.json") or {}
        seen = (d.get("run") or {}).get("totals", {}).get("completed")
        raise AssertionError(f"{e}: page {view.locator('#run-meta').inner_text()!r}, data.json completed {seen}, "
                             f"error {d.get('error')!r}, age {d.get('report_age_s')}, records {main_ok}") from None
    figures = check_view_against_records(view, run_dir)
    wait_until(lambda: (run_dir / "report.json").exists(), 30, "report.json")
    final = load_report(run_dir / "report.json").status
    for page in (view, wide):  # each page polls on its own timer: both must have read the final status
        wait_until(lambda page=page: page.locator('#headline .card[data-key="status"] .v').text_content() == final,
                   30, f"the headline's final status at {page.viewport_size['width']} px")
    # the run has ended: no step is in progress, and no caption describes one
    wait_until(lambda: view.locator("#current-row tr").count() == 0, 10, "no current row after the run")
    assert not view.locator("#current-hint").is_visible()
    for page in (view, wide):
        figures[f"headline_{page.viewport_size['width']}"] = check_dashboard(page, run_dir)
        figures[f"widths_{page.viewport_size['width']}"] = answer_visible(page)
    # the Locust UI: the LLM tab (the same rows) and its "LLM view" a link to the view
    ui.goto(base + "/?tab=llm")
    wait_until(lambda: ui.get_by_text("C=2", exact=False).count() > 0, 20, "the LLM tab of Locust's UI")
    wait_until(lambda: ui.locator("a.llmload-view-link").count() > 0, 10, "the LLM tab's link to the view")
    assert ui.locator("a.llmload-view-link").first.get_attribute("href") == "/llm/"
    # the report, downloaded through the page's link once the run has ended and written it
    link = view.locator(f'[data-run="{run_dir.name}"] a[data-file="report.md"]')
    wait_until(lambda: link.count() > 0, 60, "the report.md download link (the report written at the run's end)")
    with view.expect_download() as dl:
        link.click()
    text = Path(dl.value.path()).read_text()
    assert text == (run_dir / "report.md").read_text() and "C=2" in text
    figures["records"] = len(recs)
    figures["truth_completed"] = truth_completed(truth)
    print("LLM view vs records:", json.dumps(figures))
    return view


def shot_dir(tmp_path: Path) -> Path:
    """Where the screenshots go: ``docs/`` with ``LLMLOAD_UPDATE_SCREENSHOTS=1``, else ``tmp_path`` (a test run
    does not rewrite the committed images)."""
    return ROOT / "docs" if os.environ.get("LLMLOAD_UPDATE_SCREENSHOTS") == "1" else tmp_path


def _profile(tmp_path: Path) -> tuple[Path, Path, Path]:
    out, prof, truth = tmp_path / "runs", tmp_path / "p.yaml", tmp_path / "truth.jsonl"
    prof.write_text(PROFILE % {"out": out})
    return out, prof, truth


def test_llm_view_single_process(tmp_path: Path) -> None:
    from playwright.sync_api import sync_playwright

    chromium = require_browser()
    out, prof, truth = _profile(tmp_path)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    args = ["--web-host", "127.0.0.1", "--web-port", str(port)]  # the profile is picked in the form
    with locust(args, tmp_path, tmp_path / "locust.log", {"LLMLOAD_SIM_ARGS": f"--truth-log {truth}"}), \
            sync_playwright() as pw:
        wait_until(lambda: get_json(base + "/llm/data.json"), 60, "the web UI")
        run_flow(pw, chromium, base, out, truth, shot_dir(tmp_path) / "webui-llm-view.png", prof)
    assert "Traceback" not in (tmp_path / "locust.log").read_text()


def test_llm_view_master_and_two_workers(tmp_path: Path) -> None:
    from playwright.sync_api import sync_playwright

    chromium = require_browser()
    out, prof, truth = _profile(tmp_path)
    port, mport = free_port(), free_port()
    base = f"http://127.0.0.1:{port}"
    margs = ["--web-host", "127.0.0.1", "--web-port", str(port), "--master",
             "--master-bind-host", "127.0.0.1", "--master-bind-port", str(mport)]
    wargs = ["--worker", "--master-host", "127.0.0.1", "--master-port", str(mport)]
    log = tmp_path / "locust.log"
    with locust(margs, tmp_path, log, {"LLMLOAD_SIM_ARGS": f"--truth-log {truth}"}), \
            locust(wargs, tmp_path, tmp_path / "worker1.log") as w1, \
            locust(wargs, tmp_path, tmp_path / "worker2.log"), sync_playwright() as pw:
        wait_until(lambda: get_json(base + "/llm/data.json"), 60, "the web UI")
        view = run_flow(pw, chromium, base, out, truth, None, prof, workers=2)
        # a worker that dies is shown
        w1.send_signal(signal.SIGKILL)
        w1.wait(timeout=10)
        wait_until(lambda: view.locator('#workers tbody tr[data-dead="1"]').count() == 1, 30,
                   "the killed worker flagged dead on the LLM view")
        assert view.locator('#workers tbody tr[data-dead="0"]').count() == 1
        view.screenshot(path=str(shot_dir(tmp_path) / "webui-llm-view-workers.png"), full_page=True)
    for name in ("locust.log", "worker2.log"):
        assert "Traceback" not in (tmp_path / name).read_text(), name



def test_ctrl_c_during_a_run_started_in_the_browser(tmp_path: Path) -> None:
    """The browser starts a fixed run from the form (profile path, mode, users, max_tokens); Ctrl-C (SIGINT) to
    the Locust process while requests are in flight: the view shows the stop ("draining…" / "writing report…"),
    then the process gone; records = requests the simulator completed, the report written, exit code 0 (an
    interrupted run whose report was written exits like a finished one), no traceback."""
    from playwright.sync_api import sync_playwright

    chromium = require_browser()
    out, prof, truth = _profile(tmp_path)
    prof.write_text(prof.read_text().replace("time_scale: 0.25", "time_scale: 1.0"))  # requests of seconds
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log = tmp_path / "locust.log"
    args = ["--web-host", "127.0.0.1", "--web-port", str(port)]
    with locust(args, tmp_path, log, {"LLMLOAD_SIM_ARGS": f"--truth-log {truth}"}) as proc, \
            sync_playwright() as pw:
        wait_until(lambda: get_json(base + "/llm/data.json"), 60, "the web UI")
        browser = pw.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        ui = browser.new_page(viewport={"width": 1400, "height": 900})
        view = browser.new_page(viewport={"width": 1500, "height": 1250})
        view.goto(base + "/llm/")
        done = start_from_form(ui, base, {"profile": str(prof), "mode": "fixed", "userCount": "3",
                                          "spawnRate": "3", "maxTokens": "1500"})
        assert {"profile", "mode", "userCount", "maxTokens"} <= set(done), done
        run_dir = wait_until(lambda: next(iter(p for p in out.iterdir() if p.is_dir()), None) if out.exists()
                             else None, 30, "the run directory")
        # the fixed step runs and some of its requests completed: 3 users, each always in a request
        wait_until(lambda: view.locator("#current-row tr").count() and number(view.locator(
            '#current-row td[data-key="completed"]').first.inner_text()), 90, "completed requests of the step")
        assert json.loads((run_dir / "run.json").read_text())["mode"] == "fixed"
        t_sig = time.time()
        proc.send_signal(signal.SIGINT)
        # the drain and the report, shown while they go on (the web UI answers until the process exits)
        wait_until(lambda: view.locator("#meta-stopping").count(), 30, "the view's stopping state", every=0.2)
        assert proc.wait(timeout=90) == 0
        wait_until(lambda: view.locator('body[data-status="unreachable"]').count(), 10, "the view: process gone")
        assert "does not answer" in view.locator("#error").inner_text()
    m = json.loads((run_dir / "run.json").read_text())
    assert m["status"] == "interrupted" and m["stop_cause"] == "sigint" and m.get("cut_off") is None, m
    recs = records(run_dir)
    wait_until(lambda: truth_completed(truth) >= len(recs), 10, "the simulator's truth log")
    assert len(recs) == truth_completed(truth) > 3 and all(r["ok"] for r in recs)
    assert {r["max_tokens"] for r in recs if r["phase"] != "warmup"} == {1500}  # the form's value
    drained = [r for r in recs if r["start_wall"] < t_sig < r["start_wall"] + r["e2e"]]
    assert drained, "no request was in flight at the Ctrl-C"  # in flight then, finished and recorded
    for f in ("report.md", "report.json", "report.html"):
        assert (run_dir / f).exists(), f
    assert json.loads((run_dir / "report.json").read_text())["status"] == "interrupted"
    text = log.read_text()
    assert "Traceback" not in text and "run directory is closed" not in text
    print("Ctrl-C in the browser: records", len(recs), "simulator completed", truth_completed(truth))


def test_llm_view_processes_two(tmp_path: Path) -> None:
    """Locust's own ``--processes 2`` (one master, two forked worker processes): the view shows both workers
    live, the sweep started in the form runs on both, the view's figures = the report engine's over the merged
    records (1 %), records = requests the simulator completed after Stop; Ctrl-C then exits 0 without a
    traceback."""
    from playwright.sync_api import sync_playwright

    chromium = require_browser()
    out, prof, truth = _profile(tmp_path)
    port, mport = free_port(), free_port()
    base = f"http://127.0.0.1:{port}"
    log = tmp_path / "locust.log"
    args = ["--web-host", "127.0.0.1", "--web-port", str(port), "--processes", "2",
            "--master-bind-host", "127.0.0.1", "--master-bind-port", str(mport), "--master-port", str(mport)]
    with locust(args, tmp_path, log, {"LLMLOAD_SIM_ARGS": f"--truth-log {truth}"}) as proc, \
            sync_playwright() as pw:
        wait_until(lambda: (get_json(base + "/worker-count") or {}).get("worker_count") == 2, 90, "2 workers")
        run_flow(pw, chromium, base, out, truth, None, prof, workers=2)
        [run_dir] = [p for p in out.iterdir() if p.is_dir()]
        main = [r for r in records(run_dir) if r["phase"] == "step"]
        assert len({r["user"].split(":")[0] for r in main}) == 2  # both worker processes sent load
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) == 0
    assert "Traceback" not in log.read_text()
