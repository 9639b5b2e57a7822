"""Scoring: the factor pipeline that turns a candidate's relevance into its final score.

    final = Π_i f_i ** w_i        over the enabled factors i (weight 0: the factor is skipped)

Each factor `f_i` (scoring_factors.py) is a finite value >= 0 with 1.0 neutral, and `w_i` its
weight in [0, 10]. The product, not the seed page's sum: a factor can veto (f = 0 gives 0 — a
zero relevance never surfaces, whatever the boosts), a neutral factor changes nothing, and a
weight is an exponent, so `w = 2` doubles a factor's effect on the log score and `w = 0.5`
halves it. It is computed in the log domain, so no product over- or underflows: the result is
finite for any input.

The weights and every factor's parameters live in `scoring.json` (the shipped defaults are
`engines/resonance/data/scoring.json`); a user file lists only what it changes. `Scorer(path)`
re-reads the file when its mtime, size or inode change (checked at most every `check_every`
seconds), keeps the last good config when a version is malformed and logs why once per bad
version, and falls back to the defaults (with a warning) while the file is missing.
"""

from __future__ import annotations

import copy
import difflib
import json
import logging
import math
import os
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import lru_cache
from importlib import resources
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import numpy as np

from .errors import ConfigError
from .scoring_factors import EXTRA_KEYS, FACTORS, Inputs, check_params

if TYPE_CHECKING:
    from .state import State

__all__ = [
    "Affect",
    "FactorConfig",
    "Scored",
    "Scorer",
    "ScoringConfig",
    "ScoringConfigError",
]

log = logging.getLogger("soul.engines.resonance.scoring")

MAX_WEIGHT = 10.0
_LOG_MAX = 700.0  # exp(700) ~ 1e304: the largest final score, so it stays a finite float64


class ScoringConfigError(ConfigError):
    """A scoring config is invalid: ``source`` (file), ``where`` (key path) and ``what``."""

    def __init__(self, what: str, where: str = "", source: str = "<string>") -> None:
        self.what, self.where, self.source = what, where, source
        super().__init__(f"{source}: {where}: {what}" if where else f"{source}: {what}")


@dataclass(frozen=True)
class Affect:
    """The query's affect (Chetana's Bhava when the soul has it): valence [−1, 1], arousal,
    frustration and confidence [0, 1]. Out-of-range values are clipped, NaN read as neutral."""

    valence: float = 0.0
    arousal: float = 0.0
    frustration: float = 0.0
    confidence: float = 0.5


@dataclass(frozen=True)
class Scored:
    """Final scores and, per enabled factor, its value for every row (for explain=True)."""

    final: np.ndarray
    factors: dict[str, np.ndarray]

    def explain(self, i: int) -> dict[str, float]:
        """Every factor's value for row ``i`` of the scored rows, plus ``final``."""
        return {**{k: float(v[i]) for k, v in self.factors.items()}, "final": float(self.final[i])}


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


