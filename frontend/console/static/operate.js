// prefixroute console: the pages that operate one: the ramp, migration
// readiness and the explained pick. Loaded after overview.js.
"use strict";

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
    // Loads are in % of the prefill capacity, amounts in prefill tokens/s: the units of 'prefixctl migration'.
    const capPct = (ms) => cap > 0 && a.throughput_known ? `${num(100 * ms / cap, 1)} %` : "unknown";
    const verdict = Number(m.picks) === 0 ? ["no", "No verdict yet: no picks in the window"]
      : a.can_absorb ? ["yes", `Ready: ${m.to} can absorb ${m.from}'s traffic`] : ["no", `Not yet: ${m.to} would run out of prefill headroom`];
    box.replaceChildren(
      el("p", {}, el("span", { class: "verdict " + verdict[0], id: "verdict", text: verdict[1] })),
      el("h3", { text: `${m.to}'s prefill load, in % of its prefill capacity: now, and added by the move` }),
      el("div", { class: "bar", id: "mig-bar", style: "height:26px", role: "img", "aria-label": `busy now ${capPct(now)}, added by the move ${capPct(extra)} of ${m.to}'s prefill capacity` },
        el("span", { style: `width:${100 * now / scale}%;background:#0072B2` }),
        el("span", { class: "hatch", style: `width:${100 * extra / scale}%` })),
      legend([{ label: `busy now ${capPct(now)}`, color: "#0072B2", width: 8 }, { label: `added by the move ${capPct(extra)}`, color: "#D55E00", width: 8 },
        { label: `capacity 100 %; headroom after the move ${num(a.headroom_pct, 1)} %`, color: "#555", width: 1 }]),
      a.throughput_known ? "" : el("p", { class: "muted", text: "Prefill throughput unknown: the instances report no prefill_tokens_per_second." }),
      el("dl", { class: "kv" },
        el("dt", { text: "Window" }), el("dd", { text: `${secs(m.covered)} of ${secs(m.window)} covered, ${m.picks} picks` }),
        el("dt", { text: `Only ${m.from} holds` }), el("dd", { text: `${pct(m.from_only_request_share)} of requests, ${pct(m.from_only_token_share)} of prompt tokens` }),
        el("dt", { text: `Added to ${m.to}'s prefill` }), el("dd", { id: "mig-extra", text: `+${num(a.extra_tokens_per_second, 0)} prefill tokens/s in all: ` +
          `${num(a.moved_prefill_tokens_per_second, 0)} prefill tokens/s that move with ${m.from}'s traffic, ` +
          `${num(a.recompute_tokens_per_second, 0)} prefill tokens/s recomputing prefixes only ${m.from} holds` })),
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
