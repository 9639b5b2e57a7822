"""Scoring: the factor pipeline that turns a candidate's relevance into its final score.

    final = Π_i f_i ** w_i        over the enabled factors i (weight 0: the factor is skipped)

Each factor `f_i` (scoring_factors.py) is a finite value >= 0 with 1.0 neutral, and `w_i` its
weight in [0, 10]. The product, not the seed page's sum: a factor can veto (f = 0 gives 0 — a
zero relevance never surfaces, whatever the boosts), a neutral factor changes nothing, and a
weight is an exponent, so `w = 2` doubles a factor's effect on the log score and `w = 0.5`
halves it. It is computed in the log domain, so no product over- or underflows: the result is
finite for any input.

The weights and every factor's parameters live in `scoring.json` (the shipped defaults are
`engines/resonance/data/scoring.json`; parsing and validation in scoring_config.py, the
row columns the factors read in scoring_inputs.py); a user file lists only what it changes.
`Scorer(path)`
re-reads the file when its mtime, size or inode change (checked at most every `check_every`
seconds), keeps the last good config when a version is malformed and logs why once per bad
version, and falls back to the defaults (with a warning) while the file is missing.
"""

from __future__ import annotations

import logging
import math
import os
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import ConfigError
from ..memory import DAY, PRIOR_VAR, Kind
from .scoring_cache import AccessHistories, MetaCache, SourceCodes
from .scoring_config import FactorConfig, ScoringConfig, ScoringConfigError, unknown_name
from .scoring_factors import FACTORS, kind_values, tier_values
from .scoring_inputs import EXTRA_KEYS, RATES, TIERS, Affect, Inputs, kernels

if TYPE_CHECKING:
    from ..store.state import State

__all__ = [
    "Affect",
    "FactorConfig",
    "Scored",
    "Scorer",
    "ScoringConfig",
    "ScoringConfigError",
    "combine",
]

log = logging.getLogger("soul.engines.resonance.resonate.scoring")

_NEUTRAL = Affect()  # the query's affect when none is given
_LOG_MAX = 700.0  # exp(700) ~ 1e304: the largest final score, so it stays a finite float64


@dataclass(frozen=True)
class Scored:
    """Final scores and, per enabled factor, its value for every row (for explain=True)."""

    final: np.ndarray
    factors: dict[str, np.ndarray]

    def explain(self, i: int) -> dict[str, float]:
        """Every factor's value for row ``i`` of the scored rows, plus ``final``."""
        return {**{k: float(v[i]) for k, v in self.factors.items()}, "final": float(self.final[i])}


def _extra_arrays(extra: Mapping[str, Any] | None, n: int) -> dict[str, np.ndarray]:
    out: dict[str, np.ndarray] = {}
    for key, value in (extra or {}).items():
        if key not in EXTRA_KEYS:
            raise ConfigError(unknown_name("extra signal", key, list(EXTRA_KEYS)))
        arr = np.asarray(value, dtype=np.float64)
        if arr.shape != (n,):
            raise ConfigError(f"extra[{key!r}] has shape {arr.shape}; it needs one value per "
                              f"scored row, shape ({n},)")
        out[key] = arr
    return out


@dataclass(frozen=True)
class _Plan:
    """How `combine` evaluates a config's enabled factors with a weight (worked out once per
    config: a config is read-only). The `kernels.scoring.CORE` factors among them are
    computed by one kernel call (``slots``: each one's position in ``names``, -1 if off;
    ``params``, ``kind_table``, ``tier_table``: what it needs of their params); the others
    by their functions (``others``: position, function, params, and the signals without
    which it is 1.0 for every row, None if it must be evaluated)."""

    names: tuple[str, ...]
    weights: tuple[float, ...]
    others: tuple[tuple[int, Any, Any, frozenset[str] | None], ...]
    slots: tuple[int, ...]
    core: tuple[int, ...]  # the positions in ``slots`` that are on
    params: np.ndarray
    kind_table: np.ndarray
    tier_table: np.ndarray
    _layouts: dict[tuple[int, ...], tuple[list[int], np.ndarray, np.ndarray]] = field(
        default_factory=dict, repr=False)

    def layout(self, moving: tuple[int, ...]) -> tuple[list[int], np.ndarray, np.ndarray]:
        """For the factors ``moving`` (positions, in order; the others are 1.0 for every
        row): each factor's row in the table (the moving first), the core factors' rows
        (`kernels.scoring.core`'s slots) and the moving factors' weights. The same few sets
        come back query after query: each is worked out once."""
        kept = self._layouts.get(moving)
        if kept is None:
            at = [0] * len(self.names)
            for row, i in enumerate(moving):
                at[i] = row
            rest = [i for i in range(len(self.names)) if i not in moving]
            for row, i in enumerate(rest, len(moving)):
                at[i] = row
            if len(self._layouts) >= 64:
                self._layouts.clear()
            kept = self._layouts[moving] = (
                at, np.array([at[i] if i >= 0 else -1 for i in self.slots], np.int64),
                np.array([self.weights[i] for i in moving], np.float64))
        return kept


