"""Render this folder's dashboard (dashboards/llmload.json) from its own PromQL against a real Prometheus, as PNGs.

Not Grafana and not a screenshot: matplotlib drawings of the query results, captioned as such
(the harness.panels package does the work; this is ``llmload panels`` with this dashboard as the default).

    .venv/bin/python grafana/render_panels.py --prometheus http://127.0.0.1:9090 --last 15m --out panels
    .venv/bin/python grafana/render_panels.py --help

scripts/render_dashboard.sh runs the demo sweep against the simulator under a temporary Prometheus and renders
the README's images (docs/dashboard/) with it.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run from a checkout without the package installed
    sys.path.insert(0, str(ROOT))

from harness.panels import main  # noqa: E402

if __name__ == "__main__":
    args = sys.argv[1:]
    if not any(a == "--dashboard" or a.startswith("--dashboard=") for a in args):
        args = ["--dashboard", str(Path(__file__).resolve().parent / "dashboards" / "llmload.json"), *args]
    raise SystemExit(main(args))
