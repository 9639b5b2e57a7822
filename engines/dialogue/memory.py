"""An agent's memory in a dialogue: STM (recent thoughts), the subconscious store, conscious
memory and LTM — and the dream cycle that moves memories between them.

Each turn's memory is written to STM and to the subconscious store (`remember`). A dream
(`dream`) integrates the subconscious entries not yet integrated into conscious memory (the
subconscious layer itself is kept, as in the reference where no memory is deleted: the
Freudian slip and self-replication scan it), forgets empty entries, promotes meaningful ones
to LTM, and recharges the energy.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from .persona import Drives
from .psyche import PsycheRules, defense_flags
from .words import jaccard, keywords

__all__ = [
    "AgentMind",
    "DreamReport",
    "MemoryEntry",
    "MemoryRules",
    "dream",
    "ltm_relevance",
    "remember",
    "select_memories",
]


@dataclass(frozen=True)
class MemoryEntry:
    """One memory: its `id` (unique within its mind), text, the turn it was written, its
    importance in [0, 1], emotion and intensity, topic, `source` ("turn", "dream",
    "freudian_slip", "self_replication", ...), and the defense flags."""

    id: int
    content: str
    turn: int = 0
    importance: float = 0.5
    emotion: str | None = None
    intensity: float = 0.0
    topic: str | None = None
    source: str = "turn"
    intrusive: bool = False
    suppressed: bool = False

    @property
    def flagged(self) -> bool:
        """Whether a defense flag is set (intrusive or suppressed)."""
        return self.intrusive or self.suppressed

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> MemoryEntry:
        return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})


@dataclass(frozen=True)
class MemoryRules:
    """STM is bounded by `stm_max` entries, trimmed `stm_trim_batch` oldest at a time; a
    dream promotes an integrated entry to LTM when importance >= `promote_importance` or
    intensity >= `promote_emotion`."""

    stm_max: int = 20
    stm_trim_batch: int = 5
    promote_importance: float = 0.5
    promote_emotion: float = 0.6


@dataclass
class AgentMind:
    """One agent's mutable memory, energy and current drives (part of `DialogueState`);
    `drives` is None until the first turn moves them (the blueprint's drives hold until then)."""

    name: str
    energy: float = 100.0
    stm: list[MemoryEntry] = field(default_factory=list)
    subconscious: list[MemoryEntry] = field(default_factory=list)
    conscious: list[MemoryEntry] = field(default_factory=list)
    ltm: list[MemoryEntry] = field(default_factory=list)
    integrated: int = 0  # subconscious[:integrated] has been integrated by a dream
    next_id: int = 1
    drives: Drives | None = None

    def add_ltm(self, entry: MemoryEntry) -> bool:
        """Add `entry` to LTM unless an entry with the same id and source is already there."""
        if any(e.id == entry.id and e.source == entry.source for e in self.ltm):
            return False
        self.ltm.append(entry)
        return True

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "energy": self.energy, "integrated": self.integrated, "next_id": self.next_id,
                "drives": self.drives.to_dict() if self.drives is not None else None,
                **{layer: [e.to_dict() for e in getattr(self, layer)] for layer in ("stm", "subconscious", "conscious", "ltm")}}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> AgentMind:
        layers = {layer: [MemoryEntry.from_dict(e) for e in data.get(layer, ())]
                  for layer in ("stm", "subconscious", "conscious", "ltm")}
        drives = data.get("drives")
        return cls(name=str(data["name"]), energy=float(data.get("energy", 100.0)),
                   integrated=int(data.get("integrated", 0)), next_id=int(data.get("next_id", 1)),
                   drives=Drives.from_mapping(drives) if isinstance(drives, Mapping) else None, **layers)


