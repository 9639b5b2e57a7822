"""A Field's options: its own (`FieldConfig`), split from the store's, fusion's and resonance's.

`Field.open(path, **config)` takes one flat set of keywords; `split_config` sorts them into the
store's options, a `FieldConfig`, a `FusionConfig` and (from the ``resonance`` dict) a
`ResonanceConfig`, and names every option it does not know.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError
from ..resonate.config import ResonanceConfig

if TYPE_CHECKING:
    from ..recall.fusion import FusionConfig

__all__ = ["FieldConfig", "SplitConfig", "split_config"]

_STORE_KEYS = ("durability", "segment_bytes", "sync_interval", "compact_after", "keep_snapshots")


@dataclass(frozen=True)
class FieldConfig:
    """Options of a Field besides the store's (durability, segment_bytes, sync_interval,
    compact_after, keep_snapshots) and the fusion's (semantic_weight, method, ...)."""

    dedup_threshold: float | None = 0.95  # cosine at which remember() merges; None: never
    touch_on_recall: bool = True  # log an access for every recalled memory
    tail_limit: int = 4096  # rows compared by brute force before the vector index catches up
    batch_size: int = 512  # remember_many: items embedded and logged per step
    M: int = 16
    ef_construction: int = 200
    ef: int = 64
    entities: bool = True  # link each remembered memory to the entities its text names
    # Temporal contiguity: a new memory `follows` the one remembered before it in the same
    # session if that was at most this many seconds earlier (None: never). Measured on
    # LoCoMo (docs/memory.md): association along these edges is most of resonance's gain.
    contiguity: float | None = 1800.0
    contiguity_weight: float = 1.0
    # Session context: an embedded memory's vector is unit(e(text) + w · v_prev), v_prev the
    # stored vector of the memory it follows in its session (field/context.py); None or 0:
    # each text alone. 0.5 chosen on LoCoMo dev (docs/memory.md, "Session context").
    context_weight: float | None = 0.5

    def __post_init__(self) -> None:
        w = self.context_weight
        if w is not None and (isinstance(w, bool) or not isinstance(w, int | float)
                              or not 0.0 <= w < float("inf")):
            raise ConfigError(f"context_weight must be a number ≥ 0 or None, got {w!r:.40}")


@dataclass(frozen=True)
class SplitConfig:
    """`Field.open`'s keywords, sorted by the part of the field they configure."""

    store: dict[str, Any]
    field: FieldConfig
    fusion: FusionConfig
    resonance: ResonanceConfig


def split_config(config: Mapping[str, Any]) -> SplitConfig:
    """Sort `Field.open`'s keywords; `ConfigError` names any option nothing knows."""
    from ..recall.fusion import FusionConfig

    given = {k: v for k, v in config.items() if k != "resonance"}
    store = {k: v for k, v in given.items() if k in _STORE_KEYS}
    own_names = {f.name for f in fields(FieldConfig)}
    fusion_names = {f.name for f in fields(FusionConfig)}
    unknown = set(given) - set(_STORE_KEYS) - own_names - fusion_names
    if unknown:
        known = ", ".join(sorted({*_STORE_KEYS, *own_names, *fusion_names}))
        raise ConfigError(f"unknown Field option(s) {', '.join(sorted(unknown))}; known: {known}")
    own = FieldConfig(**{k: v for k, v in given.items() if k in own_names})
    fusion = FusionConfig(**{k: v for k, v in given.items() if k in fusion_names})
    return SplitConfig(store, own, fusion, _resonance_config(config.get("resonance")))


def _resonance_config(resonance: Mapping[str, Any] | None) -> ResonanceConfig:
    names = {f.name for f in fields(ResonanceConfig)}
    given = dict(resonance or {})
    unknown = set(given) - names
    if unknown:
        raise ConfigError(f"unknown resonance option(s) {', '.join(sorted(unknown))}; "
                          f"known: {', '.join(sorted(names))}")
    if "disabled" in given:
        given["disabled"] = frozenset(given["disabled"])
    return ResonanceConfig(**given)
