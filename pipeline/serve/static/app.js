// soul serve — the page. Plain JavaScript, no build step.
// Every piece of user or model text is set with textContent, never as HTML.
"use strict";

const $ = (role) => document.querySelector(`[data-role="${role}"]`);
const state = { soul: null, session: null, ws: null, kinds: {}, streaming: {}, lastQuery: "",
                closing: false, metrics: [], retry: 0 };

// The token (only a server off-localhost asks for one) comes once in ?token=, then lives in
// sessionStorage so the address bar stops showing it.
const params = new URLSearchParams(location.search);
if (params.get("token")) {
  sessionStorage.setItem("soul-token", params.get("token"));
  params.delete("token");
  history.replaceState(null, "", location.pathname + (params.toString() ? "?" + params : "") + location.hash);
}
const token = sessionStorage.getItem("soul-token") || "";

function el(tag, cls, text) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined && text !== null) node.textContent = String(text);
  return node;
}

function append(log, node) {
  const nearEnd = log.scrollHeight - log.scrollTop - log.clientHeight < 40;
  log.append(node);
  while (log.childElementCount > 2000) log.firstElementChild.remove();
  if (nearEnd) log.scrollTop = log.scrollHeight;
  return node;
}

async function api(path, options = {}) {
  const headers = { ...(options.body ? { "Content-Type": "application/json" } : {}),
                    ...(token ? { Authorization: `Bearer ${token}` } : {}) };
  const response = await fetch(path, { ...options, headers });
  const data = await response.json().catch(() => ({}));
  if (!response.ok) throw new Error(data.error || `${response.status} ${response.statusText}`);
  return data;
}

function showError(message) {
  const node = $("error");
  node.textContent = message || "";
  node.hidden = !message;
}

// ---- chat -----------------------------------------------------------------------------

function chatMessage(who, text, spontaneous, turn) {
  const node = el("div", `msg ${who}${spontaneous ? " spontaneous" : ""}`);
  if (spontaneous) node.append(el("span", "tag", "unprompted"));
  node.append(el("span", "text", text));
  if (spontaneous) node.dataset.spontaneous = "true";
  if (turn) stamp(node, turn);
  else (who === "user" ? unstamped.user : unstamped.soul).push(node);
  return append($("chat-log"), node);
}

// messages shown before their turn committed: a user's message waits for its turn's commit (a
// message sent while a turn commits belongs to the next one); the soul's belong to the running turn
const unstamped = { user: [], soul: [], spontaneous: false };

// a message of turn `turn`: a click inspects that turn (its trace, context window and layers)
function stamp(node, turn) {
  node.dataset.turn = turn;
  node.title = `turn ${turn}: click to inspect it`;
  node.addEventListener("click", () => chooseTurn(turn));
}

function stampTurn(turn) {
  const asked = unstamped.spontaneous ? null : unstamped.user.shift();
  if (asked) stamp(asked, turn);
  for (const node of unstamped.soul.splice(0)) stamp(node, turn);
  unstamped.spontaneous = false;
}

function onToken(event) {
  let node = state.streaming[event.step];
  if (!node) {
    node = chatMessage("soul", "");
    node.classList.add("streaming");
    state.streaming[event.step] = node;
  }
  node.querySelector(".text").textContent += event.text;
  const log = $("chat-log");
  log.scrollTop = log.scrollHeight;
}

function onReply(event) {
  unstamped.spontaneous = Boolean(event.spontaneous);
  // The Reply is the whole text: it replaces what streamed (the soul's one voice per turn).
  const streamed = Object.values(state.streaming);
  state.streaming = {};
  const node = streamed[0];
  if (node) {
    node.querySelector(".text").textContent = event.text;
    node.classList.remove("streaming");
    if (event.spontaneous) {
      node.classList.add("spontaneous");
      node.dataset.spontaneous = "true";
      node.prepend(el("span", "tag", "unprompted"));
    }
  } else if (event.text) {
    chatMessage("soul", event.text, event.spontaneous);
  }
}

