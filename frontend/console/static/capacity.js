// prefixroute console: the capacity page: the prefill model each
// deployment learned from outcomes (as prefixctl calibration shows it),
// and the pool's waiting room under on_saturation: queue. Loaded after
// overview.js.
"use strict";

// plural is n and its noun: one when n is 1, else many (one + "s").
const plural = (n, one, many = one + "s") => `${n} ${Number(n) === 1 ? one : many}`;

const CAL_COLS = ["Deployment", "Version", "Used", "Samples", "Skipped", "Clipped", "Prefill scale", "Doubling context", "Queue correction", "Mean error"];

// calRow is one deployment's fit (GetSloCalibration), in prefixctl
// calibration's words and units.
function calRow(d, cal) {
  let used = d.in_use ? "yes" : "no";
  if (!d.in_use) {
    used += cal.calibration === "SLO_CALIBRATION_OBSERVE" ? " (observe)" : ` (${d.accepted} of ${cal.min_samples} samples)`;
  }
  return el("tr", { dataset: { deployment: d.deployment, inUse: String(!!d.in_use) } },
    el("th", { scope: "row", text: d.deployment }),
    el("td", { class: "num", text: d.version }),
    el("td", { text: used }),
    el("td", { class: "num", text: d.accepted }),
    el("td", { class: "num", text: d.ignored }),
    el("td", { class: "num", text: d.clipped }),
    el("td", { class: "num", text: num(d.prefill_scale, 2) + "×" }),
    el("td", { class: "num", text: num(d.doubling_context_tokens, 0) + " tokens" }),
    el("td", { class: "num", text: num(d.queue_scale, 2) + "× (reported only)" }),
    el("td", { class: "num", text: pct(d.mean_abs_rel_residual) }));
}

// calMode is the calibration's one-line summary.
function calMode(cal) {
  const mode = cal.calibration === "SLO_CALIBRATION_OBSERVE" ? "observe (the prior prices picks)" : `apply (from ${cal.min_samples} samples)`;
  return `Calibration ${mode}; prior doubling context ${num(cal.prior_doubling_context_tokens, 0)} tokens.`;
}

// queueText is the waiting room's one-line summary.
function queueText(q) {
  const limits = `limits ${q.max_waiting} picks, ${q.max_per_band} per band, ${num(q.ttl_ms / 1000, 0)} s wait`;
  if (q.on_saturation !== "ON_SATURATION_QUEUE") {
    return `Off (on_saturation: ${q.on_saturation.replace(/^ON_SATURATION_/, "").toLowerCase()}); ${limits} once on.`;
  }
  return `${plural(q.waiting, "pick")} waiting, oldest ${q.oldest_wait_ms} ms; ${limits}.`;
}

// bandRows are one band's rows: the band, then its listed flows.
function bandRows(b, q) {
  const rows = [el("tr", { class: "band", dataset: { priority: String(b.priority), waiting: String(b.waiting) } },
    el("th", { scope: "row", text: `band ${b.priority}` }),
    el("td", { text: plural(b.flows, "flow") + (b.flows > b.top_flows.length ? ` (${b.top_flows.length} shown)` : "") }),
    el("td", { class: "num", text: `${b.waiting} (${pct(b.waiting / q.max_per_band, 0)} of band limit)` }),
    el("td", { class: "num", text: `${b.oldest_wait_ms} ms` }))];
  for (const f of b.top_flows) {
    rows.push(el("tr", { class: "flow", dataset: { priority: String(b.priority), flow: f.flow, waiting: String(f.waiting) } },
      el("td", {}), el("td", { text: f.flow }),
      el("td", { class: "num", text: String(f.waiting) }),
      el("td", { class: "num", text: `${f.oldest_wait_ms} ms` })));
  }
  return rows;
}

// countersText is what the waiting room did since the router started.
function countersText(q) {
  const c = q.counters, r = q.rejected;
  if (!q.active) return "No pick of this pool has waited since the router started.";
  return `Since start: ${plural(c.enqueued, "pick")} waited, ${c.dispatched} got an instance, ${c.passed} failed otherwise; ${plural(c.requeued, "retry", "retries")} found the pool still saturated. ` +
    `Rejected: ${r.queue_full} queue_full, ${r.queue_timeout} queue_timeout, ${r.sheddable_rejected} sheddable_rejected, ${r.canceled} canceled.`;
}

const pageCapacity = {
  init(view, r) {
    view.append(el("h2", { text: "Capacity of " + r.pool }),
      el("h3", { text: "Prefill model learned from outcomes" }),
      el("p", { id: "cal-mode" }), el("div", { class: "scroll", id: "cal" }),
      el("p", { class: "muted", text: "Prefill scale: fitted prefill time over the prior's. Doubling context: context length (tokens) " +
        "at which a prompt token costs twice as much to prefill. Queue correction: outcomes' queue wait over reported queue_ms " +
        "(reported only, not applied). Mean error: mean |observed − fit| TTFT over the predicted." }),
      el("h3", { text: "Waiting room (flow control)" }),
      el("p", { id: "queue-summary" }), el("div", { class: "scroll", id: "queue-bands" }), el("p", { class: "muted", id: "queue-counters" }));
  },
  async refresh(view, r) {
    const data = await api("capacity?pool=" + encodeURIComponent(r.pool));
    const cal = data.calibration, deps = cal.deployments || [];
    view.querySelector("#cal-mode").textContent = calMode(cal);
    view.querySelector("#cal").replaceChildren(deps.length ? el("table", {},
      el("thead", {}, el("tr", {}, CAL_COLS.map((t, i) => el("th", { scope: "col", class: i > 0 && i !== 2 ? "num" : null, text: t })))),
      el("tbody", {}, deps.map((d) => calRow(d, cal))))
      : el("p", { class: "muted", text: "No fits yet: no served outcome with ttft_ms has matched a pick of this pool." }));
    const q = data.queue;
    const summary = view.querySelector("#queue-summary");
    summary.textContent = queueText(q);
    summary.dataset.waiting = String(q.waiting);
    view.querySelector("#queue-bands").replaceChildren(q.bands.length ? el("table", {},
      el("thead", {}, el("tr", {}, ["Priority", "Flow", "Picks waiting", "Oldest wait"].map((t, i) =>
        el("th", { scope: "col", class: i > 1 ? "num" : null, text: t })))),
      el("tbody", {}, q.bands.flatMap((b) => bandRows(b, q))))
      : el("p", { class: "muted", text: "No pick is waiting." }));
    view.querySelector("#queue-counters").textContent = countersText(q);
  },
};
