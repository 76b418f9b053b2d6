// The live view: reads the node's journal (mycore/journal) as Server-Sent
// Events from /events and draws it. No framework, nothing from the network.
"use strict";

const maxSteps = 300;          // steps kept per lane
const maxRelists = 120;        // relists in the chart
const $ = (id) => document.getElementById(id);

// The token of the printed URL (?token=). It is kept in sessionStorage,
// which belongs to this origin — port included — and never in a cookie,
// which the browser would send to every port of 127.0.0.1 (see guard.go).
// It leaves the address bar (a projector shows it); a reload finds it in
// sessionStorage. Each request for the node's data carries it as a query
// parameter: EventSource cannot set a header.
const token = (() => {
  const q = new URLSearchParams(location.search);
  const t = q.get("token");
  try {
    if (t === null) return sessionStorage.getItem("token") || "";
    sessionStorage.setItem("token", t);
  } catch (e) { /* storage off: this load works, a reload does not */ }
  q.delete("token");
  const rest = q.toString();
  history.replaceState(null, "", location.pathname + (rest ? "?" + rest : "") + location.hash);
  return t;
})();
const withToken = (path) => path + "?token=" + encodeURIComponent(token);

const view = {
  lanes: new Map(),    // pod -> lane
  relists: [],         // {at, took, threshold}
  nodes: new Map(),    // fleet: node -> last node entry
  apiCalls: [],        // fleet: {at, calls}
  criLast: null,       // the last relist's {at, total} CRI calls
  paused: false,
  held: [],            // entries that came while paused
  follow: "",
  start: null,
  count: 0,
  mode: "live",        // live | file
  fleet: false,        // a fleet's grid, not one node's pods
};

function fmtDur(ns) {
  const ms = ns / 1e6;
  if (ms < 1) return ms.toFixed(2) + " ms";
  if (ms < 1000) return Math.round(ms) + " ms";
  return (ms / 1000).toFixed(ms < 10000 ? 2 : 1) + " s";
}

function rel(at) {
  if (!view.start) return "";
  return "+" + ((Date.parse(at) - view.start) / 1000).toFixed(1) + "s";
}

function lane(e) {
  let l = view.lanes.get(e.pod);
  if (l) return l;
  const row = document.createElement("div");
  row.className = "lane";
  row.dataset.pod = e.pod;
  const name = document.createElement("div");
  name.className = "name";
  name.textContent = e.pod;
  const sub = document.createElement("small");
  name.appendChild(sub);
  const steps = document.createElement("div");
  steps.className = "steps";
  row.append(name, steps);
  $("lanes").appendChild(row);
  l = { pod: e.pod, row, sub, steps, state: "new", backoffs: new Map(), phase: "" };
  view.lanes.set(e.pod, l);
  const opt = document.createElement("option");
  opt.value = e.pod;
  opt.textContent = e.pod;
  $("follow").appendChild(opt);
  applyFollow(l);
  return l;
}

// label is what a step's chip says.
function label(e) {
  switch (e.kind) {
    case "config": return e.call;
    case "worker":
      if (e.call === "sync") return "sync → " + workerMethod(e) + (e.took >= 1e6 ? " (waited " + fmtDur(e.took) + " for the cache)" : "");
      if (e.call === "transition") return "→ " + e.state;
      if (e.call === "retry") return "retry in " + fmtDur(e.took || 0);
      return e.call + " [" + e.state + "]";
    case "sync": return e.call;
    case "decision": {
      const i = e.text.indexOf(": ");
      return "computePodActions: " + (i >= 0 ? e.text.slice(i + 2) : "");
    }
    case "cri": return e.call + (e.container ? " " + e.container : "") + (e.took ? " " + fmtDur(e.took) : " …");
    case "pleg": return e.call;
    case "probe": return e.call + " " + e.state;
    case "status": return e.version ? "status v" + e.version + " " + (e.state || "") + " (+" + fmtDur(e.took || 0) + ")" : e.call || "status";
    case "backoff": return "back-off " + (e.container || "") + (e.until ? " until " + new Date(e.until).toLocaleTimeString() : "");
    default: return e.call || e.kind;
  }
}

