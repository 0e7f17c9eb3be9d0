"""The LLM view of the Locust web UI: a live page of the report's figures per step, charts and downloads.

Imported by :mod:`harness.locust` (one line); its ``init`` listener does nothing unless the process has a web UI
(``environment.web_ui``: not on workers, not with ``--headless``).

Why a page of our own (``<web_base_path>/llm/``) and not only Locust's tabs: Locust 2.47's extension points for
its React UI are ``extended_tabs`` / ``extended_tables`` (plain text tables, rows polled through
``/stats/requests``) and ``extended_csv_files`` (links in the Download Data tab). Charts inside Locust's UI need a
build of its React library, which is no longer published to npm (2026): it would mean building Locust's web UI
from source and serving it with ``--build-path``, pinned to one Locust version. So the view is a page served by
Locust's own Flask app (same host, port, ``--web-base-path`` and ``--web-login``), plain JavaScript drawing SVG,
nothing fetched from outside. Locust's UI gets both of its extension points: an "LLM" tab with the headline figures
per step (the same rows) and a link to the page in its Download Data tab.

Every figure is the report's: the page's JSON is ``harness.report.build.build_report`` of the run directory
(:mod:`harness.webui.cache`, in a child process so the load generator's loop is not held; recomputed at most
every ``max(2 s, 3 × its last compute time)``). The "current window" row is the report's row of the step in
progress (:func:`harness.webui.cache.current_row`). Percentiles are the report's: p50 / p90 / p95 / p99 for TTFT and
TTFAT, p50 / p95 / p99 for inter-chunk gaps. On a master the records of every worker are written
by the master, so the figures are the merged ones; the page lists the workers, dead ones flagged.

Modules: :mod:`~harness.webui.runs` (the one adapter onto the process's runs and workers),
:mod:`~harness.webui.compute` (the child process), :mod:`~harness.webui.cache`, :mod:`~harness.webui.downloads`,
:mod:`~harness.webui.view` (the JSON), :mod:`~harness.webui.routes` (Flask routes and Locust-UI hooks),
:mod:`~harness.webui.auth` (``--web-login``: user and password from the environment).
"""

from __future__ import annotations

from typing import Any

__all__ = ["on_init"]


def on_init(environment: Any, **_: Any) -> None:
    """Install the LLM view's routes when this process serves the web UI (no-op otherwise)."""
    web_ui = getattr(environment, "web_ui", None)
    if web_ui is None:
        return
    from harness.webui.routes import install_routes

    if getattr(web_ui, "web_login", False):
        import logging

        from harness.webui.auth import AuthSetupError, install_login

        base = (getattr(environment.parsed_options, "web_base_path", None) or "").rstrip("/")
        try:
            install_login(web_ui, base)
        except AuthSetupError as e:
            logging.getLogger(__name__).error("llmload: %s", e)
            raise SystemExit(2) from None
    install_routes(environment, web_ui)
