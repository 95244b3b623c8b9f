// prefixroute console: the history series and the charts (SVG) the pages draw.
// Loaded after app.js (helpers), before the pages.
"use strict";

// ---------- the history series ----------

// series turns a History into per-deployment arrays over its seconds.
function series(h, weights) {
  const n = h.seconds, deps = h.deployments.map((d) => d.deployment);
  for (const d of weights.deployments) if (!deps.includes(d.deployment)) deps.push(d.deployment);
  const byName = new Map(h.deployments.map((d) => [d.deployment, d]));
  const zero = new Array(n).fill(0);
  const total = new Array(n).fill(0);
  for (const d of h.deployments) for (let i = 0; i < n; i++) total[i] += d.picks[i];
  const win = 10;
  const out = { n, start: h.start, deps, share: {}, hit: {}, rate: {}, weight: {}, failures: {} };
  const current = Object.fromEntries(weights.deployments.map((d) => [d.deployment, d.share]));
  const marks = h.markers || [];
  for (const name of deps) {
    const s = byName.get(name) || { picks: zero, blocks: zero, matched: zero };
    const share = [], hit = [], rate = [], weight = [];
    let p = 0, t = 0, b = 0, m = 0, r5 = 0;
    let mi = 0, w = marks.length ? (marks[0].before[name] ?? 0) : (current[name] ?? 0);
    for (let i = 0; i < n; i++) {
      p += s.picks[i]; t += total[i]; b += s.blocks[i]; m += s.matched[i]; r5 += s.picks[i];
      if (i >= win) { p -= s.picks[i - win]; t -= total[i - win]; b -= s.blocks[i - win]; m -= s.matched[i - win]; }
      if (i >= 5) r5 -= s.picks[i - 5];
      share.push(t > 0 ? p / t : null);
      hit.push(b > 0 ? m / b : null);
      rate.push(r5 / Math.min(5, i + 1));
      const tEnd = (h.start + i + 1) * 1000;
      while (mi < marks.length && marks[mi].at < tEnd) { w = marks[mi].after[name] ?? 0; mi++; }
      weight.push(w);
    }
    out.share[name] = share; out.hit[name] = hit; out.rate[name] = rate; out.weight[name] = weight;
  }
  for (const f of h.failures || []) {
    const r = []; let r5 = 0;
    for (let i = 0; i < n; i++) { r5 += f.picks[i]; if (i >= 5) r5 -= f.picks[i - 5]; r.push(r5 / Math.min(5, i + 1)); }
    out.failures[f.outcome] = r;
  }
  return out;
}

// lineChart draws lines over the last `span` seconds of the series.
// lines: [{values, color, dash, width, label, last}]; markers from the history.
function lineChart(opts) {
  const W = Math.max(300, opts.width), H = opts.height || 190;
  const L = 46, R = 10, T = 18, B = 22;
  const { n, span } = opts;
  const from = n - span;
  const x = (i) => L + (W - L - R) * (i - from) / (span - 1);
  let ymax = opts.ymax;
  if (ymax === undefined) {
    ymax = 1;
    for (const ln of opts.lines) for (let i = from; i < n; i++) if (ln.values[i] > ymax) ymax = ln.values[i];
    ymax = niceCeil(ymax);
  }
  const y = (v) => T + (H - T - B) * (1 - v / ymax);
  const root = svg("svg", { class: "chart", viewBox: `0 0 ${W} ${H}`, width: W, height: H, role: "img", "aria-label": opts.title });
  root.append(svg("title", { text: opts.title }));
  for (let k = 0; k <= 4; k++) {
    const v = ymax * k / 4;
    root.append(svg("line", { class: "grid-line", x1: L, x2: W - R, y1: y(v), y2: y(v) }),
      svg("text", { x: L - 4, y: y(v) + 4, "text-anchor": "end", text: opts.fmt(v) }));
  }
  const tickEvery = span > 300 ? 300 : span > 120 ? 60 : 15;
  for (let s = 0; s < span; s += tickEvery) {
    const i = n - 1 - s;
    root.append(svg("line", { class: "grid-line", x1: x(i), x2: x(i), y1: T, y2: H - B }),
      svg("text", { x: x(i), y: H - 6, "text-anchor": s === 0 ? "end" : "middle", text: s === 0 ? "now" : "−" + (s >= 60 ? s / 60 + " min" : s + " s") }));
  }
  root.append(svg("line", { class: "axis", x1: L, x2: W - R, y1: H - B, y2: H - B }));
  for (const ln of opts.lines) {
    let d = "", pen = false;
    const last = ln.last ?? n - 1;
    for (let i = from; i <= last; i++) {
      const v = ln.values[i];
      if (v === null || v === undefined) { pen = false; continue; }
      d += (pen ? "L" : "M") + x(i).toFixed(1) + " " + y(v).toFixed(1);
      pen = true;
    }
    if (d) root.append(svg("path", { d, fill: "none", stroke: ln.color, "stroke-width": ln.width || 2, "stroke-dasharray": ln.dash || null,
      "stroke-linejoin": "round", "data-series": ln.label }));
  }
  const startMs = (opts.start + from) * 1000;
  const placed = []; // the labels' [x0, x1], newest first: an older label that would overlap one is left out
  for (const m of [...(opts.markers || [])].reverse()) {
    if (m.at < startMs) continue;
    const i = Math.min(n - 1, (m.at / 1000) - opts.start), mx = x(i);
    const g = svg("g", { class: "marker", "data-kind": m.kind, "data-weights-version": m.weights_version, "data-label": m.label });
    g.append(svg("title", { text: m.label + " at " + new Date(m.at).toLocaleTimeString() }),
      svg("line", { x1: mx, x2: mx, y1: T - 4, y2: H - B }));
    if (opts.markerLabels) { // on the first chart only
      const text = m.label.replace(/^ramp \d+ /, ""), w = 6.2 * text.length + 4;
      const right = mx + w > W - R;
      const x0 = right ? mx - w : mx, x1 = right ? mx : mx + w;
      if (!placed.some(([a, b]) => x0 < b && a < x1)) {
        placed.push([x0, x1]);
        g.append(svg("text", { x: right ? mx - 3 : mx + 3, y: T + 8, "text-anchor": right ? "end" : "start", text }));
      }
    }
    root.append(g);
  }
  return root;
}
const rateFmt = (v) => String(Number(v.toFixed(2)));
function niceCeil(v) {
  const p = Math.pow(10, Math.floor(Math.log10(v)));
  for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= v) return m * p;
  return 10 * p;
}

function legend(items) {
  return el("div", { class: "legend" }, items.map((it) => {
    const s = svg("svg", { width: 28, height: 10, "aria-hidden": "true" },
      svg("line", { x1: 0, x2: 28, y1: 5, y2: 5, stroke: it.color, "stroke-width": it.width || 2.5, "stroke-dasharray": it.dash || null }));
    return el("span", {}, s, " " + it.label);
  }));
}
