// The p4netem dashboard: polls /api/show (and /api/health), streams /api/live (server-sent events), plots with uPlot
// (served from /static/vendor, copied from npm at build time). Every action is one REST call.
"use strict";

const WINDOW = 120; // points kept per plot (2 minutes at the default 1 s refresh)
const STATE_COLOURS = { idle: "#bbb", promoting: "#f90", fach: "#fd5", dch: "#d33", connected: "#d33",
  short_drx: "#e77", long_drx: "#f99", standby: "#bbb", ready: "#d33" };

const $ = (id) => document.getElementById(id);
let isOperator = true;
let hasHealth = false; // /api/health answers (p4netem web --switch-metrics)

let switchError = false; // the box shows the switch's unavailability, not a refused input

function showError(text, fromSwitch = false) {
  const box = $("error");
  box.textContent = text;
  box.hidden = !text;
  switchError = Boolean(text) && fromSwitch;
}

// The switch answers again: an error it caused goes, a refused input's message stays.
function switchBack() {
  if (switchError) showError("");
}

// The switch cannot be reached (a 503 of the API, an "unavailable" event of the stream): the badge
// says so, the red box says why, until it answers again.
function switchDown(text) {
  $("live").textContent = "switch unavailable"; $("live").className = "badge bad";
  showError(text, true);
}

async function call(method, path, body) {
  const r = await fetch(path, { method, headers: body ? { "Content-Type": "application/json" } : {},
    body: body ? JSON.stringify(body) : undefined, credentials: "same-origin" });
  const data = await r.json().catch(() => ({}));
  if (!r.ok) {
    // The API's errors carry the validator's field-named problems; FastAPI's own 422s a list.
    let text = data.error || (typeof data.detail === "string" ? data.detail : JSON.stringify(data.detail));
    if (data.problems && data.problems.length > 1) text = data.error;
    const err = new Error(text || `${method} ${path}: HTTP ${r.status}`);
    err.status = r.status;
    throw err;
  }
  return data;
}

async function act(fn) {
  try { showError(""); await fn(); await refreshShow(); } catch (e) { if (e.status === 503) switchDown(e.message); else showError(e.message); }
}

const rulesOf = (text) => text.split(";").map((s) => s.trim()).filter(Boolean);

function linkText(l) {
  if (!l) return "";
  return Object.entries(l).map(([k, v]) => `${k} ${typeof v === "object" ? JSON.stringify(v) : v}`).join(", ");
}

async function refreshProfiles() {
  const profiles = await call("GET", "/api/profiles");
  for (const sel of [$("apply-profile"), $("self-select")]) {
    const keep = sel.value;
    sel.innerHTML = "";
    for (const p of profiles) {
      const o = document.createElement("option");
      o.value = p.name; o.textContent = `${p.name}: ${p.downlink}`;
      sel.appendChild(o);
    }
    if (keep) sel.value = keep;
  }
}

async function refreshSelf() {
  const me = await call("GET", "/api/self");
  $("self-address").textContent = me.address;
  $("self-profile").textContent = me.rule ? me.rule.profile : "none";
  isOperator = me.operator;
  hasHealth = Boolean(me.health);
  $("operator").hidden = !isOperator;
  $("live").hidden = !isOperator; // the stream is the operator's: no "connecting" for ever on a phone
}

async function refreshShow() {
  await refreshSelf();
  if (!isOperator) return;
  const show = await call("GET", "/api/show");
  $("switch").textContent = `switch ${show.switch}, device ${show.device_id}`;
  const body = $("rules").querySelector("tbody");
  body.innerHTML = "";
  for (const r of show.rules) {
    const tr = document.createElement("tr");
    tr.dataset.rule = r.number;
    for (const v of [`#${r.number}`, r.traffic, r.profile + (r.modified.length ? " (modified)" : ""),
      linkText(r.downlink), linkText(r.uplink), r.radio ? r.radio.model : ""]) {
      const td = document.createElement("td"); td.textContent = v; tr.appendChild(td);
    }
    body.appendChild(tr);
  }
  const t = await call("GET", "/api/timelines");
  $("timeline-status").textContent = t.running ? "running" : t.error ? `error: ${t.error}`
    : t.events === undefined ? "" : t.stopped ? `stopped (${t.events} events)` : `done (${t.events} events)`;
}