function workerMethod(e) {
  if (e.state === "terminating") return "SyncTerminatingPod";
  if (e.state === "terminated") return "SyncTerminatedPod";
  return "SyncPod";
}

function addStep(l, e) {
  const chip = document.createElement("span");
  chip.className = "chip k-" + e.kind + (e.failed ? " failed" : "");
  chip.dataset.kind = e.kind;
  if (e.call) chip.dataset.call = e.call;
  chip.title = (e.text || label(e)) + "\n" + new Date(e.at).toLocaleTimeString();
  chip.textContent = label(e);
  const t = document.createElement("small");
  t.textContent = rel(e.at);
  chip.appendChild(t);
  l.steps.appendChild(chip);
  while (l.steps.childElementCount > maxSteps) l.steps.firstElementChild.remove();
  if (view.follow === "" || view.follow === l.pod) l.steps.scrollTop = l.steps.scrollHeight;
}

// workerState is the state machine's box for a worker entry.
function workerState(e) {
  if (e.call === "finished" || e.call === "removed") return "finished";
  return e.state || "sync";
}

function setState(l, state) {
  l.state = state;
  l.sub.textContent = state + (l.phase ? " · " + l.phase : "");
  drawMachine();
}

function drawMachine() {
  const boxes = ["new", "sync", "terminating", "terminated", "finished"];
  const byState = new Map(boxes.map((b) => [b, []]));
  for (const l of view.lanes.values()) {
    if (byState.has(l.state)) byState.get(l.state).push(l.pod);
  }
  for (const b of boxes) {
    const box = $("state-" + b);
    const ul = box.querySelector(".pods");
    ul.replaceChildren();
    const pods = byState.get(b);
    box.classList.toggle("busy", pods.length > 0);
    for (const p of pods.slice(0, 12)) {
      const li = document.createElement("li");
      li.textContent = p;
      if (p === view.follow) li.className = "followed";
      ul.appendChild(li);
    }
    if (pods.length > 12) {
      const li = document.createElement("li");
      li.textContent = "+" + (pods.length - 12) + " more";
      ul.appendChild(li);
    }
  }
}

function relist(e) {
  view.relists.push(e);
  if (view.relists.length > maxRelists) view.relists.shift();
  const max = Math.max(10e6, ...view.relists.map((r) => r.took || 0));
  const n = view.relists.length;
  const pts = view.relists.map((r, i) => {
    const x = n === 1 ? 600 : (i * 600) / (maxRelists - 1);
    const y = 78 - ((r.took || 0) / max) * 74;
    return x.toFixed(1) + "," + y.toFixed(1);
  });
  $("pleg-line").setAttribute("points", pts.join(" "));
  $("pleg-text").textContent = "last relist took " + fmtDur(e.took || 0) + "; the slowest shown " + fmtDur(max === 10e6 ? Math.max(...view.relists.map((r) => r.took || 0)) : max) + "; " + n + " relists";
  plegHealth();
  if (e.counts && !view.fleet) criCalls(e);
}

// criCalls shows every CRI call the node made so far, by method: the
// calls about no pod (the relists' own lists, Version, log rotation, the
// streaming server) have no lane, so this is where they show.
function criCalls(e) {
  const methods = Object.entries(e.counts).sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]));
  const total = methods.reduce((s, [, n]) => s + n, 0);
  let rate = "";
  const last = view.criLast;
  if (last && last.node === e.node) {
    const secs = (Date.parse(e.at) - last.at) / 1000;
    if (secs > 0) rate = ", " + ((total - last.total) / secs).toFixed(1) + " per second";
  }
  view.criLast = { node: e.node, at: Date.parse(e.at), total };
  $("cri-calls").textContent = "CRI calls: " + total + rate + " — " + methods.map(([m, n]) => m + " " + n).join(" · ");
}

