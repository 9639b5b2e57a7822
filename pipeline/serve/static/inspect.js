// soul serve — the page's inspector: any turn or background cycle of the session, its context
// window part by part, its trace, the layers (soul state, mood, user model with its versions,
// diff and revert, working memory by region) as they were after it; fork and rewind. Plain
// JavaScript, loaded before app.js, whose helpers ($, el, api, state, showError) it calls.
// Every piece of user or model text is set with textContent, never as HTML.
"use strict";

// what the inspector shows: null = live (the latest turn, following the session), else
// {turn, commit, kind, label} of the chosen turn or cycle
const inspect = { chosen: null, commits: [], traces: {}, versions: [] };

function inspecting() { return inspect.chosen; }

async function refreshInspector() {
  if (!state.session) return;
  const sid = state.session;
  try {
    inspect.commits = await api(`/api/sessions/${sid}/commits`);
    if (sid !== state.session) return;
    renderCommits();
    const cost = await api(`/api/sessions/${sid}/cost`);
    $("session-cost").textContent = `this session: cost ${cost.text}`;
    const chosen = inspect.chosen;
    if (chosen) return showChosen(chosen);
    const last = [...inspect.commits].reverse().find((c) => c.kind === "message" || c.kind === "spontaneous");
    $("inspect-what").textContent = last ? `turn ${last.turn}, the latest (live)` : "no turn yet";
    for (const role of ["fork", "rewind"]) $(role).disabled = !last;
    if (last) {
      const at = `/api/sessions/${sid}/turns/${last.turn}`;
      await Promise.all([showWindow(`${at}/window`, `${at}/trace`), showTraceAt(`${at}/trace`)]);
    } else clearWindow("no turn yet: the context window of each turn appears here");
    await showLayers(null);
  } catch (err) {
    $("window-note").textContent = err.message;
  }
}

function renderCommits() {
  const list = $("commit-list");
  list.replaceChildren(...inspect.commits.map((c) => {
    const label = c.kind === "cycle" ? `turn ${c.turn} · cycle ${c.cycle ?? "?"} of ${c.process || "?"}`
      : c.kind === "subprocess" ? `turn ${c.turn} · subprocess` : `turn ${c.turn}${c.kind === "spontaneous" ? " · spontaneous" : ""}`;
    const item = el("li", "", label);
    item.dataset.commit = c.commit;
    item.dataset.turn = c.turn;
    item.dataset.kind = c.kind;
    item.dataset.role = "commit";
    const chosen = inspect.chosen;
    if (chosen && chosen.commit === c.commit) item.classList.add("chosen");
    item.addEventListener("click", () => choose({ turn: c.turn, commit: c.commit, kind: c.kind, label }));
    return item;
  }));
  if (!list.childElementCount) list.append(el("li", "note", "nothing committed yet"));
}

// a chat message was clicked: its turn (the turn's own commit, not a cycle stamped with it)
function chooseTurn(turn) {
  const own = inspect.commits.find((c) => c.turn === turn && (c.kind === "message" || c.kind === "spontaneous"));
  choose({ turn, commit: own ? own.commit : null, kind: own ? own.kind : "message", label: `turn ${turn}` });
}

function choose(chosen) {
  inspect.chosen = chosen;
  $("live").hidden = false;
  for (const node of document.querySelectorAll(".msg[data-turn]")) node.classList.toggle("chosen", Number(node.dataset.turn) === chosen.turn);
  renderCommits();
  showChosen(chosen).catch((err) => showError(err.message));
}

function backToLive() {
  inspect.chosen = null;
  $("live").hidden = true;
  for (const node of document.querySelectorAll(".msg.chosen")) node.classList.remove("chosen");
  refreshInspector();
}

async function showChosen(chosen) {
  const sid = state.session;
  const base = `/api/sessions/${sid}`;
  $("inspect-what").textContent = `${chosen.label} (${chosen.kind}), as it was`;
  for (const role of ["fork", "rewind"]) $(role).disabled = false;
  const byCommit = chosen.commit !== null && chosen.commit !== undefined;
  const windowUrl = byCommit ? `${base}/commits/${chosen.commit}/window` : `${base}/turns/${chosen.turn}/window`;
  const traceUrl = byCommit ? `${base}/commits/${chosen.commit}/trace` : `${base}/turns/${chosen.turn}/trace`;
  await Promise.all([showWindow(windowUrl, traceUrl), showTraceAt(traceUrl), showLayers(chosen.turn)]);
}

// ---- the context window ---------------------------------------------------------------

function clearWindow(note) {
  $("window-note").textContent = note;
  $("window-calls").replaceChildren();
}

