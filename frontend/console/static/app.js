// prefixroute console: a single page that polls the daemon's /ui/api/
// endpoints every second and renders with the DOM and hand-written SVG.
// Every string from the daemon goes through textContent (never innerHTML).
"use strict";

const POLL_MS = 1000;
const TOKEN_KEY = "prefixroute.console.token";
const SVG = "http://www.w3.org/2000/svg";
const COLORS = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#D55E00", "#56B4E9", "#000000", "#F0E442"];
const DASHES = ["", "6 3", "2 2", "8 3 2 3", "1 3", "10 4", "4 4", "3 6"];

// ---------- small helpers ----------

function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") e.className = v;
    else if (k === "text") e.textContent = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else if (k === "dataset") Object.assign(e.dataset, v);
    else if (k === "style") e.style.cssText = v; // CSSOM, which the CSP allows (a style attribute it would not)
    else e.setAttribute(k, v === true ? "" : v);
  }
  for (const k of kids.flat(Infinity)) if (k !== null && k !== undefined) e.append(k instanceof Node ? k : String(k));
  return e;
}
function svg(tag, attrs, ...kids) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) if (v !== undefined && v !== null) {
    if (k === "text") e.textContent = v; else e.setAttribute(k, v);
  }
  for (const k of kids.flat(Infinity)) if (k) e.append(k);
  return e;
}
const pct = (x, d = 1) => (x === null || x === undefined || isNaN(x)) ? "–" : (100 * x).toFixed(d) + " %";
const num = (x, d = 1) => (x === null || x === undefined || isNaN(x)) ? "–" : Number(x).toFixed(d);
const secs = (s) => { // a protojson duration ("12.5s") as "2m 05s"
  const v = typeof s === "string" ? parseFloat(s) : (s || 0);
  if (!isFinite(v)) return "–";
  if (v < 59.5) return v.toFixed(v < 10 ? 1 : 0) + " s";
  const t = Math.round(v), m = Math.floor(t / 60), r = t % 60;
  return m + " min " + String(r).padStart(2, "0") + " s";
};
const stateName = (s) => String(s || "").replace(/^INSTANCE_STATE_|^RAMP_STATE_/, "").toLowerCase();
function colorMap(names) {
  const m = new Map();
  [...names].sort().forEach((n, i) => m.set(n, { color: COLORS[i % COLORS.length], dash: DASHES[i % DASHES.length], idx: i }));
  return m;
}
function swatch(c) { return el("span", { class: "swatch", style: "background:" + c.color, "aria-hidden": "true" }); }

// ---------- API ----------

class HTTPError extends Error {
  constructor(status, body) { super(body.error || ("HTTP " + status)); this.status = status; this.code = body.code; }
}
async function api(path, body) {
  const headers = {};
  const tok = sessionStorage.getItem(TOKEN_KEY);
  if (tok) headers["Authorization"] = "Bearer " + tok;
  const opts = { headers, cache: "no-store", credentials: "omit" };
  if (body !== undefined) {
    opts.method = "POST";
    headers["Content-Type"] = "application/json";
    headers["X-Prefixroute-Console"] = "1";
    opts.body = JSON.stringify(body);
  }
  const r = await fetch("api/" + path, opts);
  let data = {};
  try { data = await r.json(); } catch (e) { data = { error: "HTTP " + r.status + " with a body that is not JSON" }; }
  if (!r.ok) {
    if (r.status === 401) showLogin(data.error);
    throw new HTTPError(r.status, data);
  }
  return data;
}

function showLogin(msg) {
  const f = document.getElementById("login");
  document.getElementById("login-error").textContent = sessionStorage.getItem(TOKEN_KEY) ? msg : "";
  if (f.hidden) { f.hidden = false; document.getElementById("token").focus(); }
}

// ---------- routing and polling ----------

const ui = { route: null, polls: 0, busy: false, pageState: {} };

