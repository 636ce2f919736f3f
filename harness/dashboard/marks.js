// kernelgap dashboard: the open alerts above the headline and the change points and drifts on
// each case's charts (data.js: D.alerts, and each case's `changes`, from
// harness/dashboard/alerts.py). app.js calls window.KernelgapMarks; without this file the page
// still draws, without the marks.
"use strict";
window.KernelgapMarks = (function () {
  const SLOWER = "#b3261e", FASTER = "#0a7a3d";
  const pct = (f) => (f >= 0 ? "+" : "−") + Math.abs(f * 100).toFixed(1) + "%";
  const esc = (text) => String(text).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");

  // The open alerts, slower first, each linking to its case's charts; none: a quiet line.
  function alerts(D, el, box) {
    const list = D.alerts || [];
    box.replaceChildren(el("h2", {}, list.length ? "Open alerts (" + list.length + ")" : "Open alerts"));
    if (!list.length) {
      box.append(el("p", { class: "explain" }, "None: no newest point beyond max(5%, 3 x MAD), " +
        "no change point among the newest runs and no drift (unstable points never alert)."));
      return 0;
    }
    const ul = el("ul", { class: "alerts" });
    for (const a of list) {
      const where = a.anchor ? el("a", { href: "#" + a.anchor }, a.case) : a.case;
      ul.append(el("li", { class: a.direction === "slower" ? "worse" : "better" },
        el("b", {}, pct(a.relative) + " " + a.direction), " ", where, " / " + a.impl + " " + a.metric +
        " · " + a.kind + ": ", el("span", { class: "note" }, a.text)));
    }
    box.append(ul);
    return list.length;
  }

  // A step: a dashed rule at the first run after it, red when slower, green when faster, with
  // its size; a drift: a shaded band over its window. In the panel of its metric.
  function chart(c, xOf, shapes, annotations) {
    let count = 0;
    for (const m of c.changes || []) {
      const [xa, ya] = m.metric === "gap" ? ["x", "y"] : ["x2", "y2"];
      const color = m.relative > 0 ? SLOWER : FASTER;
      const x1 = xOf([m.run])[0];
      const hover = esc(m.impl + " " + m.metric + ": " + m.kind + " " + pct(m.relative) + " (" +
        m.before + " → " + m.after + ", p " + m.p + ")");
      if (m.kind === "drift" && m.from >= 0) {
        shapes.push({ type: "rect", xref: xa, yref: ya + " domain", x0: xOf([m.from])[0], x1, y0: 0, y1: 1,
                      fillcolor: color, opacity: 0.08, line: { width: 0 } });
      } else {
        shapes.push({ type: "line", xref: xa, yref: ya + " domain", x0: x1, x1, y0: 0, y1: 1,
                      line: { color, width: 1.5, dash: "dash" } });
      }
      annotations.push({ xref: xa, yref: ya + " domain", x: x1, y: 0.02, xanchor: "right", yanchor: "bottom",
        xshift: -2, text: esc(pct(m.relative)), showarrow: false, hovertext: hover,
        font: { size: 11, color }, bgcolor: "rgba(255,255,255,0.8)" });
      count += 1;
    }
    return count;
  }

  return { alerts, chart };
})();