async function showWindow(windowUrl, traceUrl) {
  const [data, trace] = await Promise.all([api(windowUrl), api(traceUrl)]);
  if (!data.calls.length) return clearWindow("no model call was made here");
  $("window-note").textContent = "each part of what the model saw, with its tokens; click a part to read it";
  $("window-calls").replaceChildren(...data.calls.map((call, i) => windowCall(call, (trace.calls || [])[i])));
}

function money(cost) {
  if (!cost) return "cost unknown";
  if (cost.usd === null || cost.usd === undefined) return `cost unknown (no price for ${cost.model})`;
  return `cost $${Number(cost.usd).toPrecision(3)} (${cost.model}, prices of ${cost.date})`;
}

function windowCall(call, traced) {
  const box = el("div", "call");
  box.dataset.role = "window-call";
  box.dataset.unit = call.unit;
  box.append(el("div", "call-head", `call ${call.unit} on ${call.model} — ${call.steps.join(", ")}`));
  const limits = call.window !== null
    ? `window ${call.window} · reply reserve ${call.reserve} · budget ${call.budget} · prompt used ${call.used} (${call.counter.split(" (")[0]})`
    : "no budget recorded";
  box.append(el("div", "note", `${limits} · ${call.requests} request(s) · ${money(call.cost)}`));
  const table = el("table", "window");
  const head = el("tr");
  head.append(el("th", "", "part"), el("th", "", ""), el("th", "num", "tokens"), el("th", "num", "sent"), el("th", "", ""));
  table.append(head);
  const most = Math.max(1, ...call.sections.map((s) => s.tokens));
  const reader = el("pre", "part-text");
  reader.hidden = true;
  reader.dataset.role = "window-text";
  for (const section of call.sections) {
    const row = el("tr");
    row.dataset.role = "window-section";
    row.dataset.part = section.part;
    const tokens = el("td", "num", section.tokens);
    tokens.dataset.role = "tokens";
    const bar = el("td", "barcell");
    const fill = el("div", "fill");
    fill.style.width = `${(section.tokens / most) * 100}%`;
    bar.append(fill);
    row.append(el("td", "part", section.part), el("td", "dim", section.label), tokens, el("td", "num", section.sent), bar);
    const messages = traced ? traced.messages || [] : [];
    if (section.message !== null && messages[section.message]) {
      row.classList.add("readable");
      row.addEventListener("click", () => {
        const content = String(messages[section.message].content || "");
        reader.textContent = content.slice(section.start, section.start + section.chars);
        reader.hidden = false;
      });
    }
    table.append(row);
  }
  const total = el("tr", "total");
  total.dataset.role = "window-total";
  const sum = el("td", "num", call.input_tokens);
  sum.dataset.role = "tokens";
  total.append(el("td", "part", "input"), el("td", "dim", call.attributed ? "as the model reported it" : "as counted"), sum,
               el("td", "num", ""), el("td", "dim", `output ${call.output_tokens}`));
  table.append(total);
  box.append(table);
  const cut = el("ul", "cut");
  cut.dataset.role = "window-cut";
  for (const c of call.cut) cut.append(el("li", "", `cut · ${c.part}: ${c.what} (${c.why})`));
  if (!call.cut.length) cut.append(el("li", "dim", "nothing was cut"));
  box.append(cut, reader);
  return box;
}

async function showTraceAt(traceUrl) {
  const trace = await api(traceUrl);
  renderTrace(trace);
}

// ---- the layers -------------------------------------------------------------------------

async function showLayers(turn) {
  const sid = state.session;
  const layers = await api(`/api/sessions/${sid}/layers${turn === null ? "" : `?turn=${turn}`}`);
  if (sid !== state.session) return;
  $("layers-when").textContent = layers.now ? `now (after turn ${layers.turn})` : `as they were after turn ${layers.turn}`;
  const dl = $("state");
  dl.replaceChildren();
  if (layers.state === null) dl.append(el("dd", "note", "not known: this turn predates the state being kept with each turn"));
  else if (!Object.keys(layers.state).length) dl.append(el("dd", "note", "this soul declares no state"));
  for (const [key, value] of Object.entries(layers.state || {})) {
    dl.append(el("dt", "", key), el("dd", "", typeof value === "string" ? (value || "–") : JSON.stringify(value)));
  }
  const mood = layers.mood;
  $("layers-mood").textContent = mood ? `${mood.mood || "–"} · criteria: ${mood.criteria || "–"} (${mood.process || "?"} cycle ${mood.cycle ?? "?"})` : "no mood yet";
  const model = layers.user_model;
  inspect.versions = model.versions;
  $("user-model-version").textContent = model.version ? `v${model.version}${model.line !== model.user ? " · this fork's own line" : ""}` : "(nothing known yet)";
  $("user-model-text").textContent = model.text || `nothing is known about ${model.user} yet`;
  renderVersions(model.version);
  const memory = $("working-memory");
  memory.replaceChildren();
  const regions = Object.entries(layers.memory || {});
  if (!regions.length) memory.append(el("p", "note", "working memory is empty"));
  for (const [region, entries] of regions) {
    const block = el("div", "region");
    block.dataset.region = region;
    block.append(el("h5", "", `${region} (${entries.length})`));
    const list = el("ul");
    for (const e of entries.slice(-50)) {
      const who = [e.turn ? `turn ${e.turn}` : "", e.meta && e.meta.step, e.entry_type].filter(Boolean).join(" · ");
      const item = el("li");
      item.append(el("span", "label", who), el("span", "", e.content));
      list.append(item);
    }
    block.append(list);
    memory.append(block);
  }
}

