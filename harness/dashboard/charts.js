// kernelgap dashboard: the history charts drawn with Plotly: each case's gap and times over
// time (caseFigure) and the suite's geometric-mean gap (suiteFigure), from window.KERNELGAP_DATA.
// app.js makes one with KernelgapCharts(D, page) (page: its esc, commitOf, runLink and
// clickNotes) and draws the figures as the charts come into view. Plotly is only needed when a
// figure is drawn or a chart is zoomed, not when this file loads.
"use strict";
window.KernelgapCharts = function (D, page) {
  const R = D.runs;
  const { esc, commitOf, runLink, clickNotes } = page;
  // Lines with bands, not error bars and markers: each marker or error bar is an SVG node of
  // its own, which made a 1,000-point history take 4x as long to draw.
  const DASHES = ["solid", "dash", "dot", "dashdot"];
  const UNSTABLE = { color: "#8d949c", symbol: "circle-open", size: 8, line: { width: 2, color: "#8d949c" } };
  const MARKERS_UP_TO = 60;  // points on a line up to which each point also gets a marker
  let xmode = "commit";  // or "date": the x axis of every history chart
  let mode = D.mode;  // the timing mode shown: each chart draws only its series
  let gpu = D.gpu;  // and the GPU model: a point of another model is never on this one's line
  const ours = (o) => o.mode === mode && (!o.gpu || !gpu || o.gpu === gpu);
  let range = "50";  // "50": the mode's last 50 runs; "all": every run
  const RANGE_RUNS = 50;
  // Commit mode: x is the run's place among the runs of its mode (R.n), ticks show commits.
  const utcMs = (date) => Date.parse(date.replace(" ", "T") + "Z");
  const utcText = (ms) => new Date(ms).toISOString().replace("T", " ").slice(0, 19);
  const xOf = (runs) => (xmode === "date" ? runs.map((i) => R.date[i]) : runs.map((i) => R.n[i]));
  const at = (runs) => (xmode === "date" ? runs.map((i) => utcMs(R.date[i])) : runs.map((i) => R.n[i]));
  let modeRuns = [];  // the drawn runs of the mode, oldest first
  function setModeRuns() {
    modeRuns = R.id.map((_, r) => r).filter((r) => ours({ mode: R.mode[r], gpu: R.gpu && R.gpu[r] }));
  }
  setModeRuns();

  // The visible span in x units: the mode's last RANGE_RUNS runs, or all of them.
  function span() {
    if (!modeRuns.length) return [0, 1];
    const newest = modeRuns[modeRuns.length - 1];
    const first = range === "all" ? modeRuns[0] : modeRuns.find((r) => R.n[r] > R.n[newest] - RANGE_RUNS);
    if (xmode === "date") {
      const lo = utcMs(R.date[first]), hi = utcMs(R.date[newest]);
      const pad = Math.max((hi - lo) * 0.02, 600e3);
      return [lo - pad, hi + pad];
    }
    return [R.n[first] - 0.5, R.n[newest] + 0.5];
  }

  // A series (or suite trace) cut to the visible span, so that the y axis fits what is shown:
  // every array as long as its runs is sliced alike.
  function visible(s) {
    if (range === "all") return s;
    const [lo, hi] = span(), n = s.run.length;
    if (!n) return s;
    const keep = s.run.map((r, k) => k).filter((k) => { const x = at([s.run[k]])[0]; return x >= lo && x <= hi; });
    const out = {};
    for (const [key, value] of Object.entries(s)) out[key] = Array.isArray(value) && value.length === n ? keep.map((k) => value[k]) : value;
    out.first = s.run[0];  // where the series (its key) starts, seen or not
    return out;
  }

  function axis(extra) {
    // Fixed margins: automargin measures the labels and lays out again, doubling the time.
    return { showgrid: true, gridcolor: "#eceff2", zeroline: false, automargin: false, ...extra };
  }
  function commitTicks(lo, hi) {
    const inside = modeRuns.filter((r) => R.n[r] >= lo && R.n[r] <= hi);
    const step = Math.max(1, Math.ceil(inside.length / 7));
    const runs = [];
    for (let k = inside.length - 1; k >= 0; k -= step) runs.unshift(inside[k]);  // aligned on the newest
    return { tickmode: "array", tickvals: runs.map((r) => R.n[r]), ticktext: runs.map((r) => esc(R.label[r])) };
  }
  function xAxis(domain, anchor) {
    const base = { domain, anchor, tickfont: { size: 11 }, tickangle: 0 };
    const [lo, hi] = span();
    if (xmode === "date") {
      return axis({ ...base, type: "date", range: [utcText(lo), utcText(hi)], title: { text: "date (UTC)", font: { size: 12 } } });
    }
    return axis({ ...base, type: "linear", range: [lo, hi], ...commitTicks(lo, hi),
                  title: { text: "commit (" + esc(mode || "") + " runs)", font: { size: 12 } } });
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
      hovertemplate: hover, meta: { panel, gpu: s.gpu } });
    for (const k of bad) {
      unstable.runs.push(s.run[k]);
      unstable.y.push(values[k]);
      unstable.cd.push(hoverData([s.run[k]], [extra[k]])[0].concat([compilerLine(s, k), esc(s.name)]));
    }
    return traces;
  }

  // Each run in view whose clocks were below their usual ones (data.js: R.clock, the reason from
  // its document): an amber dotted rule and "⚠ throttled" on the chart, the reason on hover.
  const THROTTLED = "#b26b00";
  function clockMarks(shapes, annotations, axes) {
    if (!R.clock) return;
    const [lo, hi] = span();
    for (const r of modeRuns) {
      if (!R.clock[r] || at([r])[0] < lo || at([r])[0] > hi) continue;
      const x = xOf([r])[0];
      for (const [xa, ya] of axes) {
        shapes.push({ type: "line", xref: xa, yref: ya + " domain", x0: x, x1: x, y0: 0, y1: 1,
                      line: { color: THROTTLED, width: 1.5, dash: "dot" } });
        annotations.push({ xref: xa, yref: ya + " domain", x, y: 0.98, xanchor: "left", yanchor: "top", xshift: 2,
          text: "⚠ throttled", showarrow: false, font: { size: 11, color: THROTTLED }, bgcolor: "rgba(255,255,255,0.85)",
          hovertext: esc("commit " + commitOf(r) + ", " + R.date[r] + " UTC: " + R.clock[r]), meta: { clock: r } });
      }
    }
  }

  function caseFigure(c) {
    const traces = [], shapes = [], annotations = [];
    const unstable = { gap: { runs: [], y: [], cd: [] }, times: { runs: [], y: [], cd: [] } };
    const tail = "<br>commit %{customdata[0]}<br>%{customdata[1]} UTC<br>noise %{customdata[3]}" +
      "%{customdata[7]}<br>run %{customdata[2]}<br>%{customdata[6]}<extra></extra>";
    const gapHover = "<b>%{fullData.name}</b><br>gap %{y:.4f}x, 95% interval %{customdata[4]}" + tail;
    const timeHover = "<b>%{fullData.name}</b><br>%{y:.4~f} " + esc(c.unit) + " ± %{customdata[4]} (MAD)" + tail;
    for (const s of c.series.filter(ours).map(visible)) {
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
      const first = s.first === undefined ? s.run[0] : s.first;
      if (s.change && s.run.length && at([first])[0] >= span()[0]) {
        // A new series key: a dotted rule where it starts, and what changed, in both panels.
        const x0 = xOf([first])[0];
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
      if (!ours({ mode: R.mode[r], gpu: R.gpu && R.gpu[r] })) return;
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
    clockMarks(shapes, annotations, [["x", "y"], ["x2", "y2"]]);
    const [lo, hi] = span();
    if (window.KernelgapMarks) KernelgapMarks.chart(c, xOf, shapes, annotations, { mode, gpu, lo, hi, at });  // marks.js
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
    if (window.KernelgapMarks) KernelgapMarks.room(traces, layout);  // step labels under the points
    return { traces, layout };
  }

  function suiteFigure() {
    const hover = (name) => "<b>" + name + "</b><br>geomean gap %{y:.4f}x over %{customdata[3]} cases" +
      "%{customdata[7]}<br>%{customdata[4]}<br>commit %{customdata[0]}<br>%{customdata[1]} UTC<br>run %{customdata[2]}" +
      "<br>%{customdata[6]}<extra></extra>";
    // A point whose cases differ from the previous point's: its step is partly the
    // change of cases, so it gets a hollow diamond and says what changed.
    const changed = { x: [], y: [], cd: [] };
    const traces = D.suite.filter(ours).map(visible).map((t) => {
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
        // the 95% interval of each point's geomean (harness.dashboard.geomeans), where known
        error_y: t.lo ? { type: "data", symmetric: false, array: t.hi.map((h, k) => h - t.gap[k]),
                          arrayminus: t.lo.map((l, k) => t.gap[k] - l), color: t.color, thickness: 1, width: 0 } : undefined,
        customdata: cd, hovertemplate: hover("%{fullData.name}"), meta: { panel: "suite", gpu: t.gpu } };
    });
    if (changed.x.length) {
      traces.push({ type: "scatter", mode: "markers", name: "cases changed (hover)", x: xOf(changed.x),
        y: changed.y, customdata: changed.cd, hovertemplate: hover("%{customdata[8]}"),
        marker: { symbol: "diamond-open", size: 10, color: "#1b1f24", line: { width: 1.5 } },
        meta: { panel: "suite", changed: true } });
    }
    const shapes = [{ type: "line", xref: "x domain", yref: "y", x0: 0, x1: 1, y0: 1, y1: 1,
                      line: { color: "#7a828c", width: 1, dash: "dash" } }], annotations = [];
    clockMarks(shapes, annotations, [["x", "y"]]);
    const layout = {
      margin: { l: 72, r: 16, t: 20, b: 46 }, hovermode: "closest",
      legend: { orientation: "h", x: 0, y: -0.2 },
      xaxis: xAxis([0, 1], "y"),
      yaxis: axis({ title: { text: "geomean gap (lower is better)" }, tickformat: ".3f" }),
      shapes, annotations,
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

  // Draws `figure` into `gd`; a chart's first drawing also wires its clicks and zoom ticks.
  async function draw(gd, figure) {
    const { traces, layout } = figure();
    if (gd.querySelector(":scope > svg.sketch")) gd.replaceChildren();  // sketch.js's, until now
    await Plotly.react(gd, traces, layout, config);
    if (!gd.dataset.wired) {
      onClick(gd);
      // A change mark that a counter step explains (marks.js) opens the explanation.
      gd.on("plotly_clickannotation", (ev) => {
        const href = ev.annotation && ev.annotation.meta && ev.annotation.meta.href;
        if (href) window.open(href, "_blank", "noopener");
      });
      retickOnZoom(gd);
      gd.dataset.wired = "1";
    }
  }

  // A case's figure with one panel: "gap" (the candidates' gaps) or "times" (every
  // implementation's time per launch), full width; the other panel's parts are dropped.
  function panelFigure(c, panel) {
    const { traces, layout } = caseFigure(c);
    const keep = panel === "gap" ? /^[xy](?: domain)?$/ : /^[xy]2(?: domain)?$/;
    const flat = (ref) => (ref || "").replace(/^([xy])2/, "$1");
    const own = (o) => ({ ...o, xref: flat(o.xref), yref: flat(o.yref) });
    const tr = traces.filter((t) => t.meta && t.meta.panel === panel)
      .map((t) => ({ ...t, xaxis: "x", yaxis: "y", showlegend: !t.meta.band }));
    const shapes = layout.shapes.filter((o) => keep.test(o.xref)).map(own);
    const annotations = layout.annotations.filter((o) => keep.test(o.xref)).map(own);
    const y = panel === "gap" ? layout.yaxis : { ...layout.yaxis2, anchor: "x" };
    const out = { ...layout, xaxis: xAxis([0, 1], "y"), yaxis: y, shapes, annotations };
    delete out.xaxis2;
    delete out.yaxis2;
    return { traces: tr, layout: out };
  }

  function setView(view) {
    if (view.x) xmode = view.x;
    if (view.mode) mode = view.mode;
    if (view.gpu) gpu = view.gpu;
    setModeRuns();
    if (view.range) range = view.range;
  }

  return { caseFigure, panelFigure, suiteFigure, draw, setView, at, mode: () => xmode,
           view: () => ({ x: xmode, mode, gpu, range, span: span() }) };
};