// ---- internal dialogue and the subconscious ------------------------------------------

function line(role, cls, label, text) {
  const node = el("div", `line ${cls}`);
  node.append(el("span", "label", label), el("span", "text", text));
  return append($(role), node);
}

const QUIET = { internal_dialog: "ID_quiet", s_loud: "S_quiet" };
const LOUD = { internal_dialog: "ID_loud", s_loud: "S_loud" };

function internalStep(step, kind, outputs) {
  if (!outputs || kind === "external_dialogue" || kind.startsWith("memory.") || kind.startsWith("chetana")) return;
  if (kind === "internal_dialog") {
    if (outputs.loud) line("internal-log", "internal", `${step} · ID_loud`, outputs.loud);
    if (outputs.quiet) line("internal-log", "quiet", `${step} · ID_quiet`, outputs.quiet);
    return;
  }
  const verb = outputs.verb ? ` (${outputs.verb})` : "";
  if (typeof outputs.text === "string") {
    if (outputs.text) line("internal-log", "internal", `${step}${verb}`, outputs.text);
    return;
  }
  const shown = Object.entries(outputs).filter(([, v]) => v !== null && v !== "" && !(Array.isArray(v) && !v.length));
  if (shown.length) line("internal-log", "internal", `${step} · ${kind}`, shown.map(([k, v]) => `${k}: ${typeof v === "string" ? v : JSON.stringify(v)}`).join("\n"));
}

// each background process's status and last finished cycle, kept up to date by LoopStatus
// (status changes) and CycleFinished (a cycle done: its number)
const loopState = {};

function renderLoops() {
  $("loop-status").textContent = Object.entries(loopState)
    .map(([name, l]) => `${name}: ${l.status.replace("_", " ")} · cycle ${l.cycle}`).join(", ") || "–";
}

function setBackground(bg) {
  if (!bg) return;
  for (const key of Object.keys(loopState)) delete loopState[key];
  for (const [name, l] of Object.entries(bg.loops || {})) loopState[name] = { status: l.status, cycle: l.cycle };
  renderLoops();
  if (bg.mood !== undefined) $("mood").textContent = bg.mood || "–";
  if (bg.criteria !== undefined) $("criteria").textContent = bg.criteria || "–";
}

function onBackgroundEvent(event) {
  switch (event.type) {
    case "CycleStarted":
      line("subconscious-log", "sub", `${event.process} #${event.cycle}`, "cycle started");
      break;
    case "CycleFinished": {
      const label = `${event.process} #${event.cycle}`;
      if (event.error) { line("subconscious-log", "error", label, `cycle failed: ${event.error}; next attempt in ${event.retry_in} s`); break; }
      if (loopState[event.process]) { loopState[event.process].cycle = event.cycle; renderLoops(); }
      for (const outputs of Object.values(event.outputs || {})) {
        if (outputs.loud) line("subconscious-log", "impulse", `${label} · S_loud`, outputs.loud);
        if (outputs.quiet) line("subconscious-log", "quiet", `${label} · S_quiet`, outputs.quiet);
        if (outputs.trigger === true) line("subconscious-log", "trigger", `${label} · trigger`, "true");
      }
      break;
    }
    case "MoodChanged":
      $("mood").textContent = event.mood || "–";
      $("criteria").textContent = event.criteria || "–";
      line("subconscious-log", "sub", `${event.process} #${event.cycle}`, `mood: ${event.mood} · criteria: ${event.criteria}`);
      break;
    case "ImpulseQueued":
      line("subconscious-log", "impulse", "impulse", `${event.text} — ${event.trigger ? "now (trigger)" : `waits (${event.pending} pending)`}`);
      break;
    case "TriggerFired":
      line("subconscious-log", "trigger", `trigger ${event.trigger}`, `${event.reason} · ${event.impulses.length} impulse(s)`);
      break;
    case "LoopStatus":
      loopState[event.process] = { status: event.status, cycle: event.cycle };
      renderLoops();
      break;
  }
}

// ---- side panels: Chetana, memories, trace -------------------------------------------

