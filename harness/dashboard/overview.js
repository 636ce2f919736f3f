// kernelgap dashboard: the lead chart, the newest run's gap per case (data.js: D.table). One row
// per case, sorted by its primary candidate's gap (else its first), each candidate a marker with
// its 95% interval, unstable ones hollow; parity is the dashed line at 1.00x. app.js draws it
// first, as one more chart of its queue; without this file the page draws without it.
"use strict";
window.KernelgapOverview = (function () {
  const esc = (text) => String(text).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");

  function figure(D) {
    const rows = D.table.filter((r) => r.candidate && r.gap !== null && r.gap !== undefined);
    const lead = (c) => rows.find((r) => r.case === c && r.candidate === D.primary) || rows.find((r) => r.case === c);
    const cases = [...new Set(rows.map((r) => r.case))].sort((a, b) => lead(a).gap - lead(b).gap);
    const names = [...new Set(rows.map((r) => r.candidate))];
    if (D.primary && names.includes(D.primary)) names.sort((a, b) => (b === D.primary) - (a === D.primary));
    const traces = [];
    for (const name of names) {
      const mine = rows.filter((r) => r.candidate === name);
      for (const stable of [true, false]) {
        const part = mine.filter((r) => (r.status === "stable") === stable);
        if (!part.length) continue;
        const color = (D.colors && D.colors[name]) || "#0072b2";
        traces.push({
          type: "scatter", mode: "markers", name: esc(name) + (stable ? "" : " (unstable)"),
          legendgroup: name, x: part.map((r) => r.gap), y: part.map((r) => r.case),
          error_x: { type: "data", symmetric: false, array: part.map((r) => r.hi - r.gap),
                     arrayminus: part.map((r) => r.gap - r.lo), color, thickness: 1.5, width: 3 },
          marker: { color, size: 9, symbol: stable ? "circle" : "circle-open", line: { width: 2, color } },
          customdata: part.map((r) => [r.lo.toFixed(4), r.hi.toFixed(4), esc(r.status)]),
          hovertemplate: "<b>%{y}</b> · " + esc(name) + "<br>gap %{x:.4f}x, 95% interval [%{customdata[0]}, " +
                         "%{customdata[1]}]<br>%{customdata[2]}<extra></extra>",
          meta: { panel: "overview", unstable: !stable },
        });
      }
    }
    const layout = {
      height: Math.max(220, 60 + 22 * cases.length),
      margin: { l: 170, r: 20, t: 10, b: 40 }, hovermode: "closest", showlegend: true,
      legend: { orientation: "h", x: 0, y: 1.02, yanchor: "bottom" },
      xaxis: { type: "log", title: { text: "gap (x baseline, log scale; lower is better)", font: { size: 12 } },
               gridcolor: "#eceff2", zeroline: false },
      yaxis: { type: "category", categoryorder: "array", categoryarray: cases, automargin: false,
               gridcolor: "#f4f6f8", tickfont: { size: 12 } },
      shapes: [{ type: "line", xref: "x", yref: "paper", x0: 1, x1: 1, y0: 0, y1: 1,
                 line: { color: "#7a828c", width: 1, dash: "dash" } }],
      font: { family: "system-ui, sans-serif", size: 12, color: "#1b1f24" },
    };
    return { traces, layout };
  }

  return { figure };
})();
