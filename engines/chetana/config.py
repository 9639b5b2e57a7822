"""Chetana's configuration: `ChetanaConfig` (the seed's thresholds) and `CognitivePriors`
(per-soul personality knobs), validated once at construction so the hot path never checks."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from .errors import ConfigError, ConfigTypeError

__all__ = [
    "SYSTEM_MAX_CALIBRATION_WINDOW",
    "SYSTEM_MAX_EVIDENCE",
    "SYSTEM_MAX_FOCUS_WINDOW",
    "SYSTEM_MAX_INTENTIONS",
    "SYSTEM_MAX_LIMITATIONS",
    "ChetanaConfig",
    "CognitivePriors",
    "ConfigLike",
    "PriorsLike",
    "resolve_config",
    "resolve_priors",
]

# System hard ceilings: a config above one is clamped to it, never rejected.
SYSTEM_MAX_INTENTIONS = 50
SYSTEM_MAX_LIMITATIONS = 100
SYSTEM_MAX_EVIDENCE = 100
SYSTEM_MAX_FOCUS_WINDOW = 200
SYSTEM_MAX_CALIBRATION_WINDOW = 500

# How each field is checked: "bool"; "rate" (a float in [0, 1]); "amount" (a finite float
# >= 0); or "count" (an int >= 1, clamped to its ceiling when it has one).
_KINDS: dict[str, tuple[str, int | None]] = {
    "enabled": ("bool", None),
    "affect_decay_rate": ("rate", None),
    "attention_focus_window": ("count", SYSTEM_MAX_FOCUS_WINDOW),
    "self_model_persistence": ("bool", None),
    "goal_abandonment_threshold": ("count", None),
    "frustration_per_error": ("rate", None),
    "frustration_decay_per_success": ("rate", None),
    "frustration_per_correction": ("rate", None),
    "frustration_alert_threshold": ("rate", None),
    "confidence_autonomy_threshold": ("rate", None),
    "attention_recency_lambda": ("amount", None),
    "attention_error_boost": ("amount", None),
    "attention_correction_boost": ("amount", None),
    "calibration_window": ("count", SYSTEM_MAX_CALIBRATION_WINDOW),
    "max_limitations": ("count", SYSTEM_MAX_LIMITATIONS),
    "max_intentions": ("count", SYSTEM_MAX_INTENTIONS),
    "max_evidence_per_intention": ("count", SYSTEM_MAX_EVIDENCE),
}


def _check(owner: str, name: str, value: Any, kind: str, ceiling: int | None) -> Any:
    """Validate one field; return the value to store (clamped, or an int widened to float)."""
    where = f"{owner}.{name}"
    if kind == "bool":
        if not isinstance(value, bool):
            raise ConfigTypeError(f"{where} must be true or false, got {value!r}")
        return value
    # bool is an int subclass: `True` as a window size is a typo, not a number.
    if isinstance(value, bool):
        raise ConfigTypeError(f"{where} must be a number, got the boolean {value!r}")
    if kind == "count":
        if not isinstance(value, int):
            raise ConfigTypeError(f"{where} must be a whole number, got {value!r}")
        if value < 1:
            raise ConfigError(f"{where} must be at least 1, got {value}")
        return min(value, ceiling) if ceiling is not None else value
    if not isinstance(value, int | float):
        raise ConfigTypeError(f"{where} must be a number, got {value!r}")
    number = float(value)
    if not math.isfinite(number):
        raise ConfigError(f"{where} must be a finite number, got {value!r}")
    if number < 0:
        raise ConfigError(f"{where} must not be negative, got {value}")
    if kind == "rate" and number > 1:
        raise ConfigError(f"{where} is a rate and must lie in [0, 1], got {value}")
    return number


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def _unknown_keys(owner: str, keys: list[str], valid: list[str]) -> ConfigError:
    hints = [f"{k!r} (did you mean {_snake(k)!r}?)" for k in keys if _snake(k) in valid]
    shown = ", ".join(hints) if hints else ", ".join(repr(k) for k in keys)
    return ConfigError(f"{owner} has no key {shown}; its keys are: {', '.join(valid)}")


@dataclass(frozen=True, slots=True)
class ChetanaConfig:
    """Every threshold of the four subsystems, with the seed's defaults.

    Counts above a system ceiling (focus window 200, calibration window 500, limitations
    100, intentions 50, evidence 100) are clamped to it; invalid values raise `ConfigError`
    (wrong types raise its subclass `ConfigTypeError`).
    """

    enabled: bool = True
    affect_decay_rate: float = 0.02
    attention_focus_window: int = 20
    self_model_persistence: bool = True
    goal_abandonment_threshold: int = 15
    frustration_per_error: float = 0.15
    frustration_decay_per_success: float = 0.05
    frustration_per_correction: float = 0.25
    frustration_alert_threshold: float = 0.7
    confidence_autonomy_threshold: float = 0.8
    attention_recency_lambda: float = 0.1
    attention_error_boost: float = 0.3
    attention_correction_boost: float = 0.5
    calibration_window: int = 50
    max_limitations: int = 20
    max_intentions: int = 10
    max_evidence_per_intention: int = 20

    def __post_init__(self) -> None:
        for name, (kind, ceiling) in _KINDS.items():
            value = _check("ChetanaConfig", name, getattr(self, name), kind, ceiling)
            object.__setattr__(self, name, value)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ChetanaConfig:
        """Build a config from a mapping of snake_case keys (a blueprint's `chetana:` block);
        missing keys take their defaults, unknown keys raise `ConfigError`."""
        if not isinstance(data, Mapping):
            raise ConfigTypeError(f"ChetanaConfig needs a mapping, got {type(data).__name__}")
        valid = [f.name for f in fields(cls)]
        unknown = [str(k) for k in data if k not in valid]
        if unknown:
            raise _unknown_keys("ChetanaConfig", unknown, valid)
        return cls(**dict(data))

    def to_dict(self) -> dict[str, Any]:
        """The config as a plain JSON-safe dict (the inverse of `from_dict`)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True, slots=True)
