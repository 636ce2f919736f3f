// kernelgap dashboard: the change points and drifts on each case's charts (data.js: each case's
// `changes`, from harness/dashboard/alerts.py; the open alerts are headline.js's). app.js calls window.KernelgapMarks; without this file the page
// still draws, without the marks. A mark that a counter step explains (its `step`) says what
// changed in the code on hover and opens the explanation on a click.
"use strict";
window.KernelgapMarks = (function () {
  const SLOWER = "#b3261e", FASTER = "#0a7a3d";
  const pct = (f) => (f >= 0 ? "+" : "−") + Math.abs(f * 100).toFixed(1) + "%";
  const esc = (text) => String(text).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");

  // Label levels: a label closer than MIN_GAP of the visible span to the one before it on a
  // level goes one level up; past MAX_LEVELS it is left out (its rule and hover stay).
  const MIN_GAP = 0.07, MAX_LEVELS = 4, LEVEL_Y = 0.1;
  function levels(xs, lo, hi) {
    const last = [], out = [];
    for (const x of xs) {
      let level = 0;
      while (level < MAX_LEVELS && last[level] !== undefined && x - last[level] < MIN_GAP * (hi - lo)) level += 1;
      if (level < MAX_LEVELS) last[level] = x;
      out.push(level);
    }
    return out;
  }

  // A step: a dashed rule at the first run after it, red and "▲" when slower, green and "▼"
  // when faster, labelled with its size (labels stacked so that none overlaps another); a
  // drift: a shaded band over its window. In the panel of its metric; only the marks of
  // `view.mode` within [view.lo, view.hi] (x units) are drawn.
  function chart(c, xOf, shapes, annotations, view) {
    const inView = (m) => m.mode === view.mode && (!m.gpu || !view.gpu || m.gpu === view.gpu) &&
      xOf([m.run])[0] !== undefined;
    const marks = (c.changes || []).filter(inView);
    let count = 0;
    for (const panel of ["gap", "time"]) {
      const own = marks.filter((m) => (m.metric === "gap") === (panel === "gap"))
        .map((m) => ({ m, x: xOf([m.run])[0], at: view.at([m.run])[0] })).sort((a, b) => a.at - b.at);
      const shown = own.filter((o) => o.at >= view.lo && o.at <= view.hi);
      const level = levels(shown.map((o) => o.at), view.lo, view.hi);
      const [xa, ya] = panel === "gap" ? ["x", "y"] : ["x2", "y2"];
      shown.forEach(({ m, x }, k) => {
        const color = m.relative > 0 ? SLOWER : FASTER;
        // A counter step of its implementation in it (counters.js): what changed in the code.
        const step = m.step && c.counters ? c.counters.steps.find((s) => s.id === m.step) : null;
        const hover = esc(m.impl + " " + m.metric + ": " + m.kind + " " + pct(m.relative) + " (" +
          m.before + " → " + m.after + ", p " + m.p + ")") +
          (step ? "<br>code changed: " + esc(step.text) + "<br>click: its explanation" : "");
        const href = step ? (c.page || "") + "#" + step.id : undefined;
        if (m.kind === "drift" && m.from >= 0) {
          shapes.push({ type: "rect", xref: xa, yref: ya + " domain", x0: xOf([m.from])[0], x1: x, y0: 0, y1: 1,
                        fillcolor: color, opacity: 0.08, line: { width: 0 } });
        } else {
          shapes.push({ type: "line", xref: xa, yref: ya + " domain", x0: x, x1: x, y0: 0, y1: 1,
                        line: { color, width: 1.5, dash: "dash" } });
        }
        if (level[k] < MAX_LEVELS) {
          annotations.push({ xref: xa, yref: ya + " domain", x, y: 0.02 + LEVEL_Y * level[k], xanchor: "right",
            yanchor: "bottom", xshift: -2, text: esc((m.relative > 0 ? "▲" : "▼") + pct(m.relative) + " " + m.impl),
            showarrow: false, hovertext: hover, font: { size: 11, color }, bgcolor: "rgba(255,255,255,0.85)",
            captureevents: !!step, meta: { mark: true, level: level[k], href } });
        }
        count += 1;
      });
    }
    return count;
  }

  // Room for the step labels: a panel with labels gets its y range widened downwards so that
  // their rows (at the panel's foot) lie under every point, not over the lowest series.
  function room(traces, layout) {
    for (const [ya, key] of [["y", "yaxis"], ["y2", "yaxis2"]]) {
      const rows = layout.annotations.filter((a) => a.meta && a.meta.mark && a.yref === ya + " domain");
      if (!rows.length || !layout[key]) continue;
      let lo = ya === "y" ? 1 : Infinity, hi = ya === "y" ? 1 : -Infinity;  // the gap's parity is drawn
      for (const t of traces) {
        if ((t.yaxis || "y") !== ya) continue;
        for (const v of t.y) if (typeof v === "number" && isFinite(v)) { lo = Math.min(lo, v); hi = Math.max(hi, v); }
      }
      if (!isFinite(lo)) continue;
      const pad = 0.06 * (hi - lo || Math.abs(hi) * 0.01 || 1);
      const top = hi + pad, bottom = lo - pad;
      const band = 0.04 + LEVEL_Y * (Math.max(...rows.map((a) => a.meta.level)) + 1);  // the labels' rows
      layout[key] = { ...layout[key], range: [(bottom - band * top) / (1 - band), top] };
    }
  }

  return { chart, levels, room };
})();
