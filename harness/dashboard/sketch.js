// kernelgap dashboard: a history chart drawn as plain SVG from its Plotly figure, for the time
// before plotly.min.js has loaded (1.5-2.5 s of parsing on a 2-core machine): a reader who
// jumps to a chart at once sees its lines, bands, rules and step labels at once; lazy.js draws
// it again with Plotly (hover, zoom, clicks) once the library is there. Only what charts.js
// puts in a figure is read: scatter lines and markers, filled bands, line and rect shapes,
// annotations in axis-domain units, one x and one y axis.
"use strict";
window.KernelgapSketch = (function () {
  const SVG = "http://www.w3.org/2000/svg";
  function node(tag, attrs, text) {
    const n = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs)) if (v !== undefined && v !== null) n.setAttribute(k, v);
    if (text !== undefined) n.textContent = String(text).replace(/&lt;/g, "<").replace(/&gt;/g, ">").replace(/&amp;/g, "&");
    return n;
  }
  const num = (v) => (typeof v === "string" ? Date.parse(v.replace(" ", "T") + "Z") : v);
  const plain = (html) => String(html).replace(/<[^>]*>/g, "");

  // Draws `figure` ({traces, layout}) into `box`, replacing what was there.
  function draw(box, figure) {
    const { traces, layout } = figure;
    const w = Math.max(box.clientWidth, 300), h = Math.max(box.clientHeight, 200);
    const m = layout.margin || { l: 60, r: 10, t: 30, b: 40 };
    const pw = w - m.l - m.r, ph = h - m.t - m.b;
    const [x0, x1] = (layout.xaxis.range || [0, 1]).map(num);
    const ys = [];
    for (const t of traces) for (let k = 0; k < t.y.length; k++) {
      const x = num(t.x[k]);
      if (t.y[k] !== null && x >= x0 && x <= x1) ys.push(t.y[k]);
    }
    let y0 = Math.min(...ys), y1 = Math.max(...ys);
    if (!isFinite(y0)) [y0, y1] = [0, 1];
    const pad = (y1 - y0) * 0.06 || Math.abs(y1) * 0.01 || 1;
    [y0, y1] = [y0 - pad, y1 + pad];
    if (layout.yaxis && layout.yaxis.range) [y0, y1] = layout.yaxis.range;  // room kept (marks.js)
    const X = (v) => m.l + pw * (num(v) - x0) / (x1 - x0), Y = (v) => m.t + ph * (y1 - v) / (y1 - y0);
    const svg = node("svg", { width: w, height: h, role: "img", "aria-label": box.getAttribute("aria-label") || "history chart", "font-family": "system-ui, sans-serif", "font-size": 11,
                              class: "sketch" });
    const clip = node("clipPath", { id: box.id + "-clip" });
    clip.append(node("rect", { x: m.l, y: m.t, width: pw, height: ph }));
    svg.append(clip);
    const plot = node("g", { "clip-path": "url(#" + box.id + "-clip)" });
    for (let k = 0; k <= 4; k++) {
      const v = y0 + (y1 - y0) * k / 4;
      svg.append(node("line", { x1: m.l, x2: m.l + pw, y1: Y(v), y2: Y(v), stroke: "#eceff2" }),
                 node("text", { x: m.l - 6, y: Y(v) + 4, "text-anchor": "end", fill: "#5b6470" }, v.toPrecision(4)));
    }
    const xa = layout.xaxis;
    (xa.tickvals || []).forEach((v, k) => svg.append(node("text", { x: X(v), y: m.t + ph + 16, "text-anchor": "middle",
      fill: "#5b6470" }, plain(xa.ticktext[k]))));
    for (const t of traces) {
      const pts = t.x.map((x, k) => [x, t.y[k]]).filter((p) => p[1] !== null && p[1] !== undefined);
      const d = pts.map((p, k) => (k ? "L" : "M") + X(p[0]).toFixed(1) + "," + Y(p[1]).toFixed(1)).join("");
      if (t.fill === "toself") plot.append(node("path", { d: d + "Z", fill: t.fillcolor, stroke: "none" }));
      else if (t.mode && t.mode.includes("lines")) {
        const dash = { dash: "6 3", dot: "2 3", dashdot: "6 3 2 3" }[t.line && t.line.dash];
        plot.append(node("path", { d, fill: "none", stroke: t.line.color, "stroke-width": t.line.width || 2, "stroke-dasharray": dash }));
      } else if (t.mode === "markers") {
        for (const p of pts) plot.append(node("circle", { cx: X(p[0]), cy: Y(p[1]), r: 4, fill: "#fff", stroke: "#8d949c", "stroke-width": 2 }));
      }
    }
    for (const s of layout.shapes || []) {
      const dash = s.line && s.line.dash ? "4 3" : undefined;
      const xs = s.xref === "x domain" ? [m.l + pw * s.x0, m.l + pw * s.x1] : [X(s.x0), X(s.x1)];
      const yv = s.yref.endsWith("domain") ? [m.t + ph * (1 - s.y0), m.t + ph * (1 - s.y1)] : [Y(s.y0), Y(s.y1)];
      if (s.type === "rect") {
        plot.append(node("rect", { x: Math.min(...xs), y: Math.min(...yv), width: Math.abs(xs[1] - xs[0]), height: Math.abs(yv[1] - yv[0]),
                                   fill: s.fillcolor, opacity: s.opacity }));
      } else {
        plot.append(node("line", { x1: xs[0], x2: xs[1], y1: yv[0], y2: yv[1], stroke: s.line.color, "stroke-dasharray": dash }));
      }
    }
    svg.append(plot);
    for (const a of layout.annotations || []) {
      const x = a.xref.endsWith("domain") ? m.l + pw * a.x : X(a.x);
      const y = a.yref === "paper" ? m.t + ph * (1 - a.y) : m.t + ph * (1 - a.y);
      const anchor = { left: "start", right: "end" }[a.xanchor] || "middle";
      svg.append(node("text", { x: x + (a.xshift || 0), y: a.yanchor === "bottom" ? y - 3 : y + 11, "text-anchor": anchor,
                                fill: (a.font && a.font.color) || "#1b1f24" }, plain(a.text)));
    }
    box.replaceChildren(svg);
  }

  return { draw };
})();
