"""Running a dialogue (Entelgia): several souls in one conversation, watched by Fixy.

`DialogueRunner.open(blueprint)` builds one soul per agent (`runtime/dialogue/agents.py`) and
the rules (`runtime/bridges/dialogue.py`, the engine bridge); `await runner.run(turns)` runs:

1. the topic manager gives the turn's topic; the speaker policy picks the speaker (Fixy
   included, with its probability, or legacy's schedule);
2. an agent: the seed strategy picks the instruction; the context builder writes the prompt
   in two parts: persona, drives, style and seed — the trusted part — become the turn's system
   prompt head (`Session.turn(..., persona=)`); the dialogue's tail, STM, key LTM memories and
   the resonance recalls of the agent's memory field (when its soul uses memory) — what models
   said — are the turn's input, fenced as untrusted. That is one pipeline turn of the agent's
   soul — its own steps, session and memory, committed to the store like any turn; its reply
   is the agent's line, with its emotion (the engine's lexicon) moving the agent's drives.
   With `observer.gate`, Fixy's detectors see the reply first and may ask for one rewrite (a
   second turn of the agent's soul); if the rewrite fails, the original stands. Then memory, energy (drain, hallucination risk,
   dream) and the psyche ([SLIP], [SELF-REPL]);
3. Fixy: when the policy gave it the turn, or (enhanced mode) when a detector fires after an
   agent's turn and Fixy is out of its cooldown, the intervention is the next turn: a turn of
   the observer's soul (its `fixy` step) on the detection's prompt, trimmed to four sentences
   and 150 words; the engine's fallback text when the model fails;
4. the metrics over the transcript.

Each happening is an event (`DialogueTurn`, `FixyIntervened`, `FixyGated`, `DreamCycle`,
`MetricsUpdated`) sent to `subscribe`d listeners. After every turn the dialogue is saved to
`$SOUL_HOME/dialogues/<id>.json` (the rules' state, the agents' session ids, the events so
far and the metrics checkpoint, secrets redacted); `DialogueRunner.open(..., resume=ID)`
continues it.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

from soul.errors import ProviderError, RunError, SoulError
from soul.language import Blueprint, Dialogue
from soul.runtime import tracing
from soul.runtime.bridges import DialogueRules, resonance_embedder, uses_memory
from soul.runtime.dialogue.agents import (
    agent_blueprint,
    agent_provider,
    check_script_keys,
    observer_blueprint,
    own_blueprint,
    template_texts,
)
from soul.runtime.dialogue.store import (
    METRICS_CHECKPOINT,
    DialogueResult,
    build_result,
    dialogues_dir,
    events_from,
    load_state,
    write_state,
)
from soul.runtime.events import DialogueTurn, DreamCycle, FixyGated, FixyIntervened, MetricsUpdated
from soul.runtime.session import Session
from soul.runtime.souls import Soul
from soul.runtime.turn import fixy_kind

log = logging.getLogger(__name__)

DEFAULT_TURNS = 10
RECALLS = 4  # resonance recalls an agent with memory gets in its prompt
MEMORY_TAG = "dialogue"  # the lines the runner writes to the agents' memory fields
# who "says" an agent's prompt in its session: the runner, as a moderator would hand a speaker
# the floor (the prompt is labelled with this name in the agent's call)
MODERATOR = "moderator"
REWRITE = ("\n\nFixy, the dialogue's observer, read your draft before the others did: {instruction}\n"
           "Your draft was:\n{draft}\n\nRewrite your reply once, taking this into account. Respond now:")


class DialogueRunner:
    """One dialogue: its agents' souls and sessions, the rules, the events. Use `open`."""

    def __init__(self, blueprint: Blueprint, souls: dict[str, Soul], rules: DialogueRules, *, home: Path | None,
                 dialogue_id: str, fixy_params: Mapping[str, Any]) -> None:
        assert blueprint.dialogue_spec is not None
        self.blueprint = blueprint
        self.spec: Dialogue = blueprint.dialogue_spec
        self.souls = souls
        self.rules = rules
        self.home = home
        self.id = dialogue_id
        self.fixy_params = dict(fixy_params)
        self.sessions: dict[str, Session] = {}
        self.events: list[Any] = []
        self._listeners: list[Callable[[Any], None]] = []
        self._template_cache: dict[str, tuple[str, ...]] = {}

    # -- building ------------------------------------------------------------------------------

    @classmethod
    def open(cls, name_or_path: str | Path | Blueprint, *, provider: Any = None, model: str | None = None,
             home: str | Path | None = None, seed: int | None = None, resume: str | None = None,
             embedder: Any = "default") -> DialogueRunner:
        """A runner for a blueprint's `dialogue:` (path, built-in name or Blueprint).

        `provider` serves every agent, or maps agent names to providers (a dialogue's
        `--script`); `model` overrides every agent's model; `seed` the blueprint's; `resume`
        continues the stored dialogue of that id (its seed and state); `embedder` (texts →
        vectors) serves topic drift and persona collapse: "default" is the resonance engine's
        when installed, None turns both off."""
        from soul.compiler import load_valid
        from soul.runtime.souls import load

        bp = name_or_path if isinstance(name_or_path, Blueprint) else load_valid(name_or_path)
        spec = bp.dialogue_spec
        if spec is None:
            raise RunError(f"{bp.file}: soul '{bp.name}' has no `dialogue:` block; `soul run {bp.name}` talks to it alone")
        home_path = Path(home).expanduser() if home is not None else None
        check_script_keys(provider, spec.agents)
        saved = load_state(home_path, resume) if resume else None
        dialogue_id = saved["id"] if saved else secrets.token_hex(6)
        seed = int(saved["seed"]) if saved else spec.seed if seed is None else seed
        souls: dict[str, Soul] = {}
        personas: dict[str, str] = {}
        fixy_params: Mapping[str, Any] = {}
        for name, agent in spec.agents.items():
            if spec.observer and name == spec.observer.agent:
                agent_bp, step = observer_blueprint(bp, spec)
                fixy_params = step.params
            elif agent.blueprint:
                agent_bp = own_blueprint(bp, agent)
            else:
                agent_bp = agent_blueprint(bp, spec, agent)
            # the persona text the rules format (a rich one) and send as the turn's system prompt
            personas[name] = (bp.read_file(agent.persona, "persona") if agent.persona else agent_bp.persona_text() or "").strip()
            souls[name] = load(agent_bp, model=model, provider=agent_provider(provider, name, agent_bp), home=home_path)
        chosen = resonance_embedder() if embedder == "default" else embedder
        rules = DialogueRules(bp, spec, personas, seed, chosen)
        runner = cls(bp, souls, rules, home=home_path, dialogue_id=dialogue_id, fixy_params=fixy_params)
        if saved:
            runner._resume(saved)
        return runner

    @property
    def name(self) -> str:
        return self.blueprint.name

    @property
    def seed(self) -> int:
        return self.rules.seed

    @property
    def agent_names(self) -> tuple[str, ...]:
        return tuple(self.spec.agents)

    @property
    def observer(self) -> str | None:
        return self.rules.observer

    def subscribe(self, listener: Callable[[Any], None]) -> Callable[[], None]:
        """Send every dialogue event to `listener`; returns the function that unsubscribes."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    def _emit(self, event: Any) -> None:
        self.events.append(event)
        for listener in list(self._listeners):
            try:
                listener(event)
            except Exception:  # a listener's bug must not stop the dialogue
                log.exception("dialogue %s: a listener failed on %s", self.id, type(event).__name__)

    def _session(self, agent: str) -> Session:
        session = self.sessions.get(agent)
        if session is None:
            session = self.sessions[agent] = self.souls[agent].session(user=MODERATOR)
        return session

    # -- running -------------------------------------------------------------------------------

    def run_sync(self, turns: int | None = None) -> DialogueResult:
        """`run` from synchronous code."""
        return asyncio.run(self.run(turns))

    async def run(self, turns: int | None = None, *, stop: Callable[[], bool] | None = None) -> DialogueResult:
        """Run `turns` more turns (default: the blueprint's `max_turns`, else 10); Fixy's
        interventions are turns too. Saved after every turn (on a worker thread: redacting and
        writing 10,000 turns takes most of a second, which a server's other sessions must not
        wait for; nothing changes the dialogue meanwhile, as the run waits for it); `stop`,
        asked between turns, ends the run early when it says so (a server's pause)."""
        count = turns or self.spec.max_turns or DEFAULT_TURNS
        end = self.rules.turn - 1 + count
        while self.rules.turn <= end and not (stop is not None and stop()):
            await self.step(end)
            await asyncio.to_thread(self.save)
        return self.result()

    async def step(self, end: int | None = None) -> None:
        """One turn, and the intervention that may follow it when turn `end` allows."""
        rules = self.rules
        number = rules.turn
        topic = rules.topic(number)
        speaker = rules.next_speaker()
        if speaker == rules.observer:
            # the detectors judge the turns so far (as after an agent's turn); none firing, Fixy
            # reflects on the dialogue
            detection = self._detect(number - 1, topic) or rules.scheduled(number)
            await self._traced(self._fixy(number, topic, detection), number, speaker)
            return
        await self._traced(self._agent(number, topic, speaker), number, speaker)
        nxt = rules.turn
        if end is not None and nxt > end:
            return
        if rules.fixy_may_intervene(nxt):
            detection = self._detect(nxt - 1, topic)
            if detection is not None:
                await asyncio.to_thread(self.save)
                await self._traced(self._fixy(nxt, rules.topic(nxt), detection), nxt, rules.observer or "fixy")

    async def _traced(self, work: Awaitable[None], number: int, speaker: str) -> None:
        """A dialogue turn, in its span when tracing is on (the speaker's own turn below it)."""
        await (tracing.dialogue_turn(work, self.id, number, speaker) if tracing.on() else work)

    def _detect(self, turn: int, topic: str, extra: Any = None) -> Any:
        history = [*self.rules.history, extra] if extra is not None else self.rules.history
        try:
            found = fixy_kind().detect(history, turn, self.fixy_params, **self.rules.detection_context(topic))
        except Exception as exc:  # an embedder failure must not end the dialogue
            if type(exc).__name__ == "RulesError":
                raise RunError(f"Fixy's detectors: {exc}") from exc
            log.warning("dialogue %s: Fixy's detectors failed at turn %d: %s", self.id, turn, exc)
            return None
        return self.rules.with_shown_names(found) if found is not None else None

    async def _agent(self, number: int, topic: str, speaker: str) -> None:
        rules = self.rules
        seed = rules.seed_for(speaker, topic)
        parts = rules.context(speaker, seed, topic, self._recalls(speaker, topic))
        echoes = (parts.system, *self._templates(speaker))
        text = rules.clean(speaker, await self._say(speaker, parts.dialogue, parts.system), echoes)
        flags: list[str] = []
        if not text:  # nothing said (or only the prompt echoed): asked once more, as a re-ask
            text = rules.clean(speaker, await self._say(speaker, parts.dialogue, parts.system), echoes)
            flags.append("re-asked")
        if self.spec.observer and self.spec.observer.gate and self.spec.mode == "enhanced":
            text, rewritten = await self._gate(number, topic, speaker, parts, text)
            if rewritten:
                flags.append("rewritten")
        said = rules.record(speaker, text, topic, seed.strategy)
        after = rules.after_agent_turn(speaker, text, topic)
        energy = after.energy.level if after.energy is not None else None
        if after.energy is not None and after.energy.hallucination_risk:
            flags.append("hallucination_risk")
        if after.dream is not None:
            flags.append("dream")
        self._emit(DialogueTurn(number, speaker, text, topic, seed.strategy, energy, False, tuple(flags), after.marks,
                                said.emotion, said.intensity, said.conflict))
        await self._remember(speaker, text, topic)
        if after.dream is not None:
            report = after.dream.to_dict()
            self._emit(DreamCycle(number, speaker, float(report.get("energy_before", 0.0)), report))
        self._emit(MetricsUpdated(number, rules.metrics()))

    async def _gate(self, number: int, topic: str, speaker: str, parts: Any, draft: str) -> tuple[str, bool]:
        """Fixy sees the draft first: when a detector fires on the dialogue with it, the agent
        is asked for one rewrite; a failed rewrite (an error, or nothing said) keeps the draft."""
        candidate = self.rules.engine.Turn(speaker, draft, topic=topic)
        detection = self._detect(number, topic, candidate)
        if detection is None:
            return draft, False
        ask = parts.dialogue.removesuffix("Respond now:").rstrip() + REWRITE.format(
            instruction=detection.instruction, draft=" ".join(draft.split())[:1200])
        try:
            rewrite = self.rules.clean(speaker, await self._say(speaker, ask, parts.system),
                                       (parts.system, detection.instruction, *self._templates(speaker)))
            error = None if rewrite else "the rewrite was empty"
        except SoulError as exc:  # the model failed, or the turn did: the draft stands
            if type(exc).__name__ == "ScriptExhausted":
                raise
            rewrite, error = "", (str(exc).splitlines() or [type(exc).__name__])[0][:200]
        ok = error is None
        self._emit(FixyGated(number, speaker, detection.reason, ok, error))
        return (rewrite, True) if ok else (draft, False)

    async def _fixy(self, number: int, topic: str, detection: Any) -> None:
        assert self.observer is not None
        # the reason and its instruction are the rules' words: the system prompt; the dialogue's
        # last turns, what models said: the fenced input
        system = (f"{self.rules.personas.get(self.observer, '')}\n\n## Why you step in now\n"
                  f"Reason: {detection.reason}\n{detection.instruction}").strip()
        prompt = detection.prompt.removeprefix(detection.instruction).strip()
        try:
            result = await self._session(self.observer).turn(prompt, persona=system)
            step = next((out for out in result.steps.values() if "reason" in out and "text" in out), {})
            text = str(step.get("text") or result.reply or "").strip()
        except ProviderError as exc:
            if type(exc).__name__ == "ScriptExhausted":
                raise
            log.warning("dialogue %s: Fixy's model failed at turn %d (%s); its fallback text is used", self.id, number, exc)
            text = ""
        text = self.rules.clean(self.observer, text, (system, *self._templates(self.observer))) if text else ""
        text = fixy_kind().trim(text) if text else detection.fallback
        self.rules.record(self.observer, text, topic, None)
        evidence = {k: (round(v, 6) if isinstance(v, float) else v) for k, v in dict(detection.evidence).items()}
        if detection.detail:
            evidence["detail"] = detection.detail
        self._emit(DialogueTurn(number, self.observer, text, topic, None, None, True, (f"reason:{detection.reason}",), ()))
        await self._remember(self.observer, text, topic)
        self._emit(FixyIntervened(number, detection.reason, evidence, text))
        self._emit(MetricsUpdated(number, self.rules.metrics()))

    def _templates(self, agent: str) -> tuple[str, ...]:
        """The agent's step templates (read once): echoes `clean` removes."""
        if agent not in self._template_cache:
            self._template_cache[agent] = template_texts(self.souls[agent].blueprint)
        return self._template_cache[agent]

    async def _say(self, agent: str, prompt: str, system: str | None = None) -> str:
        """One turn of the agent's soul: `prompt` (the dialogue's tail and memories: what
        models said) is its fenced input; `system` (persona, drives, seed: the rules' and the
        blueprint's own words) its system prompt head for this turn."""
        result = await self._session(agent).turn(prompt, persona=system)
        return result.reply.strip()

    async def _remember(self, speaker: str, text: str, topic: str) -> None:
        """Every line of the dialogue goes to the memory field of each agent whose soul uses
        memory (tagged `dialogue`, so the recalls find lines, not prompts); a failure is
        logged and the dialogue goes on."""
        item = {"text": f"{speaker.title()}: {text}", "kind": "episode", "source": "dialogue",
                "tags": [MEMORY_TAG], "meta": {"dialogue": self.id, "topic": topic}}
        for agent, soul in self.souls.items():
            if agent == self.observer or not uses_memory(soul.blueprint):
                continue
            session = self._session(agent).id
            try:
                await asyncio.to_thread(soul.remember, [item], session)
            except Exception as exc:
                log.warning("dialogue %s: remembering a line in %s's memory failed: %s", self.id, agent, exc)

    def _recalls(self, agent: str, topic: str) -> list[str]:
        """Resonance recalls from the agent's memory field, when its soul uses memory."""
        soul = self.souls[agent]
        if not uses_memory(soul.blueprint):
            return []
        last = self.rules.history[-1].text if self.rules.history else ""
        try:
            hits = soul.memory.reader().resonate(f"{topic}\n{last}"[:2000], 3 * RECALLS, tags=[MEMORY_TAG])
        except Exception as exc:  # a recall is a help, not a requirement: say so and go on
            log.warning("dialogue %s: %s's recall failed: %s", self.id, agent, exc)
            return []
        # tags rank rather than filter in resonance: keep only the dialogue's lines (an agent
        # whose blueprint stores episodes also holds its prompts, which are no memories to show)
        return [str(h.text) for h in hits if MEMORY_TAG in tuple(getattr(h, "tags", ()) or ())][:RECALLS]

    # -- results, saving, resuming ----------------------------------------------------------

    def result(self) -> DialogueResult:
        """The dialogue so far: its events sorted by kind, the metrics and the series."""
        return build_result(self.id, self.name, self.seed, self.events, self.rules.metrics(), self.rules.series(),
                            self.rules.speakers, self.spec.energy_start)

    def state_path(self) -> Path:
        return dialogues_dir(self.home) / f"{self.id}.json"

    def save(self) -> Path:
        """Write the dialogue's state (`runtime/dialogue/store.py`: atomic, redacted), with the
        metrics checkpoint, so the next process to read the metrics restores them."""
        path = write_state(self.state_path(), {
            "id": self.id, "soul": self.name, "blueprint": self.blueprint.file, "seed": self.seed,
            "sessions": {agent: s.id for agent, s in self.sessions.items()},
            "rules": self.rules.to_dict(), "events": [{"event": type(e).__name__, **e.to_dict()} for e in self.events],
            METRICS_CHECKPOINT: self.rules.metrics_cache(),
        })
        self.rules.metrics_read_whole = 0
        return path

    def read_metrics(self, *, save: bool = False) -> bool:
        """Read the metrics now: restored from the saved checkpoint, else (a dialogue saved
        before checkpoints, or one whose turns changed) every turn read once — 0.1–0.7 s at
        10,000 turns, so a server calls this off its event loop. With `save`, a dialogue whose
        turns had to be read is saved, so the next process restores them; True when it was
        (an error writing, on a read-only data home, is the caller's: the metrics stand)."""
        self.rules.metrics()
        if save and self.rules.metrics_read_whole:
            self.save()
            return True
        return False

    def _resume(self, saved: Mapping[str, Any]) -> None:
        if saved.get("soul") != self.name:
            raise RunError(f"dialogue {self.id} belongs to soul '{saved.get('soul')}', not '{self.name}'")
        self.rules.restore(saved["rules"], saved.get(METRICS_CHECKPOINT))
        for agent, session_id in dict(saved.get("sessions", {})).items():
            if agent in self.souls:
                self.sessions[agent] = self.souls[agent].session(session_id)
        self.events.extend(events_from(saved.get("events", ())))

    def close(self) -> None:
        for soul in self.souls.values():
            soul.close()