function renderVersions(current) {
  $("user-model-diff").hidden = true;  // the versions may have changed under a diff shown before
  const list = $("user-model-versions");
  list.replaceChildren();
  const from = $("diff-from");
  const to = $("diff-to");
  const options = (selected) => [["0", "v0 (empty)"], ...inspect.versions.map((v) => [String(v.version), `v${v.version}`])].map(([value, text]) => {
    const option = el("option", "", text);
    option.value = value;
    if (value === String(selected)) option.selected = true;
    return option;
  });
  const newest = inspect.versions.length ? inspect.versions[inspect.versions.length - 1].version : 0;
  from.replaceChildren(...options(Math.max(0, newest - 1)));
  to.replaceChildren(...options(newest));
  for (const v of [...inspect.versions].reverse()) {
    const item = el("li", v.version === current ? "current" : "");
    item.dataset.version = v.version;
    const where = v.turn ? ` · turn ${v.turn}` : "";
    item.append(el("span", "", `v${v.version}${where} · ${v.note || ""}`));
    const revert = el("button", "", "revert to this");
    revert.type = "button";
    revert.dataset.role = "revert";
    revert.addEventListener("click", () => revertTo(v.version));
    item.append(revert);
    list.append(item);
  }
  if (!inspect.versions.length) list.append(el("li", "note", "no version yet"));
}

async function showDiff() {
  const out = $("user-model-diff");
  try {
    const diff = await api(`/api/sessions/${state.session}/user-model/diff?from=${$("diff-from").value}&to=${$("diff-to").value}`);
    out.replaceChildren(...(diff.diff.length ? diff.diff : [`v${diff.from} and v${diff.to} are the same`]).map((text) => {
      const cls = text.startsWith("+++") || text.startsWith("---") ? "head" : text.startsWith("+") ? "add" : text.startsWith("-") ? "del" : text.startsWith("@@") ? "hunk" : "";
      return el("div", `dl ${cls}`, text);
    }));
    out.hidden = false;
  } catch (err) {
    out.replaceChildren(el("div", "error", err.message));
    out.hidden = false;
  }
}

async function revertTo(version) {
  try {
    const made = await api(`/api/sessions/${state.session}/user-model/revert`, { method: "POST", body: JSON.stringify({ version }) });
    $("fork-note").textContent = `the user model is now v${made.version}, a copy of v${version}`;
    await showLayers(inspect.chosen ? inspect.chosen.turn : null);
  } catch (err) {
    showError(err.message);
  }
}

// ---- fork and rewind ----------------------------------------------------------------------

function forkTurn() {
  const chosen = inspect.chosen;
  if (chosen) return chosen.turn;
  const last = [...inspect.commits].reverse().find((c) => c.kind === "message" || c.kind === "spontaneous");
  return last ? last.turn : 0;
}

async function fork(rewind) {
  const at = forkTurn();
  try {
    const made = await api(`/api/sessions/${state.session}/fork`, { method: "POST", body: JSON.stringify({ at }) });
    if (rewind) {
      inspect.chosen = null;
      $("live").hidden = true;
      await openSession(made.id);
      $("fork-note").textContent = `rewound to turn ${at}: this is a new session forked from ${made.forked_from.slice(0, 8)}, which is unchanged`;
      return;
    }
    const note = $("fork-note");
    note.replaceChildren(el("span", "", `forked after turn ${at}: session ${made.id.slice(0, 8)} `));
    const open = el("button", "", "open it");
    open.type = "button";
    open.dataset.role = "open-fork";
    open.addEventListener("click", () => { inspect.chosen = null; $("live").hidden = true; openSession(made.id); });
    note.append(open);
    await loadSessions();
  } catch (err) {
    showError(err.message);
  }
}

function startInspector() {
  $("live").addEventListener("click", backToLive);
  $("fork").addEventListener("click", () => fork(false));
  $("rewind").addEventListener("click", () => fork(true));
  $("diff").addEventListener("click", showDiff);
}

function resetInspector() {
  inspect.chosen = null;
  inspect.commits = [];
  $("live").hidden = true;
  $("fork-note").textContent = "";
  $("user-model-diff").hidden = true;
  $("commit-list").replaceChildren();
  clearWindow("");
}
