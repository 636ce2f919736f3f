// kernelgap dashboard: draws each chart only when it comes into (or near) the window. A page of
// 69 charts that drew them all at open kept the browser busy for 6.5 s; a reader looks at a few.
// The charting library is loaded once, after the page's first view is on screen, and a chart
// that needs it waits for it. app.js adds the charts and says what drawing one means.
"use strict";
window.KernelgapLazy = (function () {
  const NEAR = "25% 0px";  // drawn ahead: a quarter of a window above and below the screen

  // After the next frame is painted: a frame, then a task (MessageChannel, as nested
  // setTimeout(0) calls are clamped to 4 ms each).
  const channel = new MessageChannel();
  const waiting = [];
  channel.port1.onmessage = () => waiting.shift()();
  const yieldTask = () => new Promise((resolve) => { waiting.push(resolve); channel.port2.postMessage(0); });
  const nextPaint = () => new Promise((resolve) => requestAnimationFrame(() => yieldTask().then(resolve)));

  // The script at `src`, loaded once (a promise of its load; rejected, naming it, if it fails).
  function loadScript(src) {
    return new Promise((resolve, reject) => {
      const script = document.createElement("script");
      script.src = src;
      script.onload = resolve;
      script.onerror = () => reject(new Error("failed to load " + src));
      document.head.append(script);
    });
  }

  // hooks.library: the charting library's script. It is loaded once, when a chart that needs
  // it is to be drawn or else once everything in view at open is drawn (so that a chart
  // scrolled to later need not wait for it); then hooks.loaded() or hooks.missing() is called.
  // hooks.idle(drawn, total): nothing in view is left to draw; hooks.sketched(): what is in view
  // is sketched, the library not loaded yet; hooks.error(e): a drawing failed.
  // A job: { node, draw(node) -> promise, library: whether it needs the library, sketch(node):
  // drawn at once while the library is loading (optional) }.
  function create(hooks) {
    const jobs = [], visible = new Set();
    let library = null, ready = false, missing = false, running = Promise.resolve(), pumping = false, seen;
    const sighted = new Promise((resolve) => (seen = resolve));  // the observer's first report

    function load() {
      if (library === null) {
        library = loadScript(hooks.library).then(() => {
          ready = true;
          hooks.loaded();
          for (const j of jobs) {  // sketched: drawn again with the library when in view
            if (!j.sketched) continue;
            j.sketched = false;
            j.drawn = false;
            j.version += 1;
          }
          start();
        }, () => {
          missing = true;  // its charts stay undrawn (or sketched)
          hooks.missing();
        });
      }
      return library;
    }
    // A sketched chart in view waits for the library: the page is not idle until it is drawn.
    const waitingUpgrade = () => !ready && !missing && jobs.some((j) => j.sketched && visible.has(j.node));

    const observer = new IntersectionObserver((entries) => {
      for (const e of entries) (e.isIntersecting ? visible.add(e.target) : visible.delete(e.target));
      seen();
      start();
    }, { rootMargin: NEAR });

    // The pending job in view (or near it) nearest the middle of the window.
    function next() {
      let best = null, bestDistance = Infinity;
      for (const j of jobs) {
        if (j.drawn || !visible.has(j.node) || (j.library && missing)) continue;
        const box = j.node.getBoundingClientRect();
        const distance = Math.abs(box.top + box.height / 2 - innerHeight / 2);
        if (distance < bestDistance) [best, bestDistance] = [j, distance];
      }
      return best;
    }

    async function pump() {
      await sighted;  // the observer has said what is in view
      for (let job = next(); job; job = next()) {
        if (job.library && !ready && !missing && job.sketch) {
          // The library is not there yet: a sketch now (sketch.js), the chart when it is.
          job.drawn = job.sketched = true;
          job.sketch(job.node);
          job.node.dataset.drawn = "1";
          load();
          await nextPaint();
          continue;
        }
        if (job.library) await load();
        if (job.library && missing) continue;
        if (job.drawn || !visible.has(job.node)) continue;  // drawn or scrolled away meanwhile
        const version = ++job.version;
        job.drawn = true;
        await job.draw(job.node);
        if (job.version === version) job.node.dataset.drawn = "1";  // else asked again meanwhile
        // A chart takes 50-400 ms: each is put on screen before the next is begun, and the page
        // can scroll and answer clicks in between.
        await nextPaint();
      }
      await nextPaint();  // what is in view is on screen (also when nothing was drawn)
    }

    function start() {
      if (pumping) return;
      pumping = true;
      running = pump().then(() => {
        pumping = false;
        if (next()) return start();  // scrolled meanwhile
        if (waitingUpgrade()) { hooks.sketched(); return load(); }  // idle once drawn for good
        hooks.idle(jobs.filter((j) => j.drawn).length, jobs.length);
        load();
      }, (e) => { pumping = false; hooks.error(e); });
    }

    return {
      add(node, draw, options) {
        const job = { node, draw, drawn: false, version: 0, library: !!(options && options.library),
                      sketch: options && options.sketch, sketched: false };
        jobs.push(job);
        if (options && options.drawn) { job.drawn = true; node.dataset.drawn = "1"; }
        observer.observe(node);
      },
      // Every chart that `which(node)` picks is drawn again: those in view now, the others
      // when they come into view.
      redraw(which) {
        for (const j of jobs) {
          if (!j.drawn || !which(j.node)) continue;
          j.drawn = false;
          j.version += 1;  // a drawing under way now does not count as the new one
          delete j.node.dataset.drawn;
        }
        start();
      },
      // Resolves once what is in view now is drawn and on screen (for tests and benchmarks).
      idle: async () => {
        await nextPaint();
        await nextPaint();
        start();
        while (pumping) await running;
        while (waitingUpgrade() || pumping) { await (pumping ? running : library); await nextPaint(); }
      },
      nextPaint,
      counts: () => ({ drawn: jobs.filter((j) => j.drawn).length, total: jobs.length }),
    };
  }

  return { create };
})();
