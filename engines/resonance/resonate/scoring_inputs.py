"""What the scoring factors read: the candidate rows' columns, gathered once and lazily.

`Inputs` pulls each column of the `State` for the scored rows only when a factor first asks
for it, so a disabled factor costs nothing: the meta JSON is decoded (and cached by the
Scorer across calls) only if a meta-reading factor is on, the access histories are laid end to
end in flat arrays only if ACT-R or Spacing is. Also here: the query's `Affect`, the ACT-R
base-level activation with Petrov's approximation, and `memory.tier_of` over arrays.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from itertools import chain
from operator import itemgetter
from typing import TYPE_CHECKING, Any

import numpy as np

from ..memory import DAY, DECAY_RATES, PRIOR_VAR, Kind, Tier
from .scoring_cache import AccessHistories, MetaCache, SourceCodes

if TYPE_CHECKING:
    from ..store.state import State

__all__ = [
    "EXTRA_KEYS",
    "RATES",
    "TIERS",
    "Affect",
    "Inputs",
    "affect_values",
    "base_level_activation",
    "base_level_flat",
    "clip",
    "finite_or",
    "kernels",
    "tier_index",
]

# Keys of `extra` the factors read (one float per row each); anything else is a caller typo.
EXTRA_KEYS = (
    "competitors", "prediction", "surprise", "integration", "epistemic_debt",
    "surprise_domain", "realm_reliability",
)
RATES = np.array([DECAY_RATES[Kind(i)] for i in range(len(Kind))])
TIERS = (Tier.HOT, Tier.WARM, Tier.COOL, Tier.COLD)
# The State's numeric columns as `kernels.scoring.gather_columns` reads them in place
_TYPECODES = ("d", "I", "I", "d", "d", "d")
_ARRAYS = (array,) * len(_TYPECODES)


@dataclass(frozen=True)
class Affect:
    """The query's affect (Chetana's Bhava when the soul has it): valence [−1, 1], arousal,
    frustration and confidence [0, 1]. Out-of-range values are clipped, NaN read as neutral."""

    valence: float = 0.0
    arousal: float = 0.0
    frustration: float = 0.0
    confidence: float = 0.5


_KERNELS: Any = None


def kernels() -> Any:
    """The scoring kernels (kernels/scoring.py), imported on first use: numba loads only
    when a query is scored."""
    global _KERNELS
    if _KERNELS is None:
        from ..kernels import scoring

        _KERNELS = scoring
    return _KERNELS


def finite_or(x: np.ndarray, neutral: float) -> np.ndarray:
    """``x`` as float64 with every NaN/Inf replaced by ``neutral``."""
    x = np.asarray(x, dtype=np.float64)
    return np.where(np.isfinite(x), x, neutral)


def clip(x: Any, lo: float, hi: float) -> np.ndarray:
    """np.clip for small arrays, without its ~10 µs of dispatch overhead."""
    return np.minimum(np.maximum(x, lo), hi)


def _number(value: Any, neutral: float) -> float:
    """A meta value as a finite float (bools count as 0/1); anything else is ``neutral``."""
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, int | float):
        try:
            v = float(value)
        except OverflowError:  # an int beyond float range
            return neutral
        return v if math.isfinite(v) else neutral
    return neutral


def base_level_activation(created: np.ndarray, history: list[list[float]],
                          access_count: np.ndarray, now: float, *, decay: float = 0.5,
                          min_age: float = 60.0) -> np.ndarray:
    """ACT-R base-level activation ``B = ln Σ_j t_j^−d`` per row, ages ``t_j`` in days.

    The presentations are the creation plus every access; ages are floored at ``min_age``
    seconds (a memory touched this instant would otherwise have infinite activation). The
    state keeps only the latest accesses; when ``access_count`` exceeds the kept history, the
    ``m`` older accesses are summed with Petrov's (2006) hybrid approximation: they are taken
    as spread evenly between the oldest kept access (age ``t_k``) and the creation (age
    ``t_n``), whose integral gives ``m·(t_n^(1−d) − t_k^(1−d)) / ((1−d)(t_n − t_k))``.
    """
    counts = np.fromiter((len(h) for h in history), np.int64, len(history))
    flat = np.fromiter(chain.from_iterable(history), np.float64, int(counts.sum()))
    return base_level_flat(np.asarray(created, np.float64), flat, counts,
                       np.asarray(access_count, np.float64), now, decay, min_age)


def base_level_flat(created: np.ndarray, flat: np.ndarray, counts: np.ndarray,
                access_count: np.ndarray, now: float, decay: float,
                min_age: float) -> np.ndarray:
    """`base_level_activation` over the histories laid end to end (``counts`` per row):
    ages in days floored at ``min_age`` seconds (an unreadable time counts as a presentation
    a minute ago), one kernel call (kernels/scoring.py)."""
    out = np.empty(len(created))
    kernels().base_level(np.ascontiguousarray(created, np.float64), np.ascontiguousarray(flat, np.float64),
               np.ascontiguousarray(counts, np.int64),
               np.ascontiguousarray(access_count, np.float64), float(now), float(decay),
               min_age / DAY, float(DAY), out)
    return out


def tier_index(idle_days: np.ndarray, confidence: np.ndarray) -> np.ndarray:
    """`memory.tier_of` over arrays: 0 hot, 1 warm, 2 cool, 3 cold (index into TIERS)."""
    idle = finite_or(idle_days, np.inf)
    out = np.where(idle < 1.0, 0, np.where(idle < 7.0, 1, 2))
    return np.where((finite_or(confidence, 0.0) < 0.1) | (idle >= 30.0), 3, out)


class Inputs:
    """What the factors may read about the candidate rows, gathered once and lazily (each
    on its first read: plain attributes, not `functools.cached_property`, whose lock and
    descriptor call cost more than a few rows' gathering)."""

    def __init__(self, state: State, rows: np.ndarray, relevance: np.ndarray, now: float,
                 affect: Affect, extra: Mapping[str, np.ndarray],
                 meta_cache: MetaCache | None = None,
                 histories: AccessHistories | None = None,
                 sources: SourceCodes | None = None) -> None:
        self.state = state
        self.rows = rows
        self.row_list: list[int] = rows.tolist()
        self.relevance = relevance
        self.now = now
        self.affect = affect
        self.extra = extra
        self._numbers: dict[tuple[str, float], np.ndarray] = {}
        # the rows' decoded metas and their key sets: a Scorer keeps one across calls
        self.meta_cache = MetaCache() if meta_cache is None else meta_cache
        self.histories = AccessHistories() if histories is None else histories
        self.sources = SourceCodes() if sources is None else sources
        self._kind: np.ndarray | None = None
        self._gathered: np.ndarray | None = None
        self._history: tuple[np.ndarray, np.ndarray] | None = None
        self._metas: list[tuple[int, dict[str, Any]]] | None = None
        self._meta_keys: frozenset[str] | None = None
        self._decayed: tuple[np.ndarray, ...] | None = None
        self._affect_values: tuple[float, float, float, float] | None = None

    def values(self, column: Any) -> tuple[Any, ...]:
        """The rows' entries of a State column, in row order."""
        rows = self.row_list
        if len(rows) < 2:  # itemgetter of one key returns the value, not a tuple
            return (column[rows[0]],) if rows else ()
        return itemgetter(*rows)(column)

    def _columns(self) -> None:
        """Gather the rows' kind and numeric columns (`kind`, `numbers`), read in the
        State's own arrays by one kernel call (it holds the GIL: no writer appends
        meanwhile, and no view of them outlives it), or a boxed Python value each for
        columns of another type or rows past them."""
        st = self.state
        columns = (st.created, st.access_count, st.n, st.last_active, st.mu, st.var)
        n = len(self.row_list)
        numbers, kind = np.empty((len(columns), n)), np.empty(n, np.int64)
        if (not (isinstance(st.kind, bytearray) and all(map(isinstance, columns, _ARRAYS))
                 and tuple(c.typecode for c in columns) == _TYPECODES)
                or not kernels().gather_columns(*columns, st.kind,
                                                np.ascontiguousarray(self.rows, np.int64),
                                                numbers, kind)):
            numbers = np.array([self.values(c) for c in columns], np.float64).reshape(len(columns), n)
            kind = np.array(self.values(st.kind), np.int64)
        self._gathered, self._kind = numbers, kind

    @property
    def kind(self) -> np.ndarray:
        """Each row's kind code (int64)."""
        if self._kind is None:
            self._columns()
        return self._kind

    @property
    def numbers(self) -> np.ndarray:
        """The rows' numeric columns the factors read, gathered in one (6, rows) array:
        created, access count, observations, last active, mu, var."""
        if self._gathered is None:
            self._columns()
        return self._gathered

    @property
    def access_count(self) -> np.ndarray:
        return self.numbers[1]

    @property
    def observations(self) -> np.ndarray:
        return self.numbers[2]

    @property
    def created(self) -> np.ndarray:
        return self.numbers[0]

    @property
    def history(self) -> tuple[np.ndarray, np.ndarray]:
        """(every row's kept access times laid end to end, how many per row)."""
        if self._history is None:
            self._history = self.histories.of(self.state, self.rows, self.numbers[1])
        return self._history

    @property
    def meta_keys(self) -> frozenset[str]:
        """Every key some row's meta holds: a factor whose key no row has is neutral."""
        if self._meta_keys is None:
            self._meta_keys = self.meta_cache.keys(self.state, self.rows)
        return self._meta_keys

    def has(self, key: str, *, meta: bool = True) -> bool:
        """Whether any row has the signal ``key``: given in ``extra``, or (``meta``) in a
        row's meta. Without it, the factors that read it are neutral for every row."""
        return key in self.extra or (meta and key in self.meta_keys)

    @property
    def metas(self) -> list[tuple[int, dict[str, Any]]]:
        """(position, meta) of the rows that have a non-empty meta; the others have none."""
        if self._metas is None:
            self._metas = self.meta_cache.metas(self.state, self.rows)
        return self._metas

    def meta_number(self, key: str, neutral: float) -> np.ndarray:
        """``meta[key]`` per row as a finite float; ``neutral`` where missing or not a number."""
        cache = self._numbers
        if (key, neutral) not in cache or neutral != neutral:  # NaN: never equal as a key
            out = np.full(len(self.row_list), neutral)
            if key in self.meta_keys:
                found = [(i, m[key]) for i, m in self.metas if key in m]
                if found:
                    at, raw = zip(*found, strict=True)
                    out[list(at)] = [_number(v, neutral) for v in raw]
            cache[(key, neutral)] = out
        return cache[(key, neutral)]

    def meta_lookup(self, key: str, table: Mapping[str, float], default: float) -> np.ndarray:
        """``table[str(meta[key]).lower()]`` per row; ``default`` where missing or unknown."""
        out = np.full(len(self.row_list), float(default))
        if key in self.meta_keys:
            for i, m in self.metas:
                if key in m:
                    out[i] = table.get(str(m[key]).lower(), default)
        return out

    def signal(self, key: str, neutral: float, *, meta: bool = True) -> np.ndarray:
        """A per-row signal: ``extra[key]`` if the caller gave it, else ``meta[key]``."""
        if key in self.extra:
            return finite_or(self.extra[key], neutral)
        if meta:
            return self.meta_number(key, neutral)
        return np.full(len(self.row_list), neutral)

    def decayed(self) -> tuple[np.ndarray, ...]:
        """(idle days, decayed confidence mean, its variance, tier index, the kind clipped to
        the known kinds), one kernel call."""
        if self._decayed is None:
            n = len(self.row_list)
            idle, mu, var = np.empty(n), np.empty(n), np.empty(n)
            tier, kind = np.empty(n, np.int64), np.empty(n, np.int64)
            numbers = self.numbers
            kernels().decayed(numbers[3], self.kind, numbers[4], numbers[5], RATES,
                              float(self.now), float(DAY), float(PRIOR_VAR), idle, mu, var, tier,
                              kind)
            self._decayed = (idle, mu, var, tier, kind)
        return self._decayed

    @property
    def kind_index(self) -> np.ndarray:
        """Each row's kind clipped to the known kinds: an index into a per-kind table."""
        return self.decayed()[4]

    @property
    def tier(self) -> np.ndarray:
        """Each row's tier index (`tier_index` of its idle days and decayed confidence)."""
        return self.decayed()[3]

    @property
    def affect_values(self) -> tuple[float, float, float, float]:
        """The query's `affect_values` (an `Affect` is frozen: the same few come back query
        after query, worked out once each)."""
        if self._affect_values is None:
            self._affect_values = (_affect_values(self.affect) if type(self.affect) is Affect
                                   else affect_values(self.affect))
        return self._affect_values

    @property
    def idle_days(self) -> np.ndarray:
        """Days since each row was last active (an unreadable time reads as now)."""
        return self.decayed()[0]

    @property
    def confidence(self) -> tuple[np.ndarray, np.ndarray]:
        """The decayed (mean, variance), as `Confidence.decay` computes them."""
        decayed = self.decayed()
        return decayed[1], decayed[2]


def affect_values(affect: Affect) -> tuple[float, float, float, float]:
    """(valence, arousal, frustration, confidence), clipped, non-finite read as neutral."""
    def clip(v: float, lo: float, hi: float, neutral: float) -> float:
        v = _number(v, neutral)
        return min(max(v, lo), hi)
    return (clip(affect.valence, -1.0, 1.0, 0.0), clip(affect.arousal, 0.0, 1.0, 0.0),
            clip(affect.frustration, 0.0, 1.0, 0.0), clip(affect.confidence, 0.0, 1.0, 0.5))


_affect_values = lru_cache(maxsize=256)(affect_values)
