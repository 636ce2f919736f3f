// kernelgap dashboard: the headline of one timing mode (data.js: D.views[mode].cards), each card
// saying its mode in words, the primary candidate's card first with its trend: a sparkline of
// its suite geomean over the chosen span and "1.31x -> 1.21x since <date> (<commit>)", the span
// the last N runs, every run, or since a chosen run (a commit or date typed or picked, or a
// point of the sparkline clicked); and the
// open alerts, one per change event, each with its mode. Drawn as HTML and SVG at once (no plotly.js): all of it is in the first
// window. app.js calls draw() and alerts() again when the mode or the span changes.
"use strict";
window.KernelgapHeadline = (function () {
  const SVG = "http://www.w3.org/2000/svg";
  const SPANS = [["10", "the last 10 runs"], ["50", "the last 50 runs"], ["all", "the first run"]];
  const SHOWN_ALERTS = 6;  // the rest one click away: the first window keeps its lead chart
  const PICK_RUNS = 200;  // runs in the trend's pick list
  const gapText = (g) => (g === null || g === undefined) ? "–" : g.toFixed(3) + "x";
  const pct = (f) => (f >= 0 ? "+" : "−") + Math.abs(f * 100).toFixed(1) + "%";

  // A mode's family, symbol and tooltip, from data.js's table (protocol.modes): every mode name
  // the history carries (hot, cold-mean, cold-mean/cupti, ...) is in it.
  function modeInfo(mode) {
    const table = (window.KERNELGAP_DATA || {}).mode_info || {};
    return table[mode] || { name: mode || "?", family: "other", symbol: "●", title: "mode " + (mode || "?") };
  }
  function modeTag(el, mode) {
    const info = modeInfo(mode);
    return el("span", { class: "mode-tag " + info.family, title: info.title, "data-family": info.family },
      info.symbol + " " + (mode || "mode ?"));
  }

  // The trend's points over the span: the last N of the card's key's runs, all of them, or
  // ("run:<r>") those from run r of D.runs on (the card's last point if it has none since).
  function span(card, since) {
    const t = card.trend || { run: [], gap: [] };
    const chosen = chosenOf(since), at = chosen === null ? -1 : t.run.findIndex((r) => r >= chosen);
    const k = chosen !== null ? (at < 0 ? t.run.length - 1 : at) :
      since === "all" ? 0 : t.run.length - Number(since);
    return { run: t.run.slice(Math.max(0, k)), gap: t.gap.slice(Math.max(0, k)), of: t.run.length };
  }

  // The run of D.runs that a span "run:<r>" starts at; null for the other spans.
  function chosenOf(since) {
    return since.startsWith("run:") ? Number(since.slice(4)) : null;
  }

  // A run as the reader would type it or pick it from the list: its commit's first 12 digits
  // and its date to the minute (runs of one commit told apart), or its date to the second.
  function named(R, r) {
    return R.commit[r] ? R.commit[r].slice(0, 12) + " " + R.date[r].slice(0, 16) : R.date[r].slice(0, 19);
  }

  // The run (an index of D.runs) of `runs` that `text` names: the one it names in full (a pick
  // from the list), else the first whose commit starts with it, or whose date (YYYY-MM-DD[
  // HH:MM...]) does; null if none.
  function chosenRun(R, runs, text) {
    const t = text.trim().toLowerCase();
    if (!t) return null;
    const r = runs.find((r) => named(R, r).toLowerCase() === t) ??
      runs.find((r) => (R.commit[r] || "").toLowerCase().startsWith(t)) ??
      runs.find((r) => R.date[r].replace("T", " ").startsWith(t.replace("t", " ")));
    return r === undefined ? null : r;
  }

  function sparkline(points, color, onPick) {
    const w = 500, h = 46, pad = 3;
    const svg = document.createElementNS(SVG, "svg");
    for (const [k, v] of Object.entries({ width: w, height: h, viewBox: `0 0 ${w} ${h}`, class: "spark", role: "img",
                                          "aria-label": "suite geomean gap over the chosen span" })) svg.setAttribute(k, v);
    const ys = points.gap.filter((g) => g !== null);
    if (ys.length < 2) return svg;
    const lo = Math.min(...ys), hi = Math.max(...ys), n = points.gap.length;
    const x = (i) => pad + (w - 2 * pad) * i / (n - 1);
    const y = (g) => h - pad - (h - 2 * pad) * (hi > lo ? (g - lo) / (hi - lo) : 0.5);
    const path = points.gap.map((g, i) => (g === null ? "" : (i ? "L" : "M") + x(i).toFixed(1) + "," + y(g).toFixed(1))).join("");
    const line = document.createElementNS(SVG, "path");
    for (const [k, v] of Object.entries({ d: path.replace(/^L/, "M"), fill: "none", stroke: color, "stroke-width": 2 })) line.setAttribute(k, v);
    const title = document.createElementNS(SVG, "title");
    title.textContent = "suite geomean gap, " + n + " runs: " + gapText(ys[0]) + " to " + gapText(ys[ys.length - 1]) +
      " (click a point to start the trend there)";
    svg.setAttribute("aria-label", title.textContent);
    svg.append(title, line);
    svg.style.cursor = "pointer";
    svg.addEventListener("click", (e) => {
      const box = svg.getBoundingClientRect();
      const at = Math.round((e.clientX - box.left - pad * box.width / w) / (box.width * (w - 2 * pad) / w) * (n - 1));
      let best = -1;  // the nearest point with a gap
      points.gap.forEach((g, i) => { if (g !== null && (best < 0 || Math.abs(i - at) < Math.abs(best - at))) best = i; });
      if (best >= 0) onPick(points.run[best]);
    });
    return svg;
  }

  // "1.310x → 1.214x (−7.3%) since 2026-01-01 (0ade7e2)", over the chosen span's points with a
  // gap (a span of one point after a chosen run says so).
  function trendText(points, R) {
    const k = points.gap.findIndex((g) => g !== null);
    const n = points.gap.findLastIndex((g) => g !== null);
    if (k < 0 || n <= k) {
      if (points.of < 2) return "one run so far";
      if (points.run.length !== 1) return "fewer than two runs with a gap in this span";
      return "the newest run only (" + R.date[points.run[0]].slice(0, 10) + "): nothing after it to compare";
    }
    const first = points.gap[k], last = points.gap[n], r = points.run[k];
    const commit = R.commit[r] ? " (" + R.commit[r].slice(0, 7) + ")" : "";
    return gapText(first) + " → " + gapText(last) + " (" + pct(last / first - 1) + ") since " + R.date[r].slice(0, 10) + commit;
  }

  function card(el, c, D, since, onPick) {
    const points = span(c, since);
    let delta = el("div", { class: "delta note" }, "no earlier comparable run");
    if (c.change !== null) {
      const arrow = Math.abs(c.change) < 0.0005 ? "= 0.0%" : (c.change < 0 ? "▼ " : "▲ ") + pct(c.change);
      delta = el("div", { class: "delta note " + (c.change < 0 ? "better" : "worse") }, arrow + " against the previous " + c.mode + " run, over the " +
                 c.previous.common + " cases in both");
    }
    const listed = (what, ids) => ids && ids.length ? "; " + what + ": " + ids.join(", ") : "";
    const note = c.gap === null ? "no case with a gap in the newest " + c.mode + " run" :
      "geometric mean over " + (c.of > c.cases ? c.cases + " of " + c.of : c.cases) + " cases" +
      (c.ci_low !== null && c.ci_low !== undefined ? ", 95% interval " + gapText(c.ci_low) + " to " + gapText(c.ci_high) : "") +
      listed("unstable, in it", c.unstable) + listed("missing", c.missing);
    const color = (D.colors && D.colors[c.candidate]) || "#0072b2";
    return el("div", { class: c.primary ? "card primary" : "card", "data-candidate": c.candidate, "data-gap": c.gap,
                       "data-change": c.change, "data-mode": c.mode, "data-primary": c.primary ? "1" : null },
      el("div", { class: "tag" }, c.primary ? "primary candidate · " : "", modeTag(el, c.mode)),
      el("div", { class: "who" }, c.candidate + " ", el("span", {}, "vs " + c.baseline + " · " + c.mode)),
      el("div", { class: "big" }, gapText(c.gap)),
      el("div", { class: "trend" }, trendText(points, D.runs)), sparkline(points, color, onPick), delta,
      el("div", { class: "note" }, note));
  }

  // The cards of `mode`; `since` (a SPANS key, or "run:<r>": since run r of D.runs) sets the
  // trends' span; onSince(value) is called when the reader picks another: from the list, by a
  // commit or date typed (or picked from the primary's runs), or by a point of a sparkline.
  // What it drew, for the page's render state.
  function draw(D, mode, since, box, el, onSince) {
    const view = D.views[mode], R = D.runs;
    box.replaceChildren();
    const lead = view.cards.find((c) => c.primary) || view.cards[0];
    const runs = (lead && lead.trend) ? lead.trend.run : [];
    const select = el("select", { "aria-label": "Trend since", id: "trend-since" });
    const chosen = chosenOf(since);
    const spans = chosen === null ? SPANS : [...SPANS, [since, R.commit[chosen] ?
      R.date[chosen].slice(0, 10) + " (" + R.commit[chosen].slice(0, 7) + ")" : R.date[chosen].slice(0, 16)]];
    for (const [value, words] of spans) {
      const option = el("option", { value }, "since " + words);
      if (value === since) option.selected = true;
      select.append(option);
    }
    select.addEventListener("change", () => onSince(select.value));
    const from = el("input", { id: "trend-from", list: "trend-runs", size: 16, placeholder: "or a commit or date",
                                "aria-label": "Trend since the run of a commit or date",
                                value: chosen === null ? null : named(R, chosen) });
    const list = el("datalist", { id: "trend-runs" });
    // The newest PICK_RUNS to pick from (a typed commit or date finds any run): 10,000 runs
    // would put 5,000 options in the page.
    for (const r of runs.slice(-PICK_RUNS).reverse()) list.append(el("option", { value: named(R, r) }));
    from.addEventListener("change", () => {
      const r = chosenRun(R, runs, from.value);
      if (r === null) {
        from.setAttribute("aria-invalid", "true");
        from.title = "no " + mode + " run of " + (lead ? lead.candidate : "the primary candidate") + " with that commit or date";
      } else onSince("run:" + r);
    });
    const onPick = (r) => onSince("run:" + r);
    const drawn = [];
    for (const c of view.cards) {
      const node = card(el, c, D, since, onPick);
      if (c === lead) node.querySelector(".trend").after(el("label", {}, "trend ", select), " ", from, list);
      box.append(node);
      drawn.push({ candidate: c.candidate, mode: c.mode, gap: c.gap, text: gapText(c.gap), primary: !!c.primary,
                   cases: c.cases, trend: node.querySelector(".trend").textContent });
    }
    if (!view.cards.length) box.append(el("p", { class: "explain" }, "No candidate has a gap in the newest " + mode + " run."));
    return drawn;
  }

  // The open alerts as events (data.js: D.alerts, harness/dashboard/alerts.py: one per change,
  // gap events first, then by size, newest first), those of `mode` and of the shown GPU model
  // first; each lists the series it covers on a click. One count: the heading's, the button's.
  function alerts(D, mode, box, el) {
    const list = (D.alerts || []).map((e, k) => [e, k])
      .sort(([a, i], [b, j]) => (a.mode !== mode) - (b.mode !== mode) || i - j).map(([e]) => e);
    box.replaceChildren(el("h2", {}, "Open alerts (" + list.length + ")"));
    if (!list.length) {
      box.append(el("p", { class: "explain" }, "None: no newest point beyond max(5%, 3 x MAD), no change point " +
        "among the newest runs and no drift (unstable points never alert)."));
      return { shown: 0, total: 0, series: 0 };
    }
    const R = D.runs, ul = el("ul", { class: "alerts" });
    list.forEach((e, k) => {
      const slower = e.direction === "slower";
      const cls = e.kind === "baseline" ? "shared" : (slower ? "worse" : "better");
      const range = (e.from >= 0 && R.commit[e.from] ? R.commit[e.from].slice(0, 7) + ".." : "up to ") +
        (R.commit[e.run] ? R.commit[e.run].slice(0, 7) : R.date[e.run].slice(0, 16));
      const first = e.series[0];
      const where = first.anchor ? el("a", { href: "#" + first.anchor }, e.cases[0]) : e.cases[0];
      const more = e.cases.length > 1 ? " and " + (e.cases.length - 1) + " more case" + (e.cases.length > 2 ? "s" : "") : "";
      const details = el("details", { class: "covers" }, el("summary", {}, e.series.length + " series" +
        (e.points ? ", " + e.points + " sweep points" : "") + " (" + e.metrics.join(", ") + ")"),
        el("ul", {}, ...e.series.map((a) => el("li", {}, a.case + " / " + a.impl + " " + a.metric + ": " + a.text +
          (a.folded ? " (" + a.folded.join(", ") + " folded into it)" : "")))));
      const li = el("li", { class: cls, "data-mode": e.mode || "", "data-kind": e.kind, "data-gpu": e.gpu || "",
                            "data-cases": e.cases.join(" ") },
        modeTag(el, e.mode), " ", el("b", {}, (e.kind === "gap" ? "gap " : "times ") + pct(e.relative) + " " + e.direction),
        " ", where, more, e.kind === "baseline" ? el("span", { class: "note" }, " · the baseline moved, the gap did not") : "",
        el("span", { class: "note" }, " · commits " + range + (D.gpus && D.gpus.length > 1 ? " · " + e.gpu : "")), details);
      if (k >= SHOWN_ALERTS) li.hidden = true;
      ul.append(li);
    });
    box.append(ul);
    if (list.length > SHOWN_ALERTS) {
      const more = el("button", { type: "button", class: "more", "aria-expanded": "false" }, "show all " + list.length);
      more.addEventListener("click", () => {
        for (const li of ul.querySelectorAll(":scope > li[hidden]")) li.hidden = false;
        more.remove();
      });
      box.append(more);
    }
    return { shown: Math.min(list.length, SHOWN_ALERTS), total: list.length,
             series: list.reduce((n, e) => n + e.series.length, 0) };
  }

  // The run (of D.runs) the chosen span starts at: the primary card's first point in it.
  function startOf(D, mode, since) {
    const cards = (D.views[mode] || { cards: [] }).cards, lead = cards.find((c) => c.primary) || cards[0];
    if (!lead) return null;
    const points = span(lead, since);
    return points.run.length ? points.run[0] : null;
  }

  return { draw, alerts, modeTag, modeInfo, gapText, startOf };
})();
