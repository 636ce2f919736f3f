// kernelgap dashboard: the lead chart, the newest run's gap per case (data.js: D.table). One row
// per case, sorted by its primary candidate's gap (else its first; the largest gap on top), each
// candidate a marker with its 95% interval, unstable ones hollow; parity is the dashed line at
// 1.00x; a case's name links to its charts. Drawn as plain SVG, not with plotly.js: it is the
// chart in view when the page opens, and this way it is on screen with the table instead of
// after plotly.min.js has loaded (1.5-2.5 s on a 2-core machine). At the right of each row, its
// primary candidate's gap trend since the headline's chosen start (D.trends: case -> [first gap,
// newest gap, first run]), "is it closing" per case. app.js calls draw(); without this file the
// page draws without it. It fits its box: a narrow one (a phone) gets narrower labels.
"use strict";
window.KernelgapOverview = (function () {
  const SVG = "http://www.w3.org/2000/svg";
  const WIDE = { l: 170, r: 84, t: 34, b: 42 }, NARROW = { l: 96, r: 62, t: 34, b: 42 };
  const ROW_PX = 22, MIN_HEIGHT = 220, NARROW_PX = 560;
  const BETTER = "#0a7a3d", WORSE = "#b3261e";
  const INK = "#1b1f24", MUTED = "#5b6470", GRID = "#eceff2", ROW_GRID = "#f4f6f8", PARITY = "#7a828c";

  function node(tag, attrs, ...children) {
    const n = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs || {})) n.setAttribute(k, v);
    for (const c of children) n.append(c);
    return n;
  }
  const title = (text) => node("title", {}, text);  // the browser's tooltip; text, never markup

  // The newest run's rows with a gap, by case (sorted), and the candidates (the primary first).
  function rowsOf(D) {
    const rows = D.table.filter((r) => r.candidate && r.gap !== null && r.gap !== undefined);
    const lead = (c) => rows.find((r) => r.case === c && r.candidate === D.primary) || rows.find((r) => r.case === c);
    const cases = [...new Set(rows.map((r) => r.case))].sort((a, b) => lead(b).gap - lead(a).gap);
    const names = [...new Set(rows.map((r) => r.candidate))];
    if (D.primary && names.includes(D.primary)) names.sort((a, b) => (b === D.primary) - (a === D.primary));
    return { rows, cases, names };
  }

  // Tick values for a log axis over [lo, hi]: 1-2-5 per decade over a wide range, else evenly
  // stepped values (a gap axis usually spans well under a decade).
  function ticks(lo, hi) {
    const out = [];
    if (Math.log10(hi / lo) >= 1) {
      for (let e = Math.floor(Math.log10(lo)); e <= Math.ceil(Math.log10(hi)); e++) {
        for (const m of [1, 2, 5]) out.push(m * 10 ** e);
      }
    } else {
      const raw = (hi - lo) / 6, mag = 10 ** Math.floor(Math.log10(raw));
      const step = [1, 2, 5, 10].map((m) => m * mag).find((s) => s >= raw);
      for (let v = Math.ceil(lo / step) * step; v <= hi; v += step) out.push(+v.toPrecision(6));
    }
    return out.filter((v) => v >= lo && v <= hi);
  }

  function draw(D, box) {
    const { rows, cases, names } = rowsOf(D);
    box.replaceChildren();
    if (!cases.length) {
      box.append(Object.assign(document.createElement("p"), { className: "explain", textContent: "No case of the newest run has a gap." }));
      return { cases: 0, points: 0 };
    }
    const width = Math.max(box.clientWidth, 280), height = Math.max(MIN_HEIGHT, 60 + ROW_PX * cases.length);
    const MARGIN = width < NARROW_PX ? NARROW : WIDE, LABEL_CHARS = width < NARROW_PX ? 13 : 24;
    const plotW = width - MARGIN.l - MARGIN.r, plotH = height - MARGIN.t - MARGIN.b;
    let lo = Math.min(1, ...rows.map((r) => r.lo ?? r.gap)), hi = Math.max(1, ...rows.map((r) => r.hi ?? r.gap));
    const pad = Math.max(Math.log(hi / lo) * 0.04, 0.01);
    lo *= Math.exp(-pad);
    hi *= Math.exp(pad);
    const x = (v) => MARGIN.l + plotW * Math.log(v / lo) / Math.log(hi / lo);
    const rowH = plotH / cases.length;
    const y = (i) => MARGIN.t + rowH * (i + 0.5);
    const svg = node("svg", { width, height, viewBox: `0 0 ${width} ${height}`, role: "img",
                              "font-family": "system-ui, sans-serif", "font-size": 12, fill: INK });
    const name = "Latest gap per case: " + cases.length + " cases, lower is better";
    svg.setAttribute("aria-label", name);
    svg.append(node("title", {}, name));
    const grid = node("g", { stroke: GRID });
    let last = -Infinity;
    for (const v of ticks(lo, hi)) {
      const px = x(v);
      if (px - last < 44) continue;  // labels would touch
      last = px;
      grid.append(node("line", { x1: px, x2: px, y1: MARGIN.t, y2: MARGIN.t + plotH }));
      svg.append(node("text", { x: px, y: MARGIN.t + plotH + 15, "text-anchor": "middle", fill: MUTED }, String(+v.toPrecision(3))));
    }
    cases.forEach((_, i) => grid.append(node("line", { x1: MARGIN.l, x2: MARGIN.l + plotW, y1: y(i), y2: y(i), stroke: ROW_GRID })));
    svg.prepend(grid);
    svg.append(node("line", { x1: x(1), x2: x(1), y1: MARGIN.t, y2: MARGIN.t + plotH, stroke: PARITY, "stroke-dasharray": "4 3" }),
               node("text", { x: MARGIN.l + plotW / 2, y: height - 6, "text-anchor": "middle" },
                    "gap (x baseline, log scale; lower is better)"));
    const anchorOf = Object.fromEntries(D.table.map((r) => [r.case, r.anchor]));
    cases.forEach((c, i) => {
      const label = c.length > LABEL_CHARS ? c.slice(0, LABEL_CHARS - 1) + "…" : c;
      const text = node("text", { x: MARGIN.l - 8, y: y(i) + 4, "text-anchor": "end" }, label, title(c));
      svg.append(anchorOf[c] ? node("a", { href: "#" + anchorOf[c] }, text) : text);
    });
    const trends = D.trends || {};
    let trended = 0;
    cases.forEach((c, i) => {
      const t = trends[c];
      if (!t) return;
      const change = t[1] / t[0] - 1, flat = Math.abs(change) < 0.0005;
      const words = (flat ? "= " : change < 0 ? "▼ " : "▲ ") + (change >= 0 ? "+" : "−") + Math.abs(change * 100).toFixed(1) + "%";
      svg.append(node("text", { x: width - 4, y: y(i) + 4, "text-anchor": "end", class: "case-trend", "data-case": c,
                                fill: flat ? MUTED : change < 0 ? BETTER : WORSE },
        words, title(c + " · " + (D.primary || "primary") + ": " + t[0].toFixed(3) + "x → " + t[1].toFixed(3) + "x since " +
                     D.runs.date[t[2]].slice(0, 10) + (D.runs.commit[t[2]] ? " (" + D.runs.commit[t[2]].slice(0, 7) + ")" : ""))));
      trended += 1;
    });
    if (trended) svg.append(node("text", { x: width - 4, y: MARGIN.t - 8, "text-anchor": "end", fill: MUTED, "font-size": 11 }, "since start"));
    const dodge = Math.min(5, rowH / (names.length + 1));
    let points = 0;
    names.forEach((name, j) => {
      const color = (D.colors && D.colors[name]) || "#0072b2";
      const shift = (j - (names.length - 1) / 2) * dodge;
      for (const r of rows.filter((r) => r.candidate === name)) {
        const i = cases.indexOf(r.case), cy = y(i) + shift, stable = r.status === "stable";
        const g = node("g", { class: "point", "data-case": r.case, "data-candidate": name, "data-stable": stable ? "1" : "0" });
        if (r.lo !== null && r.lo !== undefined) {
          const [a, b] = [x(r.lo), x(r.hi)];
          g.append(node("path", { d: `M${a},${cy}H${b}M${a},${cy - 3}v6M${b},${cy - 3}v6`, stroke: color, "stroke-width": 1.5, fill: "none" }));
        }
        g.append(node("circle", { cx: x(r.gap), cy, r: 4.5, fill: stable ? color : "#fff", stroke: color, "stroke-width": 2 }),
                 title(r.case + " · " + name + "\ngap " + r.gap.toFixed(4) + "x" +
                       (r.lo !== null && r.lo !== undefined ? ", 95% interval [" + r.lo.toFixed(4) + ", " + r.hi.toFixed(4) + "]" : "") +
                       "\n" + r.status));
        svg.append(g);
        points += 1;
      }
    });
    let lx = MARGIN.l;
    const legend = node("g", { class: "legend" });
    const entries = names.map((n) => [n, (D.colors && D.colors[n]) || "#0072b2", true]);
    if (rows.some((r) => r.status !== "stable")) entries.push(["unstable (hollow)", MUTED, false]);
    for (const [text, color, filled] of entries) {
      legend.append(node("circle", { cx: lx + 5, cy: 14, r: 4.5, fill: filled ? color : "#fff", stroke: color, "stroke-width": 2 }),
                    node("text", { x: lx + 14, y: 18 }, text));
      lx += 30 + 7 * text.length;
    }
    svg.append(legend);
    box.append(svg);
    return { cases: cases.length, points, trends: trended, width };
  }

  return { draw };
})();
