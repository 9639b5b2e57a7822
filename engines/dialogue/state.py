"""The state of one dialogue — turn history, each agent's memory and energy, Fixy's last
turn, the topic position and the seeded RNG — saveable as JSON and resumable.

A resumed state continues the same random sequence: `to_dict` stores the RNG's internal
state, so "run 10 turns, save, load, run 10 more" equals "run 20 turns".
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .errors import StateError
from .memory import AgentMind
from .turns import Turn

__all__ = ["STATE_VERSION", "DialogueState"]

STATE_VERSION = 1


def _rng_state(rng: random.Random) -> list[Any]:
    version, internal, gauss = rng.getstate()
    return [version, list(internal), gauss]


def _rng_from(data: Any) -> random.Random:
    try:
        version, internal, gauss = data
        rng = random.Random()
        rng.setstate((int(version), tuple(int(x) for x in internal), gauss))
        return rng
    except (TypeError, ValueError) as exc:
        raise StateError(f"rng: not a saved random state ({exc})") from None


@dataclass
class DialogueState:
    """A dialogue in progress. `turns` is the history (Fixy's turns included); `minds` each
    agent's memory and energy; `last_fixy_turn` the 1-based number of Fixy's last turn;
    `interventions` the detections recorded (as dicts); `extra` any JSON data the caller
    keeps with the state."""

    agents: tuple[str, ...]
    observer: str | None = "Fixy"
    seed: int = 0
    turns: list[Turn] = field(default_factory=list)
    minds: dict[str, AgentMind] = field(default_factory=dict)
    rng: random.Random = field(default_factory=random.Random)
    last_fixy_turn: int | None = None
    topic_index: int = 0
    interventions: list[dict[str, Any]] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def new(cls, agents: Iterable[str], observer: str | None = "Fixy", seed: int = 0, energy: float = 100.0) -> DialogueState:
        """A fresh dialogue: one mind per agent at `energy`, the RNG seeded with `seed`."""
        names = tuple(agents)
        return cls(agents=names, observer=observer, seed=seed, rng=random.Random(seed),
                   minds={n: AgentMind(n, energy) for n in names})

    @property
    def turn(self) -> int:
        """How many turns have been taken (the next turn's number is `turn + 1`)."""
        return len(self.turns)

    def mind(self, name: str) -> AgentMind:
        """The mind of agent `name` (created at full energy on first use)."""
        if name not in self.minds:
            self.minds[name] = AgentMind(name)
        return self.minds[name]

    def add_turn(self, turn: Turn) -> int:
        """Append `turn`; returns its 1-based number (and notes it when it is Fixy's)."""
        self.turns.append(turn)
        if turn.is_fixy or (self.observer is not None and turn.speaker == self.observer):
            self.last_fixy_turn = len(self.turns)
        return len(self.turns)

    def to_dict(self) -> dict[str, Any]:
        """The state as JSON-ready data (RNG included)."""
        return {
            "version": STATE_VERSION, "agents": list(self.agents), "observer": self.observer, "seed": self.seed,
            "turns": [t.to_dict() for t in self.turns], "minds": {n: m.to_dict() for n, m in self.minds.items()},
            "rng": _rng_state(self.rng), "last_fixy_turn": self.last_fixy_turn, "topic_index": self.topic_index,
            "interventions": list(self.interventions), "extra": dict(self.extra),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> DialogueState:
        """A state saved by `to_dict`; `StateError` naming the bad field otherwise."""
        if not isinstance(data, Mapping):
            raise StateError("a dialogue state must be a mapping")
        if data.get("version") != STATE_VERSION:
            raise StateError(f"version: expected {STATE_VERSION}, got {data.get('version')!r}")
        try:
            turns = [Turn.from_dict(t) for t in data.get("turns", ())]
            minds = {str(n): AgentMind.from_dict(m) for n, m in dict(data.get("minds", {})).items()}
            last = data.get("last_fixy_turn")
            return cls(
                agents=tuple(str(a) for a in data["agents"]), observer=data.get("observer"), seed=int(data.get("seed", 0)),
                turns=turns, minds=minds, rng=_rng_from(data.get("rng")),
                last_fixy_turn=int(last) if last is not None else None, topic_index=int(data.get("topic_index", 0)),
                interventions=[dict(i) for i in data.get("interventions", ())], extra=dict(data.get("extra", {})),
            )
        except StateError:
            raise
        except (KeyError, TypeError, ValueError) as exc:
            raise StateError(f"dialogue state: {type(exc).__name__}: {exc}") from None
