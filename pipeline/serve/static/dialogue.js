// soul serve — the page's dialogue view (a soul with a `dialogue:` block). Plain JavaScript,
// loaded before app.js, whose helpers ($, el, line, api, state, token, showError) it calls.
// Every piece of model text is set with textContent (or drawn on the canvas), never as HTML.
"use strict";

// ---- dialogue --------------------------------------------------------------------------
// A dialogue soul's runs: their own socket (/api/dialogues/{id}/events), beside the session's.

const dialogue = { id: null, ws: null, closing: false, retry: 0, topic: "" };

function evidenceText(evidence) {
  return Object.entries(evidence || {})
    .map(([k, v]) => `${k}=${typeof v === "number" && !Number.isInteger(v) ? v.toFixed(2) : typeof v === "string" ? v : JSON.stringify(v)}`)
    .join(", ");
}

function onDialogueEvent(event) {
  if (event.type === "DialogueTurn") {
    if (event.topic && event.topic !== dialogue.topic) {
      dialogue.topic = event.topic;
      line("dialogue-log", "sub", "topic", event.topic);
    }
    const who = event.fixy ? "Fixy" : event.speaker;
    const felt = event.emotion && event.emotion !== "neutral" ? `${event.emotion} ${Number(event.intensity ?? 0).toFixed(2)}` : "";
    const extra = [event.seed_strategy, felt, event.energy !== null && event.energy !== undefined ? `energy ${Number(event.energy).toFixed(0)}` : "",
                   ...(event.flags || []).filter((f) => !f.startsWith("reason:"))].filter(Boolean).join(" · ");
    const node = line("dialogue-log", event.fixy ? "trigger" : "internal", `#${event.turn} ${who}${extra ? ` (${extra})` : ""}`, event.text);
    node.dataset.speaker = event.speaker;
    for (const mark of event.marks || []) line("dialogue-log", "quiet", "", mark);
  } else if (event.type === "FixyIntervened") {
    const node = line("dialogue-log", "impulse", `#${event.turn} Fixy stepped in: ${event.reason}`, evidenceText(event.evidence));
    node.dataset.reason = event.reason;
  } else if (event.type === "FixyGated") {
    line("dialogue-log", "impulse", `#${event.turn} Fixy asked ${event.speaker} to rewrite: ${event.reason}`, event.rewritten ? "rewritten" : `original kept${event.error ? ` (${event.error})` : ""}`);
  } else if (event.type === "DreamCycle") {
    const r = event.report || {};
    line("dialogue-log", "sub", `#${event.turn} ${event.agent} dreams`,
         `energy ${Number(event.energy_before).toFixed(0)} → ${Number(r.energy_after ?? 100).toFixed(0)}: ${(r.integrated || []).length} integrated, ${(r.promoted || []).length} promoted, ${r.forgotten || 0} forgotten`);
  } else if (event.type === "MetricsUpdated") {
    state.metrics.push(event);
    drawMetrics();
  }
}

function dialogueStatus(text, running) {
  $("dialogue-status").textContent = text;
  $("run-dialogue").disabled = $("step-dialogue").disabled = running || !dialogue.id;
  $("pause-dialogue").disabled = !running;
}

function onDialogueSocket(event) {
  switch (event.type) {
    case "Hello": {
      $("dialogue-log").replaceChildren();
      state.metrics = [];
      dialogue.topic = "";
      for (const e of event.events) onDialogueEvent(e);
      drawMetrics();
      const d = event.dialogue;
      dialogueStatus(d.running ? "running…" : `${d.turns} turn(s) so far`, d.running);
      return;
    }
    case "DialogueRun": return dialogueStatus(`running turns ${event.from}–${event.to}…`, true);
    case "DialogueIdle":
      dialogueStatus(event.state === "failed" ? `stopped after turn ${event.turns}: ${event.error}` : `${event.state} · ${event.turns} turn(s) so far`, false);
      loadDialogues().catch(() => {});
      return;
    case "Error": return showError(event.error);
    default: return onDialogueEvent(event);
  }
}

