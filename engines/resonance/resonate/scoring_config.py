"""scoring.json: the typed, validated, read-only config of the scoring factors.

A document is `{"version": 1, "combine": "product", "factors": {Name: {"enabled", "weight",
"params"}}}`. The shipped defaults (engines/resonance/data/scoring.json) define every factor
and parameter; a user file names only what it changes and is merged over them. Every value
is checked against the default's type (numbers finite), each factor's numeric rules
(`scoring_factors.RULES`) and its tables' keys; an error names the file, the key path and
what is wrong, with a "did you mean" for a misspelt name.
"""

from __future__ import annotations

import copy
import difflib
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import lru_cache
from importlib import resources
from types import MappingProxyType
from typing import Any

from ..errors import ConfigError
from .scoring_factors import FACTORS, check_params

__all__ = ["MAX_WEIGHT", "FactorConfig", "ScoringConfig", "ScoringConfigError", "unknown_name"]

MAX_WEIGHT = 10.0


class ScoringConfigError(ConfigError):
    """A scoring config is invalid: ``source`` (file), ``where`` (key path) and ``what``."""

    def __init__(self, what: str, where: str = "", source: str = "<string>") -> None:
        self.what, self.where, self.source = what, where, source
        super().__init__(f"{source}: {where}: {what}" if where else f"{source}: {what}")


def _freeze(value: Any) -> Any:
    if isinstance(value, dict):
        return MappingProxyType({k: _freeze(v) for k, v in value.items()})
    if isinstance(value, list | tuple):
        return tuple(_freeze(v) for v in value)
    return value


def _thaw(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _thaw(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return [_thaw(v) for v in value]
    return value


@dataclass(frozen=True)
class FactorConfig:
    """One factor: on or off, its weight (an exponent), its parameters (read-only)."""

    name: str
    enabled: bool = True
    weight: float = 1.0
    params: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))


@dataclass(frozen=True)
class ScoringConfig:
    """Every factor's config, in the documented order; load with `defaults()`/`from_json()`."""

    factors: tuple[FactorConfig, ...]
    source: str = "<defaults>"

    @classmethod
    def defaults(cls) -> ScoringConfig:
        """The shipped defaults (engines/resonance/data/scoring.json)."""
        return _defaults()

    @classmethod
    def from_json(cls, text: str, source: str = "<string>") -> ScoringConfig:
        """Parse a scoring.json text: the factors it names are merged over the defaults.

        Raises `ScoringConfigError` naming the source, the key path and what is wrong.
        """
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ScoringConfigError(f"not valid JSON: {exc.msg}",
                                     f"line {exc.lineno} column {exc.colno}", source) from None
        return cls.from_dict(data, source)

    @classmethod
    def from_dict(cls, data: Any, source: str = "<dict>") -> ScoringConfig:
        """Like `from_json`, from already-decoded JSON."""
        return _parse(data, source, _defaults())

    def factor(self, name: str) -> FactorConfig:
        """The config of factor ``name``."""
        for f in self.factors:
            if f.name == name:
                return f
        raise ScoringConfigError(f"no factor {name!r}; the factors are: {', '.join(FACTORS)}")

    def with_factor(self, name: str, *, enabled: bool | None = None,
                    weight: float | None = None, **params: Any) -> ScoringConfig:
        """A copy with one factor changed (validated like a file)."""
        entry: dict[str, Any] = {"params": params}
        if enabled is not None:
            entry["enabled"] = enabled
        if weight is not None:
            entry["weight"] = weight
        return _parse({"factors": {name: entry}}, self.source, self)

    def only(self, *names: str) -> ScoringConfig:
        """A copy with every factor but ``names`` disabled (for tests and ablations)."""
        unknown = [n for n in names if n not in FACTORS]
        if unknown:
            raise ScoringConfigError(f"no factor {unknown[0]!r}; the factors are: "
                                     f"{', '.join(FACTORS)}")
        return replace(self, factors=tuple(replace(f, enabled=f.name in names)
                                           for f in self.factors))

    def to_dict(self) -> dict[str, Any]:
        """The config as the JSON document that would load it back."""
        return {"version": 1, "combine": "product", "factors": {
            f.name: {"enabled": f.enabled, "weight": f.weight, "params": _thaw(f.params)}
            for f in self.factors}}

    def to_json(self) -> str:
        """`to_dict()` as indented JSON text."""
        return json.dumps(self.to_dict(), indent=2)


def _kind_of(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, dict | Mapping):
        return "an object"
    if isinstance(value, list | tuple):
        return "a list"
    return "null" if value is None else type(value).__name__


