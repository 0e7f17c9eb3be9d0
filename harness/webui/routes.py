"""The LLM view's routes on Locust's Flask app, all under ``<web_base_path>/llm`` and behind ``--web-login`` when
it is on (``web_ui.auth_required_if_enabled``):

* ``/llm/`` the page (:file:`static/llm.html`, its script and style from ``/llm/static/<name>``: fixed names);
* Locust's own page (``/``) gets two ``<script>`` s: :file:`static/locust-ui.js` (Locust's Edit dialog closes
  whatever ``/swarm`` answers, so a refused edit's one-line answer is shown in a banner there) and
  :file:`static/llm-link.js` (the "LLM view" named in the LLM tab's last row made a link to the page);
* ``/llm/data.json[?run=<run_id>]`` the figures it polls every 2 s (:func:`harness.webui.view.payload`);
* ``/llm/download/<run_id>/<name>`` a run's file (:mod:`harness.webui.downloads`: known runs, fixed names).

Locust's own UI gets an "LLM" tab (a table of the headline figures per step, the same rows, injected into the
polled ``/stats/requests`` answer as ``extended_stats``) and a link to the page in its "Download Data" tab
(``extended_csv_files``, the one place Locust's UI renders a link of ours).
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

from flask import Blueprint, Response, abort, jsonify, make_response, request

from harness.report.catalogue import FIGURES, Flag, display, hours_text, label_text
from harness.report.model import Report
from harness.report.realtime import in_real_time
from harness.webui.cache import ReportCache, current_row
from harness.webui.downloads import FIGURES_ZIP, FILES, MIME, figures_zip, find_run
from harness.webui.runs import live, run_dirs, stopping, workers
from harness.webui.view import payload

__all__ = ["STATIC", "TAB_COLUMNS", "install_routes", "tab_rows"]

#: Files served from ``/llm/static/`` (nothing else is).
STATIC = {"llm.js": "application/javascript", "llm.css": "text/css", "locust-ui.js": "application/javascript",
          "llm-link.js": "application/javascript"}
#: The catalogued figures of the Locust "LLM" tab, between the step label and hours to the first N.
TAB_KEYS = ("concurrency", "completed", "errors", "output_tps", "ttft_p50_s", "ttft_p99_s", "ttfat_p50_s",
            "truncated_pct", "client_cpu_share_max", "client_ttft_error_bound_s")
#: The Locust "LLM" tab's table: (key, title); titles are the catalogue's short headers.
TAB_COLUMNS = (
    ("label", "step"), *((k, FIGURES[k].short_header) for k in TAB_KEYS), ("hours", FIGURES["hours"].short_header),
)


def _static(name: str) -> str:
    return resources.files("harness.webui").joinpath("static", name).read_text(encoding="utf-8")


def tab_rows(rep: Report | None) -> list[dict[str, str]]:
    """Rows of the Locust "LLM" tab from the cached typed report (None: no report yet): its step rows, the step in
    progress last (label ``… (so far)``, :func:`harness.webui.cache.current_row`), then a row naming the run and
    the target it measured and pointing to the full page.

    Every cell is the catalogue's display text (:mod:`harness.report.catalogue`), as the report shows it: labels
    with their † / ‡ / § marks, hours to the first N as ``N=100,000: 27.1 h (25.0–30.2)``. A compressed-time run
    (simulator ``time_scale`` ≠ 1) is shown in real-time equivalents (:func:`harness.report.realtime.in_real_time`,
    as the terminal and the LLM view show it), and the last row says so once."""
    steps = rep.steps if rep is not None else []
    cur = current_row(rep) if rep is not None else None
    ts = (rep.time_scale if rep is not None else None) or 1.0
    out = []
    for r in steps:
        shown = in_real_time(r, ts)
        h = shown.hours[0] if shown.hours else None
        out.append({
            "label": label_text(r) + (" (so far)" if r is cur else ""),
            **{k: display(shown, k) for k in TAB_KEYS},
            "hours": f"N={h.n:,}: {hours_text(h)}" if h else "–",
        })
    target = rep.target.get("base_url") if rep is not None else None
    measured = (f"run {rep.run_id} measured {target} (Locust's header shows the Host field as "
                "typed); ") if rep is not None and target else ""
    compressed = (f"{Flag.COMPRESSED_TIME.named} (simulator time_scale = {ts:g}): real-time "
                  f"equivalents (durations ÷ {ts:g}, rates × {ts:g}); ") if ts != 1.0 else ""
    out.append({"label": f"{measured}{compressed}all figures, charts and downloads: the LLM view (/llm/)"})
    return out


def install_routes(environment: Any, web_ui: Any) -> None:
    """Register the view's routes and Locust-UI hooks on ``web_ui`` (a ``locust.web.WebUI``)."""
    opts = environment.parsed_options
    base = (getattr(opts, "web_base_path", None) or "").rstrip("/")
    url = f"{base}/llm"
    cache = ReportCache()
    seen: set[str] = set()
    bp = Blueprint("llmload_view", __name__, url_prefix=url)
    auth = web_ui.auth_required_if_enabled

    def data_for(run_id: str | None) -> dict[str, Any]:
        runs = run_dirs()
        known = runs.all()
        shown = find_run(known, run_id) if run_id else (known[0] if known else None)
        entry = cache.get(shown, wait_s=60.0) if shown is not None else None  # waits only for a run's first report
        return payload(runs, entry, shown, workers(environment.runner, seen), url, stopping(environment.runner),
                       live(environment.runner))

    @bp.route("/")
    @auth
    def page() -> Response:
        html = _static("llm.html").replace("{{BASE}}", url)
        resp = make_response(html)
        resp.headers["Content-Type"] = "text/html; charset=utf-8"
        return resp

    @bp.route("/static/<name>")
    @auth
    def static(name: str) -> Response:
        if name not in STATIC:
            abort(404)
        resp = make_response(_static(name))
        resp.headers["Content-Type"] = STATIC[name]
        return resp

    @bp.route("/data.json")
    @auth
    def data() -> Response:
        resp = jsonify(data_for(request.args.get("run")))
        resp.headers["Cache-Control"] = "no-store"
        return resp

    @bp.route("/download/<run_id>/<name>")
    @auth
    def download(run_id: str, name: str) -> Response:
        if name not in FILES and name != FIGURES_ZIP:
            abort(404)
        run = find_run(run_dirs().all(), run_id)
        if run is None:
            abort(404)
        if name == FIGURES_ZIP:
            body = figures_zip(run)
        else:
            p = Path(run) / name
            if not p.is_file():
                abort(404)
            body = p.read_bytes()
        resp = make_response(body)
        resp.headers["Content-Type"] = MIME[name]
        resp.headers["Content-Disposition"] = f'attachment; filename="{run.name}-{name}"'
        resp.headers["Cache-Control"] = "no-store"
        return resp

    web_ui.app.register_blueprint(bp)

    stats_path = f"{base}/stats/requests"
    index_path = f"{base}/"
    ui_script = (f'<script src="{url}/static/locust-ui.js"></script>'
                 f'<script src="{url}/static/llm-link.js" data-href="{url}/"></script>').encode()

    @web_ui.app.after_request
    def _locust_page_script(response: Response) -> Response:
        """Locust's page gets :file:`static/locust-ui.js` (a refused Edit's message shown in a banner) and
        :file:`static/llm-link.js` (the "LLM view" named in its LLM tab made a link to the view)."""
        if request.path != index_path or response.status_code != 200 or response.mimetype != "text/html":
            return response
        try:
            body = response.get_data()
            if b"</body>" in body and ui_script not in body:
                response.set_data(body.replace(b"</body>", ui_script + b"</body>", 1))
        except Exception:  # never break Locust's own UI
            return response
        return response

    @web_ui.app.after_request
    def _extend_stats(response: Response) -> Response:
        if request.path != stats_path or response.status_code != 200 or response.mimetype != "application/json":
            return response
        try:
            body = json.loads(response.get_data())
            runs = run_dirs()
            known = runs.all()
            entry = cache.get(known[0], wait_s=0.0) if known else None
            body["extended_stats"] = [{"key": "llm", "data": tab_rows(entry.report if entry is not None else None)}]
            response.set_data(json.dumps(body))
        except Exception:  # never break Locust's own UI
            return response
        return response

    web_ui.template_args["extended_tabs"] = [{"title": "LLM", "key": "llm"}]
    web_ui.template_args["extended_tables"] = [
        {"key": "llm", "structure": [{"key": k, "title": t} for k, t in TAB_COLUMNS]}
    ]
    web_ui.template_args["extended_csv_files"] = [
        {"href": f"{url}/", "title": "LLM view (live per-step figures, charts; records and report downloads)"}
    ]
