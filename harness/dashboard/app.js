// kernelgap dashboard: draws the headline, the table and the charts from window.KERNELGAP_DATA
// (data.js, written by harness/dashboard/build.py) with Plotly (plotly.min.js beside the page).
// What it drew goes into <script id="render-state"> as JSON and into <body data-rendered>, so a
// headless browser (tests, benchmarks/perf/dashboard_build.py) can check the page.
"use strict";
(function () {
  const state = { errors: [], headline: [], table: 0, cases: {}, suite: null, xmode: "commit",
                  script_ms: performance.now(), first_view_ms: null, first_chart_ms: null,
                  rendered_ms: null };
  const errorBox = document.getElementById("errors");

  function fail(message) {
    state.errors.push(message);
    errorBox.style.display = "block";
    errorBox.textContent = state.errors.join("\n");
    writeState();
  }
  window.addEventListener("error", (e) => {
    // Capture phase: a script or file that failed to load arrives here too, without a message.
    const what = e.message || ("failed to load " + ((e.target && (e.target.src || e.target.href)) || "a resource"));
    fail(what);
  }, true);
  window.addEventListener("unhandledrejection", (e) => fail("unhandled rejection: " + e.reason));

  function writeState() {
    // "<" escaped so that a serialised DOM (chromium --dump-dom) cannot end the script early.
    document.getElementById("render-state").textContent = JSON.stringify(state).replace(/</g, "\\u003c");
  }

  const D = window.KERNELGAP_DATA;
  if (!D) { fail("data.js is missing or did not set window.KERNELGAP_DATA: rebuild with `python -m harness dashboard`"); return; }
  if (typeof Plotly === "undefined") { fail("plotly.min.js is missing beside index.html: rebuild with `python -m harness dashboard`"); return; }
  if (D.format !== 1) { fail("data.js has layout " + D.format + "; this page reads layout 1"); return; }
  const R = D.runs;

  // -- small helpers ----------------------------------------------------------------------
  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined) continue;
      if (k === "class") node.className = v; else node.setAttribute(k, v);
    }
    for (const c of children) if (c !== null && c !== undefined) node.append(c);
    return node;
  }
  // Plotly reads every string it draws (names, annotations, hover text, titles, ticks) as its
  // HTML subset: text from the data is escaped so `template<T>` shows as written and a name
  // cannot become a link. Plotly turns the entities back into the characters.
  const esc = (text) => String(text).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
  const gapText = (g) => (g === null || g === undefined) ? "–" : g.toFixed(3) + "x";
  const pct = (f) => (f >= 0 ? "+" : "−") + Math.abs(f * 100).toFixed(1) + "%";
  function timeText(s) {
    if (s === null || s === undefined) return "–";
    const units = [[1e-6, "ns", 1e9], [1e-3, "µs", 1e6], [1, "ms", 1e3], [Infinity, "s", 1]];
    const [, name, scale] = units.find(([limit]) => s < limit);
    const v = s * scale;
    return v.toPrecision(v >= 100 ? 4 : 3) + " " + name;
  }
  function commitOf(run) { return R.commit[run] ? R.commit[run].slice(0, 12) : "unknown"; }
  function runLink(run) {
    // Clicking a point: the commit when the site knows the repository, else the raw document.
    if (D.repo_url && R.commit[run]) return D.repo_url + "/commit/" + R.commit[run];
    if (R.raw[run]) return "runs/" + R.id[run] + ".json";
    return null;
  }
  window.kernelgapLink = runLink;
  // What clicking a run's point does, for its hover text; said also when it does nothing.
  const clickNotes = R.id.map((_, r) => {
    if (D.repo_url && R.commit[r]) return "click: open commit " + esc(R.commit[r].slice(0, 12));
    if (R.raw[r]) return "click: open the raw run document";
    return "raw document not published: only the newest " + D.raw_runs + " runs are; " +
           "rebuild with --raw-runs " + (R.id.length - r) + " to publish this one";
  });

  // -- header, headline, table ------------------------------------------------------------
  function drawHeader() {
    const L = D.latest;
    document.title = D.title;
    document.getElementById("title").textContent = D.title;
    const sub = document.getElementById("subtitle");
    const commit = R.commit[L.run];
    const commitNode = commit && D.repo_url
      ? el("a", { href: D.repo_url + "/commit/" + commit }, commit.slice(0, 12))
      : commitOf(L.run);
    sub.append(L.gpu + " · " + (L.mode || "mode ?") + " · " + L.suite + " · newest run " + R.date[L.run] +
               " UTC, commit ", commitNode);
    if (R.raw[L.run]) sub.append(" (", el("a", { href: "runs/" + R.id[L.run] + ".json" }, "raw document"), ")");
    sub.append(" · " + D.counts.runs + " runs in the history" + (L.complete ? "" : " · newest run incomplete"));

    const box = document.getElementById("headline");
    for (const c of L.cards) {
      let delta = el("div", { class: "delta same" }, "no earlier comparable run");
      if (c.change !== null) {
        const cls = Math.abs(c.change) < 0.0005 ? "same" : (c.change < 0 ? "better" : "worse");
        const arrow = cls === "same" ? "= 0.0%" : (c.change < 0 ? "▼ " : "▲ ") + pct(c.change);
        const p = c.previous, n = p.common;
        // The change is over the stable cases of both runs; say so when either run had others.
        const others = p.cases !== n || c.cases !== n
          ? "; the previous run's own: " + gapText(p.gap) + " over " + p.cases + " case" + (p.cases === 1 ? "" : "s")
          : "";
        delta = el("div", { class: "delta " + cls }, arrow + " vs previous run " + commitOf(p.run),
                   el("div", { class: "note" }, "over the " + n + " stable case" + (n === 1 ? "" : "s") +
                      " in both: " + gapText(p.common_gap) + " → " + gapText(p.common_gap_now) + others));
      }
      const note = c.gap === null
        ? "no stable case in the newest run (" + c.of + " with a gap)"
        : "geometric mean over " + c.cases + " stable case" + (c.cases === 1 ? "" : "s") +
          (c.of > c.cases ? " of " + c.of + " (" + (c.of - c.cases) + " unstable, left out)" : "");
      // The suite's primary candidate (harness.primary) comes first and says so.
      box.append(el("div", { class: c.primary ? "card primary" : "card", "data-candidate": c.candidate, "data-gap": c.gap,
                             "data-change": c.change, "data-primary": c.primary ? "1" : null },
        c.primary ? el("div", { class: "tag" }, "primary candidate") : null,
        el("div", { class: "who" }, c.candidate + " ", el("span", {}, "vs " + c.baseline)),
        el("div", { class: "big" }, gapText(c.gap)), delta, el("div", { class: "note" }, note)));
      state.headline.push({ candidate: c.candidate, gap: c.gap, change: c.change, cases: c.cases, text: gapText(c.gap),
                            primary: !!c.primary });
    }
    const dl = el("dl");
    for (const [what, value] of L.signature) dl.append(el("dt", {}, what), el("dd", {}, value));
    box.append(el("div", { class: "signature" }, el("h3", {}, "Hardware and toolchain of the newest run"), dl));
  }

  function drawTable() {
    const body = document.querySelector("#gap-table tbody");
    for (const r of D.table) {
      const link = r.anchor ? el("a", { href: "#" + r.anchor }, r.case) : r.case;
      const status = el("td", {}, el("span", { class: "badge " + r.status.replace(" ", "-") }, r.status),
                        r.note ? el("span", { class: "status-note" }, r.note) : null);
      const ci = (r.lo === null || r.lo === undefined) ? "–" : r.lo.toFixed(3) + " – " + r.hi.toFixed(3);
      body.append(el("tr", { "data-case": r.case, "data-candidate": r.candidate, "data-status": r.status },
        el("td", {}, link, el("span", { class: "status-note" }, "v" + r.version)),
        el("td", {}, r.candidate ? r.candidate + " vs " + r.baseline : "–",
           r.explain ? el("a", { class: "explain", href: r.explain, title: "why: resources, instruction mix and counters side by side (harness explain)" }, "explain") : null),
        el("td", { class: "num gap" }, gapText(r.gap)), el("td", { class: "num" }, ci),
        el("td", { class: "num" }, timeText(r.base_s)), el("td", { class: "num" }, timeText(r.cand_s)), status));
      state.table += 1;
    }
  }

  // -- charts ---------------------------------------------------------------------------
  // Lines with bands, not error bars and markers: each marker or error bar is an SVG node of
  // its own, which made a 1,000-point history take 4x as long to draw.
  const DASHES = ["solid", "dash", "dot", "dashdot"];
  const UNSTABLE = { color: "#8d949c", symbol: "circle-open", size: 8, line: { width: 2, color: "#8d949c" } };
  const MARKERS_UP_TO = 60;  // points on a line up to which each point also gets a marker
  let xmode = "commit";
  // Commit mode: x is the run's position in R (runs are in time order), ticks show commits.
  const xOf = (runs) => (xmode === "date" ? runs.map((i) => R.date[i]) : runs);

  function axis(extra) {
    // Fixed margins: automargin measures the labels and lays out again, doubling the time.
    return { showgrid: true, gridcolor: "#eceff2", zeroline: false, automargin: false, ...extra };
  }
  function commitTicks(lo, hi) {
    const first = Math.max(0, Math.ceil(lo)), last = Math.min(R.label.length - 1, Math.floor(hi));
    const vals = [];
    const step = Math.max(1, Math.ceil((last - first + 1) / 7));
    for (let v = last; v >= first; v -= step) vals.unshift(v);  // aligned on the newest run
    return { tickmode: "array", tickvals: vals, ticktext: vals.map((v) => esc(R.label[v])) };
  }
  // Every chart spans the same runs, so charts read alike and a case missing lately shows it.
  const utcMs = (date) => Date.parse(date.replace(" ", "T") + "Z");
  const utcText = (ms) => new Date(ms).toISOString().replace("T", " ").slice(0, 19);
  function xAxis(domain, anchor) {
    const base = { domain, anchor, tickfont: { size: 11 }, tickangle: 0 };
    if (xmode === "date") {
      const first = utcMs(R.date[0]), last = utcMs(R.date[R.date.length - 1]);
      const pad = Math.max((last - first) * 0.02, 3600e3);
      return axis({ ...base, type: "date", range: [utcText(first - pad), utcText(last + pad)],
                    title: { text: "date (UTC)", font: { size: 12 } } });
    }
    const range = [-0.5, R.label.length - 0.5];
    return axis({ ...base, type: "linear", range, ...commitTicks(...range), title: { text: "commit", font: { size: 12 } } });
  }
  function retickOnZoom(gd) {
    // Commit ticks are chosen for the visible runs, so they are chosen again after a zoom.
    gd.on("plotly_relayout", (ev) => {
      if (xmode !== "commit" || !Object.keys(ev).some((k) => /^xaxis\d*\.(range|autorange)/.test(k))) return;
      const update = {};
      for (const name of Object.keys(gd._fullLayout).filter((k) => /^xaxis\d*$/.test(k))) {
        const [lo, hi] = gd._fullLayout[name].range;
        const t = commitTicks(lo, hi);
        update[name + ".tickvals"] = t.tickvals;
        update[name + ".ticktext"] = t.ticktext;
      }
      Plotly.relayout(gd, update);
    });
  }
  function rgba(hex, alpha) {
    const n = parseInt(hex.slice(1), 16);
    return "rgba(" + (n >> 16) + "," + ((n >> 8) & 255) + "," + (n & 255) + "," + alpha + ")";
  }
  // customdata of a point: commit, date, run id, two values of its chart, run index, click note.
  function hoverData(runs, extra) {
    return runs.map((r, k) => [esc(commitOf(r)), R.date[r], R.id[r].slice(0, 12), extra[k][0], extra[k][1], r,
                               clickNotes[r]]);
  }
  const pick = (arr, idx) => idx.map((k) => arr[k]);
  const noiseText = (n) => (n === null || n === undefined) ? "–" : (n * 100).toFixed(2) + "%";
  const has = (v) => v !== null && v !== undefined;

  // The compiler that built a series' k-th point, as a hover line ('' when the history lacks it).
  function compilerLine(s, k) {
    const i = s.compiler ? s.compiler[k] : -1;
    return has(i) && i >= 0 ? "<br>compiler " + esc(D.compilers[i]) : "";
  }

  // One series in one panel: a band (MAD or 95% interval), a line through the stable points,
  // and its unstable points handed to the panel's grey hollow trace. customdata: hoverData's
  // seven, then the compiler line, then (unstable points) the series name.
  function seriesTraces(s, panel, values, lower, upper, okFlags, extra, hover, axes, unstable) {
    const idx = s.run.map((_, k) => k).filter((k) => has(values[k]));
    const ok = idx.filter((k) => okFlags[k]);
    const bad = idx.filter((k) => !okFlags[k]);
    const x = xOf(pick(s.run, ok));
    const banded = ok.filter((k) => has(lower[k]) && has(upper[k]));
    const bx = xOf(pick(s.run, banded));
    const traces = [];
    if (banded.length) {
      traces.push({ type: "scatter", mode: "lines", x: bx.concat(bx.slice().reverse()),
        y: pick(upper, banded).concat(pick(lower, banded).reverse()), fill: "toself",
        fillcolor: rgba(s.color, 0.18), line: { width: 0 }, hoverinfo: "skip", showlegend: false,
        legendgroup: s.name, ...axes, meta: { panel, band: true } });
    }
    traces.push({ type: "scatter", mode: ok.length <= MARKERS_UP_TO ? "lines+markers" : "lines", name: esc(s.name),
      legendgroup: s.name, showlegend: panel === "times", x, y: pick(values, ok), ...axes,
      line: { color: s.color, width: 2, dash: DASHES[s.segment % DASHES.length] }, marker: { color: s.color, size: 5 },
      customdata: hoverData(pick(s.run, ok), pick(extra, ok)).map((row, i) => row.concat([compilerLine(s, ok[i])])),
      hovertemplate: hover, meta: { panel } });
    for (const k of bad) {
      unstable.runs.push(s.run[k]);
      unstable.y.push(values[k]);
      unstable.cd.push(hoverData([s.run[k]], [extra[k]])[0].concat([compilerLine(s, k), esc(s.name)]));
    }
    return traces;
  }

  function caseFigure(c) {
    const traces = [], shapes = [], annotations = [];
    const unstable = { gap: { runs: [], y: [], cd: [] }, times: { runs: [], y: [], cd: [] } };
    const tail = "<br>commit %{customdata[0]}<br>%{customdata[1]} UTC<br>noise %{customdata[3]}" +
      "%{customdata[7]}<br>run %{customdata[2]}<br>%{customdata[6]}<extra></extra>";
    const gapHover = "<b>%{fullData.name}</b><br>gap %{y:.4f}x, 95% interval %{customdata[4]}" + tail;
    const timeHover = "<b>%{fullData.name}</b><br>%{y:.4~f} " + esc(c.unit) + " ± %{customdata[4]} (MAD)" + tail;
    for (const s of c.series) {
      const tExtra = s.run.map((_, k) => [noiseText(s.noise[k]), has(s.mad[k]) ? s.mad[k] + " " + esc(c.unit) : "–"]);
      const tLow = s.t.map((t, k) => (has(t) && has(s.mad[k]) ? t - s.mad[k] : null));
      const tHigh = s.t.map((t, k) => (has(t) && has(s.mad[k]) ? t + s.mad[k] : null));
      traces.push(...seriesTraces(s, "times", s.t, tLow, tHigh, s.ok, tExtra, timeHover,
                                  { xaxis: "x2", yaxis: "y2" }, unstable.times));
      if (s.role === "candidate") {
        const gExtra = s.run.map((_, k) => [noiseText(s.noise[k]),
          has(s.lo[k]) ? "[" + s.lo[k].toFixed(4) + ", " + s.hi[k].toFixed(4) + "]" : "–"]);
        traces.push(...seriesTraces(s, "gap", s.gap, s.lo, s.hi, s.gap_ok, gExtra, gapHover,
                                    { xaxis: "x", yaxis: "y" }, unstable.gap));
      }
      if (s.change && s.run.length) {
        // A new series key: a dotted rule where it starts, and what changed, in both panels.
        const x0 = xOf([s.run[0]])[0];
        const panels = s.role === "candidate" ? [["x", "y"], ["x2", "y2"]] : [["x2", "y2"]];
        for (const [xa, ya] of panels) {
          shapes.push({ type: "line", xref: xa, yref: ya + " domain", x0, x1: x0, y0: 0, y1: 1,
                        line: { color: s.color, width: 1.5, dash: "dot" } });
        }
        const [xa, ya] = panels[0];
        annotations.push({ xref: xa, yref: ya + " domain", x: x0, y: 1, xanchor: "left", yanchor: "top", xshift: 3,
          text: esc(s.impl + ": " + s.change), showarrow: false, bgcolor: "rgba(255,255,255,0.85)",
          font: { size: 11, color: s.color } });
      }
    }
    c.failed.run.forEach((r, k) => {
      // A run where the case failed: a red cross at the foot of both panels.
      for (const [xa, ya] of [["x", "y"], ["x2", "y2"]]) {
        annotations.push({ xref: xa, yref: ya + " domain", x: xOf([r])[0], y: 0, yanchor: "bottom", text: "✕",
          showarrow: false, font: { size: 14, color: "#b3261e" },
          hovertext: esc("failed in run " + R.id[r].slice(0, 12) + " (commit " + commitOf(r) + ", " + R.date[r] +
                         " UTC): " + c.failed.error[k]) });
      }
    });
    const unstableTrace = (panel, axes, hover) => ({
      type: "scatter", mode: "markers", name: "unstable (not in geomeans)", legendgroup: "unstable",
      showlegend: panel === "times", x: xOf(unstable[panel].runs), y: unstable[panel].y, ...axes,
      marker: UNSTABLE, customdata: unstable[panel].cd, meta: { panel, unstable: true },
      hovertemplate: hover.replace("%{fullData.name}", "%{customdata[8]} (unstable)") });
    if (unstable.times.runs.length) traces.push(unstableTrace("times", { xaxis: "x2", yaxis: "y2" }, timeHover));
    if (unstable.gap.runs.length) traces.push(unstableTrace("gap", { xaxis: "x", yaxis: "y" }, gapHover));
    shapes.push({ type: "line", xref: "x domain", yref: "y", x0: 0, x1: 1, y0: 1, y1: 1,
                  line: { color: "#7a828c", width: 1, dash: "dash" } });  // parity
    if (window.KernelgapMarks) KernelgapMarks.chart(c, xOf, shapes, annotations);  // marks.js
    annotations.push(
      { xref: "x domain", yref: "paper", x: 0, y: 1.08, xanchor: "left", showarrow: false,
        text: "<b>gap</b> (x " + esc(c.baseline) + ", lower is better; band: 95% interval)", font: { size: 13 } },
      { xref: "x2 domain", yref: "paper", x: 0, y: 1.08, xanchor: "left", showarrow: false,
        text: "<b>time per launch</b> (" + esc(c.unit) + "; band: ± MAD)", font: { size: 13 } });
    const layout = {
      margin: { l: 72, r: 16, t: 40, b: 46 }, hovermode: "closest", showlegend: true,
      legend: { orientation: "h", x: 0, y: -0.22, font: { size: 12 } },
      xaxis: xAxis([0, 0.46], "y"), xaxis2: xAxis([0.54, 1], "y2"),
      yaxis: axis({ title: { text: "gap (x " + esc(c.baseline) + ")", font: { size: 12 } }, tickformat: ".3f" }),
      yaxis2: axis({ anchor: "x2", title: { text: esc(c.unit), font: { size: 12 } } }),
      shapes, annotations, font: { family: "system-ui, sans-serif", size: 12, color: "#1b1f24" },
    };
    return { traces, layout };
  }

  function suiteFigure() {
    const hover = (name) => "<b>" + name + "</b><br>geomean gap %{y:.4f}x over %{customdata[3]} stable cases" +
      "%{customdata[7]}<br>%{customdata[4]}<br>commit %{customdata[0]}<br>%{customdata[1]} UTC<br>run %{customdata[2]}" +
      "<br>%{customdata[6]}<extra></extra>";
    // A point whose stable cases differ from the previous point's: its step is partly the
    // change of cases, so it gets a hollow diamond and says what changed.
    const changed = { x: [], y: [], cd: [] };
    const traces = D.suite.map((t) => {
      const cd = hoverData(t.run, t.cases.map((n) => [n, esc(t.suite)]))
        .map((row, k) => row.concat([t.cases_note[k] ? "<br><b>" + esc(t.cases_note[k]) + "</b>" : "", esc(t.name)]));
      t.cases_note.forEach((note, k) => {
        if (!note) return;
        changed.x.push(t.run[k]);
        changed.y.push(t.gap[k]);
        changed.cd.push(cd[k]);
      });
      return { type: "scatter", mode: t.run.length <= MARKERS_UP_TO ? "lines+markers" : "lines", name: esc(t.name),
        x: xOf(t.run), y: t.gap, line: { color: t.color, width: 2.5 }, marker: { color: t.color, size: 5 },
        customdata: cd, hovertemplate: hover("%{fullData.name}"), meta: { panel: "suite" } };
    });
    if (changed.x.length) {
      traces.push({ type: "scatter", mode: "markers", name: "stable cases changed (hover)", x: xOf(changed.x),
        y: changed.y, customdata: changed.cd, hovertemplate: hover("%{customdata[8]}"),
        marker: { symbol: "diamond-open", size: 10, color: "#1b1f24", line: { width: 1.5 } },
        meta: { panel: "suite", changed: true } });
    }
    const layout = {
      margin: { l: 72, r: 16, t: 20, b: 46 }, hovermode: "closest",
      legend: { orientation: "h", x: 0, y: -0.2 },
      xaxis: xAxis([0, 1], "y"),
      yaxis: axis({ title: { text: "geomean gap (lower is better)" }, tickformat: ".3f" }),
      shapes: [{ type: "line", xref: "x domain", yref: "y", x0: 0, x1: 1, y0: 1, y1: 1,
                 line: { color: "#7a828c", width: 1, dash: "dash" } }],
      font: { family: "system-ui, sans-serif", size: 12, color: "#1b1f24" },
    };
    return { traces, layout };
  }

  const config = { displaylogo: false, responsive: true, modeBarButtonsToRemove: ["lasso2d", "select2d"] };

  function onClick(gd) {
    gd.on("plotly_click", (ev) => {
      const p = ev.points && ev.points[0];
      if (!p || !p.customdata) return;
      const url = runLink(p.customdata[5]);
      if (url) window.open(url, "_blank", "noopener");
    });
  }

  function recordCase(c, gd) {
    const names = (panel) => gd.data.filter((t) => t.meta && t.meta.panel === panel && !t.meta.unstable && !t.meta.band).map((t) => t.name);
    const count = (panel) => gd.data.filter((t) => t.meta && t.meta.panel === panel && t.meta.unstable).reduce((n, t) => n + t.y.length, 0);
    state.cases[c.id] = { charts: ["gap", "times"].filter((p) => gd.data.some((t) => t.meta && t.meta.panel === p)),
      gap_traces: names("gap"), time_traces: names("times"), unstable_gap: count("gap"), unstable_times: count("times") };
  }

  // -- rendering: what is on screen first, then the rest, one chart per task --------------
  const jobs = [];
  function addJob(node, figure, record) {
    jobs.push({ node, figure, record, drawn: false });
  }
  function drawCases() {
    const overview = document.getElementById("chart-overview");
    if (window.KernelgapOverview && overview) {  // overview.js: the lead chart, drawn first
      overview.dataset.wired = "1";  // no commit ticks, no click-through: not a history chart
      addJob(overview, () => KernelgapOverview.figure(D), (gd) => (state.overview = gd.data.length));
    }
    const list = document.getElementById("case-list");
    for (const c of D.cases) {
      const chart = el("div", { class: "chart", id: "chart-" + c.anchor, "data-case": c.id });
      const shown = c.series.reduce((n, s) => n + s.run.length, 0);
      const stored = c.series.reduce((n, s) => n + s.stored, 0);
      list.append(el("div", { class: "case", id: c.anchor },
        el("div", { class: "title" }, el("h3", {}, c.id + " v" + c.version),
          el("span", { class: "meta" }, "baseline " + c.baseline + " · " + c.series.length + " series · " +
             (shown < stored ? shown + " of " + stored + " points drawn" : stored + " points") +
             (c.failed_runs ? " · failed in " + c.failed_runs + " run" + (c.failed_runs === 1 ? "" : "s") + " (✕)" : ""))), chart));
      addJob(chart, () => caseFigure(c), (gd) => recordCase(c, gd));
    }
    addJob(document.getElementById("chart-suite"), suiteFigure, (gd) => {
      const lines = gd.data.filter((t) => !t.meta.changed);
      state.suite = { traces: lines.map((t) => t.name), points: lines.reduce((n, t) => n + t.y.length, 0),
                      changed: gd.data.filter((t) => t.meta.changed).reduce((n, t) => n + t.y.length, 0) };
    });
  }

  // Which charts are in (or near) the window: they are drawn first.
  const visible = new Set();
  let observed;
  const firstSighting = new Promise((resolve) => (observed = resolve));
  const observer = new IntersectionObserver((entries) => {
    for (const e of entries) (e.isIntersecting ? visible.add(e.target) : visible.delete(e.target));
    observed();
    if (!pumping && jobs.some((j) => !j.drawn)) pump();
  }, { rootMargin: "200px 0px" });

  // Yield to the browser between slices of drawing: MessageChannel, as nested setTimeout(0)
  // calls are clamped to 4 ms each.
  const channel = new MessageChannel();
  const waiting = [];
  channel.port1.onmessage = () => waiting.shift()();
  const yieldTask = () => new Promise((resolve) => { waiting.push(resolve); channel.port2.postMessage(0); });
  const nextPaint = () => new Promise((resolve) => requestAnimationFrame(() => yieldTask().then(resolve)));
  const SLICE_MS = 50;

  let pumping = false;
  async function pump() {
    if (pumping) return;
    pumping = true;
    try {
      let slice = performance.now();
      for (;;) {
        const pending = jobs.filter((j) => !j.drawn);
        const onScreen = pending.find((j) => visible.has(j.node));
        if (!onScreen && state.first_view_ms === null) {
          await nextPaint();  // what is on screen has been painted
          state.first_view_ms = performance.now();
          document.body.dataset.rendered = "first";
        }
        const job = onScreen || pending[0];
        if (!job) {
          await nextPaint();
          if (jobs.some((j) => !j.drawn)) continue;  // the x axis was switched meanwhile
          break;
        }
        const { traces, layout } = job.figure();
        job.drawn = true;
        await Plotly.react(job.node, traces, layout, config);
        if (!job.node.dataset.wired) {
          onClick(job.node);
          retickOnZoom(job.node);
          job.node.dataset.wired = "1";
        }
        job.record(job.node);
        if (state.first_chart_ms === null) state.first_chart_ms = performance.now();
        if (performance.now() - slice > SLICE_MS) {
          await yieldTask();  // let the page scroll, paint and answer clicks
          slice = performance.now();
        }
      }
      state.rendered_ms = performance.now();
      state.xmode = xmode;
      document.body.dataset.rendered = "all";
    } catch (e) {
      fail("drawing the charts failed: " + (e && e.stack || e));
    } finally {
      pumping = false;
      writeState();
    }
  }

  function setX(mode) {
    xmode = mode;
    for (const b of document.querySelectorAll(".toolbar button")) b.setAttribute("aria-pressed", String(b.dataset.x === mode));
    for (const j of jobs) j.drawn = false;  // redraw with the other axis, visible charts first
    document.body.dataset.rendered = "first";
    pump();
  }

  try {
    if (window.KernelgapMarks) state.alerts = KernelgapMarks.alerts(D, el, document.getElementById("alerts"));
    drawHeader();
    drawTable();
    drawCases();
    document.getElementById("footer").textContent = "Built " + D.generated_utc + " by kernelgap from " +
      D.counts.runs + " runs and " + D.counts.series + " series; " + D.counts.points_drawn + " of " +
      D.counts.points_stored + " points drawn (trimmed for display only: the history keeps every point).";
    for (const b of document.querySelectorAll(".toolbar button")) b.addEventListener("click", () => setX(b.dataset.x));
    window.kernelgapSetX = setX;
    for (const j of jobs) observer.observe(j.node);
    writeState();
    firstSighting.then(pump);
  } catch (e) {
    fail("building the page failed: " + (e && e.stack || e));
  }
})();