class CognitivePriors:
    """Per-soul personality knobs, each in [0, 1]. The defaults reproduce the original
    dynamics exactly; moving a knob away from 0.5 tunes one subsystem:

    - `base_arousal`: arousal's starting value and the level it decays back to (Bhava).
    - `emotional_reactivity`: scales the *rises* of frustration and arousal by
      `0.5 + reactivity` (x1 at 0.5, x0.5 at 0, x1.5 at 1); relief on success is unscaled.
    - `goal_orientedness`: scales the patience with a goal that makes no progress: the
      pause threshold becomes `round(goal_abandonment_threshold * (0.5 + g))` (abandonment
      stays at twice that, the stalling hint at half).
    - `self_awareness`: narrows the calibration band outside which the self-model warns:
      `1 ± 0.3 * (1.5 - s)` (1.3/0.7 at 0.5, 1.15/0.85 at 1, 1.45/0.55 at 0).
    """

    base_arousal: float = 0.3
    emotional_reactivity: float = 0.5
    goal_orientedness: float = 0.5
    self_awareness: float = 0.5

    def __post_init__(self) -> None:
        for f in fields(self):
            value = _check("CognitivePriors", f.name, getattr(self, f.name), "rate", None)
            object.__setattr__(self, f.name, value)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CognitivePriors:
        """Build priors from a mapping of snake_case keys; unknown keys raise `ConfigError`."""
        if not isinstance(data, Mapping):
            raise ConfigTypeError(f"CognitivePriors needs a mapping, got {type(data).__name__}")
        valid = [f.name for f in fields(cls)]
        unknown = [str(k) for k in data if k not in valid]
        if unknown:
            raise _unknown_keys("CognitivePriors", unknown, valid)
        return cls(**dict(data))

    def to_dict(self) -> dict[str, float]:
        """The priors as a plain JSON-safe dict."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @property
    def reactivity_gain(self) -> float:
        """Multiplier on frustration and arousal rises (1.0 at the default reactivity)."""
        return 0.5 + self.emotional_reactivity

    def patience(self, threshold: int) -> int:
        """Turns without progress before a goal is paused, given the configured threshold."""
        return max(1, round(threshold * (0.5 + self.goal_orientedness)))

    @property
    def calibration_tolerance(self) -> float:
        """Half-width of the well-calibrated band around 1.0 (0.3 at the default)."""
        return 0.3 * (1.5 - self.self_awareness)


# What a constructor or `deserialize` takes for each: the object, a mapping of overrides, or
# None for the defaults.
ConfigLike = ChetanaConfig | Mapping[str, Any] | None
PriorsLike = CognitivePriors | Mapping[str, Any] | None


def resolve_config(config: ConfigLike) -> ChetanaConfig:
    """Accept a config, a mapping of overrides (like the original's partial config) or None."""
    if config is None:
        return ChetanaConfig()
    if isinstance(config, ChetanaConfig):
        return config
    if isinstance(config, Mapping):
        return ChetanaConfig.from_dict(config)
    raise ConfigTypeError(
        f"config must be a ChetanaConfig, a mapping or None, got {type(config).__name__}"
    )


def resolve_priors(priors: PriorsLike) -> CognitivePriors:
    """Accept priors, a mapping of overrides or None (the defaults)."""
    if priors is None:
        return CognitivePriors()
    if isinstance(priors, CognitivePriors):
        return priors
    if isinstance(priors, Mapping):
        return CognitivePriors.from_dict(priors)
    raise ConfigTypeError(
        f"priors must be CognitivePriors, a mapping or None, got {type(priors).__name__}"
    )