_PLANS: dict[int, tuple[ScoringConfig, _Plan]] = {}


def _plan(config: ScoringConfig) -> _Plan:
    hit = _PLANS.get(id(config))
    if hit is None or hit[0] is not config:
        if len(_PLANS) > 64:
            _PLANS.clear()
        hit = _PLANS[id(config)] = (config, _make_plan(config))
    return hit[1]


def _make_plan(config: ScoringConfig) -> _Plan:
    core_names = kernels().CORE
    enabled = [f for f in config.factors if f.enabled and f.weight != 0.0]
    slots = [-1] * len(core_names)
    others = []
    params = np.zeros(12)
    kind_table, tier_table = np.ones(len(Kind)), np.ones(len(TIERS))
    for i, f in enumerate(enabled):
        if f.name not in core_names:
            spec = FACTORS[f.name]
            idle = spec.idle(f.params) if spec.idle is not None else None
            # None: always evaluated; else the signals without which it is 1.0 for every row
            others.append((i, spec.fn, f.params, spec.signals if idle == 1.0 else None))
            continue
        slots[core_names.index(f.name)] = i
        p = f.params
        if f.name == "Relevance":
            params[0] = 1.0 if p["scale"] == "cosine" else 0.0
        elif f.name == "ActR":  # as `scoring_factors.actr` passes them
            params[1:6] = (float(p["decay"]), p["min_age_seconds"] / DAY, float(p["offset"]),
                           float(p["width"]), float(p["floor"]))
        elif f.name == "Strength":
            params[6:8] = float(p["floor"]), float(p["half_observations"])
        elif f.name == "Confidence":
            params[8:10] = float(p["floor"]), float(p["doubt"])
        elif f.name == "Spacing":
            params[10:12] = float(p["floor"]), float(p["min_accesses"])
        elif f.name == "Kind":
            kind_table = kind_values(p)
        else:
            tier_table = tier_values(p)
    return _Plan(tuple(f.name for f in enabled), tuple(f.weight for f in enabled),
                 tuple(others), tuple(slots), tuple(sorted(i for i in slots if i >= 0)), params,
                 kind_table, tier_table)


