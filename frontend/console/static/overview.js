// prefixroute console: the pages that watch a cutover: the pool list, the
// cutover view and the instances table. Loaded after charts.js.
"use strict";

// ---------- pools ----------

// depsCell is a pool's deployments with their weight shares; a deployment
// without instances shows its weight and says so; a pool with neither
// deployments nor weights says why instead of a bare count.
function depsCell(s, w, deps, colors) {
  if (!w) return String(s.deployments) + " deployments";
  if (deps.length) {
    return deps.map((d) => el("span", { style: "margin-right:10px" }, swatch(colors.get(d.deployment)),
      d.deployment + " " + (Number(d.instances) > 0 ? pct(d.share, 0) : `weight ${num(d.weight, 2)} (no instances)`)));
  }
  const set = Object.entries(w.weights || {});
  if (set.length) return set.map(([d, x]) => `${d} weight ${num(x, 2)}`).join(", ") + " (no instances)";
  return "— no instances (forgotten or never reported) and weights never set";
}

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
        el("td", { class: "deps" }, depsCell(s, w, deps, colors)),
        el("td", { class: "num" }, String(s.instances)),
        el("td", {}, ["ok", "stale", "draining", "unreachable", "disconnected"].filter((k) => st[k]).map((k) =>
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
// roleName is an instance's prefill/decode role: prefill, decode or both
// (PD_ROLE_UNSPECIFIED is both).
const roleName = (r) => ({ PD_ROLE_PREFILL: "prefill", PD_ROLE_DECODE: "decode" })[r] || "both";
// ROLE_COL is shown after Instance only when a pool has a prefill or
// decode instance: an aggregated pool's table is as before.
const ROLE_COL = ["role", "Role", (i) => roleName(i.role)];

const pageInstances = {
  init(view, r, st) {
    st.sort = "deployment"; st.dir = 1; st.filter = ""; st.state = "";
    const filter = el("input", { id: "filter", type: "search", placeholder: "instance, deployment or address", oninput: (e) => { st.filter = e.target.value; this.draw(view, st); } });
    const state = el("select", { id: "state-filter", onchange: (e) => { st.state = e.target.value; this.draw(view, st); } },
      ["", "ok", "stale", "draining", "unreachable", "disconnected"].map((s) => el("option", { value: s, text: s || "any state" })));
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
    const pd = all.some((i) => roleName(i.role) !== "both");
    const cols = pd ? [...INST_COLS.slice(0, 2), ROLE_COL, ...INST_COLS.slice(2)] : INST_COLS;
    const col = cols.find((c) => c[0] === st.sort) || INST_COLS[0];
    rows.sort((a, b) => { const x = col[2](a, picks), y = col[2](b, picks); return (x < y ? -1 : x > y ? 1 : 0) * st.dir || a.instance_id.localeCompare(b.instance_id); });
    const head = el("tr", {}, cols.map(([id, label]) => el("th", {
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
        pd ? el("td", { class: "role", dataset: { role: roleName(i.role) }, text: roleName(i.role) }) : null,
        el("td", { text: i.address }),
        el("td", {}, el("span", { class: "badge " + s, text: (s === "ok" ? "" : "⚠ ") + s }), " " + secs(i.report_age_ms / 1000)),
        el("td", { class: "num", text: i.queue_ms === undefined || i.queue_ms === null ? "–" : num(i.queue_ms, 1) }),
        el("td", { class: "num", text: pct(i.kv_cache_usage, 0) }),
        el("td", { class: "num", text: i.cached_blocks }),
        el("td", { class: "num", text: num(picks[i.instance_id] || 0, 1) }));
    });
    view.querySelector("#insts").replaceChildren(el("table", {}, el("thead", {}, head),
      el("tbody", {}, body.length ? body : el("tr", {}, el("td", { colspan: cols.length, class: "muted", text: "No instance matches." })))));
    view.querySelector("#inst-count").textContent = `${rows.length} of ${all.length} instances. Stale, unreachable and disconnected rows are shaded and marked ⚠.`;
  },
};
