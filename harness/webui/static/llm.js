// llmload LLM view: polls <base>/data.json every 2 s and renders the report's figures (no external code).
"use strict";
(function () {
  const BASE = document.body.dataset.base;
  const POLL_MS = 2000;
  const NS = "http://www.w3.org/2000/svg";
  const COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b"];

  function num(v, digits) {
    if (v === null || v === undefined || Number.isNaN(v)) return "–";
    if (typeof v !== "number") return String(v);
    if (Number.isInteger(v) && Math.abs(v) < 1e7) return String(v);
    const a = Math.abs(v);
    const d = digits === undefined ? 4 : digits;
    if (a !== 0 && (a < 1e-3 || a >= 1e7)) return v.toExponential(d - 1);
    return Number(v.toPrecision(d)).toString();
  }
  function el(tag, attrs, text) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
    if (text !== undefined) e.textContent = text;
    return e;
  }
  // The table's columns and every cell's text come from the server ({key, header} in d.columns, the text of each
  // cell in row.display): the catalogue of figures formats them as the report does; this page formats none.
  function rowEl(r, cols, current) {
    const tr = el("tr", { "data-step": r.label, "data-current": current ? "1" : "0",
      "data-provisional": r.provisional ? "1" : "0" });
    const shown = r.display || {};
    for (const { key } of cols) {
      const td = el("td", { "data-key": key }, shown[key] ?? "–");
      if (key === "label" && current) td.textContent = `${td.textContent} (so far)`;
      if (key === "label" && !current && r.provisional) td.textContent = `${td.textContent} (provisional)`;
      if (key === "client_starved" && r.client_starved) td.className = "starved";
      tr.appendChild(td);
    }
    return tr;
  }

  function renderTable(d) {
    const cols = d.columns || [];
    const head = document.querySelector("#steps thead");
    head.replaceChildren(el("tr"));
    for (const { header } of cols) head.firstChild.appendChild(el("th", {}, header));
    document.getElementById("step-rows").replaceChildren(...d.steps.map((r) => rowEl(r, cols, false)));
    document.getElementById("current-row").replaceChildren(...(d.current ? [rowEl(d.current, cols, true)] : []));
  }

  function renderMeta(d) {
    const m = document.getElementById("run-meta");
    m.replaceChildren();
    const add = (label, value, id) => {
      const s = el("span", id ? { id } : {});
      s.append(`${label} `, el("b", {}, value ?? "–"), "   ");
      m.appendChild(s);
    };
    const run = d.run || {};
    add("run", run.run_id || d.shown || "no run yet", "meta-run");
    add("status", run.status || d.state, "meta-status");
    const st = d.stopping;
    if (st) {  // Stop (or Ctrl-C, or the load's end) answered at once; the run is recorded when this goes away
      const text = st.stage === "draining"
        ? `draining… in-flight requests finish (${st.users_left ?? "?"} user(s) left, up to ${num(st.drain_timeout_s)} s)`
        : "writing report…";
      add("stopping", text, "meta-stopping");
      m.lastChild.dataset.stage = st.stage;
    }
    add("profile", run.profile_name);
    add("target", run.target);
    add("model", run.model);
    add("completed", run.totals ? num(run.totals.completed) : "–", "meta-completed");
    add("report age", d.report_age_s === null ? "–" : `${num(d.report_age_s, 2)} s`);
    for (const b of d.banners || []) add("!", b, "meta-banner");
    const err = document.getElementById("error");
    err.hidden = !d.error;
    err.textContent = d.error ? `report: ${d.error}` : "";
    document.getElementById("footer").textContent =
      `report computed in ${num(d.compute_s, 3)} s; refreshed every ${POLL_MS / 1000} s (at most every max(2 s, 3 × compute time))`;
  }

  function renderWorkers(d) {
    const sec = document.getElementById("workers-section");
    sec.hidden = !d.workers.length;
    const body = document.querySelector("#workers tbody");
    body.replaceChildren(...d.workers.map((w) => {
      const tr = el("tr", { "data-worker": w.id, "data-dead": w.dead ? "1" : "0" });
      tr.append(el("td", {}, w.id), el("td", { class: w.dead ? "dead" : "" }, w.dead ? `${w.state} (DEAD)` : w.state),
                el("td", {}, num(w.users)), el("td", {}, num(w.in_flight)), el("td", {}, num(w.cpu_pct, 3)));
      return tr;
    }));
  }

  function renderDownloads(d) {
    const box = document.getElementById("downloads");
    box.replaceChildren(...d.runs.map((run) => {
      const div = el("div", { class: "downloads-run", "data-run": run.run_id });
      div.appendChild(el("b", {}, `${run.run_id}${run.current ? " (current)" : ""}: `));
      if (!run.files.length) div.append("no files yet");
      for (const f of run.files) {
        const a = el("a", { href: f.href, download: "", "data-file": f.name }, f.name);
        div.appendChild(a);
      }
      return div;
    }));
    if (!d.runs.length) box.textContent = "no run yet: press Start in the Locust UI";
    const failures = d.failures || [];  // per step and error class: count, top server messages, hints
    document.getElementById("failures").replaceChildren(...failures.map((f) => el("li", {}, f)));
    document.getElementById("failures-section").hidden = !failures.length;
    document.getElementById("notes").replaceChildren(...((d.run && d.run.notes) || []).map((n) => el("li", {}, n)));
  }

  // ---- charts (SVG) -----------------------------------------------------------------------------------------
  function svgEl(tag, attrs) {
    const e = document.createElementNS(NS, tag);
    for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
    return e;
  }
  function chart(svg, t0, series, rows, unit) {
    const W = 900, H = 260, L = 56, R = 150, T = 26, B = 30;
    svg.replaceChildren();
    const xs = [], ys = [];
    for (const s of series) for (const p of s.points) { xs.push(p[0], p[1]); ys.push(p[2]); }
    for (const r of rows) xs.push(r.start_wall - t0, r.end_wall - t0);
    if (!ys.length) {
      const t = svgEl("text", { x: W / 2, y: H / 2, "text-anchor": "middle" });
      t.textContent = "no data yet";
      svg.appendChild(t);
      return;
    }
    const x1 = Math.max(1, ...xs), y1 = Math.max(...ys) * 1.1 || 1;
    const X = (v) => L + (W - L - R) * Math.max(0, v) / x1, Y = (v) => H - B - (H - T - B) * v / y1;
    svg.appendChild(svgEl("line", { x1: L, y1: H - B, x2: W - R, y2: H - B, stroke: "#888" }));
    svg.appendChild(svgEl("line", { x1: L, y1: T, x2: L, y2: H - B, stroke: "#888" }));
    for (let i = 0; i <= 4; i++) {
      const v = y1 * i / 4, t = svgEl("text", { x: L - 4, y: Y(v) + 4, "text-anchor": "end" });
      t.textContent = num(v, 3);
      svg.appendChild(t);
      const u = x1 * i / 4, tx = svgEl("text", { x: X(u), y: H - B + 14, "text-anchor": "middle" });
      tx.textContent = `${num(u, 3)} s`;
      svg.appendChild(tx);
    }
    const yl = svgEl("text", { x: 4, y: 12 });
    yl.textContent = unit;
    svg.appendChild(yl);
    for (const r of rows) {  // step markers
      svg.appendChild(svgEl("line", { x1: X(r.start_wall - t0), y1: T, x2: X(r.start_wall - t0), y2: H - B,
                                      stroke: "#777", "stroke-dasharray": "4 3", class: "step-marker" }));
      const t = svgEl("text", { x: X(r.start_wall - t0) + 2, y: T + 10 });
      t.textContent = r.label;
      svg.appendChild(t);
    }
    series.forEach((s, i) => {
      const c = s.color || COLORS[i % COLORS.length];
      for (const p of s.points) {
        if (s.kind === "segment") {
          svg.appendChild(svgEl("line", { x1: X(p[0]), y1: Y(p[2]), x2: X(p[1]), y2: Y(p[2]), stroke: c,
                                          "stroke-width": 3 }));
        } else if (s.kind === "dot") {
          svg.appendChild(svgEl("circle", { cx: X((p[0] + p[1]) / 2), cy: Y(p[2]), r: 2.5, fill: c }));
        }
      }
      if (s.kind === "line" && s.points.length) {
        const d = s.points.map((p, j) => `${j ? "L" : "M"}${X(p[1]).toFixed(1)},${Y(p[2]).toFixed(1)}`).join("");
        svg.appendChild(svgEl("path", { d, stroke: c, fill: "none", "stroke-width": 1.5 }));
      }
      const ly = T + 14 + 16 * i;
      svg.appendChild(svgEl("rect", { x: W - R + 8, y: ly - 8, width: 12, height: 4, fill: c }));
      const lt = svgEl("text", { x: W - R + 24, y: ly - 3 });
      lt.textContent = s.name;
      svg.appendChild(lt);
    });
  }
  function seriesOf(rows, history, t0, key, name, color) {
    const out = [];
    const seg = rows.filter((r) => r[key] !== null && r[key] !== undefined)
      .map((r) => [r.window_start_wall - t0, r.window_end_wall - t0, r[key]]);
    out.push({ name, kind: "segment", points: seg, color });
    const live = history.filter((h) => h[key] !== null && h[key] !== undefined).map((h) => [h.t - t0, h.t - t0, h[key]]);
    if (live.length) out.push({ name: `${name} (live)`, kind: "line", points: live, color });
    const sl = [];
    for (const r of rows) for (const s of r.slices || []) if (s[key] !== null && s[key] !== undefined)
      sl.push([s.start_wall - t0, s.end_wall - t0, s[key]]);
    if (sl.length) out.push({ name: `${name} (slices)`, kind: "dot", points: sl, color });
    return out;
  }
  function renderCharts(d) {
    const rows = d.steps.concat(d.current ? [d.current] : []);
    const t0 = (d.run && d.run.start_wall) || (rows[0] && rows[0].start_wall) || d.now;
    const h = d.history || [];
    const title = (key) => ((d.columns || []).find((c) => c.key === key) || { header: key }).header;
    const tps = [
      ...seriesOf(rows, h, t0, "output_tps", title("output_tps"), COLORS[0]),
      ...seriesOf(rows, h, t0, "output_tps_reasoning", title("output_tps_reasoning"), COLORS[4]),
      ...seriesOf(rows, h, t0, "output_tps_answer", title("output_tps_answer"), COLORS[2]),
    ];
    chart(document.getElementById("chart-tps"), t0, tps, rows, "tok/s");
    const lat = [
      ...seriesOf(rows, h, t0, "ttft_p50_s", title("ttft_p50_s"), COLORS[0]),
      ...seriesOf(rows, h, t0, "ttft_p99_s", title("ttft_p99_s"), COLORS[3]),
      ...seriesOf(rows, h, t0, "ttfat_p50_s", title("ttfat_p50_s"), COLORS[2]),
      ...seriesOf(rows, h, t0, "ttfat_p99_s", title("ttfat_p99_s"), COLORS[1]),
    ].filter((s) => s.kind !== "dot" || s.points.length);
    chart(document.getElementById("chart-lat"), t0, lat, rows, "seconds");
  }

  let runParam = new URLSearchParams(window.location.search).get("run");
  async function poll() {
    try {
      const q = runParam ? `?run=${encodeURIComponent(runParam)}` : "";
      const resp = await fetch(`${BASE}/data.json${q}`, { cache: "no-store", credentials: "same-origin" });
      if (!resp.ok) throw new Error(`HTTP ${resp.status}`);
      const d = await resp.json();
      renderMeta(d);
      renderTable(d);
      renderWorkers(d);
      renderDownloads(d);
      renderCharts(d);
      document.body.dataset.updated = String(d.now);
      document.body.dataset.status = (d.run && d.run.status) || d.state;
      document.body.dataset.stage = d.stopping ? d.stopping.stage : "";
    } catch (e) {
      const err = document.getElementById("error");
      err.hidden = false;
      err.textContent = `view: the web UI does not answer (${e}): the Locust process has exited or is unreachable; the last figures stay shown`;
      document.body.dataset.status = "unreachable";
    } finally {
      setTimeout(poll, POLL_MS);
    }
  }
  poll();
})();