// The data plane's liveness (/api/health, with `p4netem web --switch-metrics`): a stalled
// data-plane thread forwards nothing while P4Runtime answers and the counters stand still as on an
// idle link, so the badge and the box say so. Without --switch-metrics nothing is known: no badge.
async function refreshHealth() {
  const badge = $("dataplane"), box = $("stall");
  let data = {};
  try {
    // 200 while the data plane runs, 503 while it is stalled (the summary all the same) or while
    // the switch's metrics cannot be read ({"error"} only).
    const r = await fetch("/api/health", { credentials: "same-origin" });
    data = await r.json().catch(() => ({}));
  } catch (e) { data = { error: String(e) }; }
  badge.hidden = false;
  const live = data.dataplane;
  const stalled = Boolean(live && live.serving === false);
  box.hidden = !stalled;
  if (stalled) {
    badge.textContent = "data plane stalled"; badge.className = "badge bad";
    box.textContent = data.error;
  } else if (live && live.serving) {
    badge.textContent = "data plane running"; badge.className = "badge ok";
  } else {
    // The switch's metrics cannot be read, or a switch without heartbeats.
    badge.textContent = "data plane unknown"; badge.className = "badge";
  }
  badge.title = live && live.threads && live.threads.length
    ? live.threads.map((t) => `${t.thread}${t.port ? ` port ${t.port}` : ""}: last ran ${t.age_s} s ago`).join("\n")
      + `\nstalled after ${live.timeout_s} s`
    : data.error || "the switch exports no heartbeats";
}

// ---- live plots ---------------------------------------------------------------------------------

const plots = {};
let previous = null; // the last sample, for rates
const series = { keys: null, t: [], throughput: {}, queue: {}, drops: {} }; // keys null: no plots yet
const radioHistory = []; // [{t, states: {ue: state}}]

function makePlot(id, keys, data) {
  const el = $(id);
  el.innerHTML = "";
  const opts = { width: 420, height: 200, series: [{}, ...keys.map((k, i) => ({ label: k, stroke: `hsl(${(i * 67) % 360},70%,45%)` }))],
    axes: [{}, { size: 50 }], legend: { show: true } };
  return new uPlot(opts, data, el);
}

function ensureSeries(keys) {
  if (series.keys !== null && keys.join("|") === series.keys.join("|")) return;
  series.keys = keys;
  for (const m of ["throughput", "queue", "drops"]) {
    series[m] = {};
    for (const k of keys) series[m][k] = series.t.map(() => null);
  }
  plots.throughput = makePlot("plot-throughput", keys.flatMap((k) => [`${k} in`, `${k} out`]), [[]]);
  plots.queue = makePlot("plot-queue", keys, [[]]);
  plots.drops = makePlot("plot-drops", keys, [[]]);
}

// The stream sends every row when the rows change ("full"), else only the rows that moved.
let liveRows = new Map(); // "label direction" -> row, in the server's order

function merged(s) {
  if (s.full) liveRows = new Map();
  for (const r of s.rows) liveRows.set(`${r.label} ${r.direction}`, r);
  return { ...s, rows: [...liveRows.values()] };
}

function onSample(event) {
  if (event.error && event.unavailable) { switchDown(event.error); return; }
  if (event.error) { $("live").textContent = "switch error"; $("live").className = "badge bad"; showError(event.error, true); return; }
  switchBack();
  const s = merged(event);
  $("live").textContent = "live"; $("live").className = "badge ok";
  const rows = s.rows.filter((r) => r.label !== "default" || r.packets_in > 0);
  const keys = rows.map((r) => `${r.label} ${r.direction}`);
  ensureSeries(keys);
  const now = s.t;
  const dt = previous ? now - previous.t : null;
  const prevRows = {};
  if (previous) for (const r of previous.rows) prevRows[`${r.label} ${r.direction}`] = r;
  series.t.push(now);
  for (const r of rows) {
    const k = `${r.label} ${r.direction}`;
    const p = prevRows[k];
    const rate = (a, b) => (p && dt > 0 ? (a - b) / dt : null);
    series.throughput[k] = series.throughput[k] || [];
    series.throughput[k].push([rate(r.bytes_in, p && p.bytes_in) * 8 / 1e6, rate(r.bytes_out, p && p.bytes_out) * 8 / 1e6]);
    series.queue[k].push(r.held);
    series.drops[k].push(rate(r.dropped, p && p.dropped));
  }
  if (series.t.length > WINDOW) {
    series.t.shift();
    for (const m of ["throughput", "queue", "drops"]) for (const k of keys) series[m][k].shift();
  }
  const pair = (k, i) => series.throughput[k].map((v) => (v && v[i] !== null && !Number.isNaN(v[i]) ? v[i] : null));
  plots.throughput.setData([series.t, ...keys.flatMap((k) => [pair(k, 0), pair(k, 1)])]);
  plots.queue.setData([series.t, ...keys.map((k) => series.queue[k])]);
  plots.drops.setData([series.t, ...keys.map((k) => series.drops[k])]);
  previous = s;

  const body = $("counters").querySelector("tbody");
  body.innerHTML = "";
  for (const r of rows) {
    const tr = document.createElement("tr");
    const drops = Object.entries(r.drops).filter(([, n]) => n).map(([k, n]) => `${k} ${n}`).join(", ");
    for (const v of [r.label, r.direction, r.profile_label, r.packets_in, r.packets_out, r.held, drops]) {
      const td = document.createElement("td"); td.textContent = v; tr.appendChild(td);
    }
    body.appendChild(tr);
  }
  onRadio(now, s.radio);
}

