#!/usr/bin/env python3
"""Run each shipped profile against the built-in simulator and print (or write) the docs' report excerpts.

Every excerpt of the "Shipped profiles" docs page (``docs/guides/shipped-profiles.md``; the name of this script
is from when that section was in the README) comes from this script: for each entry of
:data:`EXCERPTS` it writes a copy of the profile with the stated shortened durations (:attr:`Excerpt.overrides`;
for the search also fewer probes; nothing else changed, but a relative ``dataset.path`` is made absolute so the
copy finds the profile's data file), runs

    .venv/bin/locust -f locustfiles/k26.py --headless --profile <copy> --output-dir <tmp> --metrics-port 0

(no ``--host``: the built-in simulator), and cuts the excerpt out of the run's ``report.md``: whole tables and
paragraphs, verbatim. The run's ``report.json`` is kept as ``tests/data/excerpts/<name>.report.json`` so
``tests/test_docs.py`` can re-render it with the current report code and check the page's excerpt against what
the report renders now: the same tables with the same column headers, and the same text (the kept run fixes the
numbers, which vary from run to run). After a change of the report's format, ``--rerender --write`` brings the
excerpts up to date without a run.

Usage::

    .venv/bin/python scripts/readme_excerpts.py                 # run all, print the excerpts
    .venv/bin/python scripts/readme_excerpts.py soak rate-sweep # only these
    .venv/bin/python scripts/readme_excerpts.py --write         # also replace the page's blocks and the fixtures
    .venv/bin/python scripts/readme_excerpts.py --from-run soak=runs/20261201-203000-soak --write   # no new run
    .venv/bin/python scripts/readme_excerpts.py --rerender --write   # the kept runs, rendered by the current code

One run at a time, each about 1.5-3.5 minutes of wall time on 2 shared cores (~16 min for all six).
"""

from __future__ import annotations

import argparse
import copy
import json
import re
import subprocess
import sys
import tempfile
import textwrap
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from harness.report.model import Report, load_report
from harness.report.render import render_markdown

ROOT = Path(__file__).resolve().parents[1]
#: The docs page holding the excerpts (between :data:`BEGIN` / :data:`END` markers).
PAGE = ROOT / "docs" / "guides" / "shipped-profiles.md"
FIXTURES = ROOT / "tests" / "data" / "excerpts"


@dataclass(frozen=True)
class Part:
    """One piece of a report.md section: its tables (0-based indices among the section's tables; None: all of
    them, or none when only ``prose`` is given) and the paragraphs or bullets of the section whose text matches
    ``prose`` (a regex; None: none)."""

    section: str
    tables: tuple[int, ...] | None = None
    prose: str | None = None


@dataclass(frozen=True)
class Excerpt:
    """A docs excerpt: the profile run, the shortened settings, and the report parts shown."""

    name: str
    profile: str
    overrides: dict[str, Any]
    parts: tuple[Part, ...]
    documents: tuple[str, ...] = field(default=())  # further shipped profiles this excerpt documents

    def files(self) -> tuple[str, ...]:
        """The profile files (repository paths) the excerpt documents."""
        return (self.profile, *self.documents)


EXCERPTS: tuple[Excerpt, ...] = (
    Excerpt("k26", "profiles/sim-k26.yaml", {}, (
        Part("Real-time equivalents", tables=(0, 1), prose=r"^Hours to N in real time"),
        Part("Per step", tables=(), prose=r"^- ‡"),
    ), documents=("profiles/k26.yaml",)),
    Excerpt("soak", "profiles/soak.yaml", {"steps": {"duration": 150}, "report": {"slice_s": 15}}, (
        Part("Soak"),
        Part("Slices of C=16"),
    )),
    Excerpt("rate-sweep", "profiles/rate-sweep.yaml", {"steps": {"duration": 20}}, (
        Part("Open-loop rates"),
        Part("Notes", prose=r"TARGET RATE|waited for a free user"),
    )),
    Excerpt("synthetic-data", "profiles/synthetic-data.yaml", {}, (
        Part("Hours to N usable samples", tables=(0,)),
    )),
    # C=1 needs >= 10 requests in its window (E2E ~4 s on the demo preset): 45 s steps, and 4 of the 8 probes
    Excerpt("slo-search", "profiles/slo-search.yaml", {"steps": {"duration": 45}, "search": {"max_steps": 4}}, (
        Part("SLO capacity search", tables=(0,), prose=r"^Over "),
    )),
    # high effort at C=32 takes ~10 s a request: 25 s steps leave a steady window after the first wave
    Excerpt("thinking-sweep", "profiles/thinking-sweep.yaml", {"steps": {"duration": 25}}, (
        Part("Settings (sweep axes)"),
    )),
)