def combine(config: ScoringConfig, inputs: Inputs) -> Scored:
    """Evaluate the enabled factors and their weighted product (in the log domain)."""
    plan = _plan(config)
    n = len(inputs.row_list)
    names = plan.names
    # One table of every factor's values (factor, row), and one array operation per stage
    # over all of them, not one per factor (a few candidates: numpy's per-call cost was most
    # of the time), with the same arithmetic: each value guarded, its log times its weight,
    # summed in factor order (row after row, as a loop over the factors did), exp of the
    # sum. A factor with one value for every row (most are, for memories without the signal
    # they read) is left out of the sum when that value is 1.0 (log 1 = 0 exactly: adding
    # it changes no bit). The others ("moving") take the table's first rows, in factor
    # order, so the guard and the log run over one contiguous block.
    values: list[Any] = [None] * len(names)
    moving = list(plan.core)
    neutral = []
    present: set[str] | None = None  # the signals some row has (meta keys, extra)
    for i, fn, params, signals in plan.others:
        if signals is not None:
            if present is None:
                present = inputs.meta_keys | inputs.extra.keys()
            if signals.isdisjoint(present):  # what it would give: 1.0 for every row
                neutral.append(i)
                continue
        value = values[i] = fn(inputs, params)
        if isinstance(value, float) and value == 1.0:
            neutral.append(i)
        else:
            moving.append(i)
    if plan.core and len(moving) > len(plan.core):
        moving.sort()
    m = len(moving)
    at, slots, weights = plan.layout(tuple(moving))
    table = np.empty((len(names), n))
    if neutral:
        table[m:] = 1.0
    for i in moving:
        if values[i] is not None:
            table[at[i]] = values[i]
    if plan.core:
        flat, counts = inputs.history
        kernels().core(np.ascontiguousarray(inputs.relevance, np.float64), inputs.numbers,
                       inputs.kind, flat, counts, RATES, plan.params, plan.kind_table,
                       plan.tier_table, float(inputs.now), DAY, PRIOR_VAR, table, slots)
    rows = list(table)
    factors = dict(zip(names, map(rows.__getitem__, at), strict=True))
    if not moving:
        return Scored(np.ones(n), factors)
    block = table[:m]
    # Factors are finite by construction; this guards a future factor that is not:
    # non-finite reads 1, then clipped to [0, 1e6] (kernels/scoring.py).
    if kernels().guard_rows(table, m):
        logs = np.log(block)
    else:
        with np.errstate(divide="ignore"):
            logs = np.log(block)  # log 0 = -inf: the veto
    log_final = np.empty(n)
    kernels().weighted_sums(logs, weights, _LOG_MAX, log_final)
    return Scored(np.exp(log_final), factors)


class Scorer:
    """Scores candidate rows with the factor pipeline; hot-reloads its scoring.json."""

    def __init__(self, path: str | Path | None = None, *, check_every: float = 1.0,
                 config: ScoringConfig | None = None, optional: bool = False) -> None:
        """``path`` None: the shipped defaults (or ``config``), never reloaded. Otherwise the
        file is watched: stat at most every ``check_every`` seconds, re-read on a change —
        including a file created after the scorer (a field's own scoring.json). ``optional``:
        a file that was never there is the normal case (the defaults, no warning); one that
        goes away after it was read is warned about either way."""
        self._path = Path(path).expanduser() if path is not None else None
        self._check_every = check_every
        self._config = config or ScoringConfig.defaults()
        self._stamp: tuple[int, int, int] | None = None  # the version last read (good or bad)
        self._missing = optional  # optional: absent from the start, without a word
        self._next_check = 0.0
        self._lock = threading.Lock()
        self._scaled: tuple[ScoringConfig, str, ScoringConfig] | None = None
        self._meta_cache = MetaCache()
        self._histories = AccessHistories()
        self._sources = SourceCodes()
        if self._path is not None:
            self._check()

    def prepare(self, state: State, accessed: Sequence[int] = ()) -> None:
        """After a write to ``state``: what the next query would read first of the new rows
        (their metas' keys) and of the ``accessed`` rows (their access histories, as the
        accesses just logged left them) is read now, in the writer's thread
        (`MetaCache.catch_up`, `AccessHistories.catch_up`)."""
        self._meta_cache.catch_up(state)
        if accessed:
            self._histories.catch_up(state, accessed)

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
        ``scale: unit``), an already fused relevance >= 0 taken as is (not capped at 1, so
        boosts past 1 keep their order). Full resonance passes its fused score with "unit".
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
        now = time.time() if now is None else float(now)
        if not math.isfinite(now):
            raise ConfigError(f"now must be a finite time in seconds, got {now!r}")
        inputs = Inputs(state, rows, rel, now, affect or _NEUTRAL,
                        _extra_arrays(extra, rows.size), self._meta_cache, self._histories,
                        self._sources)
        row_list = inputs.row_list  # min/max of a few ints: cheaper on the list than numpy's
        if row_list and (min(row_list) < 0 or max(row_list) >= state.n_rows):
            raise ConfigError(f"row numbers must be in [0, {state.n_rows}); got "
                              f"{min(row_list)}..{max(row_list)}")
        return combine(config, inputs)