function bar(name, value, min, max) {
  const row = el("div", "bar");
  const track = el("div", "track");
  const fill = el("div", "fill");
  fill.style.width = `${Math.max(0, Math.min(1, (value - min) / (max - min))) * 100}%`;
  track.append(fill);
  row.append(el("span", "", name), track, el("span", "", Number(value).toFixed(2)));
  return row;
}

async function refreshChetana() {
  if (!state.soul.chetana || !state.session) return;
  try {
    const report = await api(`/api/sessions/${state.session}/chetana`);
    const affect = $("affect");
    affect.replaceChildren(
      bar("valence", report.affect.valence, -1, 1), bar("arousal", report.affect.arousal, 0, 1),
      bar("confidence", report.affect.confidence, 0, 1), bar("frustration", report.affect.frustration, 0, 1));
    const list = $("intentions");
    list.replaceChildren(...(report.intentions || []).map((i) => el("li", "", `${i.status || ""} · ${i.description || i.goal || JSON.stringify(i)}`)));
    if (!list.childElementCount) list.append(el("li", "note", "no intention yet"));
    $("chetana-note").textContent = report.self && report.self.assessment ? report.self.assessment : "";
  } catch (err) {
    $("chetana-note").textContent = err.message;
  }
}

function showMemories(hits) {
  const list = $("memories");
  const explain = $("memory-explain");
  explain.hidden = true;
  list.replaceChildren();
  if (!hits.length) { list.append(el("li", "note", "nothing recalled this turn")); return; }
  for (const hit of hits) {
    const item = el("li", "", `${Number(hit.score).toFixed(3)} [${hit.kind}] ${hit.text}`);
    item.addEventListener("click", () => explainMemory(hit));
    list.append(item);
  }
}

async function explainMemory(hit) {
  const explain = $("memory-explain");
  explain.hidden = false;
  explain.textContent = "explaining…";
  try {
    const hits = await api(`/api/sessions/${state.session}/recall`, { method: "POST", body: JSON.stringify({ query: state.lastQuery || hit.text }) });
    const found = hits.find((h) => h.id === hit.id);
    explain.textContent = found ? JSON.stringify(found.components, null, 2)
      : `this memory is not among the top hits for "${state.lastQuery}" now (the field has changed since): its components cannot be shown`;
  } catch (err) {
    explain.textContent = err.message;
  }
}

function costText(calls) {
  const known = calls.filter((c) => c.cost && c.cost.usd !== null && c.cost.usd !== undefined);
  if (!calls.length) return "no model call";
  if (!known.length) return "cost unknown";
  const usd = known.reduce((n, c) => n + c.cost.usd, 0);
  const unknown = calls.length - known.length;
  return `cost $${usd.toPrecision(3)}${unknown ? ` + ${unknown} call(s) at unknown prices` : ""}`;
}

function renderTrace(trace) {
  const total = Math.max(trace.total_ms || 0, 0.001);
  const tokensIn = trace.calls.reduce((n, c) => n + c.input_tokens, 0);
  const tokensOut = trace.calls.reduce((n, c) => n + c.output_tokens, 0);
  $("trace-summary").textContent = `turn ${trace.turn} (${trace.kind}) · ${(trace.total_ms || 0).toFixed(1)} ms, framework ${(trace.framework_ms || 0).toFixed(1)} ms · ${trace.calls.length} call(s) · ${tokensIn} → ${tokensOut} tokens · ${costText(trace.calls)}`;
  const rows = [];
  for (const call of trace.calls) rows.push(timelineRow("call", `call ${call.unit} · ${call.model}`, call.latency_ms, total, `${call.input_tokens}→${call.output_tokens} tok`));
  for (const step of trace.steps) rows.push(timelineRow(`step ${step.status}`, `${step.step} · ${step.status}`, step.ms || 0, total, `${(step.ms || 0).toFixed(1)} ms`));
  $("timeline").replaceChildren(...rows);
}

