"""The `dialogue:` block as typed data: agents, topics, speaker and seed policies, the observer,
energy and the psyche switches (Entelgia, seed 002).

`build_dialogue` is tolerant like `blueprint.build`: parts the schema rejected are skipped or
take their defaults, so the graph rules can still report on the rest. The defaults are the
reference's constants (../shared/reference/original-systems.md, section 3); where a value is
left out here, the rules engine (`soul.engines.dialogue`) uses its own default.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

DialogueMode = Literal["enhanced", "legacy"]
DRIVE_NAMES = ("id", "ego", "superego", "self_awareness", "conflict")


@dataclass(frozen=True)
class DialogueAgent:
    """One speaker of a dialogue. `persona` is a file beside the blueprint; a rich persona
    has a `core` (and optional `traits`, and a file whose text follows) and its text is
    formatted from the agent's drives each turn."""

    name: str
    persona: str | None = None
    rich: bool = False
    core: str = ""
    traits: tuple[str, ...] = ()
    blueprint: str | None = None
    model: str | None = None
    drives: dict[str, float] = field(default_factory=dict)
    style: str = ""


@dataclass(frozen=True)
class Observer:
    """Fixy: who observes, when it may speak, and whether it gates replies."""

    agent: str
    min_turn: int = 4
    cooldown: int = 3
    probability: float = 0.20
    repetition_probability: float = 0.35
    window: int = 10
    every: int = 5  # legacy mode: Fixy speaks every N turns
    gate: bool = False
    detectors: tuple[str, ...] | None = None  # None: all, in the engine's order


@dataclass(frozen=True)
class Dialogue:
    """A dialogue as written (`Blueprint.dialogue_spec`); `soul dialogue` runs it."""

    agents: dict[str, DialogueAgent]
    mode: DialogueMode = "enhanced"
    seed: int = 0
    topics: tuple[str, ...] = ()
    turns_per_topic: int = 8
    cycle_topics: bool = True
    speaker_policy: str | None = None  # None: entelgia (enhanced) / round_robin (legacy)
    first: str | None = None
    max_consecutive: int = 2
    seed_strategy: str | None = None  # None: entelgia (enhanced) / static (legacy)
    observer: Observer | None = None
    energy: bool = True
    energy_start: float = 100.0
    dream_below: float = 35.0
    dream_every: int = 7
    defense: bool = True
    slip: bool = True
    self_replication: bool = True
    max_turns: int | None = None

    @property
    def speakers(self) -> tuple[str, ...]:
        """The agents who take turns (the observer is not one of them)."""
        watcher = self.observer.agent if self.observer else None
        return tuple(name for name in self.agents if name != watcher)

    @property
    def first_speaker(self) -> str | None:
        return self.first if self.first in self.agents else (self.speakers[0] if self.speakers else None)

    @property
    def speaker_policy_name(self) -> str:
        return self.speaker_policy or ("round_robin" if self.mode == "legacy" else "entelgia")

    @property
    def seed_strategy_name(self) -> str:
        return self.seed_strategy or ("static" if self.mode == "legacy" else "entelgia")


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _int(value: Any, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def _num(value: Any, default: float) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else default


def _bool(value: Any, default: bool) -> bool:
    return value if isinstance(value, bool) else default


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _agent(name: str, raw: dict[str, Any]) -> DialogueAgent:
    persona = raw.get("persona")
    rich = isinstance(persona, dict)
    rich_spec = _dict(persona)
    drives = {k: float(v) for k, v in _dict(raw.get("drives")).items()
              if k in DRIVE_NAMES and isinstance(v, int | float) and not isinstance(v, bool)}
    return DialogueAgent(
        name=name,
        persona=_str(rich_spec.get("file")) if rich else _str(persona),
        rich=rich,
        core=_str(rich_spec.get("core")) or "",
        traits=tuple(t for t in rich_spec.get("traits", ()) if isinstance(t, str)) if isinstance(rich_spec.get("traits"), list) else (),
        blueprint=_str(raw.get("blueprint")),
        model=_str(raw.get("model")),
        drives=drives,
        style=_str(raw.get("style")) or "",
    )


def build_dialogue(raw: Any) -> Dialogue | None:
    """The typed dialogue of a blueprint's `dialogue:` value (None when there is none)."""
    if not isinstance(raw, dict):
        return None
    agents = {name: _agent(name, spec) for name, spec in _dict(raw.get("agents")).items()
              if isinstance(name, str) and isinstance(spec, dict)}
    policy = _dict(raw.get("speaker_policy"))
    topics_raw = raw.get("topics")
    topics = tuple(t for t in topics_raw if isinstance(t, str) and t) if isinstance(topics_raw, list) else ()
    manager = _dict(raw.get("topic_manager"))
    obs = _dict(raw.get("observer"))
    observer = None
    if _str(obs.get("agent")):
        observer = Observer(
            agent=obs["agent"],
            min_turn=_int(obs.get("min_turn"), 4),
            cooldown=_int(obs.get("cooldown"), 3),
            probability=_num(obs.get("probability"), 0.20),
            repetition_probability=_num(obs.get("repetition_probability"), 0.35),
            window=_int(obs.get("window"), 10),
            every=_int(obs.get("every"), 5),
            gate=_bool(obs.get("gate"), False),
            detectors=tuple(d for d in obs["detectors"] if isinstance(d, str)) if isinstance(obs.get("detectors"), list) else None,
        )
    energy = _dict(raw.get("energy"))
    psyche = _dict(raw.get("psyche"))
    max_turns = raw.get("max_turns")
    seed = raw.get("seed") if "seed" in raw else policy.get("seed")
    return Dialogue(
        agents=agents,
        mode="legacy" if raw.get("mode") == "legacy" else "enhanced",
        seed=_int(seed, 0),
        topics=topics,
        turns_per_topic=_int(manager.get("turns_per_topic"), 8),
        cycle_topics=_bool(manager.get("cycle"), True),
        speaker_policy=_str(policy.get("kind")),
        first=_str(policy.get("first")),
        max_consecutive=_int(policy.get("max_consecutive"), 2),
        seed_strategy=_str(raw.get("seed_strategy")),
        observer=observer,
        energy=_bool(energy.get("enabled"), True),
        energy_start=_num(energy.get("start"), 100.0),
        dream_below=_num(energy.get("dream_below"), 35.0),
        dream_every=_int(energy.get("dream_every"), 7),
        defense=_bool(psyche.get("defense"), True),
        slip=_bool(psyche.get("slip"), True),
        self_replication=_bool(psyche.get("self_replication"), True),
        max_turns=max_turns if isinstance(max_turns, int) and not isinstance(max_turns, bool) and max_turns > 0 else None,
    )
