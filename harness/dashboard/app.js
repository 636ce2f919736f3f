// kernelgap dashboard: draws the alerts, the headline, the lead chart and the table from
// window.KERNELGAP_DATA (data.js, written by harness/dashboard/build.py) at once, then loads
// plotly.min.js and draws each history chart (charts.js) as it comes into view (lazy.js).
// What it drew goes into <script id="render-state"> as JSON and into <body data-rendered>
// ("first": the page is on screen; "view": every chart in view is drawn; "all": every chart
// is), so a headless browser (tests, tools/perf/dashboard_build.py) can check the page;
// window.kernelgapIdle() resolves once what is in view now is drawn.
"use strict";
(function () {
  // Times are ms since navigation start: script (data.js loaded, this starts), first_view (the
  // page but the history charts painted), in_view (every chart in the window at open drawn and
  // painted: drawn_at_open of `charts`), plotly (plotly.min.js loaded), first_chart (the first
  // Plotly chart drawn) and rendered (every chart drawn: after all were scrolled into view).
  const state = { errors: [], headline: [], table: 0, cases: {}, suite: null, xmode: "commit",
                  mode: null, gpu: null, range: "50", since: "all", alerts: 0, counters: {}, first_sketch_ms: null, sketched_ms: null,
                  charts: 0, drawn: 0, drawn_at_open: null, chart_ms: {}, script_ms: performance.now(),
                  first_view_ms: null, in_view_ms: null, plotly_ms: null, first_chart_ms: null,
                  rendered_ms: null };
  const errorBox = document.getElementById("errors");

  function fail(message) {
    if (state.errors.includes(message)) return;  // a chart that cannot draw is tried again on scrolling
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
  for (const part of ["KernelgapCharts", "KernelgapLazy", "KernelgapHeadline"]) {
    if (!window[part]) { fail(part + " is missing (charts.js, lazy.js, headline.js beside index.html): rebuild with `python -m harness dashboard`"); return; }
  }
  if (D.format !== 3) { fail("data.js has layout " + D.format + "; this page reads layout 3: rebuild with `python -m harness dashboard`"); return; }
  const R = D.runs;
  state.mode = D.mode;
  state.gpu = D.gpu || null;

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

  // -- header, mode switch, headline, alerts, table: what the chosen mode's newest run says --
  const view = () => D.views[state.mode];
  function drawHeader() {
    const L = view();
    document.title = D.title;
    document.getElementById("title").textContent = D.title;
    const sub = document.getElementById("subtitle");
    const commit = R.commit[L.run];
    const commitNode = commit && D.repo_url
      ? el("a", { href: D.repo_url + "/commit/" + commit }, commit.slice(0, 12))
      : commitOf(L.run);
    sub.replaceChildren(L.gpu + " · " + L.suite + " · newest " + state.mode + " run " + R.date[L.run] + " UTC, commit ", commitNode);
    if (R.raw[L.run]) sub.append(" (", el("a", { href: "runs/" + R.id[L.run] + ".json" }, "raw document"), ")");
    sub.append(" · " + D.counts.runs + " runs in the history" + (L.complete ? "" : " · newest run incomplete"));
    if (R.clock && R.clock[L.run]) sub.append(" · ", el("span", { class: "throttled" }, "⚠ newest run throttled: " + R.clock[L.run]));
    for (const node of document.querySelectorAll("[data-mode-text]")) node.textContent = "· " + state.mode + " mode" + gpuText();
    const dl = document.getElementById("signature");
    dl.replaceChildren();
    for (const [what, value] of L.signature) dl.append(el("dt", {}, what), el("dd", {}, value));
    state.headline = KernelgapHeadline.draw(D, state.mode, state.since, document.getElementById("headline"), el, (since) => {
      state.since = since;
      drawHeader();
      redrawOverview();
      writeState();
    });
    state.alerts = KernelgapHeadline.alerts(D, state.mode, document.getElementById("alerts"), el).total;
  }

  function drawModeSwitch() {
    const box = document.getElementById("mode-switch");
    box.append(el("span", { class: "mode-note" }, "timing mode "));
    for (const m of D.modes) {
      const info = KernelgapHeadline.modeInfo(m);
      const b = el("button", { type: "button", "data-mode": m, "data-family": info.family,
                               "aria-pressed": String(m === state.mode), title: info.title }, info.symbol + " " + m);
      b.addEventListener("click", () => setMode(m));
      box.append(b);
    }
  }

  function drawTable() {
    const body = document.querySelector("#gap-table tbody");
    body.replaceChildren();
    state.table = 0;
    for (const r of view().table) {
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

  function recordCase(c, gd) {
    const names = gd.data.filter((t) => t.meta && !t.meta.unstable && !t.meta.band).map((t) => t.name);
    const unstable = gd.data.filter((t) => t.meta && t.meta.unstable).reduce((n, t) => n + t.y.length, 0);
    const labels = (gd.layout.annotations || []).filter((a) => a.meta && a.meta.mark);
    const gpus = [...new Set(gd.data.filter((t) => t.meta && t.meta.gpu).map((t) => t.meta.gpu))];
    const throttled = (gd.layout.annotations || []).filter((a) => a.meta && a.meta.clock !== undefined)
      .map((a) => [R.commit[a.meta.clock], a.text, a.hovertext]);
    state.cases[c.id] = { panel: panels[c.id], mode: state.mode, gpu: state.gpu, gpus, traces: names, unstable, throttled,
      marks: labels.length, range: gd.layout.xaxis.range.slice() };
  }

  // -- rendering: the page at once; each chart when it comes into (or near) the window -----
  const lazy = KernelgapLazy.create({
    // Loaded only when the charts in view are drawn, so that its 1.5-2.5 s of parsing (on a
    // 2-core machine) never holds up the first view; a history chart in view waits for it.
    library: "plotly.min.js",
    loaded() { state.plotly_ms = performance.now(); writeState(); },
    sketched() { if (state.sketched_ms === null) state.sketched_ms = performance.now(); writeState(); },
    missing: () => fail("plotly.min.js is missing beside index.html: rebuild with `python -m harness dashboard`"),
    idle(drawn, total) {
      state.drawn = drawn;
      if (state.in_view_ms === null) {  // everything in view at open is drawn and on screen
        state.in_view_ms = performance.now();
        state.drawn_at_open = drawn;
      }
      if (drawn === total) {
        if (state.rendered_ms === null) state.rendered_ms = performance.now();
        document.body.dataset.rendered = "all";
      } else {
        document.body.dataset.rendered = "view";
      }
      writeState();
    },
    error: (e) => fail("drawing the charts failed: " + (e && e.stack || e)),
  });
  const charts = KernelgapCharts(D, { esc, commitOf, runLink, clickNotes });

  // A history chart: drawn with Plotly, then what it drew goes into the page's state.
  async function drawChart(node, figure, record) {
    const t0 = performance.now();
    await charts.draw(node, figure);
    state.chart_ms[node.id] = Math.round(performance.now() - t0);  // its latest drawing
    record(node);
    if (state.first_chart_ms === null) state.first_chart_ms = performance.now();
    writeState();  // what the page says it drew follows every drawing, not only the idle hook
  }

  // The case's counter panel under its chart (counters.js), over the chart's runs.
  function drawCounters(c, box) {
    if (!window.KernelgapCounters) return;
    const { span } = charts.view();
    state.counters[c.id] = KernelgapCounters.draw(box, c, { mode: state.mode, lo: span[0], hi: span[1], at: charts.at,
      href: (s) => (c.page || "") + "#" + s.id, commit: commitOf }, el);
  }

  // A chart as SVG while plotly.min.js loads (sketch.js), timed like a drawing.
  function sketch(node, figure) {
    if (!window.KernelgapSketch) return;
    KernelgapSketch.draw(node, figure());
    if (state.first_sketch_ms === null) state.first_sketch_ms = performance.now();
  }

  // Per case: its primary candidate's gap at the chosen start (the first drawn point from the
  // headline's start run on) and now, in the shown mode and GPU model: [first, newest, run].
  function caseTrends() {
    const start = KernelgapHeadline.startOf(D, state.mode, state.since), out = {};
    if (start === null) return out;
    for (const c of D.cases) {
      const pairs = [];
      for (const s of c.series) {
        if (s.role !== "candidate" || s.impl !== D.primary || s.mode !== state.mode || (s.gpu && state.gpu && s.gpu !== state.gpu)) continue;
        s.run.forEach((r, k) => { if (r >= start && s.gap[k] !== null && s.gap_ok[k]) pairs.push([r, s.gap[k]]); });
      }
      pairs.sort((a, b) => a[0] - b[0]);
      if (pairs.length >= 2) out[c.id] = [pairs[0][1], pairs[pairs.length - 1][1], pairs[0][0]];
    }
    return out;
  }

  function drawOverview() {
    const box = document.getElementById("chart-overview");
    if (!window.KernelgapOverview || !box) return;  // overview.js: the lead chart, SVG, at once
    const draw = () => (state.overview = KernelgapOverview.draw({ ...D, table: view().table, trends: caseTrends() }, box));
    draw();
    let width = box.clientWidth;
    window.addEventListener("resize", () => {
      if (box.clientWidth !== width) draw();
      width = box.clientWidth;
    });
    return draw;
  }

  // Each case: its current gaps in the chosen mode, a note where every series moved together,
  // a gap / times switch, its page and its explain report; then its chart.
  const panels = {};  // case id -> "gap" or "times"
  function caseTitle(c) {
    const rows = view().table.filter((r) => r.case === c.id && r.candidate);
    rows.sort((a, b) => (b.candidate === D.primary) - (a.candidate === D.primary));
    const now = el("span", { class: "now" }, KernelgapHeadline.modeTag(el, state.mode), " now: ");
    rows.forEach((r, k) => now.append(k ? " · " : "", r.candidate + " ", el("b", {}, gapText(r.gap)),
                                      r.status === "stable" ? "" : " (" + r.status + ")"));
    if (!rows.length) now.append("no gap in the newest " + state.mode + " run");
    const explain = rows.find((r) => r.explain);
    const panes = el("span", { class: "panes", role: "group", "aria-label": "Chart of " + c.id });
    for (const [value, words] of [["gap", "gap"], ["times", "times"]]) {
      const b = el("button", { type: "button", "data-panel": value, "aria-pressed": String(panels[c.id] === value) }, words);
      b.addEventListener("click", () => setPanel(c, value));
      panes.append(b);
    }
    const notes = (c.together || []).filter((t) => t.mode === state.mode)
      .map((t) => el("p", { class: "together", "data-mode": t.mode }, "⚠ " + t.text + " (commit " + commitOf(t.run) + ", " + R.date[t.run].slice(0, 10) + ")"));
    return [el("div", { class: "title" }, el("h3", {}, c.id + " v" + c.version), now,
              c.page ? el("a", { href: c.page }, "case page") : null,
              explain ? el("a", { href: explain.explain }, "explain") : null, panes), ...notes];
  }

  function addCharts() {
    const list = document.getElementById("case-list");
    for (const c of D.cases) {
      panels[c.id] = "gap";
      const chart = el("div", { class: "chart", id: "chart-" + c.anchor, "data-case": c.id, role: "figure",
                                "aria-label": c.id + ": gap (or time per launch) per run, the chosen mode and GPU model; " +
                                  "its case page has the recent history as a table" });
      const head = el("div", { class: "head" }, ...caseTitle(c));
      const counters = el("div", { class: "counters", id: "counters-" + c.anchor, hidden: "" });
      list.append(el("div", { class: "case", id: c.anchor }, head, chart, counters));
      lazy.add(chart, (node) => { drawCounters(c, counters); return drawChart(node, () => charts.panelFigure(c, panels[c.id]), (gd) => recordCase(c, gd)); },
               { library: true, sketch: (node) => { drawCounters(c, counters); sketch(node, () => charts.panelFigure(c, panels[c.id])); } });
    }
    lazy.add(document.getElementById("chart-suite"), (node) => drawChart(node, charts.suiteFigure, (gd) => {
      const lines = gd.data.filter((t) => !t.meta.changed);
      state.suite = { traces: lines.map((t) => t.name), points: lines.reduce((n, t) => n + t.y.length, 0),
                      gpus: [...new Set(lines.map((t) => t.meta.gpu))],
                      throttled: (gd.layout.annotations || []).filter((a) => a.meta && a.meta.clock !== undefined)
                        .map((a) => [R.commit[a.meta.clock], a.text, a.hovertext]),
                      changed: gd.data.filter((t) => t.meta.changed).reduce((n, t) => n + t.y.length, 0),
                      mode: state.mode, range: gd.layout.xaxis.range.slice() };
    }), { library: true, sketch: (node) => sketch(node, charts.suiteFigure) });
    state.charts = lazy.counts().total;
  }

  function redrawHistory(which) {
    charts.setView({ x: state.xmode, mode: state.mode, gpu: state.gpu, range: state.range });
    for (const b of document.querySelectorAll(".toolbar button[data-x]")) b.setAttribute("aria-pressed", String(b.dataset.x === state.xmode));
    for (const b of document.querySelectorAll(".toolbar button[data-range]")) b.setAttribute("aria-pressed", String(b.dataset.range === state.range));
    document.body.dataset.rendered = "view";
    lazy.redraw(which || ((node) => node.id !== "chart-overview"));
  }
  // The charts of one GPU model: each model's runs apart, never a point of one on another's line.
  function drawGpuSwitch() {
    const box = document.getElementById("gpu-switch");
    if (!box || !D.gpus || D.gpus.length < 2) return;
    box.append(el("span", { class: "mode-note" }, "charts of "));
    for (const g of D.gpus) {
      const b = el("button", { type: "button", "data-gpu": g, "aria-pressed": String(g === state.gpu),
                               title: "history charts of the runs on " + g }, g);
      b.addEventListener("click", () => setGpu(g));
      box.append(b);
    }
  }
  function setGpu(gpu) {
    state.gpu = gpu;
    for (const b of document.querySelectorAll("#gpu-switch button")) b.setAttribute("aria-pressed", String(b.dataset.gpu === gpu));
    for (const node of document.querySelectorAll("[data-gpu-text]")) node.textContent = gpuText();
    state.cases = {};
    redrawOverview();
    redrawHistory();
    writeState();
  }
  const gpuText = () => (D.gpus && D.gpus.length > 1 ? " · " + state.gpu : "");
  function setX(mode) { state.xmode = mode; redrawHistory(); }
  function setRange(range) { state.range = range; redrawHistory(); }
  function setPanel(c, panel) {
    panels[c.id] = panel;
    for (const b of document.querySelectorAll("#" + c.anchor + " .panes button")) b.setAttribute("aria-pressed", String(b.dataset.panel === panel));
    const node = document.getElementById("chart-" + c.anchor);
    redrawHistory((n) => n === node);
  }
  let redrawOverview = () => {};
  // The other timing mode: every card, alert, table row, case header and chart says and shows it.
  function setMode(mode) {
    if (!D.views[mode]) return;
    state.mode = mode;
    for (const b of document.querySelectorAll("#mode-switch button")) b.setAttribute("aria-pressed", String(b.dataset.mode === mode));
    drawHeader();
    drawTable();
    redrawOverview();
    for (const c of D.cases) document.querySelector("#" + c.anchor + " .head").replaceChildren(...caseTitle(c));
    state.cases = {};
    state.counters = {};
    redrawHistory();
    writeState();
  }

  try {
    drawModeSwitch();
    drawGpuSwitch();
    drawHeader();
    drawTable();
    redrawOverview = drawOverview() || redrawOverview;
    const overview = document.getElementById("chart-overview");
    if (overview) lazy.add(overview, null, { drawn: true });
    addCharts();
    document.getElementById("footer").textContent = "Built " + D.generated_utc + " by kernelgap from " +
      D.counts.runs + " runs and " + D.counts.series + " series; " + D.counts.points_drawn + " of " +
      D.counts.points_stored + " points drawn (trimmed for display only: the history keeps every point).";
    for (const b of document.querySelectorAll(".toolbar button[data-x]")) b.addEventListener("click", () => setX(b.dataset.x));
    for (const b of document.querySelectorAll(".toolbar button[data-range]")) b.addEventListener("click", () => setRange(b.dataset.range));
    Object.assign(window, { kernelgapSetX: setX, kernelgapSetMode: setMode, kernelgapSetRange: setRange, kernelgapSetGpu: setGpu,
                            kernelgapIdle: lazy.idle });
    window.kernelgapSetPanel = (id, panel) => setPanel(D.cases.find((c) => c.id === id), panel);
    writeState();
    lazy.nextPaint().then(() => {
      if (state.first_view_ms === null) state.first_view_ms = performance.now();
      if (!document.body.dataset.rendered) document.body.dataset.rendered = "first";
      writeState();
    });
  } catch (e) {
    fail("building the page failed: " + (e && e.stack || e));
  }
})();
