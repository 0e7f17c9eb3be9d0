"""The HTML report and its figures on small synthetic runs: one self-contained file, the report's values as in
report.md, every figure embedded and written as a valid PNG, the figures' numbers from the columnar engine's
definitions (the frame the report's rows are computed from)."""

from __future__ import annotations

import base64
import io
import json
import logging
import math
import re
import sys
from pathlib import Path
from typing import Any

import matplotlib
import polars as pl
import pytest
from PIL import Image

from harness.report import build_report, write_report
from harness.report import charts as charts_mod
from harness.report.charts import CHART_NAMES, draw_charts
from harness.report.columns import load_frame_run
from harness.report.fmt import sig3
from harness.report.html import render_html, write_html
from harness.report.model import Report, StepRow
from harness.report.series import main_frame, output_tokens_binned, row_latency_sample, time_bin_s
from harness.report.tokens import window_tokens as _window_tokens
from tests.report.rundir import phase, rec, run_end, write_run

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _scenario(root: Path, meta: dict[str, Any] | None = None) -> Path:
    """Warm-up [0, 5), single [5, 35), C=2 [35, 95) (one error, one truncation), C=4 [95, 110) NOT steady."""
    records = [rec("w", -1, 0, 4, tokens=20)]
    t = 5.0
    for i in range(6):  # single stream: 5 s requests back to back
        records.append(rec("u1", 0, t, 5, ttft=0.2 + 0.01 * i, tokens=100 + 10 * i))
        t += 5
    for u, e2e in (("u1", 6.0), ("u2", 7.5)):
        t = 35.0
        for i in range(int(60 // e2e)):
            ok = not (u == "u2" and i == 3)
            records.append(rec(u, 1, t, e2e, ttft=0.4 + 0.02 * i, tokens=150 + 5 * i, ok=ok,
                               truncated=(u == "u1" and i == 2), concurrency=2))
            t += e2e
    for j in range(4):  # every first request ends after the step end: no steady window
        records.append(rec(f"u{j + 1}", 2, 95 + 0.1 * j, 16, ttft=1.0 + 0.1 * j, tokens=200, concurrency=4))
    phases = [phase("warmup", -1, 1, 0), phase("single", 0, 1, 5, 30), phase("step", 1, 2, 35, 60),
              phase("step", 2, 4, 95, 5), run_end(110)]
    return write_run(root, records, phases, meta)


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Report, str, str]:
    """(run dir, report, report.md, report.html) of the scenario after write_report."""
    root = _scenario(tmp_path_factory.mktemp("html") / "run")
    rep, md = write_report(root)
    return root, rep, md, (root / "report.html").read_text(encoding="utf-8")


def test_one_self_contained_file(written: tuple[Path, Report, str, str]) -> None:
    root, _, _, page = written
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    low = page.lower()
    for bad in ('src="http', "src='http", 'href="http', "href='http", "@import", "url(", "<script", "<link",
                "<iframe", "//cdn"):
        assert bad not in low, bad
    # every src is an embedded image, every href an anchor of the page itself
    assert set(re.findall(r'src="([a-z]+:[a-z/]+)', page)) == {"data:image/png"}
    for href in re.findall(r'href="([^"]*)"', page):
        assert href.startswith("#fig-") and f'id="{href[1:]}"' in page
    assert not (root / "report.html.tmp").exists()


def test_every_figure_embedded_and_written_as_png(written: tuple[Path, Report, str, str]) -> None:
    root, rep, _, page = written
    assert rep.time_scale == 1.0
    files = sorted((root / "figures").glob("*.png"))
    names = [p.stem for p in files]
    assert sorted(names) == sorted(n for n in CHART_NAMES if n != "hours_real_time")
    embedded = re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', page)
    assert len(embedded) == len(files)
    for p in files:
        data = p.read_bytes()
        assert data.startswith(PNG_MAGIC)
        with Image.open(io.BytesIO(data)) as im:
            im.verify()
        with Image.open(p) as im:
            assert im.format == "PNG" and im.size[0] >= 800 and im.size[1] >= 300
        assert base64.b64encode(data).decode("ascii") in embedded, p.name
        assert f'id="fig-{p.stem}"' in page


def test_tables_hold_the_report_values_as_in_the_markdown(written: tuple[Path, Report, str, str]) -> None:
    _, rep, md, page = written
    single, c2, c4 = rep["steps"]
    assert (single["steady"], c2["steady"], c4["steady"]) == (True, True, False)
    assert c2["errors"] == 1 and c2["truncated"] == 1
    h100k = c2["hours"][0]
    expected = [
        sig3(c2["output_tps"]),                                                # output tok/s
        sig3(c2["per_stream_tps"]),                                            # per-stream tok/s
        " / ".join(sig3(c2[f"ttft_p{q}_s"]) for q in (50, 90, 99)),          # TTFT triple
        f"{sig3(c2['tpot_mean_s'] * 1000)} / {sig3(c2['tpot_p50_s'] * 1000)}", # TPOT in ms
        sig3(single["request_rate"]),                                          # req/s
        f"{c2['window_s']:.1f} (from +{c2['window_start_s']:.1f})",           # steady window
        (f"{sig3(h100k['hours'])} h (no interval)" if h100k["hours_low"] is None and h100k["hours_high"] is None
         else f"{sig3(h100k['hours'])} h ({sig3(h100k['hours_low'])}–{sig3(h100k['hours_high'])})"),  # hours cell
        f"{sig3(h100k['token_hours'])} h",                                    # token cross-check cell
        "C=4 †",                                                               # NOT steady label
        "NOT steady †",
        f"N={rep['hours_to_n'][-1]:,}",
    ]
    for text in expected:
        assert text in md, text
        assert text in page, text
    # every Markdown table (per step, self-certification, hours, per prompt, by finish reason; no real-time tables
    # at time_scale 1)
    md_tables = sum(1 for line in md.splitlines() if line.startswith("|---"))
    assert md_tables == 5 and page.count("<table>") == md_tables


def test_header_definitions_and_notes(written: tuple[Path, Report, str, str]) -> None:
    _, rep, _, page = written
    head = page[: page.index("<h2>")]
    assert "synthetic" in head and "k2-test" in head and "http://127.0.0.1:8000/v1" in head
    assert re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC[+-]\d\d:\d\d", head)
    assert "finished" in head
    import html as html_lib

    # a number never breaks from its " %" (a no-break space, also inside the definitions and notes)
    assert "95&nbsp;%" in page and not re.search(r"\d %", page.split("<style>")[0] + page.split("</style>")[1])
    # wrapped Markdown prose joins into one paragraph (a newline reads as a space); the no-break spaces read as spaces
    flat = " ".join(page.replace("&nbsp;%", " %").split())
    for key, text in rep["definitions"].items():
        assert f"<strong>{key}</strong>: {html_lib.escape(text, quote=False)}" in flat, key
    assert rep["notes"]
    for note in rep["notes"]:
        assert html_lib.escape(note, quote=False) in flat, note
    assert "<br" not in page  # the footnotes are list items, not lines forced apart
    # the figures sit between the tables and the formulas
    assert page.index("<h2>Hours to N") < page.index("<h2>Figures</h2>") < page.index("<h2>Formulas</h2>")


def test_figures_use_the_report_functions(written: tuple[Path, Report, str, str]) -> None:
    root, rep, _, _ = written
    main = main_frame(load_frame_run(root))
    for row in rep["steps"]:
        sample = row_latency_sample(main, StepRow.model_validate(row))
        assert sample.height == row["latency_n"]
        v = sample.select(pl.col("ttft").quantile(0.5, interpolation="linear"),
                          pl.col("e2e").quantile(0.5, interpolation="linear"),
                          pl.col("reasoning_tokens").mean(), pl.col("answer_tokens").mean()).row(0)
        assert v[0] == pytest.approx(row["ttft_p50_s"]) and v[1] == pytest.approx(row["e2e_p50_s"])
        assert v[2] is not None and v[3] is not None
        assert v[2] + v[3] == pytest.approx(row["mean_output_tokens"])  # the stacked bar's total
        if row["steady"]:  # the binned tokens over the steady window are the row's window tokens
            w0, w1 = row["window_start_wall"], row["window_end_wall"]
            assert output_tokens_binned(main, w0, w1 - w0, 1)[0] == pytest.approx(row["window_output_tokens"])
    # tokens per time bin: the output_tps rule on each bin, and no token lost or counted twice across bins
    t0 = rep["start_wall"]
    t1 = float(main.get_column("_end").max())  # type: ignore[arg-type]
    width = time_bin_s(t1 - t0)
    n = math.ceil((t1 - t0) / width)
    bins = output_tokens_binned(main, t0, width, n)
    assert len(bins) == n
    for i in (0, 7, 40, n - 1):
        assert bins[i] == pytest.approx(_window_tokens(main, t0 + i * width, t0 + (i + 1) * width)[0])
    assert sum(bins) == pytest.approx(_window_tokens(main, t0, t0 + n * width)[0])
    assert sum(bins) == pytest.approx(main.filter(pl.col("_ok")).get_column("output_tokens").sum())


def test_drawing_is_deterministic(written: tuple[Path, Report, str, str]) -> None:
    root, rep, _, _ = written
    a = draw_charts(rep, load_frame_run(root))
    b = draw_charts(rep.as_dict(), load_frame_run(root))  # a report dict draws the same
    assert [c.name for c in a] == [c.name for c in b]
    assert [c.png for c in a] == [c.png for c in b]
    assert [c.png for c in a] == [(root / "figures" / f"{c.name}.png").read_bytes() for c in a]


def test_compressed_time_adds_real_time_hours_and_stale_figures_go(tmp_path: Path) -> None:
    root = _scenario(tmp_path / "run", {"simulator": {"time_scale": 0.5}})
    rep, md = write_report(root)
    assert rep.time_scale == 0.5
    page = (root / "report.html").read_text(encoding="utf-8")
    assert (root / "figures" / "hours_real_time.png").read_bytes().startswith(PNG_MAGIC)
    assert 'id="fig-hours_real_time"' in page and "COMPRESSED TIME" in page
    # per step, self-certification, hours, real-time equivalents and their hours, per prompt, by finish reason
    md_tables = sum(1 for line in md.splitlines() if line.startswith("|---"))
    assert md_tables == 7 and page.count("<table>") == md_tables
    meta = json.loads((root / "run.json").read_text())
    del meta["simulator"]
    (root / "run.json").write_text(json.dumps(meta))
    write_report(root)
    assert not (root / "figures" / "hours_real_time.png").exists()
    assert 'id="fig-hours_real_time"' not in (root / "report.html").read_text(encoding="utf-8")


def test_text_from_the_run_is_escaped(tmp_path: Path) -> None:
    meta = {"target": {"base_url": "http://127.0.0.1:1/<script>x</script>", "model": "<img src=http://e/x>"},
            "profile": {"name": "[a](http://evil.example/) <b>p</b>"}}
    root = _scenario(tmp_path / "run", meta)
    write_report(root)
    page = (root / "report.html").read_text(encoding="utf-8")
    assert "<script" not in page and "<img src=http" not in page and "<b>p</b>" not in page
    assert 'href="http' not in page
    assert "&lt;script&gt;" in page


def test_run_without_steps_still_writes_the_page(tmp_path: Path) -> None:
    root = write_run(tmp_path / "run", [rec("w", -1, 0, 2)], [phase("warmup", -1, 1, 0), run_end(5)])
    rep = build_report(root)
    assert rep.steps == []
    out = write_html(root, rep)
    assert out == root / "report.html"
    page = out.read_text(encoding="utf-8")
    assert "No steps recorded." in page
    assert len(re.findall(r'src="data:image/png;base64,', page)) == len(CHART_NAMES) - 1
    assert render_html(rep, []).count("<figure") == 0


def test_without_matplotlib_md_and_json_are_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    caplog: pytest.LogCaptureFixture) -> None:
    root = _scenario(tmp_path / "run")
    monkeypatch.delitem(sys.modules, "harness.report.charts")
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # `import matplotlib` raises ImportError
    with caplog.at_level(logging.WARNING, logger="llmload"):
        rep, md = write_report(root)
    assert (root / "report.md").read_text() == md and json.loads((root / "report.json").read_text()) == rep.as_dict()
    assert not (root / "report.html").exists() and not (root / "figures").exists()
    assert any("HTML report skipped" in r.getMessage() and "matplotlib" in r.getMessage() for r in caplog.records)


