// llmload LLM view: polls <base>/data.json every 2 s and renders the report's figures (no external code).
"use strict";
(function () {
  const BASE = document.body.dataset.base;
  const POLL_MS = 2000;
  const NS = "http://www.w3.org/2000/svg";
  // One colour per series of a chart: each figure's final segments, its live line and its slices all differ.
  const COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#17becf", "#8c564b", "#e377c2",
                  "#7f7f7f", "#bcbd22"];
  const open = new Set();  // labels of the rows whose details are shown (kept across refreshes)

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
  // The table's columns and every cell's text come from the server ({key, header, main} in d.columns, the text of
  // each cell in row.display): the catalogue of figures formats them as the report does; this page formats none.
  // Main columns are the row's cells; the others are in the row's details (▸), one row below it.
  function rowEls(r, cols, current) {
    const attrs = { "data-step": r.label, "data-current": current ? "1" : "0",
      "data-provisional": r.provisional ? "1" : "0" };
    const tr = el("tr", attrs);
    const shown = r.display || {};
    const main = cols.filter((c) => c.main), rest = cols.filter((c) => !c.main);
    const details = el("tr", { "data-step": r.label, class: "details" });
    details.hidden = !open.has(r.label);
    for (const { key, answer } of main) {
      const td = el("td", { "data-key": key }, shown[key] ?? "–");
      if (answer) td.classList.add("answer");
      if (key === "label") {
        if (current) td.textContent = `${td.textContent} (so far)`;
        if (!current && r.provisional) td.textContent = `${td.textContent} (provisional)`;
        const btn = el("button", { type: "button", class: "more", "aria-expanded": String(!details.hidden),
          title: "the row's other figures" }, details.hidden ? "▸" : "▾");
        btn.addEventListener("click", () => {
          details.hidden = !details.hidden;
          if (details.hidden) open.delete(r.label); else open.add(r.label);
          btn.textContent = details.hidden ? "▸" : "▾";
          btn.setAttribute("aria-expanded", String(!details.hidden));
        });
        td.prepend(btn);
      }
      tr.appendChild(td);
    }
    const dl = el("dl");
    for (const { key, header } of rest) {
      const dd = el("dd", { "data-key": key }, shown[key] ?? "–");
      if (key === "client_starved" && r.client_starved) dd.className = "starved";
      const div = el("div", WIDE.has(key) ? { class: "wide" } : FULL.has(key) ? { class: "full" } : {});
      div.append(el("dt", {}, header), dd);
      dl.appendChild(div);
    }
    const td = el("td", { colspan: String(main.length) });
    td.appendChild(dl);
    details.appendChild(td);
    return [tr, details];
  }

  function renderTable(d) {
    const cols = d.columns || [];
    const head = document.querySelector("#steps thead");
    head.replaceChildren(el("tr"));
    for (const { key, header, main, answer } of cols) {
      if (main) head.firstChild.appendChild(el("th", { "data-key": key, class: answer ? "answer" : "" }, header));
    }
    document.getElementById("step-rows").replaceChildren(...d.steps.flatMap((r) => rowEls(r, cols, false)));
    document.getElementById("current-row").replaceChildren(...(d.current ? rowEls(d.current, cols, true) : []));
    document.getElementById("current-hint").hidden = !d.current;  // no step in progress: no caption for one
  }

  // The headline strip: every text is the server's (the report's display text of the step in progress).
  const ANSWER = new Set(["hours", "usd"]), WIDE = new Set(["interval", "cross_check"]);
  const FULL = new Set(["selfcert"]);  // a sentence: the details' whole width, left-aligned
  function renderHeadline(d) {
    const box = document.getElementById("headline");
    box.replaceChildren(...(d.headline || []).map(({ key, label, text }) => {
      const card = el("div", { class: `card${ANSWER.has(key) ? " answer" : ""}${WIDE.has(key) ? " wide" : ""}`,
        "data-key": key });
      card.append(el("span", { class: "k" }, label), el("span", { class: "v" }, text));
      return card;
    }));
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
    const W = 480, L = 46, R = 14, T = 14, PH = 170;  // plot height; the legend goes below the x axis
    const legendRows = Math.ceil(series.length / 2), H = T + PH + 26 + 15 * legendRows;
    svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
    svg.replaceChildren();
    const B = H - T - PH;
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
    for (let i = 0; i <= 4; i++) {  // axis ticks (not figures): 3 significant digits
      const v = y1 * i / 4, t = svgEl("text", { x: L - 4, y: Y(v) + 4, "text-anchor": "end" });
      t.textContent = num(v, 3);
      svg.appendChild(t);
      const u = x1 * i / 4, tx = svgEl("text", { x: X(u), y: H - B + 14, "text-anchor": i === 4 ? "end" : "middle" });
      tx.textContent = `${num(u, 3)} s`;
      svg.appendChild(tx);
    }
    const yl = svgEl("text", { x: L + 4, y: T + 10, "font-weight": "bold" });
    yl.textContent = unit;
    svg.appendChild(yl);
    for (const r of rows) {  // step markers
      svg.appendChild(svgEl("line", { x1: X(r.start_wall - t0), y1: T, x2: X(r.start_wall - t0), y2: H - B,
                                      stroke: "#999", "stroke-dasharray": "4 3", class: "step-marker" }));
      const t = svgEl("text", { x: X(r.start_wall - t0) + 2, y: T + 22 });
      t.textContent = r.label;
      svg.appendChild(t);
    }
    series.forEach((s, i) => {
      const c = s.color;
      const g = svgEl("g", { class: `series ${s.kind}`, "data-name": s.name, "data-color": c });
      for (const p of s.points) {
        if (s.kind === "segment") {
          g.appendChild(svgEl("line", { x1: X(p[0]), y1: Y(p[2]), x2: X(p[1]), y2: Y(p[2]), stroke: c,
                                        "stroke-width": 3 }));
        } else if (s.kind === "dot") {
          g.appendChild(svgEl("circle", { cx: X((p[0] + p[1]) / 2), cy: Y(p[2]), r: 2.5, fill: c }));
        }
      }
      if (s.kind === "line" && s.points.length) {
        const d = s.points.map((p, j) => `${j ? "L" : "M"}${X(p[1]).toFixed(1)},${Y(p[2]).toFixed(1)}`).join("");
        g.appendChild(svgEl("path", { d, stroke: c, fill: "none", "stroke-width": 1.5 }));
      }
      svg.appendChild(g);
      const lx = L + (i % 2) * ((W - L) / 2), ly = H - B + 32 + 15 * Math.floor(i / 2);
      svg.appendChild(svgEl("rect", { x: lx, y: ly - 6, width: 12, height: s.kind === "segment" ? 4 : 2, fill: c }));
      const lt = svgEl("text", { x: lx + 16, y: ly - 1 });
      lt.textContent = s.name;
      svg.appendChild(lt);
    });
  }
  // A figure's series: its final rows (flat segments), its live trace (line) and its slices (dots), each its own colour;
  // values × factor (the catalogue's conversion to the chart's unit, from the server).
  function seriesOf(rows, history, t0, key, name, factor, colors) {
    const out = [];
    const ok = (v) => v !== null && v !== undefined;
    const seg = rows.filter((r) => ok(r[key])).map((r) => [r.window_start_wall - t0, r.window_end_wall - t0,
                                                             r[key] * factor]);
    out.push({ name, kind: "segment", points: seg, color: colors[0] });
    const live = history.filter((h) => ok(h[key])).map((h) => [h.t - t0, h.t - t0, h[key] * factor]);
    if (live.length) out.push({ name: `${name} (live)`, kind: "line", points: live, color: colors[1] });
    const sl = [];
    for (const r of rows) for (const s of r.slices || []) if (ok(s[key]))
      sl.push([s.start_wall - t0, s.end_wall - t0, s[key] * factor]);
    if (sl.length) out.push({ name: `${name} (slices)`, kind: "dot", points: sl, color: colors[2] });
    return out;
  }
  function renderCharts(d) {
    const rows = d.steps.concat(d.current ? [d.current] : []);
    const t0 = (d.run && d.run.start_wall) || (rows[0] && rows[0].start_wall) || d.now;
    const h = d.history || [];
    const box = document.getElementById("charts");
    for (const c of d.charts || []) {
      let svg = document.getElementById(`chart-${c.id}`);
      if (!svg) {
        const div = el("div");
        div.appendChild(el("h2", {}, c.title));
        svg = svgEl("svg", { id: `chart-${c.id}`, role: "img", "aria-label": c.title });
        div.appendChild(svg);
        box.appendChild(div);
      }
      const series = c.series.flatMap((s, i) => seriesOf(rows, h, t0, s.key, s.name, c.factor,
        [COLORS[i], COLORS[i + 3], COLORS[i + 6]]));
      chart(svg, t0, series, rows, c.unit);
    }
  }

  let runParam = new URLSearchParams(window.location.search).get("run");
  async function poll() {
    try {
      const q = runParam ? `?run=${encodeURIComponent(runParam)}` : "";
      const resp = await fetch(`${BASE}/data.json${q}`, { cache: "no-store", credentials: "same-origin" });
      if (!resp.ok) throw new Error(`HTTP ${resp.status}`);
      const d = await resp.json();
      renderMeta(d);
      renderHeadline(d);
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
