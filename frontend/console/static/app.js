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
  return { pools: pagePools, cutover: pageCutover, instances: pageInstances, ramp: pageRamp, migration: pageMigration, explain: pageExplain, capacity: pageCapacity }[name];
}
const TABS = [["cutover", "Cutover"], ["instances", "Instances"], ["ramp", "Ramp"], ["migration", "Migration"], ["explain", "Explain"], ["capacity", "Capacity"]];

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