def test_a_failing_figure_does_not_lose_the_report(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                   caplog: pytest.LogCaptureFixture) -> None:
    root = _scenario(tmp_path / "run")

    def boom(*_: Any) -> Any:
        raise RuntimeError("drawing failed")

    monkeypatch.setattr(charts_mod, "draw_charts", boom)
    with caplog.at_level(logging.ERROR, logger="llmload"):
        rep, md = write_report(root)
    assert (root / "report.md").read_text() == md and rep.steps
    assert not (root / "report.html").exists()
    assert any("HTML report failed" in r.getMessage() and "drawing failed" in r.getMessage() for r in caplog.records)


def test_cli_writes_the_html(tmp_path: Path) -> None:
    from harness.report.cli import main

    root = _scenario(tmp_path / "run")
    assert main([str(root), "--quiet"]) == 0
    assert (root / "report.html").stat().st_size > 10_000
    assert {p.stem for p in (root / "figures").glob("*.png")} == set(CHART_NAMES) - {"hours_real_time"}


def _texts(fig: Any) -> list[str]:
    """Every text of a figure: titles, labels, tick labels, legend entries, annotations."""
    return [t.get_text() for t in fig.findobj(lambda a: hasattr(a, "get_text"))]


def test_priced_soak_run_draws_slices_cost_and_yield(tmp_path: Path) -> None:
    meta = {"profile": {"name": "synthetic", "cost": {"hour_usd": 12.5}, "report": {"slice_s": 10}}}
    root = _scenario(tmp_path / "run", meta)
    rep = build_report(root)
    sliced = [r for r in rep["steps"] if r["slices"]]
    assert sliced and rep["cost_usd_per_hour"] == 12.5
    main = main_frame(load_frame_run(root))
    with matplotlib.rc_context({"font.family": "DejaVu Sans"}):
        timeline = charts_mod.timeline_chart(rep, main)
        hours = charts_mod.hours_chart(rep)
        prompts = charts_mod.prompts_chart(rep)
    ax1, ax2 = timeline.axes
    seg = [c for c in ax1.collections if c.get_label() == "output tok/s per soak slice"]
    assert len(seg) == 1  # one collection: a segment per slice at its output_tps, over the slice
    want = [(s["start_wall"] - rep["start_wall"], s["end_wall"] - rep["start_wall"], s["output_tps"])
            for r in sliced for s in r["slices"]]
    got = [(float(p[0][0]), float(p[1][0]), float(p[0][1])) for p in seg[0].get_segments()]
    assert len(got) == len(want) and all(g == pytest.approx(w) for g, w in zip(got, want, strict=True))
    assert any(c.get_label() == "p99 TTFT per soak slice" for c in ax2.collections)
    assert any("US\\$ (at 12.50 US\\$/h)" in t for t in _texts(hours))  # the cost axis of the hours figure
    texts = _texts(prompts)
    p = rep["prompts"][0]
    assert "p" in texts and f"{p['usable_pct']:.0f} % usable of {p['requests']:,}" in texts
    # drawn twice: the same bytes (slices, cost axis and the yield figure included)
    a, b = draw_charts(rep, load_frame_run(root)), draw_charts(rep, load_frame_run(root))
    assert [c.name for c in a] == [n for n in CHART_NAMES if n != "hours_real_time"]
    assert [c.png for c in a] == [c.png for c in b]