BY_NAME = {e.name: e for e in EXCERPTS}


def merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """``base`` with ``over`` deep-merged into it (nested dicts merged, other values replaced); a new dict."""
    out = copy.deepcopy(base)
    for k, v in over.items():
        out[k] = merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else copy.deepcopy(v)
    return out


def derived_profile(ex: Excerpt, into: Path) -> Path:
    """Write ``ex.profile`` with ``ex.overrides`` applied to ``into/<file name>`` (a relative ``dataset.path``
    made absolute against the original's directory); returns the written path."""
    src = ROOT / ex.profile
    data = merge(yaml.safe_load(src.read_text(encoding="utf-8")), ex.overrides)
    ds = data.get("dataset")
    if isinstance(ds, dict) and ds.get("path") and not Path(ds["path"]).is_absolute():
        ds["path"] = str((src.parent / ds["path"]).resolve())
    out = into / src.name
    out.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True), encoding="utf-8")
    return out


def run_profile(ex: Excerpt, workdir: Path, timeout_s: float = 900.0) -> tuple[Path, float]:
    """Run the shortened profile headless against the built-in simulator; returns (run directory, wall seconds).

    Raises:
        RuntimeError: Locust exited non-zero or wrote no report.md.
    """
    prof = derived_profile(ex, workdir)
    out = workdir / "runs"
    cmd = [str(ROOT / ".venv" / "bin" / "locust"), "-f", str(ROOT / "locustfiles" / "k26.py"), "--headless",
           "--profile", str(prof), "--output-dir", str(out), "--metrics-port", "0"]
    t0 = time.monotonic()
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout_s)
    wall = time.monotonic() - t0
    runs = sorted(out.glob("*/report.md"))
    if proc.returncode != 0 or not runs:
        raise RuntimeError(f"{ex.name}: locust exited {proc.returncode}, reports {runs}:\n{proc.stderr[-3000:]}")
    return runs[-1].parent, wall


def sections(md: str) -> dict[str, list[str]]:
    """report.md's sections by heading text (``## X`` and ``### X``), each its lines up to the next heading."""
    out: dict[str, list[str]] = {}
    cur: list[str] | None = None
    for line in md.splitlines():
        m = re.match(r"^#{2,3} (.+)$", line)
        if m:
            cur = out.setdefault(m.group(1).strip(), [])
            continue
        if cur is not None:
            cur.append(line)
    return out


def blocks(lines: list[str]) -> list[list[str]]:
    """A section's blocks: tables (consecutive ``|`` lines), bullets (with their indented continuation lines) and
    paragraphs, in order."""
    out: list[list[str]] = []
    for line in lines:
        if not line.strip():
            out.append([])
            continue
        table = line.startswith("|")
        new_item = line.startswith("- ")
        if out and out[-1] and (out[-1][0].startswith("|") == table) and not new_item:
            out[-1].append(line)
        else:
            out.append([line])
    return [b for b in out if b]


def is_table(block: list[str]) -> bool:
    """Whether a block is a Markdown table."""
    return block[0].startswith("|")


def cut(md: str, part: Part) -> list[list[str]]:
    """The blocks of ``part`` from a report.md, verbatim.

    Raises:
        KeyError: the report has no such section.
    """
    sec = sections(md)[part.section]
    bl = blocks(sec)
    tables = [b for b in bl if is_table(b)]
    if part.tables is not None:
        picked = [tables[i] for i in part.tables]
    else:  # all tables, unless only prose was asked for
        picked = tables if part.prose is None else []
    prose = [b for b in bl if not is_table(b) and part.prose and re.search(part.prose, " ".join(b), re.M)]
    # keep the report's order
    return [b for b in bl if any(b is p for p in picked) or any(b is p for p in prose)]


def describe(ex: Excerpt, wall_s: float, started: float | None) -> str:
    """The paragraph stating exactly what was run (wrapped at 120 columns, as the docs' prose): the profile,
    the shortened settings, the command, ``wall_s`` (seconds) and the day of ``started`` (epoch s, UTC)."""
    flat = ", ".join(f"`{k}.{kk}: {vv}`" for k, v in ex.overrides.items() for kk, vv in v.items())
    changed = f" with {flat} (nothing else changed)" if flat else " as shipped"
    day = time.strftime("%Y-%m-%d", time.gmtime(started)) if started else "?"
    command = f"`.venv/bin/python scripts/readme_excerpts.py {ex.name}`"
    text = (f"Simulator run of `{ex.profile}`{changed}: {command} (`locust -f locustfiles/k26.py --headless "
            f"--profile <that copy>`, no `--host`: the built-in simulator), {wall_s / 60:.1f} min wall on 2 shared "
            f"cores, {day}.")
    return textwrap.fill(text, width=120, break_long_words=False, break_on_hyphens=False)