function connectDialogue() {
  if (dialogue.ws) { dialogue.closing = true; dialogue.ws.close(); }
  const scheme = location.protocol === "https:" ? "wss" : "ws";
  const query = token ? `?token=${encodeURIComponent(token)}` : "";
  const ws = new WebSocket(`${scheme}://${location.host}/api/dialogues/${dialogue.id}/events${query}`);
  dialogue.ws = ws;
  dialogue.closing = false;
  ws.onopen = () => { dialogue.retry = 0; };
  ws.onmessage = (message) => onDialogueSocket(JSON.parse(message.data));
  ws.onclose = () => {
    if (ws !== dialogue.ws) return;
    dialogueStatus("disconnected", false);
    if (!dialogue.closing) setTimeout(connectDialogue, Math.min(10000, 500 * 2 ** dialogue.retry++));
  };
}

async function loadDialogues() {
  const list = await api("/api/dialogues");
  $("dialogue-list").replaceChildren(...list.map((d) => {
    const option = el("option", "", `${d.id} · seed ${d.seed} · ${d.turns} turn(s)`);
    option.value = d.id;
    option.selected = d.id === dialogue.id;
    return option;
  }));
  return list;
}

async function openDialogue(id) {
  dialogue.id = id;
  connectDialogue();
  await loadDialogues();
}

function runDialogue(turns) {
  if (!dialogue.ws || dialogue.ws.readyState !== WebSocket.OPEN) return;
  showError("");
  dialogue.ws.send(JSON.stringify({ type: "run", turns }));
}

async function startDialogues() {
  $("dialogue-controls").hidden = false;
  dialogueStatus("no dialogue yet: New dialogue starts one", false);
  $("new-dialogue").addEventListener("click", async () => {
    try { await openDialogue((await api("/api/dialogues", { method: "POST", body: "{}" })).id); }
    catch (err) { showError(err.message); }
  });
  $("dialogue-list").addEventListener("change", (e) => openDialogue(e.target.value).catch((err) => showError(err.message)));
  $("run-dialogue").addEventListener("click", () => runDialogue(Math.max(1, Math.min(200, parseInt($("dialogue-turns").value, 10) || 1))));
  $("step-dialogue").addEventListener("click", () => runDialogue(1));
  $("pause-dialogue").addEventListener("click", () => {
    if (dialogue.ws && dialogue.ws.readyState === WebSocket.OPEN) dialogue.ws.send(JSON.stringify({ type: "pause" }));
  });
  const list = await loadDialogues();
  if (list.length) await openDialogue(list[0].id);
}

const COLORS = ["#6b2fa0", "#0b5cad", "#2f7d4f", "#a1400c", "#0f6f7c", "#c9a200"];

function drawMetrics() {
  const canvas = $("metrics");
  const ctx = canvas.getContext("2d");
  ctx.clearRect(0, 0, canvas.width, canvas.height);
  const counts = ["turns", "fixy_turns"];  // they only grow: no signal to draw
  const names = [...new Set(state.metrics.flatMap((m) => Object.keys(m.metrics).filter((k) => typeof m.metrics[k] === "number" && !counts.includes(k))))];
  const n = state.metrics.length;
  if (!n) return;
  const top = Math.ceil(names.length / 4) * 12 + 8;  // the legend's rows, above the lines
  names.forEach((name, i) => {
    const values = state.metrics.map((m) => m.metrics[name]);
    const nums = values.filter((v) => typeof v === "number");
    const lo = Math.min(0, ...nums), hi = Math.max(1, ...nums);
    ctx.strokeStyle = COLORS[i % COLORS.length];
    ctx.beginPath();
    values.forEach((v, j) => {
      if (typeof v !== "number") return;
      const x = 30 + (j / Math.max(1, n - 1)) * (canvas.width - 40);
      const y = canvas.height - 12 - ((v - lo) / (hi - lo)) * (canvas.height - 12 - top);
      j ? ctx.lineTo(x, y) : ctx.moveTo(x, y);
    });
    ctx.stroke();
    ctx.fillStyle = ctx.strokeStyle;
    ctx.fillText(name, 34 + (i % 4) * 200, 12 + Math.floor(i / 4) * 12);  // canvas text is never markup
  });
}