def _unknown(what: str, name: str, known: list[str]) -> str:
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
            raise ScoringConfigError(_unknown("top-level key", key,
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
            raise ScoringConfigError(_unknown("factor", name, list(FACTORS)),
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
                raise ScoringConfigError(_unknown("factor key", key,
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
                    raise ScoringConfigError(_unknown("parameter", key, list(params)),
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
    text = resources.files(__package__).joinpath("data", "scoring.json").read_text("utf-8")
    return _parse(json.loads(text), "<defaults: engines/resonance/data/scoring.json>", None)


def _extra_arrays(extra: Mapping[str, Any] | None, n: int) -> dict[str, np.ndarray]:
    out: dict[str, np.ndarray] = {}
    for key, value in (extra or {}).items():
        if key not in EXTRA_KEYS:
            raise ConfigError(_unknown("extra signal", key, list(EXTRA_KEYS)))
        arr = np.asarray(value, dtype=np.float64)
        if arr.shape != (n,):
            raise ConfigError(f"extra[{key!r}] has shape {arr.shape}; it needs one value per "
                              f"scored row, shape ({n},)")
        out[key] = arr
    return out


def combine(config: ScoringConfig, inputs: Inputs) -> Scored:
    """Evaluate the enabled factors and their weighted product (in the log domain)."""
    n = len(inputs.row_list)
    log_final = np.zeros(n)
    factors: dict[str, np.ndarray] = {}
    for f in config.factors:
        if not f.enabled or f.weight == 0.0:
            continue
        value = np.asarray(FACTORS[f.name].fn(inputs, f.params), dtype=np.float64)
        if value.shape != (n,):
            value = np.full(n, value)
        # Factors are finite by construction; this guards a future factor that is not.
        value = np.minimum(np.maximum(np.where(np.isfinite(value), value, 1.0), 0.0), 1e6)
        factors[f.name] = value
        with np.errstate(divide="ignore"):
            log_final += f.weight * np.log(value)  # log 0 = -inf: the veto
    final = np.exp(np.minimum(log_final, _LOG_MAX))
    return Scored(final, factors)


class Scorer:
    """Scores candidate rows with the factor pipeline; hot-reloads its scoring.json."""

    def __init__(self, path: str | Path | None = None, *, check_every: float = 1.0,
                 config: ScoringConfig | None = None) -> None:
        """``path`` None: the shipped defaults (or ``config``), never reloaded. Otherwise the
        file is watched: stat at most every ``check_every`` seconds, re-read on a change."""
        self._path = Path(path).expanduser() if path is not None else None
        self._check_every = check_every
        self._config = config or ScoringConfig.defaults()
        self._stamp: tuple[int, int, int] | None = None  # the version last read (good or bad)
        self._missing = False
        self._next_check = 0.0
        self._lock = threading.Lock()
        self._scaled: tuple[ScoringConfig, str, ScoringConfig] | None = None
        self._meta_cache: dict[int, tuple[str, dict[str, Any]]] = {}
        if self._path is not None:
            self._check()

    @property
    def path(self) -> Path | None:
        """The watched scoring.json, if any."""
        return self._path

    @property
    def config(self) -> ScoringConfig:
        """The config in force (re-checks the file when ``check_every`` has passed)."""
        if self._path is not None and time.monotonic() >= self._next_check:
            self._check()
        return self._config

    def reload(self) -> ScoringConfig:
        """Check the file now, whatever ``check_every`` says; the config in force after."""
        if self._path is not None:
            self._check(force=True)
        return self._config

    def _check(self, force: bool = False) -> None:
        # One thread checks; readers arriving meanwhile keep using the current config.
        if not self._lock.acquire(blocking=force):
            return
        try:
            self._next_check = time.monotonic() + self._check_every
            path = self._path
            assert path is not None
            try:
                st = os.stat(path)
            except FileNotFoundError:
                if not self._missing:
                    log.warning("scoring config %s is missing: using the defaults", path)
                    self._missing, self._stamp = True, None
                    self._config = ScoringConfig.defaults()
                return
            except OSError as exc:
                log.warning("scoring config %s cannot be read (%s): keeping the config in "
                            "force", path, exc)
                return
            stamp = (st.st_mtime_ns, st.st_size, st.st_ino)
            if stamp == self._stamp:
                return
            self._stamp = stamp
            self._missing = False
            try:
                text = path.read_text("utf-8")
                config = ScoringConfig.from_json(text, str(path))
            except (OSError, UnicodeDecodeError, ScoringConfigError) as exc:
                log.warning("scoring config not loaded, keeping the last good one (%s): %s",
                            self._config.source, exc)
                return
            self._config = config
            log.info("scoring config loaded from %s", path)
        finally:
            self._lock.release()

    def _rescaled(self, config: ScoringConfig, scale: str) -> ScoringConfig:
        # Cached: a per-call relevance_scale must not re-validate the config on every query.
        cached = self._scaled
        if cached is not None and cached[0] is config and cached[1] == scale:
            return cached[2]
        out = config.with_factor("Relevance", scale=scale)
        self._scaled = (config, scale, out)
        return out

    def score(self, state: State, rows: np.ndarray, relevance: np.ndarray, *,
              now: float | None = None, affect: Affect | None = None,
              extra: Mapping[str, np.ndarray] | None = None,
              relevance_scale: str | None = None) -> Scored:
        """Final scores of ``rows`` (int row numbers of ``state``), vectorised over rows.

        ``relevance``: one value per row — a cosine in [−1, 1] (the default Relevance scale
        "cosine" maps it to (cos + 1)/2) or, with ``relevance_scale="unit"`` (or the factor's
        ``scale: unit``), an already fused relevance in [0, 1] taken as is.
        ``affect``: the query's affect (default neutral). ``extra``: per-row signals the
        caller knows ("competitors", "prediction", "surprise", "integration",
        "epistemic_debt", "surprise_domain", "realm_reliability"); a missing one is neutral.
        """
        config = self.config
        if relevance_scale is not None:
            config = self._rescaled(config, relevance_scale)
        rows = np.asarray(rows, dtype=np.int64).reshape(-1)
        rel = np.asarray(relevance, dtype=np.float64).reshape(-1)
        if rel.shape != rows.shape:
            raise ConfigError(f"relevance has {rel.size} values for {rows.size} rows; give "
                              "one per row")
        if rows.size and (rows.min() < 0 or rows.max() >= state.n_rows):
            raise ConfigError(f"row numbers must be in [0, {state.n_rows}); got "
                              f"{int(rows.min())}..{int(rows.max())}")
        now = time.time() if now is None else float(now)
        if not math.isfinite(now):
            raise ConfigError(f"now must be a finite time in seconds, got {now!r}")
        inputs = Inputs(state, rows, rel, now, affect or Affect(),
                        _extra_arrays(extra, rows.size), self._meta_cache)
        return combine(config, inputs)
