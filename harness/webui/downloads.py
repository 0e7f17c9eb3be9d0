"""The files of a run the LLM view offers for download, by fixed name, from known run directories only.

A download is ``<url>/download/<run_id>/<name>``: ``run_id`` must be the directory name of one of this process's
runs (:func:`harness.webui.runs.run_dirs`) and ``name`` one of :data:`FILES`, so no path from the request ever
reaches the file system. ``figures.zip`` is the run's ``figures/*.png`` zipped on the fly.
"""

from __future__ import annotations

import io
import zipfile
from pathlib import Path
from typing import Any

__all__ = ["FIGURES_ZIP", "FILES", "MIME", "figures_zip", "files_of", "find_run"]

#: Downloadable files of a run directory, in the order listed on the page.
FILES = ("records.jsonl", "phases.jsonl", "run.json", "report.md", "report.json", "report.html", "steps.csv")
FIGURES_ZIP = "figures.zip"
MIME = {
    "records.jsonl": "application/x-ndjson",
    "phases.jsonl": "application/x-ndjson",
    "run.json": "application/json",
    "report.md": "text/markdown; charset=utf-8",
    "report.json": "application/json",
    "report.html": "text/html; charset=utf-8",
    "steps.csv": "text/csv; charset=utf-8",
    FIGURES_ZIP: "application/zip",
}


def _figures(run_dir: Path) -> list[Path]:
    d = run_dir / "figures"
    return sorted(p for p in d.glob("*.png") if p.is_file()) if d.is_dir() else []


def files_of(run_dir: Path, url: str) -> list[dict[str, Any]]:
    """The downloads of ``run_dir`` that exist now: ``[{"name", "href", "size"}]`` (size in bytes; None for the
    zip, built on request)."""
    out: list[dict[str, Any]] = []
    for name in FILES:
        p = run_dir / name
        if p.is_file():
            out.append({"name": name, "href": f"{url}/download/{run_dir.name}/{name}", "size": p.stat().st_size})
    if _figures(run_dir):
        out.append({"name": FIGURES_ZIP, "href": f"{url}/download/{run_dir.name}/{FIGURES_ZIP}", "size": None})
    return out


def find_run(known: list[Path], run_id: str) -> Path | None:
    """The known run directory named ``run_id``, or None (anything else, ``..`` and slashes included)."""
    return next((p for p in known if p.name == run_id), None)


def figures_zip(run_dir: Path) -> bytes:
    """``figures/*.png`` of ``run_dir`` as a zip (``figures/<name>.png`` inside)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for p in _figures(run_dir):
            z.write(p, f"figures/{p.name}")
    return buf.getvalue()