@dataclass(frozen=True)
class DreamReport:
    """What a dream moved: ids integrated into conscious memory, how many empty entries were
    forgotten, ids promoted to LTM, and the energy before and after the recharge."""

    agent: str
    integrated: tuple[int, ...]
    forgotten: int
    promoted: tuple[int, ...]
    energy_before: float
    energy_after: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def remember(mind: AgentMind, content: str, turn: int, *, importance: float = 0.5, emotion: str | None = None,
             intensity: float = 0.0, topic: str | None = None, source: str = "turn",
             psyche: PsycheRules | None = None, rules: MemoryRules | None = None) -> MemoryEntry:
    """Write a memory to STM and the subconscious store, with the defense flags when
    `psyche.defense` is on; STM over `stm_max` drops its `stm_trim_batch` oldest entries."""
    psyche = psyche or PsycheRules()
    rules = rules or MemoryRules()
    intrusive, suppressed = defense_flags(content, emotion, intensity, psyche) if psyche.defense else (False, False)
    entry = MemoryEntry(mind.next_id, content, turn, min(max(importance, 0.0), 1.0), emotion, intensity, topic,
                        source, intrusive, suppressed)
    mind.next_id += 1
    mind.stm.append(entry)
    if len(mind.stm) > rules.stm_max:
        del mind.stm[:max(rules.stm_trim_batch, len(mind.stm) - rules.stm_max)]
    mind.subconscious.append(entry)
    return entry


def dream(mind: AgentMind, recharge_to: float = 100.0, rules: MemoryRules = MemoryRules()) -> DreamReport:
    """One dream cycle: (1) integration — subconscious entries not yet integrated are appended
    to conscious memory; (2) forgetting — entries whose content is empty or whitespace leave
    STM and conscious memory; (3) promotion — integrated non-empty entries with importance >=
    `promote_importance` or intensity >= `promote_emotion` are copied to LTM with source
    "dream"; (4) recharge — energy set to `recharge_to`."""
    fresh = mind.subconscious[mind.integrated:]
    mind.integrated = len(mind.subconscious)
    mind.conscious.extend(fresh)
    before = len(mind.stm) + len(mind.conscious)
    mind.stm = [e for e in mind.stm if e.content.strip()]
    mind.conscious = [e for e in mind.conscious if e.content.strip()]
    forgotten = before - len(mind.stm) - len(mind.conscious)
    promoted = []
    for entry in fresh:
        meaningful = entry.content.strip() and (entry.importance >= rules.promote_importance
                                                or entry.intensity >= rules.promote_emotion)
        if meaningful and mind.add_ltm(replace(entry, source="dream")):
            promoted.append(entry.id)
    energy_before, mind.energy = mind.energy, recharge_to
    return DreamReport(mind.name, tuple(e.id for e in fresh), forgotten, tuple(promoted), energy_before, recharge_to)


def ltm_relevance(entry: MemoryEntry, topic: str, recent_texts: Sequence[str]) -> float:
    """The reference's relevance of an LTM entry: 0.4 · Jaccard(keywords(topic),
    keywords(entry)) + 0.3 · importance + 0.2 · Jaccard(keywords(last 3 turns joined),
    keywords(entry)) + 0.05 (keywords: words longer than 4 characters)."""
    kw = keywords(entry.content)
    recent = keywords(" ".join(recent_texts[-3:]))
    return 0.4 * jaccard(keywords(topic), kw) + 0.3 * entry.importance + 0.2 * jaccard(recent, kw) + 0.05


def select_memories(entries: Iterable[MemoryEntry], topic: str, recent_texts: Sequence[str], k: int = 5) -> list[MemoryEntry]:
    """The `k` entries with the highest `ltm_relevance` (ties: higher importance, then newer);
    one per memory id (LTM may hold a memory twice, promoted by a dream and by the psyche)."""
    scored = [(ltm_relevance(e, topic, recent_texts), e) for e in entries]
    scored.sort(key=lambda pair: (-pair[0], -pair[1].importance, -pair[1].id))
    chosen: list[MemoryEntry] = []
    seen: set[int] = set()
    for _, entry in scored:
        if entry.id not in seen and len(chosen) < k:
            seen.add(entry.id)
            chosen.append(entry)
    return chosen