// plegHealth is GenericPLEG.Healthy: unhealthy once the last relist is
// older than the threshold (3 min), drawn as a gauge of that age.
function plegHealth() {
  const last = view.relists[view.relists.length - 1];
  if (!last) return;
  const now = view.mode === "file" ? Date.parse(last.at) : Date.now();
  const age = Math.max(0, now - Date.parse(last.at));
  const threshold = (last.threshold || 180e9) / 1e6;
  const g = $("pleg-gauge");
  g.style.width = Math.min(100, (age / threshold) * 100).toFixed(1) + "%";
  const bad = age > threshold;
  g.classList.toggle("unhealthy", bad);
  $("pleg-health").textContent = (bad ? "PLEG is not healthy: " : "healthy: ") + "last relist " + (age / 1000).toFixed(1) + " s ago, threshold " + (threshold / 1000) + " s";
}

function countdowns() {
  const now = Date.now();
  for (const l of view.lanes.values()) {
    for (const [c, el] of l.backoffs) {
      const left = (Date.parse(el.dataset.until) - now) / 1000;
      if (left <= 0 || view.mode === "file") {
        el.remove();
        l.backoffs.delete(c);
      } else {
        el.textContent = "back-off " + c + ": " + left.toFixed(0) + " s";
      }
    }
  }
}

function backoff(l, e) {
  if (!e.until) return;
  let el = l.backoffs.get(e.container);
  if (!el) {
    el = document.createElement("span");
    el.className = "countdown";
    l.sub.after(el);
    l.backoffs.set(e.container, el);
  }
  el.dataset.until = e.until;
  countdowns();
}

function node(e) {
  view.nodes.set(e.node, e);
  let cell = document.querySelector('.cell[data-node="' + CSS.escape(e.node) + '"]');
  if (!cell) {
    cell = document.createElement("div");
    cell.className = "cell";
    cell.dataset.node = e.node;
    $("fleet-grid").appendChild(cell);
  }
  paintCell(cell, e);
  let ready = 0, pods = 0;
  for (const n of view.nodes.values()) { if (n.nodeReady) ready++; pods += n.nodePods || 0; }
  $("fleet-summary").textContent = view.nodes.size + " nodes, " + ready + " Ready, " + pods + " pods";
}

// paintCell colours a node: NotReady red; Ready with a lease not renewed
// for more than half its 40 s duration amber (the kubelet renews every 10 s).
function paintCell(cell, e) {
  const now = view.mode === "file" ? Date.parse(e.at) : Date.now();
  const renewed = e.nodeLeaseRenewed ? Date.parse(e.nodeLeaseRenewed) : 0;
  const age = renewed ? Math.max(0, (now - renewed) / 1000) : Infinity;
  cell.classList.toggle("notready", !e.nodeReady);
  cell.classList.toggle("stale", !!e.nodeReady && age > 20);
  cell.title = e.node + ": " + (e.nodeReady ? "Ready" : "NotReady") + ", lease renewed " + (renewed ? age.toFixed(0) + " s ago" : "never") + ", " + (e.nodePods || 0) + " pod(s)";
}

function repaintNodes() {
  for (const cell of document.querySelectorAll(".cell")) {
    const e = view.nodes.get(cell.dataset.node);
    if (e) paintCell(cell, e);
  }
}

function apiRate(e) {
  view.apiCalls.push(e);
  if (view.apiCalls.length > 2) view.apiCalls.shift();
  if (view.apiCalls.length === 2) {
    const [a, b] = view.apiCalls;
    const secs = (Date.parse(b.at) - Date.parse(a.at)) / 1000;
    if (secs > 0) $("fleet-rate").textContent = "apiserver requests: " + ((b.version - a.version) / secs).toFixed(1) + " per second (" + b.version + " in all)";
  }
}

function apply(e) {
  if (!view.start) view.start = Date.parse(e.at);
  view.count++;
  switch (e.kind) {
    case "relist": relist(e); return;
    case "node":
      if ($("fleet").hidden) fleetLayout(true);
      if (e.call === "apiserver") apiRate(e); else node(e);
      return;
  }
  if (!e.pod) return; // a node-wide step: the terminal has it
  const l = lane(e);
  addStep(l, e);
  if (e.kind === "worker") setState(l, workerState(e));
  if (e.kind === "status" && e.state) { l.phase = e.state; setState(l, l.state); }
  if (e.kind === "backoff") backoff(l, e);
}