def test_yield_figure_keeps_the_prompts_with_the_lowest_usable_share() -> None:
    prompts = [{"prompt": f"p{i:02d}", "requests": 100, "usable": i, "usable_pct": float(i),
                "usable_reasons": {"truncated": 100 - i}, "mean_reasoning_tokens": 10.0, "mean_answer_tokens": 5.0,
                "max_tokens": 64} for i in range(charts_mod.MAX_PROMPTS + 5)]
    fig = charts_mod.prompts_chart(Report.model_validate({"prompts": prompts}))
    ticks = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert sorted(ticks) == [f"p{i:02d}" for i in range(charts_mod.MAX_PROMPTS)]
    at = dict(zip(ticks, fig.axes[0].get_yticks(), strict=True))
    assert max(at, key=lambda k: at[k]) == "p00"  # the first prompt (by name) at the top
    assert any(f"the {charts_mod.MAX_PROMPTS} with the lowest usable share" in t for t in _texts(fig))
    empty = charts_mod.prompts_chart(Report())
    assert "no data" in _texts(empty)


def test_hours_figure_draws_arrows_only_for_steps_bounded_below(tmp_path: Path) -> None:
    from matplotlib.collections import LineCollection
    from matplotlib.text import Annotation

    rep = build_report(_scenario(tmp_path / "run"))
    rep.hours_to_n = rep.hours_to_n[:1]
    rows = rep.steps
    assert len(rows) >= 2
    kinds = [(None, None), (0.5, None)] + [(0.5, 2.0)] * (len(rows) - 2)  # none, low only, both
    for row, (lo, hi) in zip(rows, kinds, strict=True):
        h = row.hours[0]
        h.hours = 1.0
        h.hours_low = None if lo is None else lo * h.hours
        h.hours_high = None if hi is None else hi * h.hours
    with matplotlib.rc_context({"font.family": "DejaVu Sans"}):
        fig = charts_mod.hours_chart(rep)
    ax = fig.axes[0]
    arrows = [a for a in ax.texts if isinstance(a, Annotation) and a.arrow_patch is not None]
    assert len(arrows) == 1  # the step bounded below only; the step with no interval has just its point
    assert arrows[0].xy[0] == pytest.approx(rows[1].concurrency, rel=0.1)
    bars = [c for c in ax.collections if isinstance(c, LineCollection)]  # the interval bars (vlines)
    assert sum(len(c.get_segments()) for c in bars) == len(rows) - 2
