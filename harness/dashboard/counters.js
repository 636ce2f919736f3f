// kernelgap dashboard: each case's counter panel under its chart (data.js: each case's
// `counters`, from harness/dashboard/counter_panels.py), drawn as plain SVG when its chart is.
// One row per static counter that stepped in the runs shown, a step line per implementation
// (the primary candidate in its colour, the baseline grey) with each step marked; a mark links
// to the step's explanation on the case page. The counters that did not step collapse to one
// line of text per implementation. Without this file the page still draws, without panels.
"use strict";
window.KernelgapCounters = (function () {
  const NS = "http://www.w3.org/2000/svg";
  const LEFT = 72, RIGHT = 16, ROW = 34;  // the case chart's plot margins: steps line up with it
  const SHOWN_STEPS = 3;  // steps listed under the rows (each is on the case page)
  const MAX_ROWS = 6;  // rows drawn; the other counters that stepped are named in a line
  const MORE_NAMES = 6;  // of those, named (every one is on the case page)
  const UNITS = { "bytes/thread": " B", "bytes/block": " B/block" };
  function node(tag, attrs, text) {
    const n = document.createElementNS(NS, tag);
    for (const [k, v] of Object.entries(attrs)) if (v !== undefined && v !== null) n.setAttribute(k, v);
    if (text !== undefined) n.textContent = text;
    return n;
  }
  function number(v, unit) {
    if (v === null || v === undefined) return "–";
    if (unit === "fraction") return Math.round(v * 100) + "%";
    return (Number.isInteger(v) ? String(v) : v.toPrecision(4)) + (UNITS[unit] || "");
  }

  // One row: the counter's step lines over [lo, hi], its label and newest values, its marks.
  function row(svg, P, i, lines, steps, view, width, y0) {
    const xpx = (x) => LEFT + (width - LEFT - RIGHT) * (x - view.lo) / (view.hi - view.lo);
    const values = lines.flatMap((l) => l.set.map((k) => P.sets[k][i])).filter((v) => v !== null);
    const lo = Math.min(...values), hi = Math.max(...values);
    const ypx = (v) => y0 + 28 - (hi === lo ? 8 : 16 * (v - lo) / (hi - lo));
    // Each line's value where the view begins (its last point before it, else its first) → newest.
    const change = lines.map((l) => {
      const before = l.run.map((r, k) => k).filter((k) => view.at([l.run[k]])[0] <= view.lo).pop();
      const [a, b] = [P.sets[l.set[before === undefined ? 0 : before]][i], P.sets[l.set[l.set.length - 1]][i]];
      return (lines.length > 1 ? l.impl + " " : "") + (a === b ? number(b, P.units[i]) : number(a, P.units[i]) + " → " + number(b, P.units[i]));
    });
    svg.append(node("text", { x: LEFT, y: y0 + 9, fill: "#1b1f24" }, P.labels[i] + ": " + change.join(" · ")));
    for (const l of lines) {
      let d = "";
      l.run.forEach((r, k) => {
        const v = P.sets[l.set[k]][i];
        if (v === null) return;
        const x = Math.max(xpx(view.at([r])[0]), LEFT - 4).toFixed(1), y = ypx(v).toFixed(1);
        d += d ? "H" + x + "V" + y : "M" + x + "," + y;
      });
      if (d) svg.append(node("path", { d: d + "H" + (width - RIGHT), fill: "none", stroke: l.color,
                                       "stroke-width": l.role === "baseline" ? 1.5 : 2.2 }));
    }
    let marks = 0;
    for (const s of steps.filter((s) => s.names.includes(P.names[i]))) {
      const x = xpx(view.at([s.run])[0]);
      const color = (lines.find((l) => l.impl === s.impl) || {}).color || "#333333";
      const link = node("a", { href: view.href(s), class: "step", "data-step": s.id });
      link.append(node("title", {}, s.impl + " at commit " + view.commit(s.run) + ": " + s.text),
                  node("line", { x1: x, x2: x, y1: y0 + 10, y2: y0 + 32, stroke: color, "stroke-dasharray": "3 2" }),
                  node("path", { d: "M" + (x - 5) + "," + (y0 + 32) + "l5,-7l5,7Z", fill: color }));
      svg.append(link);
      marks += 1;
    }
    return marks;
  }

  // Draws case `c`'s panel for `view` ({ mode, lo, hi, at(runs) -> x, href(step), commit(run) })
  // into `box` with `el` (app.js's element maker); what it drew, for the page's render state.
  function draw(box, c, view, el) {
    const P = c.counters;
    const lines = P ? P.lines.filter((l) => l.mode === view.mode) : [];
    box.hidden = !lines.length;
    if (!lines.length) { box.replaceChildren(); return null; }
    const inView = (r) => { const x = view.at([r])[0]; return x >= view.lo && x <= view.hi; };
    const steps = P.steps.filter((s) => s.mode === view.mode && inView(s.run));
    const stepped = new Set(steps.flatMap((s) => s.names));
    // The rows: the counters that stepped, most telling first (each step lists its counters so).
    const ranked = [...new Set(steps.slice().sort((a, b) => b.names.length - a.names.length).flatMap((s) => s.names))];
    const rows = ranked.slice(0, MAX_ROWS).map((n) => P.names.indexOf(n));
    const parts = [];
    let marks = 0;
    if (rows.length) {
      const width = Math.max(box.clientWidth, 300);
      const svg = node("svg", { width, height: ROW * rows.length + 4, role: "img", "font-size": 11,
                                "font-family": "system-ui, sans-serif", "aria-label": "counters of " + c.id });
      rows.forEach((i, k) => { marks += row(svg, P, i, lines, steps, view, width, k * ROW); });
      parts.push(svg);
    }
    if (ranked.length > rows.length) {
      const more = ranked.slice(rows.length).map((n) => P.labels[P.names.indexOf(n)]);
      parts.push(el("p", { class: "unchanged" }, "+" + more.length + " more counters stepped: " +
                    more.slice(0, MORE_NAMES).join(", ") + (more.length > MORE_NAMES ? ", …" : "")));
    }
    // What did not step, per implementation (those with the same words in one line): resources
    // and totals by value, the instruction classes by count (each is on the case page).
    const said = new Map();
    for (const l of lines) {
      const last = P.sets[l.set[l.set.length - 1]];
      const kept = P.names.map((n, i) => i).filter((i) => !stepped.has(P.names[i]) && last[i] !== null);
      const isClass = (i) => /^static\/(instructions|in_loops)\/(?!total$)/.test(P.names[i]);
      const words = kept.filter((i) => !isClass(i)).map((i) => P.labels[i] + " " + number(last[i], P.units[i]));
      const classes = kept.filter(isClass).length;
      if (classes) words.push(classes + " instruction classes");
      if (!words.length) continue;
      const text = words.join(", ");
      said.set(text, (said.get(text) || []).concat([l.impl]));
    }
    const unchanged = [...said].map(([text, impls]) => impls.join(", ") + " unchanged: " + text);
    for (const text of unchanged) parts.push(el("p", { class: "unchanged" }, text));
    const listed = steps.slice().sort((a, b) => b.run - a.run).slice(0, SHOWN_STEPS);
    for (const s of listed) {
      parts.push(el("p", { class: "step" }, el("a", { href: view.href(s), "data-step": s.id },
        "▲ " + s.impl + " at commit " + view.commit(s.run)), ": " + s.text));
    }
    if (steps.length > listed.length) {
      parts.push(el("p", { class: "step" }, "+" + (steps.length - listed.length) + " more steps on ",
                    el("a", { href: c.page }, "the case page")));
    }
    box.replaceChildren(el("p", { class: "counters-title" }, "counters (static, per build; ▲ a step: hover or click it)"), ...parts);
    return { rows: rows.map((i) => P.names[i]), marks, steps: steps.map((s) => s.id), unchanged };
  }

  return { draw };
})();
