"""Knobs of full resonance: `ResonanceConfig` and the names of its phases (`PHASES`)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from ..errors import ConfigError

__all__ = ["PHASES", "ResonanceConfig"]

PHASES = ("semantic", "keyword", "tags", "spreading", "priming", "code", "basin", "scoring",
          "inhibition", "hebbian", "credit")


@dataclass(frozen=True)
class ResonanceConfig:
    """Knobs of full resonance (defaults tuned on the LoCoMo dev file; docs/memory.md)."""

    depth: int = 100  # candidates from each of the semantic and keyword lists
    seeds: int = 20  # top hybrid candidates that start spreading activation
    activation_weight: float = 0.7
    entry_threshold: float = 0.05  # activation at which a non-candidate memory joins
    join: int = 50  # at most this many of those join (the strongest): each costs a scoring
    spread_strength: float | None = None  # None: the knowledge graph's SpreadConfig default
    # per hop; higher than the graph's 0.8 default so a turn's neighbours two or three turns
    # away still count (LoCoMo dev R@10: 0.7 → .753, 0.8 → .773, 0.9 → .785, 1.0 → .743)
    spread_decay: float | None = 0.9
    max_hops: int | None = None
    # a path stops once its activation falls below the entry threshold: activation only
    # decreases along a path, and the lost remainder changed no LoCoMo ranking (R@10 .784 at
    # cutoff .01, .02 and .05) while spreading reached 2.5× fewer nodes, 5× faster
    cutoff: float | None = 0.05
    priming_boost: float = 1.3
    priming_size: int = 50
    topic_boost: float = 0.1
    attractors: int = 10
    basin_boost: float = 1.05  # the seed's 1.15 cost 0.8 R@10 points on LoCoMo dev
    inhibition_threshold: float = 0.92  # the seed's 0.85 damped paraphrases, not duplicates
    inhibition_strength: float = 0.7
    inhibition_window: int = 50
    inhibition_max_competitors: int = 3
    hebbian: float = 0.03
    hebbian_top: int = 5
    code_symbols: int = 5
    code_relevance: float = 0.5
    learn: bool = False  # draw the parameters from the field's Thompson learner per query
    disabled: frozenset[str] = field(default_factory=frozenset)

    def __post_init__(self) -> None:
        unknown = set(self.disabled) - set(PHASES)
        if unknown:
            raise ConfigError(f"unknown resonance phase(s) {sorted(unknown)}; phases: "
                              f"{', '.join(PHASES)}")
        if not 0.0 <= self.activation_weight <= 1.0:
            raise ConfigError(f"activation_weight must be in [0, 1], not {self.activation_weight}")
        if self.depth < 1 or self.seeds < 0 or self.inhibition_window < 1:
            raise ConfigError(f"invalid resonance config: {self}")
        object.__setattr__(self, "disabled", frozenset(self.disabled))

    def on(self, phase: str) -> bool:
        return phase not in self.disabled

    def tuned(self, params: dict[str, float]) -> ResonanceConfig:
        """A copy with the learner's drawn parameters (names as in learner.PARAMETERS)."""
        mapping = {"spread_strength": "spread_strength", "spread_decay": "spread_decay",
                   "hebbian": "hebbian", "basin_boost": "basin_boost",
                   "similarity_threshold": "inhibition_threshold",
                   "inhibition": "inhibition_strength"}
        changes: dict[str, Any] = {mapping[k]: float(v) for k, v in params.items() if k in mapping}
        if "semantic_weight" in params:
            changes["activation_weight"] = 1.0 - float(params["semantic_weight"])
        return replace(self, **changes)