let layersSoon = null;  // background events refresh the live layers, at most every 300 ms
function refreshSoon() {
  if (inspecting() || layersSoon) return;
  layersSoon = setTimeout(() => { layersSoon = null; refreshInspector(); }, 300);
}

function timelineRow(cls, label, ms, total, right) {
  const row = el("div", `row ${cls}`);
  const track = el("div", "track");
  const span = el("div", "span");
  span.style.width = `${Math.max(0.5, (ms / total) * 100)}%`;
  track.append(span);
  row.append(el("span", "", label), track, el("span", "", right));
  return row;
}

// ---- the event stream --------------------------------------------------------------------

function onEvent(event) {
  switch (event.type) {
    case "Hello": return onHello(event);
    case "UserMessage": state.lastQuery = event.text; chatMessage("user", event.text); return;
    case "StepStarted": state.kinds[event.step] = event.kind; return;
    case "Token": return onToken(event);
    case "StepFinished": {
      const kind = state.kinds[event.step] || state.soul.steps[event.step] || "";
      if (kind === "memory.recall") showMemories(event.outputs.hits || []);
      internalStep(event.step, kind, event.outputs);
      return;
    }
    case "Reply": return onReply(event);
    case "TurnCommitted":
      stampTurn(event.turn);
      refreshChetana();
      loadSessions();
      refreshInspector();
      return;
    case "TurnFailed":
      unstamped.user.shift();  // its turn never committed
      unstamped.soul.splice(0);
      state.streaming = {};
      append($("chat-log"), el("div", "msg failed", `the turn failed: ${event.error}`));
      return;
    case "Error": return showError(event.error);
    default:
      if (["DialogueTurn", "FixyIntervened", "FixyGated", "DreamCycle", "MetricsUpdated"].includes(event.type)) return onDialogueEvent(event);
      if (["CycleFinished", "MoodChanged"].includes(event.type)) refreshSoon();
      return onBackgroundEvent(event);
  }
}

function onHello(hello) {
  state.streaming = {};
  unstamped.user = [];
  unstamped.soul = [];
  for (const role of ["chat-log", "internal-log", "subconscious-log"]) $(role).replaceChildren();
  for (const m of hello.messages) {
    if (m.layer === "external") {
      if (m.tag === "user") { state.lastQuery = m.content; chatMessage("user", m.content, false, m.turn); }
      else chatMessage("soul", m.content, m.spontaneous, m.turn);
    } else if (m.layer === "internal") {
      line("internal-log", m.tag.endsWith("quiet") ? "quiet" : "internal", `#${m.turn} ${m.step || ""} · ${m.tag}${m.verb ? ` (${m.verb})` : ""}`, m.content);
    } else if (m.layer === "subconscious") {
      line("subconscious-log", m.tag === "S_loud" ? "impulse" : m.tag.endsWith("quiet") ? "quiet" : "sub", `#${m.turn} ${m.tag}`, m.content);
    }
  }
  setBackground(hello.background);
  refreshInspector();  // live: the latest turn's trace, context window and layers
  if (hello.session.turns) {
    refreshChetana();
  } else if (state.soul.chetana) {  // no state before the first turn: nothing to ask the server
    $("affect").replaceChildren();
    $("intentions").replaceChildren(el("li", "note", "no intention yet"));
    $("chetana-note").textContent = "affect and intentions appear after the first turn";
  }
}

function connect() {
  if (state.ws) { state.closing = true; state.ws.close(); }
  const scheme = location.protocol === "https:" ? "wss" : "ws";
  const query = token ? `?token=${encodeURIComponent(token)}` : "";
  const ws = new WebSocket(`${scheme}://${location.host}/api/sessions/${state.session}/events${query}`);
  state.ws = ws;
  state.closing = false;
  const badge = $("connection");
  ws.onopen = () => { badge.textContent = "live"; badge.className = "badge live"; state.retry = 0; };
  ws.onmessage = (message) => onEvent(JSON.parse(message.data));
  ws.onclose = () => {
    if (ws !== state.ws) return;
    badge.textContent = "disconnected"; badge.className = "badge down";
    if (!state.closing) setTimeout(connect, Math.min(10000, 500 * 2 ** state.retry++));
  };
}