def _check_value(new: Any, old: Any, where: str, source: str) -> Any:
    """``new`` checked against the type of the default ``old`` (numbers finite)."""
    want = _kind_of(old)
    if _kind_of(new) != want:
        raise ScoringConfigError(f"must be {want}, got {_kind_of(new)} {new!r}", where, source)
    if want == "a number" and not math.isfinite(new):
        raise ScoringConfigError(f"must be a finite number, got {new!r}", where, source)
    if want == "an object":  # tables: str -> finite number
        for k, v in new.items():
            if _kind_of(v) != "a number" or not math.isfinite(v):
                raise ScoringConfigError(f"must be a finite number, got {v!r}",
                                         f"{where}.{k}", source)
        return dict(new)
    if want == "a list":
        for i, v in enumerate(new):
            if not isinstance(v, str):
                raise ScoringConfigError(f"must be a string, got {v!r}", f"{where}[{i}]", source)
        return list(new)
    return float(new) if want == "a number" else new


def unknown_name(what: str, name: str, known: list[str]) -> str:
    close = difflib.get_close_matches(name, known, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return f"unknown {what} {name!r}{hint}; the {what}s are: {', '.join(known)}"


def _parse(data: Any, source: str, base: ScoringConfig | None) -> ScoringConfig:
    """Validate ``data`` and merge it over ``base`` (None: ``data`` must define everything)."""
    if not isinstance(data, dict):
        raise ScoringConfigError(f"the document must be a JSON object, got {_kind_of(data)}",
                                 "", source)
    for key in data:
        if key not in ("version", "combine", "factors"):
            raise ScoringConfigError(unknown_name("top-level key", key,
                                              ["version", "combine", "factors"]), key, source)
    if data.get("version", 1) != 1:
        raise ScoringConfigError(f"unsupported version {data['version']!r}; this reads 1",
                                 "version", source)
    if data.get("combine", "product") != "product":
        raise ScoringConfigError(f"unsupported combination {data['combine']!r}: the score is "
                                 "the weighted product (see docs/memory.md, 'Scoring')",
                                 "combine", source)
    given = data.get("factors", {})
    if not isinstance(given, dict):
        raise ScoringConfigError(f"must be an object, got {_kind_of(given)}", "factors", source)
    for name in given:
        if name not in FACTORS:
            raise ScoringConfigError(unknown_name("factor", name, list(FACTORS)),
                                     f"factors.{name}", source)
    old = {f.name: f for f in base.factors} if base else {}
    out = []
    for name in FACTORS:
        where = f"factors.{name}"
        entry = given.get(name)
        if entry is None:
            if name not in old:
                raise ScoringConfigError("missing factor", where, source)
            out.append(old[name])
            continue
        if not isinstance(entry, dict):
            raise ScoringConfigError(f"must be an object, got {_kind_of(entry)}", where, source)
        for key in entry:
            if key not in ("enabled", "weight", "params"):
                raise ScoringConfigError(unknown_name("factor key", key,
                                                  ["enabled", "weight", "params"]),
                                         f"{where}.{key}", source)
        prev = old.get(name)
        enabled = entry.get("enabled", prev.enabled if prev else True)
        if not isinstance(enabled, bool):
            raise ScoringConfigError(f"must be true or false, got {enabled!r}",
                                     f"{where}.enabled", source)
        weight = entry.get("weight", prev.weight if prev else 1.0)
        if (_kind_of(weight) != "a number" or not math.isfinite(weight)
                or not 0.0 <= weight <= MAX_WEIGHT):
            raise ScoringConfigError(f"must be a number in [0, {MAX_WEIGHT:g}], got {weight!r}",
                                     f"{where}.weight", source)
        params_in = entry.get("params", {})
        if not isinstance(params_in, dict):
            raise ScoringConfigError(f"must be an object, got {_kind_of(params_in)}",
                                     f"{where}.params", source)
        params = _thaw(prev.params) if prev else {}
        if prev:
            for key, value in params_in.items():
                if key not in params:
                    raise ScoringConfigError(unknown_name("parameter", key, list(params)),
                                             f"{where}.params.{key}", source)
                params[key] = _check_value(value, params[key], f"{where}.params.{key}", source)
        else:
            params = copy.deepcopy(params_in)
        try:
            problems = check_params(name, params)
        except KeyError as exc:  # only the defaults file can lack a key: user keys merge over it
            raise ScoringConfigError(f"missing parameter {exc.args[0]!r}", f"{where}.params",
                                     source) from None
        if problems:
            key, what = problems[0]
            raise ScoringConfigError(what, f"{where}.params.{key}", source)
        out.append(FactorConfig(name, enabled, float(weight), _freeze(params)))
    return ScoringConfig(tuple(out), source)


@lru_cache(maxsize=1)
def _defaults() -> ScoringConfig:
    text = resources.files("soul.engines.resonance.data").joinpath("scoring.json").read_text("utf-8")
    return _parse(json.loads(text), "<defaults: engines/resonance/data/scoring.json>", None)