def excerpt_text(ex: Excerpt, md: str, wall_s: float, started: float | None) -> str:
    """The docs block of one excerpt from its run's report.md text: what was run (:func:`describe`), then the
    report's parts, each under its section name.

    Raises:
        RuntimeError: a part is empty in this report.
    """
    out = [describe(ex, wall_s, started), ""]
    for part in ex.parts:
        got = cut(md, part)
        if not got:
            raise RuntimeError(f"{ex.name}: nothing of {part} in its report")
        out += [f"From the report's \"{part.section}\":", ""]
        for b, nxt in zip(got, [*got[1:], None], strict=True):
            bullets = b[0].startswith("- ") and nxt is not None and nxt[0].startswith("- ")
            out += b if bullets else [*b, ""]  # consecutive bullets stay one list
    return "\n".join(out).rstrip() + "\n"


def excerpt_of_report(ex: Excerpt, rep: Report) -> str:
    """The docs block of one excerpt from its run's report (``report.json`` read by
    :func:`harness.report.model.load_report`), rendered by the current report code; the wall time stated is the
    report's ``duration_s`` (first record to run end)."""
    return excerpt_text(ex, render_markdown(rep), float(rep.duration_s or 0.0), rep.start_wall)


BEGIN = "<!-- excerpt {name} begin: written by scripts/readme_excerpts.py -->"
END = "<!-- excerpt {name} end -->"


def replace_block(readme: str, name: str, body: str) -> str:
    """The page's text (``readme``) with the block between excerpt ``name``'s markers replaced by ``body``.

    Raises:
        KeyError: the page has no markers for ``name``.
    """
    begin, end = BEGIN.format(name=name), END.format(name=name)
    i, j = readme.find(begin), readme.find(end)
    if i < 0 or j < i:
        raise KeyError(f"{PAGE.name} has no {begin!r} … {end!r} markers")
    return readme[: i + len(begin)] + "\n\n" + body + "\n" + readme[j:]


def main(argv: list[str] | None = None) -> int:
    """Run the excerpts named (all by default), print them; ``--write`` updates the docs page and the fixtures."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("names", nargs="*", help=f"excerpts to run [all: {', '.join(BY_NAME)}]")
    ap.add_argument("--write", action="store_true", help="replace the docs page's blocks and tests/data/excerpts/")
    ap.add_argument("--keep", metavar="DIR", type=Path,
                    help="run in DIR/<name>/ and keep the runs (default: a temporary directory, removed)")
    ap.add_argument("--from-run", action="append", default=[], metavar="NAME=RUN_DIR",
                    help="use an existing run directory of that excerpt's shortened profile instead of running")
    ap.add_argument("--rerender", action="store_true",
                    help="no run: re-render the kept report.json of tests/data/excerpts/ with the current report "
                         "code (after a change of the report's format; the numbers stay that run's)")
    args = ap.parse_args(argv)
    given = dict(s.split("=", 1) for s in args.from_run)
    names = args.names or ([*given] if given else [*BY_NAME])
    unknown = [n for n in [*names, *given] if n not in BY_NAME]
    if unknown:
        ap.error(f"unknown excerpts {unknown}; known: {', '.join(BY_NAME)}")
    for name in names:
        ex = BY_NAME[name]
        with tempfile.TemporaryDirectory(prefix=f"excerpt-{name}-") as tmp:
            work = Path(tmp) if args.keep is None else args.keep / name
            work.mkdir(parents=True, exist_ok=True)
            if args.rerender:
                src = FIXTURES / f"{name}.report.json"
            else:
                if name in given:
                    run_dir = Path(given[name])
                else:
                    run_dir, wall = run_profile(ex, work)
                    print(f"{name}: ran in {wall:.0f} s wall: {run_dir}", file=sys.stderr, flush=True)
                src = run_dir / "report.json"
            rep = json.loads(src.read_text(encoding="utf-8"))  # the dict too: written back key for key below
            typed = load_report(src)
            if not args.rerender and render_markdown(typed) != (run_dir / "report.md").read_text(encoding="utf-8"):
                raise RuntimeError(f"{name}: {src} does not render to its report.md (report code changed since?)")
            body = excerpt_of_report(ex, typed)
            print(f"===== {name} ({src})\n{body}", flush=True)
            if args.write:
                PAGE.write_text(replace_block(PAGE.read_text(encoding="utf-8"), name, body), encoding="utf-8")
                FIXTURES.mkdir(parents=True, exist_ok=True)
                # key order kept: the report renders dict entries in their order (e.g. a search's SLO columns)
                (FIXTURES / f"{name}.report.json").write_text(json.dumps(rep, indent=1, ensure_ascii=False) + "\n",
                                                              encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
