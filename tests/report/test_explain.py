"""Failures explained in the report: real failed requests (a loopback server answering 401 with a JSON body, 400
"maximum context length", 429 with Retry-After, an HTML 404) recorded, then per step and error class the count, the
top server messages and the hint in report.json (``steps[i].failures``), report.md / report.html and the terminal
summary; the echoed key never."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from harness.client import ChatClient
from harness.report import build_report
from harness.report.build import write_report
from harness.report.explain import class_line, step_failure_lines
from harness.report.html import render_html
from harness.report.model import load_report
from harness.report.render import render_markdown
from harness.report.summary import render_summary
from harness.result import RequestIdentity
from tests.failure_server import ECHOED_KEY, FailureServer
from tests.report.rundir import phase, rec, run_end, write_run

#: requests per case sent in step 1 (C=2)
PLAN = {"context": 3, "auth": 2, "throttle": 2, "html404": 1}


def _failed_records() -> list[dict[str, Any]]:
    """One record per planned request, its error fields as the client recorded them from the loopback server."""
    out = []
    with FailureServer() as fs:
        i = 0
        for case, n in PLAN.items():
            for _ in range(n):
                client = ChatClient(fs.url(case))
                try:
                    res = client.stream_chat({"model": "m", "messages": []}, RequestIdentity("p", None, "u1"))
                finally:
                    client.close()
                assert not res.ok
                out.append(rec("u1", 1, 1.0 + i, 0.1, ttft=None, ok=False, concurrency=2, tokens=0,
                               error_class=res.error_class, error_detail=res.error_detail,
                               http_status=res.http_status, retry_after_s=res.retry_after_s))
                i += 1
    return out


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    ok = [rec("u2", 1, 0.5 + k, 2.0, concurrency=2) for k in range(10)]
    return write_run(tmp_path_factory.mktemp("explain") / "run-1", ok + _failed_records(),
                     [phase("step", 1, 2, 0.0, 30.0), run_end(30.0)])


def test_report_json_has_failures_per_step_and_class(run_dir: Path) -> None:
    rep = build_report(run_dir)
    row = rep.steps[0]
    assert [(c.error_class, c.count) for c in row.failures] == [("http_4xx", 6), ("http_429", 2)]
    four = {m.message: m for m in row.failures[0].messages}
    ctx = next(m for k, m in four.items() if "maximum context length is 32768" in k)
    assert ctx.count == 3 and ctx.hint is not None and "lower max_tokens" in ctx.hint
    auth = four["HTTP 401: Incorrect API key provided: [redacted]."]
    assert auth.count == 2 and auth.hint is not None and "target.api_key_env" in auth.hint
    html = four["HTTP 404: HTML page"]
    assert html.hint is not None and "target.model" in html.hint
    throttle = row.failures[1].messages[0]
    assert throttle.message == "HTTP 429: Rate limit reached for requests"
    assert throttle.hint is not None and "Retry-After seen (3 s)" in throttle.hint
    text = rep.to_json()
    assert ECHOED_KEY not in text and "<!DOCTYPE" not in text
    back = load_report(_write(run_dir, text))  # typed on read
    assert back.steps[0].failures == row.failures


def _write(run_dir: Path, text: str) -> Path:
    path = run_dir / "report.json"
    path.write_text(text)
    return path


def test_report_md_html_and_terminal_show_messages_and_hints(run_dir: Path) -> None:
    rep = build_report(run_dir)
    md = render_markdown(rep)
    flat = " ".join(line.strip() for line in md.splitlines())
    assert "- Errors at C=2: http_429 ×2, http_4xx ×6 of the requests started in the step" in flat
    assert "- http_4xx ×6, top messages: - `HTTP 400: This model's maximum context length is 32768 tokens." in flat
    assert "- `HTTP 429: Rate limit reached for requests` ×2 → the server throttled the load: Retry-After seen (3 s)" \
        in flat
    summary = render_summary(rep, width=120)
    assert max(len(line) for line in summary.splitlines()) <= 120
    joined = " ".join(line.strip() for line in summary.splitlines())
    assert "Errors at C=2: http_429 ×2, http_4xx ×6 (requests started in the step). http_4xx ×6, top messages:" \
        in joined
    assert '"HTTP 401: Incorrect API key provided: [redacted]." ×2 → the server refused the credentials' in joined
    assert "lower max_tokens" in joined and "Retry-After seen (3 s)" in joined
    page = render_html(rep, [])
    assert "HTTP 404: HTML page" in page and "lower max_tokens" in page and "<h1>Not Found" not in page
    for text in (md, summary, page):
        assert ECHOED_KEY not in text
    assert step_failure_lines(rep.steps)[0] == f"C=2: {class_line(rep.steps[0].failures[0])}"


def test_written_report_files_carry_no_key(run_dir: Path) -> None:
    write_report(run_dir)
    for name in ("report.json", "report.md"):
        assert ECHOED_KEY not in (run_dir / name).read_text(), name
    assert json.loads((run_dir / "report.json").read_text())["steps"][0]["failures"][0]["error_class"] == "http_4xx"


def test_web_llm_view_lists_the_failures_explained(run_dir: Path) -> None:
    """The LLM view's JSON carries one line per step and error class with the messages and hints; the page shows
    them in its "Failures explained" list."""
    from harness.webui.cache import Entry
    from harness.webui.runs import RunDirs
    from harness.webui.view import payload

    rep = build_report(run_dir)
    d = payload(RunDirs(None, (run_dir,), "finished"), Entry(report=rep), run_dir, [], "/llm")
    assert d["failures"] == step_failure_lines(rep.steps)
    assert d["failures"][0].startswith("C=2: http_4xx ×6: ") and "lower max_tokens" in d["failures"][0]
    assert "Retry-After seen (3 s)" in d["failures"][1]
    assert ECHOED_KEY not in json.dumps(d)
    static = Path(__file__).resolve().parents[2] / "harness" / "webui" / "static"
    assert 'id="failures"' in (static / "llm.html").read_text() and "d.failures" in (static / "llm.js").read_text()


def test_grouped_in_polars_equals_per_record() -> None:
    """The report's grouping (details differing only in digits or uuids parsed once) gives what the per-record
    summary gives: counts, first messages, order, hints with every Retry-After value seen."""
    import polars as pl

    from harness.failures import summarise
    from harness.report.exprs import failures_by_class

    rows: list[tuple[str | None, str | None, int | None, float | None]] = []
    for i in range(40):
        rows.append(("http_4xx", f'HTTP 400: {{"message":"request {i}: context length is 32768, asked {900 + i}"}}',
                     400, None))
        if i % 3 == 0:
            rows.append(("http_429", f"HTTP 429 retry-after={i % 2 + 1}: slow down", 429, float(i % 2 + 1)))
        if i % 5 == 0:
            rows.append(("http_5xx", f'HTTP 500: {{"detail":"engine {i} failed, id 9f8e7d6c-1a2b-4c3d-8e9f-'
                         f'{i:012d}"}}', 500, None))
        if i % 7 == 0:
            rows.append((None, None, None, None))
            rows.append(("timeout_idle", f"no token for {i}.5 s", None, None))
    frame = pl.DataFrame(rows, schema={"error_class": pl.String, "error_detail": pl.String,
                                       "http_status": pl.Int64, "retry_after_s": pl.Float64}, orient="row")
    want = [{"error_class": c.error_class, "count": c.count,
             "messages": [{"message": m.message, "count": m.count, "hint": m.hint} for m in c.messages]}
            for c in summarise(rows)]
    assert failures_by_class(frame) == want
    assert [c["error_class"] for c in want] == ["http_4xx", "http_429", "http_5xx", "timeout_idle", "unknown"]
    assert "Retry-After seen (1 s, 2 s)" in str(want[1]["messages"])