function parseRoute() {
  const parts = location.hash.replace(/^#\/?/, "").split("/").map(decodeURIComponent);
  if (!parts[0]) return { page: "pools" };
  if (parts[0] === "pool" && parts[1]) return { page: parts[2] || "cutover", pool: parts[1] };
  return { page: "pools" };
}

function pageOf(name) { // the page objects are defined below
  return { pools: pagePools, cutover: pageCutover, instances: pageInstances, ramp: pageRamp, migration: pageMigration, explain: pageExplain }[name];
}
const TABS = [["cutover", "Cutover"], ["instances", "Instances"], ["ramp", "Ramp"], ["migration", "Migration"], ["explain", "Explain"]];

function renderCrumbs(r) {
  const nav = document.getElementById("crumbs");
  const items = [el("li", {}, el("a", { href: "#/", "aria-current": r.page === "pools" ? "page" : null, text: "Pools" }))];
  if (r.pool) {
    for (const [id, label] of TABS) {
      items.push(el("li", {}, el("a", {
        href: "#/pool/" + encodeURIComponent(r.pool) + "/" + id, "aria-current": r.page === id ? "page" : null,
        text: id === "cutover" ? r.pool + " · " + label : label,
      })));
    }
  }
  nav.replaceChildren(el("ol", {}, items));
}

function navigate() {
  const r = parseRoute();
  ui.route = r;
  ui.pageState = {};
  document.body.dataset.page = r.page;
  document.title = (r.pool ? r.pool + " · " + r.page : "pools") + " · prefixroute console";
  renderCrumbs(r);
  const view = document.getElementById("view");
  view.replaceChildren();
  pageOf(r.page).init(view, r, ui.pageState);
  tick();
}

async function tick() {
  if (ui.busy || !ui.route) return;
  ui.busy = true;
  const r = ui.route, page = pageOf(r.page);
  const st = document.getElementById("status");
  try {
    await page.refresh(document.getElementById("view"), r, ui.pageState);
    if (r !== ui.route) return;
    ui.polls++;
    document.body.dataset.polls = String(ui.polls);
    st.textContent = "live · updated every 1 s";
    st.className = "";
    document.getElementById("updated").textContent = "last update " + new Date().toLocaleTimeString();
    document.getElementById("login").hidden = true;
  } catch (e) {
    st.textContent = e.message;
    st.className = "error";
  } finally {
    ui.busy = false;
  }
}

// ---------- pools ----------

const pagePools = {
  init(view) {
    view.append(el("h2", { text: "Pools" }), el("div", { class: "scroll", id: "pools" }));
  },
  async refresh(view) {
    const data = await api("pools");
    const rows = data.pools.map((p) => {
      const s = p.summary, w = p.weights, st = p.instance_states || {};
      const deps = w ? w.deployments : [];
      const colors = colorMap(deps.map((d) => d.deployment));
      const ramp = w && w.ramp;
      let rampText = "none";
      if (ramp) {
        const state = stateName(ramp.state);
        rampText = (state === "running" || state === "paused")
          ? `ramp ${ramp.id} ${state}, step ${ramp.steps_applied}/${ramp.steps.length}, next in ${secs(ramp.until_next)}`
          : `last ramp ${ramp.id} ${state}`;
      }
      return el("tr", { dataset: { pool: s.pool } },
        el("th", { scope: "row" }, el("a", { href: "#/pool/" + encodeURIComponent(s.pool), text: s.pool })),
        el("td", {}, deps.length ? deps.map((d) => el("span", { style: "margin-right:10px" },
          swatch(colors.get(d.deployment)), d.deployment + " " + pct(d.share, 0))) : String(s.deployments)),
        el("td", { class: "num" }, String(s.instances)),
        el("td", {}, ["ok", "stale", "draining", "disconnected"].filter((k) => st[k]).map((k) =>
          el("span", { class: "badge " + k, style: "margin-right:4px", text: st[k] + " " + k }))),
        el("td", { class: "num", text: s.weights_version }),
        el("td", { text: rampText }));
    });
    const table = el("table", {},
      el("caption", { class: "muted", style: "text-align:left", text: data.pools.length + " pools" + (data.truncated ? " (details of the first 64)" : "") }),
      el("thead", {}, el("tr", {}, ["Pool", "Deployments (weight share)", "Instances", "By state", "Weights version", "Ramp"].map((h) =>
        el("th", { scope: "col", class: h === "Instances" || h === "Weights version" ? "num" : null, text: h })))),
      el("tbody", {}, rows.length ? rows : el("tr", {}, el("td", { colspan: 6, class: "muted", text: "No pools yet: instances create a pool when they first report." }))));
    view.querySelector("#pools").replaceChildren(table);
  },
};

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

// ---------- cutover ----------

const pageCutover = {
  init(view, r, st) {
    st.span = 300;
    const spans = el("div", { class: "controls", role: "group", "aria-label": "Time range" },
      [[60, "1 min"], [300, "5 min"], [900, "15 min"]].map(([s, label]) => el("button", {
        type: "button", "aria-pressed": String(s === st.span), dataset: { span: s }, text: label,
        onclick: (e) => { st.span = s; view.querySelectorAll("[data-span]").forEach((b) => b.setAttribute("aria-pressed", String(b === e.target))); tick(); },
      })));
    view.append(el("h2", { text: "Cutover of " + r.pool }), spans,
      el("div", { id: "legend" }),
      el("div", { class: "grid" },
        el("section", { class: "panel", "aria-labelledby": "c1" }, el("h3", { id: "c1", text: "Weight share (dashed) vs traffic share (solid), 10 s window" }), el("div", { id: "chart-share" })),
        el("section", { class: "panel", "aria-labelledby": "c2" }, el("h3", { id: "c2", text: "Hit ratio: cached blocks / prompt blocks, 10 s window" }), el("div", { id: "chart-hit" })),
        el("section", { class: "panel", "aria-labelledby": "c3" }, el("h3", { id: "c3", text: "Pick rate by deployment (picks/s, 5 s mean)" }), el("div", { id: "chart-rate" })),
        el("section", { class: "panel", "aria-labelledby": "c4" }, el("h3", { id: "c4", text: "Failed picks by outcome (picks/s, 5 s mean)" }), el("div", { id: "chart-errors" }))),
      el("h3", { text: "Deployments" }), el("div", { class: "scroll", id: "deps" }),
      el("h3", { text: "Set weights" }), el("div", { id: "setw" }));
  },
  async refresh(view, r, st) {
    const data = await api("pool?pool=" + encodeURIComponent(r.pool));
    const w = data.weights;
    const h = data.history || { start: Math.floor(data.now_ms / 1000) - 899, seconds: 900, deployments: [], failures: [], markers: [] };
    const s = series(h, w);
    const colors = colorMap(s.deps);
    const width = view.querySelector("#chart-share").clientWidth || 600;
    const span = Math.min(st.span, s.n);
    const full = s.n - 2; // the last whole second; the current one is still filling
    const base = { n: s.n, span, start: s.start, width, markers: h.markers };
    view.querySelector("#legend").replaceChildren(legend(s.deps.map((d) => ({ label: d, ...colors.get(d), dash: null }))),
      data.tracked ? "" : el("p", { class: "muted", text: "No history for this pool yet: it starts with its first pick or report." }));
    const shareLines = [];
    for (const d of s.deps) {
      const c = colors.get(d);
      shareLines.push({ values: s.weight[d], color: c.color, dash: "7 4", width: 1.6, label: "weight " + d });
      shareLines.push({ values: s.share[d], color: c.color, width: 2.4, label: "share " + d, last: full });
    }
    view.querySelector("#chart-share").replaceChildren(lineChart({ ...base, ymax: 1, fmt: (v) => pct(v, 0), lines: shareLines, markerLabels: true, title: "Weight share and traffic share" }));
    view.querySelector("#chart-hit").replaceChildren(lineChart({ ...base, ymax: 1, fmt: (v) => pct(v, 0), title: "Hit ratio",
      lines: s.deps.map((d) => ({ values: s.hit[d], color: colors.get(d).color, label: "hit " + d, last: full })) }));
    view.querySelector("#chart-rate").replaceChildren(lineChart({ ...base, fmt: rateFmt, title: "Pick rate",
      lines: s.deps.map((d) => ({ values: s.rate[d], color: colors.get(d).color, label: "rate " + d, last: full })) }));
    const outcomes = Object.keys(s.failures);
    const ecolors = colorMap(outcomes);
    view.querySelector("#chart-errors").replaceChildren(
      outcomes.length ? legend(outcomes.map((o) => ({ label: o, ...ecolors.get(o) }))) : el("p", { class: "muted", text: "No failed picks in the last 15 min." }),
      lineChart({ ...base, fmt: rateFmt, title: "Failed picks by outcome",
        lines: outcomes.map((o) => ({ values: s.failures[o], ...ecolors.get(o), label: "failed " + o, last: full })) }));
    // the table: the figures in force and over the last 60 s
    const last = (arr, k) => { let a = 0; for (let i = Math.max(0, full - k + 1); i <= full; i++) a += arr[i] || 0; return a; };
    const byName = new Map(h.deployments.map((d) => [d.deployment, d]));
    let totalPicks = 0; for (const d of h.deployments) totalPicks += last(d.picks, 60);
    const insts = data.instances.instances || [];
    const rows = w.deployments.map((d) => {
      const hs = byName.get(d.deployment);
      const p60 = hs ? last(hs.picks, 60) : 0, b60 = hs ? last(hs.blocks, 60) : 0, m60 = hs ? last(hs.matched, 60) : 0;
      const mine = insts.filter((i) => i.deployment === d.deployment);
      const ok = mine.filter((i) => stateName(i.state) === "ok").length;
      return el("tr", { dataset: { deployment: d.deployment, weight: String(d.weight) } },
        el("th", { scope: "row" }, swatch(colors.get(d.deployment)), d.deployment),
        el("td", { class: "num", text: num(d.weight, 2) + (d.configured ? "" : " (equal split)") }),
        el("td", { class: "num", text: pct(d.share) }),
        el("td", { class: "num", text: totalPicks ? pct(p60 / totalPicks) : "–" }),
        el("td", { class: "num", text: b60 ? pct(m60 / b60) : "–" }),
        el("td", { class: "num", text: num(p60 / 60, 2) }),
        el("td", { class: "num", text: ok + " ok / " + mine.length }));
    });
    view.querySelector("#deps").replaceChildren(el("table", {},
      el("thead", {}, el("tr", {}, ["Deployment", "Weight", "Weight share", "Traffic share (60 s)", "Hit ratio (60 s)", "Picks/s (60 s)", "Instances"].map((t, i) =>
        el("th", { scope: "col", class: i ? "num" : null, text: t })))),
      el("tbody", {}, rows)),
      el("p", { class: "muted", text: `weights version ${w.version}` + (w.weights_set ? "" : " (never set: equal split)") }));
    this.weightsForm(view, r, st, w);
  },
  weightsForm(view, r, st, w) {
    const ramp = w.ramp, active = ramp && ["running", "paused"].includes(stateName(ramp.state));
    const box = view.querySelector("#setw");
    const key = w.version + "|" + w.deployments.map((d) => d.deployment).join(",") + "|" + active;
    if (st.formKey === key) return; // keep what the operator is typing
    st.formKey = key;
    const inputs = w.deployments.map((d) => el("div", {}, el("label", { for: "w-" + d.deployment, text: d.deployment }),
      el("input", { id: "w-" + d.deployment, name: d.deployment, type: "number", min: "0", step: "any", value: String(d.weight), size: 6, disabled: active })));
    const msg = el("p", { role: "status", class: "muted", text: active ? "A ramp owns the weights: pause or abort it on the Ramp page first." : "" });
    const form = el("form", { class: "inline", onsubmit: async (e) => {
      e.preventDefault();
      const weights = {};
      for (const i of form.querySelectorAll("input")) weights[i.name] = parseFloat(i.value);
      try {
        const res = await api("weights", { pool: r.pool, weights, expected_version: Number(w.version) });
        msg.textContent = "Weights set: version " + res.version; msg.className = "muted";
      } catch (err) { msg.textContent = err.message; msg.className = "error"; }
      tick();
    } }, inputs, el("button", { type: "submit", class: "primary", disabled: active, text: "Set weights" }));
    box.replaceChildren(form, msg);
  },
};

// ---------- instances ----------

const INST_COLS = [
  ["deployment", "Deployment", (i) => i.deployment],
  ["instance_id", "Instance", (i) => i.instance_id],
  ["address", "Address", (i) => i.address],
  ["state", "State (report age)", (i) => stateName(i.state)],
  ["queue_ms", "Queue ms", (i) => i.queue_ms ?? -1],
  ["kv", "KV usage", (i) => i.kv_cache_usage],
  ["cached", "Cached blocks", (i) => Number(i.cached_blocks)],
  ["picks", "Picks/s (5 s)", (i, p) => p[i.instance_id] || 0],
];

const pageInstances = {
  init(view, r, st) {
    st.sort = "deployment"; st.dir = 1; st.filter = ""; st.state = "";
    const filter = el("input", { id: "filter", type: "search", placeholder: "instance, deployment or address", oninput: (e) => { st.filter = e.target.value; this.draw(view, st); } });
    const state = el("select", { id: "state-filter", onchange: (e) => { st.state = e.target.value; this.draw(view, st); } },
      ["", "ok", "stale", "draining", "disconnected"].map((s) => el("option", { value: s, text: s || "any state" })));
    view.append(el("h2", { text: "Instances of " + r.pool }),
      el("div", { class: "controls" }, el("div", {}, el("label", { for: "filter", text: "Filter" }), filter), el("div", {}, el("label", { for: "state-filter", text: "State" }), state)),
      el("div", { class: "scroll", id: "insts" }), el("p", { class: "muted", id: "inst-count" }));
  },
  async refresh(view, r, st) {
    st.data = await api("pool?history=0&pool=" + encodeURIComponent(r.pool));
    this.draw(view, st);
  },
  draw(view, st) {
    if (!st.data) return;
    const picks = st.data.instance_picks_per_second || {};
    const all = st.data.instances.instances || [];
    const colors = colorMap(new Set(all.map((i) => i.deployment)));
    const f = st.filter.toLowerCase();
    let rows = all.filter((i) => (!f || [i.instance_id, i.deployment, i.address].some((s) => s.toLowerCase().includes(f))) &&
      (!st.state || stateName(i.state) === st.state));
    const col = INST_COLS.find((c) => c[0] === st.sort);
    rows.sort((a, b) => { const x = col[2](a, picks), y = col[2](b, picks); return (x < y ? -1 : x > y ? 1 : 0) * st.dir || a.instance_id.localeCompare(b.instance_id); });
    const head = el("tr", {}, INST_COLS.map(([id, label]) => el("th", {
      scope: "col", class: ["queue_ms", "kv", "cached", "picks"].includes(id) ? "num" : null,
      "aria-sort": st.sort === id ? (st.dir > 0 ? "ascending" : "descending") : "none",
    }, el("button", { type: "button", dataset: { sort: id }, text: label, onclick: () => {
      st.dir = st.sort === id ? -st.dir : 1; st.sort = id; this.draw(view, st);
      view.querySelector(`[data-sort="${id}"]`).focus();
    } }))));
    const body = rows.map((i) => {
      const s = stateName(i.state);
      return el("tr", { class: s, dataset: { instance: i.instance_id, deployment: i.deployment, state: s } },
        el("td", {}, swatch(colors.get(i.deployment)), i.deployment),
        el("td", { text: i.instance_id }),
        el("td", { text: i.address }),
        el("td", {}, el("span", { class: "badge " + s, text: (s === "ok" ? "" : "⚠ ") + s }), " " + secs(i.report_age_ms / 1000)),
        el("td", { class: "num", text: i.queue_ms === undefined || i.queue_ms === null ? "–" : num(i.queue_ms, 1) }),
        el("td", { class: "num", text: pct(i.kv_cache_usage, 0) }),
        el("td", { class: "num", text: i.cached_blocks }),
        el("td", { class: "num", text: num(picks[i.instance_id] || 0, 1) }));
    });
    view.querySelector("#insts").replaceChildren(el("table", {}, el("thead", {}, head),
      el("tbody", {}, body.length ? body : el("tr", {}, el("td", { colspan: INST_COLS.length, class: "muted", text: "No instance matches." })))));
    view.querySelector("#inst-count").textContent = `${rows.length} of ${all.length} instances. Stale and disconnected rows are shaded and marked ⚠.`;
  },
};

// ---------- ramp ----------

const pageRamp = {
  init(view, r, st) {
    view.append(el("h2", { text: "Ramp of " + r.pool }), el("div", { id: "ramp" }),
      el("div", { class: "controls", role: "group", "aria-label": "Ramp controls" },
        ["pause", "resume", "abort"].map((op) => el("button", { type: "button", id: "ramp-" + op, class: op === "abort" ? "danger" : null, disabled: true,
          text: op[0].toUpperCase() + op.slice(1), onclick: () => this.op(view, r, st, op) }))),
      el("p", { id: "ramp-msg", role: "status" }),
      el("h3", { text: "Start a ramp" }), this.form(view, r, st));
  },
  form(view, r, st) {
    const f = el("form", { class: "inline", id: "ramp-form", onsubmit: async (e) => {
      e.preventDefault();
      const target = {};
      for (const part of f.querySelector("#ramp-target").value.split(/[,\s]+/).filter(Boolean)) {
        const [k, v] = part.split("=");
        target[k] = parseFloat(v);
      }
      const body = { pool: r.pool, target, duration: f.querySelector("#ramp-duration").value, step_interval: f.querySelector("#ramp-interval").value };
      const hold = parseFloat(f.querySelector("#ramp-hold").value);
      if (hold > 0) body.min_headroom_pct = hold;
      await this.call(view, st, "ramp/start", body, "Ramp started");
    } },
    el("div", {}, el("label", { for: "ramp-target", text: "Target weights" }), el("input", { id: "ramp-target", placeholder: "a=0, b=100", required: true, size: 22 })),
    el("div", {}, el("label", { for: "ramp-duration", text: "Duration" }), el("input", { id: "ramp-duration", value: "10m", size: 6, required: true })),
    el("div", {}, el("label", { for: "ramp-interval", text: "Step every" }), el("input", { id: "ramp-interval", value: "1m", size: 6, required: true })),
    el("div", {}, el("label", { for: "ramp-hold", text: "Auto-hold below headroom %" }), el("input", { id: "ramp-hold", type: "number", min: "0", max: "100", step: "any", size: 5 })),
    el("button", { type: "submit", class: "primary", text: "Start ramp" }));
    return f;
  },
  async call(view, st, path, body, done) {
    const msg = view.querySelector("#ramp-msg");
    try {
      const res = await api(path, body);
      msg.textContent = done + ": ramp " + res.ramp.id + " is " + stateName(res.ramp.state); msg.className = "";
    } catch (e) { msg.textContent = e.message; msg.className = "error"; }
    tick();
  },
  op(view, r, st, op) {
    const id = st.ramp ? Number(st.ramp.id) : 0;
    return this.call(view, st, "ramp/" + op, { pool: r.pool, ramp_id: id }, op[0].toUpperCase() + op.slice(1) + "d");
  },
  async refresh(view, r, st) {
    const data = await api("pool?history=0&pool=" + encodeURIComponent(r.pool));
    const ramp = data.weights.ramp;
    st.ramp = ramp;
    const box = view.querySelector("#ramp");
    const state = ramp ? stateName(ramp.state) : "none";
    view.querySelector("#ramp-pause").disabled = state !== "running";
    view.querySelector("#ramp-resume").disabled = state !== "paused";
    view.querySelector("#ramp-abort").disabled = !(state === "running" || state === "paused");
    box.dataset.state = state;
    if (!ramp) { box.replaceChildren(el("p", { class: "muted", text: "This pool never had a ramp. Start one below." })); return; }
    const colors = colorMap(new Set([...Object.keys(ramp.start || {}), ...Object.keys(ramp.target || {})]));
    const shareText = (wts) => { const sum = Object.values(wts).reduce((a, b) => a + b, 0) || 1;
      return Object.keys(wts).sort().map((k) => k + " " + pct(wts[k] / sum, 0)).join(", "); };
    let at = 0;
    const steps = [el("li", { class: "done", "aria-current": ramp.steps_applied === 0 ? "step" : null }, el("div", { text: "start" }), el("div", { class: "muted", text: shareText(ramp.start) }))];
    ramp.steps.forEach((s, i) => {
      at += parseFloat(s.after);
      const k = i + 1, cur = ramp.steps_applied === k;
      steps.push(el("li", { class: k <= ramp.steps_applied ? "done" : null, "aria-current": cur ? "step" : null, dataset: { step: k } },
        el("div", { text: `step ${k} · +${secs(at)}` }), el("div", { class: "muted", text: shareText(s.weights) })));
    });
    const next = state === "running" ? "next step in " + secs(ramp.until_next) : state === "paused" ? "paused; " + secs(ramp.until_next) + " to the next step once resumed" : state;
    box.replaceChildren(
      el("dl", { class: "kv" },
        el("dt", { text: "Ramp" }), el("dd", { text: `${ramp.id}, started by ${ramp.started_by} at ${new Date(ramp.started_at).toLocaleTimeString()}` }),
        el("dt", { text: "State" }), el("dd", {}, el("strong", { id: "ramp-state", text: state }), ramp.reason ? " · " + ramp.reason : ""),
        el("dt", { text: "Progress" }), el("dd", { text: `step ${ramp.steps_applied} of ${ramp.steps.length}; ${next}; done in ${secs(ramp.until_done)}` }),
        el("dt", { text: "Now" }), el("dd", {}, Object.keys(ramp.current || {}).sort().map((k) => el("span", { style: "margin-right:10px" }, swatch(colors.get(k)), k + " " + num(ramp.current[k], 2)))),
        ramp.auto_hold ? [el("dt", { text: "Auto-hold" }), el("dd", { text: `pause when ${ramp.auto_hold.to} has under ${ramp.auto_hold.min_headroom_pct} % headroom for ${ramp.auto_hold.from}'s traffic` })] : null),
      el("ol", { class: "timeline", "aria-label": "Ramp steps" }, steps));
  },
};

// ---------- migration ----------

const pageMigration = {
  init(view, r, st) {
    view.append(el("h2", { text: "Migration readiness in " + r.pool }),
      el("form", { class: "inline", onsubmit: (e) => { e.preventDefault(); tick(); } },
        el("div", {}, el("label", { for: "mig-from", text: "Retire (from)" }), el("select", { id: "mig-from", onchange: () => tick() })),
        el("div", {}, el("label", { for: "mig-to", text: "Move to" }), el("select", { id: "mig-to", onchange: () => tick() }))),
      el("div", { id: "mig" }));
  },
  async refresh(view, r, st) {
    const data = await api("pool?history=0&pool=" + encodeURIComponent(r.pool));
    const deps = data.weights.deployments.map((d) => d.deployment);
    const from = view.querySelector("#mig-from"), to = view.querySelector("#mig-to");
    if (st.deps !== deps.join(",")) {
      st.deps = deps.join(",");
      const keepF = from.value, keepT = to.value;
      from.replaceChildren(...deps.map((d) => el("option", { value: d, text: d })));
      to.replaceChildren(...deps.map((d) => el("option", { value: d, text: d })));
      from.value = deps.includes(keepF) ? keepF : deps[0] || "";
      to.value = deps.includes(keepT) ? keepT : deps[1] || deps[0] || "";
    }
    const box = view.querySelector("#mig");
    if (deps.length < 2) { box.replaceChildren(el("p", { class: "muted", text: "A migration needs two deployments in the pool." })); return; }
    if (from.value === to.value) { box.replaceChildren(el("p", { class: "error", text: "Choose two different deployments." })); return; }
    const m = await api(`migration?pool=${encodeURIComponent(r.pool)}&from=${encodeURIComponent(from.value)}&to=${encodeURIComponent(to.value)}&top_k=10`);
    const a = m.absorption;
    const cap = a.to_capacity_ms_per_second, now = a.to_prefill_ms_per_second, extra = a.extra_prefill_ms_per_second;
    const scale = Math.max(cap, now + extra, 1);
    const verdict = Number(m.picks) === 0 ? ["no", "No verdict yet: no picks in the window"]
      : a.can_absorb ? ["yes", `Ready: ${m.to} can absorb ${m.from}'s traffic`] : ["no", `Not yet: ${m.to} would run out of prefill headroom`];
    box.replaceChildren(
      el("p", {}, el("span", { class: "verdict " + verdict[0], id: "verdict", text: verdict[1] })),
      el("h3", { text: `${m.to}'s prefill time: in use now, extra after the move, capacity (ms of prefill per second)` }),
      el("div", { class: "bar", style: "height:26px", role: "img", "aria-label": `now ${num(now, 0)} ms/s, extra ${num(extra, 0)} ms/s, capacity ${num(cap, 0)} ms/s` },
        el("span", { style: `width:${100 * now / scale}%;background:#0072B2` }),
        el("span", { class: "hatch", style: `width:${100 * extra / scale}%` })),
      legend([{ label: `in use ${num(now, 0)} ms/s`, color: "#0072B2", width: 8 }, { label: `extra ${num(extra, 0)} ms/s`, color: "#D55E00", width: 8 },
        { label: `capacity ${num(cap, 0)} ms/s; headroom after the move ${num(a.headroom_pct, 1)} %`, color: "#555", width: 1 }]),
      a.throughput_known ? "" : el("p", { class: "muted", text: "Prefill throughput unknown: the instances report no prefill_tokens_per_second." }),
      el("dl", { class: "kv" },
        el("dt", { text: "Window" }), el("dd", { text: `${secs(m.covered)} of ${secs(m.window)} covered, ${m.picks} picks` }),
        el("dt", { text: `Only ${m.from} holds` }), el("dd", { text: `${pct(m.from_only_request_share)} of requests, ${pct(m.from_only_token_share)} of prompt tokens` }),
        el("dt", { text: "Recompute after the move" }), el("dd", { text: `${num(a.recompute_tokens_per_second, 0)} tokens/s, ${num(a.extra_tokens_per_second, 0)} extra tokens/s` })),
      el("h3", { text: `Hot prefixes only ${m.from} holds` }),
      el("div", { class: "scroll" }, el("table", {},
        el("thead", {}, el("tr", {}, ["First block hash", `Depth on ${m.from} (blocks)`, `Depth on ${m.to} (blocks)`, "Requests", "Extra tokens"].map((t, i) => el("th", { class: i ? "num" : null, text: t })))),
        el("tbody", {}, (m.hot_prefixes || []).length ? m.hot_prefixes.map((p) => el("tr", {},
          el("td", { text: "0x" + BigInt(p.first_block_hash).toString(16).padStart(16, "0") }), el("td", { class: "num", text: p.depth_from_blocks }),
          el("td", { class: "num", text: p.depth_to_blocks }), el("td", { class: "num", text: p.requests }), el("td", { class: "num", text: p.extra_tokens })))
          : el("tr", {}, el("td", { colspan: 5, class: "muted", text: "None in the window." }))))));
  },
};

// ---------- explain ----------

const pageExplain = {
  init(view, r, st) {
    const f = el("form", { id: "explain-form", onsubmit: (e) => { e.preventDefault(); this.run(view, r, st); } },
      el("fieldset", { class: "controls", style: "border:0;padding:0" }, el("legend", { class: "muted", text: "The prompt is" }),
        el("label", {}, el("input", { type: "radio", name: "mode", value: "text", checked: true }), " text"),
        el("label", {}, el("input", { type: "radio", name: "mode", value: "tokens" }), " token ids (1,2,3 or 0-63)")),
      el("label", { for: "prompt", text: "Prompt" }), el("textarea", { id: "prompt", required: true, spellcheck: "false" }),
      el("div", { class: "inline controls" },
        el("div", {}, el("label", { for: "salt", text: "Salt" }), el("input", { id: "salt", size: 10 })),
        el("div", {}, el("label", { for: "seed", text: "Seed" }), el("input", { id: "seed", value: "1", size: 8, inputmode: "numeric" })),
        el("div", {}, el("label", { for: "bs", text: "Block size (tokens)" }), el("input", { id: "bs", type: "number", value: "16", min: "1", max: "64", size: 4 })),
        el("div", {}, el("label", { for: "cb", text: "Text chunk (bytes)" }), el("input", { id: "cb", type: "number", value: "64", min: "1", max: "4096", size: 5 })),
        el("div", {}, el("span", { class: "label-gap", text: "\u00a0" }), el("button", { type: "submit", class: "primary", id: "explain-go", text: "Explain" }))));
    view.append(el("h2", { text: "Explain a pick in " + r.pool }),
      el("p", { class: "muted", text: "Runs a real Pick with the full audit (it counts as a pick) and shows why it went where it did." }),
      f, el("details", { id: "recent" }, el("summary", { text: "…or show a recent pick from the decision log" }), el("div", { id: "recent-list" })),
      el("p", { id: "explain-msg", role: "status" }), el("div", { id: "explain" }));
  },
  async refresh(view, r, st) { // the decision log's latest picks; the explained decision itself is a snapshot
    const data = await api("decisions?pool=" + encodeURIComponent(r.pool));
    const key = data.enabled + "|" + data.decisions.length + "|" + (data.decisions[0] || {}).time;
    if (st.recentKey === key) return;
    st.recentKey = key;
    const list = view.querySelector("#recent-list");
    if (!data.enabled) { list.replaceChildren(el("p", { class: "muted", text: "The decision log is off (prefixrouted --decision-log FILE --decision-log-rate R)." })); return; }
    if (!data.decisions.length) { list.replaceChildren(el("p", { class: "muted", text: "No pick of this pool sampled yet." })); return; }
    list.replaceChildren(el("ol", { class: "recent" }, data.decisions.slice(0, 20).map((d, i) => {
      const resp = d.response || {};
      const what = d.code === "OK" ? `${resp.instance_id} (${resp.deployment})` : d.code + ": " + (d.error || "");
      return el("li", {}, el("button", { type: "button", dataset: { recent: i }, onclick: () => {
        const msg = view.querySelector("#explain-msg");
        if (!d.response) { msg.textContent = what; msg.className = "error"; view.querySelector("#explain").replaceChildren(); return; }
        msg.textContent = `From the decision log: picked at ${new Date(d.time).toLocaleTimeString()}` + (d.request && d.request.request_id ? `, request ${d.request.request_id}` : "");
        msg.className = "";
        this.draw(view, d.response);
      } }, `${new Date(d.time).toLocaleTimeString()} · ${d.prefix_blocks} blocks → ${what}`));
    })));
  },
  async run(view, r, st) {
    const f = view.querySelector("#explain-form"), msg = view.querySelector("#explain-msg");
    const mode = f.querySelector("input[name=mode]:checked").value;
    const body = { pool: r.pool, salt: f.querySelector("#salt").value, seed: f.querySelector("#seed").value.trim(),
      block_size: Number(f.querySelector("#bs").value), chunk_bytes: Number(f.querySelector("#cb").value) };
    body[mode] = f.querySelector("#prompt").value;
    try {
      const res = await api("explain", body);
      msg.textContent = ""; msg.className = "";
      this.draw(view, res);
    } catch (e) { msg.textContent = e.message; msg.className = "error"; }
  },
  draw(view, res) {
    // A decision-log line omits zero fields: every figure defaults to 0.
    const d = { ...res.decision };
    d.deployments = (d.deployments || []).map((x) => ({ weight: 0, hit_ratio: 0, probability: 0, matched_blocks: 0, eligible_instances: 0, ...x }));
    d.instances = (d.instances || []).map((x) => ({ cost_ms: 0, prefill_ms: 0, queue_ms: 0, batch_wait_ms: 0, matched_blocks: 0, probability: 0, ...x }));
    d.blocks = d.blocks || 0; d.prompt_tokens = d.prompt_tokens || 0; d.weights_version = d.weights_version || "0"; d.seed = d.seed || "0";
    const colors = colorMap(d.deployments.map((x) => x.deployment));
    const depBars = d.deployments.map((x) => [
      el("div", { class: x.deployment === res.deployment ? "chosen" : null }, swatch(colors.get(x.deployment)), x.deployment, x.deployment === res.deployment ? " ✓ chosen" : ""),
      el("div", { class: "bar", role: "img", "aria-label": `P(${x.deployment}) ${pct(x.probability)}`, dataset: { deployment: x.deployment, probability: String(x.probability) } },
        el("span", { style: `width:${100 * x.probability}%;background:${colors.get(x.deployment).color}` })),
      el("div", { class: "bar-label", text: `P(d) ${pct(x.probability)} · weight ${num(x.weight, 2)} · hit ratio ${pct(x.hit_ratio)} (${x.matched_blocks}/${d.blocks} blocks) · ${x.eligible_instances} eligible` + (x.excluded_reason ? " · excluded: " + x.excluded_reason : "") }),
    ]);
    const maxCost = Math.max(1, ...d.instances.map((i) => i.cost_ms));
    const instBars = d.instances.map((i) => {
      const chosen = i.instance_id === res.instance_id;
      return [
        el("div", { class: chosen ? "chosen" : null }, swatch(colors.get(i.deployment) || { color: "#999" }), i.instance_id, chosen ? " ✓ chosen" : ""),
        el("div", { class: "bar", role: "img", "aria-label": `P(${i.instance_id} | ${i.deployment}) ${pct(i.probability)}`, dataset: { instance: i.instance_id, probability: String(i.probability) } },
          el("span", { style: `width:${100 * i.probability}%;background:${(colors.get(i.deployment) || { color: "#999" }).color}` })),
        el("div", { class: "bar-label" },
          `P(i|d) ${pct(i.probability)} · cost ${num(i.cost_ms, 1)} ms = `,
          el("span", { class: "swatch", style: "background:#0072B2" }), `prefill ${num(i.prefill_ms, 1)} + `,
          el("span", { class: "swatch", style: "background:#E69F00" }), `queue ${num(i.queue_ms, 1)} + `,
          el("span", { class: "swatch", style: "background:#CC79A7" }), `batch wait ${num(i.batch_wait_ms, 1)} · ${i.matched_blocks} blocks cached` + (i.excluded_reason ? " · excluded: " + i.excluded_reason : ""),
          el("div", { class: "bar", style: "height:8px;margin-top:2px;width:" + (100 * i.cost_ms / maxCost) + "%", "aria-hidden": "true" },
            el("span", { style: `flex:${i.prefill_ms} 0 0;background:#0072B2` }), el("span", { style: `flex:${i.queue_ms} 0 0;background:#E69F00` }),
            el("span", { style: `flex:${i.batch_wait_ms} 0 0;background:#CC79A7` }))),
      ];
    });
    view.querySelector("#explain").replaceChildren(
      el("p", {}, "Chosen: ", el("strong", { id: "chosen", text: `${res.instance_id} (${res.deployment}) at ${res.address}` }),
        ` · seed ${d.seed} · ${d.blocks} blocks, ${d.prompt_tokens} prompt tokens · weights version ${d.weights_version}` + (d.saturated ? " · saturated" : "")),
      el("h3", { text: "P(d): the deployment draw, from weight and hit ratio" }), el("div", { class: "bars", id: "dep-bars" }, depBars),
      el("h3", { text: "P(i|d): the instance draw within each deployment, from its cost" }), el("div", { class: "bars", id: "inst-bars" }, instBars));
  },
};

// ---------- start ----------

document.getElementById("login").addEventListener("submit", (e) => {
  e.preventDefault();
  sessionStorage.setItem(TOKEN_KEY, document.getElementById("token").value.trim());
  document.getElementById("token").value = "";
  document.getElementById("signout").hidden = false;
  tick();
});
document.getElementById("signout").addEventListener("click", () => { sessionStorage.removeItem(TOKEN_KEY); location.reload(); });
document.getElementById("signout").hidden = !sessionStorage.getItem(TOKEN_KEY);
window.addEventListener("hashchange", () => { navigate(); document.getElementById("view").focus(); });
navigate();
setInterval(tick, POLL_MS);