function onRadio(t, radio) {
  const states = {};
  const body = $("radio").querySelector("tbody");
  body.innerHTML = "";
  for (const u of radio.ues) {
    states[u.ue] = String(u.state).toLowerCase();
    const promos = Object.entries(u.promotions).map(([k, n]) => `${k} ${n}`).join(", ");
    const tr = document.createElement("tr");
    for (const v of [u.ue, u.model, u.state, promos, u.energy_j]) {
      const td = document.createElement("td"); td.textContent = v === null ? "" : v; tr.appendChild(td);
    }
    body.appendChild(tr);
  }
  radioHistory.push({ t, states });
  if (radioHistory.length > WINDOW) radioHistory.shift();
  drawRadio();
}

// One row per UE, one column per sample, coloured by RRC state: the state timeline.
function drawRadio() {
  const c = $("radio-timeline");
  const ues = [...new Set(radioHistory.flatMap((h) => Object.keys(h.states)))];
  c.height = Math.max(20, ues.length * 16 + 4);
  const g = c.getContext("2d");
  g.clearRect(0, 0, c.width, c.height);
  const w = (c.width - 60) / WINDOW;
  g.font = "11px sans-serif";
  ues.forEach((ue, row) => {
    g.fillStyle = "#222"; g.fillText(`UE ${ue}`, 2, row * 16 + 13);
    radioHistory.forEach((h, i) => {
      const s = h.states[ue];
      if (!s) return;
      g.fillStyle = STATE_COLOURS[s] || "#888";
      g.fillRect(60 + i * w, row * 16 + 2, Math.ceil(w), 14);
    });
  });
}

function startLive() {
  const es = new EventSource("/api/live");
  es.onmessage = (m) => onSample(JSON.parse(m.data));
  es.onerror = () => { $("live").textContent = "reconnecting"; $("live").className = "badge bad"; };
}

// ---- actions ------------------------------------------------------------------------------------

function parseChanges(text) {
  const out = {};
  for (const item of text.split(/[\s,]+/).filter(Boolean)) {
    const [k, ...rest] = item.split("=");
    if (!rest.length) throw new Error(`${item}: not field=value`);
    out[k] = rest.join("=");
  }
  return out;
}

$("apply-form").addEventListener("submit", (e) => { e.preventDefault(); act(() => call("POST", "/api/apply", {
  profile: $("apply-profile").value, rules: rulesOf($("apply-rules").value), in_place: $("apply-inplace").checked })); });
$("set-form").addEventListener("submit", (e) => { e.preventDefault(); act(() => call("POST", "/api/set", {
  changes: parseChanges($("set-changes").value), rules: rulesOf($("set-rules").value) })); });
$("validate-button").addEventListener("click", () => act(async () => {
  const v = await call("POST", "/api/profiles/validate", { yaml: $("upload-yaml").value });
  if (!v.valid) throw new Error(v.error);
  $("upload-result").textContent = `valid: ${v.profiles.join(", ")}`; $("upload-result").className = "ok-text";
}));
$("upload-form").addEventListener("submit", (e) => { e.preventDefault(); act(async () => {
  const r = await call("POST", "/api/profiles", { yaml: $("upload-yaml").value });
  $("upload-result").textContent = `added ${r.added.join(", ")}`; $("upload-result").className = "ok-text";
  await refreshProfiles();
}); });
$("timeline-form").addEventListener("submit", (e) => { e.preventDefault(); act(async () => {
  const s = await call("POST", "/api/timelines", { yaml: $("timeline-yaml").value });
  $("timeline-status").textContent = s.running ? "running" : "done";
}); });
$("timeline-stop").addEventListener("click", () => act(async () => {
  const s = await call("DELETE", "/api/timelines");
  $("timeline-status").textContent = s.error ? `error: ${s.error}` : "stopped";
}));
$("reset-button").addEventListener("click", () => { if (confirm("Remove every rule?")) act(() => call("POST", "/api/reset", {})); });
$("self-apply").addEventListener("click", () => act(() => call("PUT", "/api/self", { profile: $("self-select").value })));
$("self-remove").addEventListener("click", () => act(() => call("DELETE", "/api/self")));

// A page opened while the switch is down keeps trying: the stream starts once the page knows it
// is an operator's, and the periodic refresh runs whatever the first one met.
let liveStarted = false;
function refreshAll() {
  return refreshShow().then(() => {
    switchBack();
    if (isOperator && !liveStarted) {
      liveStarted = true; startLive();
      if (hasHealth) { refreshHealth(); setInterval(refreshHealth, 2000); }
    }
  }, (e) => (e.status === 503 ? switchDown(e.message) : showError(e.message, true)));
}

(async () => {
  try { await refreshProfiles(); } catch (e) { showError(e.message); }
  await refreshAll();
  setInterval(() => { refreshAll(); if (!$("apply-profile").options.length) refreshProfiles().catch(() => {}); }, 5000);
})();
