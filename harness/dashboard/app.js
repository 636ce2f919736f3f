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
  for (const part of ["KernelgapCharts", "KernelgapLazy"]) {
    if (!window[part]) { fail(part + " is missing (charts.js, lazy.js beside index.html): rebuild with `python -m harness dashboard`"); return; }
  }
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
        // The change is over the cases with a gap in both runs; say so when either run had others.
        const others = p.cases !== n || c.cases !== n
          ? "; the previous run's own: " + gapText(p.gap) + " over " + p.cases + " case" + (p.cases === 1 ? "" : "s")
          : "";
        delta = el("div", { class: "delta " + cls }, arrow + " vs previous run " + commitOf(p.run),
                   el("div", { class: "note" }, "over the " + n + " case" + (n === 1 ? "" : "s") +
                      " in both: " + gapText(p.common_gap) + " → " + gapText(p.common_gap_now) + others));
      }
      // The fixed set of cases (protocol.headline): unstable ones in, named; missing ones named.
      const listed = (what, ids) => ids && ids.length ? "; " + what + ": " + ids.join(", ") : "";
      const note = c.gap === null
        ? "no case with a gap in the newest run (" + c.of + " in the suite)"
        : "geometric mean over " + (c.of > c.cases ? c.cases + " of " + c.of : c.cases) + " case" +
          (c.of === 1 ? "" : "s") +
          (c.ci_low !== undefined && c.ci_low !== null ? ", 95% interval " + gapText(c.ci_low) + " to " + gapText(c.ci_high) : "") +
          listed("unstable, in it", c.unstable) + listed("missing", c.missing);
      // The suite's primary candidate (harness.reporting.primary) comes first and says so.
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

  function recordCase(c, gd) {
    const names = (panel) => gd.data.filter((t) => t.meta && t.meta.panel === panel && !t.meta.unstable && !t.meta.band).map((t) => t.name);
    const count = (panel) => gd.data.filter((t) => t.meta && t.meta.panel === panel && t.meta.unstable).reduce((n, t) => n + t.y.length, 0);
    state.cases[c.id] = { charts: ["gap", "times"].filter((p) => gd.data.some((t) => t.meta && t.meta.panel === p)),
      gap_traces: names("gap"), time_traces: names("times"), unstable_gap: count("gap"), unstable_times: count("times") };
  }

  // -- rendering: the page at once; each chart when it comes into (or near) the window -----
  const lazy = KernelgapLazy.create({
    // Loaded only when the charts in view are drawn, so that its 1.5-2.5 s of parsing (on a
    // 2-core machine) never holds up the first view; a history chart in view waits for it.
    library: "plotly.min.js",
    loaded() { state.plotly_ms = performance.now(); writeState(); },
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
    state.xmode = charts.mode();
  }

  function drawOverview() {
    const box = document.getElementById("chart-overview");
    if (!window.KernelgapOverview || !box) return;  // overview.js: the lead chart, SVG, at once
    state.overview = KernelgapOverview.draw(D, box);
    let width = box.clientWidth;
    window.addEventListener("resize", () => {
      if (box.clientWidth !== width) state.overview = KernelgapOverview.draw(D, box);
      width = box.clientWidth;
    });
    lazy.add(box, null, { drawn: true });
  }

  function addCharts() {
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
      lazy.add(chart, (node) => drawChart(node, () => charts.caseFigure(c), (gd) => recordCase(c, gd)), { library: true });
    }
    lazy.add(document.getElementById("chart-suite"), (node) => drawChart(node, charts.suiteFigure, (gd) => {
      const lines = gd.data.filter((t) => !t.meta.changed);
      state.suite = { traces: lines.map((t) => t.name), points: lines.reduce((n, t) => n + t.y.length, 0),
                      changed: gd.data.filter((t) => t.meta.changed).reduce((n, t) => n + t.y.length, 0) };
    }), { library: true });
    state.charts = lazy.counts().total;
  }

  // The other x axis: the history charts in view are drawn again now, the others as they come
  // into view.
  function setX(mode) {
    charts.setMode(mode);
    for (const b of document.querySelectorAll(".toolbar button")) b.setAttribute("aria-pressed", String(b.dataset.x === mode));
    document.body.dataset.rendered = "view";
    lazy.redraw((node) => node.id !== "chart-overview");
  }

  try {
    if (window.KernelgapMarks) state.alerts = KernelgapMarks.alerts(D, el, document.getElementById("alerts"));
    drawHeader();
    drawTable();
    drawOverview();
    addCharts();
    document.getElementById("footer").textContent = "Built " + D.generated_utc + " by kernelgap from " +
      D.counts.runs + " runs and " + D.counts.series + " series; " + D.counts.points_drawn + " of " +
      D.counts.points_stored + " points drawn (trimmed for display only: the history keeps every point).";
    for (const b of document.querySelectorAll(".toolbar button")) b.addEventListener("click", () => setX(b.dataset.x));
    window.kernelgapSetX = setX;
    window.kernelgapIdle = lazy.idle;
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