// ---- sessions --------------------------------------------------------------------------

async function loadSessions() {
  const sessions = await api("/api/sessions");
  const list = $("session-list");
  list.replaceChildren(...sessions.map((s) => {
    const item = el("li", s.id === state.session ? "current" : "");
    item.dataset.session = s.id;
    item.append(el("code", "", s.id.slice(0, 8)), el("span", "", ` ${s.user} · ${s.turns} turn(s)`));
    if (s.forked_from) item.append(el("span", "dim", ` · fork of ${s.forked_from.slice(0, 8)} at turn ${s.forked_at}`));
    const resume = el("button", "", s.id === state.session ? "open" : "resume");
    resume.type = "button";
    resume.dataset.role = "resume-session";
    resume.addEventListener("click", () => openSession(s.id));
    item.append(resume);
    return item;
  }));
  return sessions;
}

async function openSession(id) {
  state.session = id;
  $("session-id").textContent = id;
  history.replaceState(null, "", `${location.pathname}${location.search}#session=${id}`);
  showMemories([]);
  $("timeline").replaceChildren();
  $("trace-summary").textContent = "no turn yet";
  $("session-cost").textContent = "";
  resetInspector();
  connect();
  await loadSessions();
}

async function newSession() {
  const info = await api("/api/sessions", { method: "POST", body: JSON.stringify({ user: "user" }) });
  await openSession(info.id);
}

function send() {
  const box = $("send");
  const text = box.value;
  if (!text.trim() || !state.ws || state.ws.readyState !== WebSocket.OPEN) return;
  showError("");
  state.ws.send(JSON.stringify({ type: "message", text }));
  box.value = "";
}

function notes(soul) {
  const none = (what) => `${soul.name} has no ${what}`;
  $("subconscious-note").textContent = soul.processes.length ? "" : `${none("background process (processes:)")}: nothing runs between turns.`;
  for (const role of ["pause", "resume"]) $(role).disabled = !soul.processes.length;
  $("chetana-note").textContent = soul.chetana ? "" : `${none("chetana: block")}: no affect or intentions are kept.`;
  $("memory-note").textContent = soul.memory ? "click a memory for its resonance explanation" : `${none("memory: block")}: nothing is recalled.`;
  $("dialogue-note").textContent = soul.dialogue
    ? "the dialogue's turns, Fixy's interventions with their reasons, and the evaluation signals over the turns, live"
    : `${none("dialogue: block")}; a dialogue soul shows its agents' turns, Fixy's interventions and live metrics here.`;
  $("internal-note").textContent = "";
  $("metrics").hidden = !soul.dialogue;
}

async function start() {
  $("send-form").addEventListener("submit", (e) => { e.preventDefault(); send(); });
  $("send").addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey && !e.isComposing) { e.preventDefault(); send(); }
  });
  $("new-session").addEventListener("click", () => newSession().catch((e) => showError(e.message)));
  startInspector();
  for (const verb of ["pause", "resume"]) {
    $(verb).addEventListener("click", async () => {
      try { setBackground(await api(`/api/sessions/${state.session}/${verb}`, { method: "POST", body: "{}" })); }
      catch (err) { showError(err.message); }
    });
  }
  try {
    state.soul = await api("/api/soul");
    $("soul-name").textContent = state.soul.name;
    $("soul-description").textContent = state.soul.description;
    document.title = `${state.soul.name} · soul serve`;
    notes(state.soul);
    if (state.soul.dialogue) startDialogues().catch((e) => showError(e.message));
    const sessions = await loadSessions();
    const wanted = new URLSearchParams(location.hash.slice(1)).get("session");
    if (wanted && sessions.some((s) => s.id === wanted)) await openSession(wanted);
    else if (sessions.length) await openSession(sessions[0].id);
    else await newSession();
  } catch (err) {
    showError(err.message);
  }
}

start();