function receive(e) {
  if (view.paused) { view.held.push(e); counts(); return; }
  apply(e);
  counts();
}

function counts() {
  $("counts").textContent = view.count + " steps, " + (view.fleet ? view.nodes.size + " nodes" : view.lanes.size + " pods") + (view.held.length ? ", " + view.held.length + " held while paused" : "");
}

function conn(text, cls) {
  const c = $("conn");
  c.textContent = text;
  c.className = "conn " + cls;
}

let source = null;
function connect() {
  if (!token) { conn("no token: open the URL the lab printed", "ended"); return; }
  $("save").href = withToken("trace.json");
  source = new EventSource(withToken("events"));
  source.addEventListener("hello", (m) => {
    const h = JSON.parse(m.data);
    if (h.title) { $("title").textContent = h.title; document.title = h.title + " · live view"; }
    reset();
    fleetLayout(h.fleet);
    conn("live", "live");
  });
  source.addEventListener("entry", (m) => receive(JSON.parse(m.data)));
  source.addEventListener("dropped", (m) => conn("live (the page fell behind: " + m.data + " steps not shown)", "live"));
  source.addEventListener("end", () => { conn("ended: the node stopped", "ended"); source.close(); });
  // CLOSED: the view answered, but not with the stream (a wrong token);
  // otherwise the connection broke and EventSource tries again
  source.onerror = () => {
    if (source.readyState === EventSource.CLOSED) conn("refused: open the URL the lab printed (a new run prints a new one)", "ended");
    else conn("reconnecting…", "lost");
  };
}

// fleetLayout shows the grid of nodes instead of one node's pods.
function fleetLayout(fleet) {
  view.fleet = fleet;
  $("fleet").hidden = !fleet;
  for (const id of ["machine", "pleg", "timeline"]) $(id).hidden = fleet;
  $("follow").parentElement.hidden = fleet;
}

function reset() {
  view.lanes.clear(); view.relists = []; view.criLast = null; view.nodes.clear(); view.apiCalls = [];
  view.held = []; view.start = null; view.count = 0;
  $("lanes").replaceChildren(); $("fleet-grid").replaceChildren();
  const f = $("follow");
  while (f.options.length > 1) f.remove(1);
  $("pleg-line").setAttribute("points", "");
  drawMachine();
}

function applyFollow(l) {
  l.row.classList.toggle("hidden", view.follow !== "" && view.follow !== l.pod);
}

$("pause").addEventListener("click", () => {
  view.paused = !view.paused;
  $("pause").textContent = view.paused ? "Resume" : "Pause";
  if (!view.paused) {
    const held = view.held;
    view.held = [];
    held.forEach(apply);
    if (view.mode === "live") conn("live", "live");
  } else {
    conn("paused", "paused");
  }
  counts();
});

$("follow").addEventListener("change", (ev) => {
  view.follow = ev.target.value;
  for (const l of view.lanes.values()) applyFollow(l);
  drawMachine();
});

// Load a saved session (the Chrome trace /trace.json gives): each event's
// args.entry is a journal entry, replayed in order.
$("load").addEventListener("change", async (ev) => {
  const file = ev.target.files[0];
  if (!file) return;
  let entries;
  try {
    const trace = JSON.parse(await file.text());
    entries = (trace.traceEvents || []).map((t) => t.args && t.args.entry).filter(Boolean);
  } catch (err) {
    conn("not a saved session: " + err.message, "ended");
    return;
  }
  if (entries.length === 0) { conn("no step of ours in " + file.name, "ended"); return; }
  entries.sort((a, b) => a.seq - b.seq);
  if (source) source.close();
  view.mode = "file";
  view.paused = false;
  $("pause").textContent = "Pause";
  reset();
  entries.forEach(apply);
  counts();
  $("save").hidden = true;
  conn("from " + file.name + " (" + entries.length + " steps)", "file");
});

setInterval(() => { if (view.mode === "live") { countdowns(); plegHealth(); repaintNodes(); } }, 1000);
drawMachine();
connect();
