"""The scoring factors: one pure function per factor over the candidate rows' columns.

Every factor maps what is known about a row (its columns in the `State`, its `meta`, the
caller's per-row `extra` arrays, the query's `Affect`) to a finite value >= 0, where 1.0 is
neutral. `scoring.Scorer` combines them as a weighted product (docs/memory.md, "Scoring").
Missing information always gives the neutral value, so a field that never records, say,
arousal is scored exactly as if the Arousal factor were off.

`Inputs` gathers the columns once per call and lazily: a factor that is disabled never
decodes a row's meta JSON or walks its access history.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cached_property
from itertools import chain
from operator import itemgetter
from typing import TYPE_CHECKING, Any

import numpy as np

from .memory import DAY, DECAY_RATES, PRIOR_VAR, Kind, Tier

if TYPE_CHECKING:
    from .scoring import Affect
    from .state import State

__all__ = [
    "EXTRA_KEYS",
    "FACTORS",
    "Inputs",
    "base_level_activation",
    "check_params",
    "tier_index",
]

# Keys of `extra` the factors read (one float per row each); anything else is a caller typo.
EXTRA_KEYS = (
    "competitors", "prediction", "surprise", "integration", "epistemic_debt",
    "surprise_domain", "realm_reliability",
)
_RATES = np.array([DECAY_RATES[Kind(i)] for i in range(len(Kind))])
_META_CACHE = 65_536  # decoded metas kept per Scorer
TIERS = (Tier.HOT, Tier.WARM, Tier.COOL, Tier.COLD)


def _finite(x: np.ndarray, neutral: float) -> np.ndarray:
    """``x`` as float64 with every NaN/Inf replaced by ``neutral``."""
    x = np.asarray(x, dtype=np.float64)
    return np.where(np.isfinite(x), x, neutral)


def _clip(x: Any, lo: float, hi: float) -> np.ndarray:
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
    return _base_level(np.asarray(created, np.float64), flat, counts,
                       np.asarray(access_count, np.float64), now, decay, min_age)


def _base_level(created: np.ndarray, flat: np.ndarray, counts: np.ndarray,
                access_count: np.ndarray, now: float, decay: float,
                min_age: float) -> np.ndarray:
    """`base_level_activation` over the histories laid end to end (``counts`` per row)."""
    n = len(created)
    if n == 0:
        return np.zeros(0)
    floor = min_age / DAY
    seg = np.repeat(np.arange(n), counts)
    # fmax ignores NaN: an unreadable time counts as a presentation a minute ago.
    age_created = np.fmax((now - _finite(created, now)) / DAY, floor)
    ages = np.fmax((now - flat) / DAY, floor)
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        total = age_created ** -decay + np.bincount(seg, weights=ages ** -decay, minlength=n)
        older = np.maximum(_finite(access_count, 0.0) - counts, 0.0)
        if older.any():
            t_k = np.full(n, floor)
            np.maximum.at(t_k, seg, ages)  # the oldest kept access
            t_n = np.maximum(age_created, t_k)
            span = t_n - t_k
            e = 1.0 - decay
            spread = (t_n ** e - t_k ** e) / (e * np.where(span > 0, span, 1.0))
            # All older accesses at one moment (span 0): each counts t_k^−d.
            each = np.where(span > 1e-12 * t_n, spread, t_k ** -decay)
            total = total + older * _finite(each, 0.0)
    return np.log(_clip(_finite(total, 0.0), 1e-300, 1e300))


def tier_index(idle_days: np.ndarray, confidence: np.ndarray) -> np.ndarray:
    """`memory.tier_of` over arrays: 0 hot, 1 warm, 2 cool, 3 cold (index into TIERS)."""
    idle = _finite(idle_days, np.inf)
    out = np.where(idle < 1.0, 0, np.where(idle < 7.0, 1, 2))
    return np.where((_finite(confidence, 0.0) < 0.1) | (idle >= 30.0), 3, out)


class Inputs:
    """What the factors may read about the candidate rows, gathered once and lazily."""

    def __init__(self, state: State, rows: np.ndarray, relevance: np.ndarray, now: float,
                 affect: Affect, extra: Mapping[str, np.ndarray],
                 meta_cache: dict[int, tuple[str, dict[str, Any]]] | None = None) -> None:
        self.state = state
        self.rows = rows
        self.row_list: list[int] = rows.tolist()
        self.relevance = relevance
        self.now = now
        self.affect = affect
        self.extra = extra
        self._numbers: dict[tuple[str, float], np.ndarray] = {}
        # row -> (its meta text, decoded): a Scorer keeps one across calls (meta never changes)
        self.meta_cache = {} if meta_cache is None else meta_cache

    def _column(self, column: Any, dtype: type = np.float64) -> np.ndarray:
        rows = self.row_list
        if len(rows) < 2:  # itemgetter of one key returns the value, not a tuple
            return np.array([column[r] for r in rows], dtype)
        return np.array(itemgetter(*rows)(column), dtype)

    @cached_property
    def kind(self) -> np.ndarray:
        return self._column(self.state.kind, np.int64)

    @cached_property
    def access_count(self) -> np.ndarray:
        return self._column(self.state.access_count)

    @cached_property
    def created(self) -> np.ndarray:
        return self._column(self.state.created)

    @cached_property
    def history(self) -> tuple[np.ndarray, np.ndarray]:
        """(every row's kept access times laid end to end, how many per row)."""
        accessed = self.state.accessed
        # tuple() copies: a snapshot, in case a writer appends to a row's history meanwhile.
        hists = [tuple(accessed.get(r, ())) for r in self.row_list]
        counts = np.fromiter(map(len, hists), np.int64, len(hists))
        return np.fromiter(chain.from_iterable(hists), np.float64, int(counts.sum())), counts

    @cached_property
    def metas(self) -> list[tuple[int, dict[str, Any]]]:
        """(position, meta) of the rows that have a non-empty meta; the others have none."""
        raw, cache = self.state.meta, self.meta_cache
        out = []
        for i, r in enumerate(self.row_list):
            text = raw[r]
            if not text:
                continue
            hit = cache.get(r)
            if hit is not None and hit[0] is text:  # the row's meta string is never replaced
                m = hit[1]
            else:
                try:
                    m = json.loads(text)
                except ValueError:  # undecodable meta: read as none rather than fail a recall
                    m = None
                if not isinstance(m, dict):
                    m = {}
                if len(cache) >= _META_CACHE:
                    cache.clear()
                cache[r] = (text, m)
            if m:
                out.append((i, m))
        return out

    def meta_number(self, key: str, neutral: float) -> np.ndarray:
        """``meta[key]`` per row as a finite float; ``neutral`` where missing or not a number."""
        cache = self._numbers
        if (key, neutral) not in cache or np.isnan(neutral):
            out = np.full(len(self.row_list), neutral)
            for i, m in self.metas:
                if key in m:
                    out[i] = _number(m[key], neutral)
            cache[(key, neutral)] = out
        return cache[(key, neutral)]

    def meta_lookup(self, key: str, table: Mapping[str, float], default: float) -> np.ndarray:
        """``table[str(meta[key]).lower()]`` per row; ``default`` where missing or unknown."""
        out = np.full(len(self.row_list), float(default))
        for i, m in self.metas:
            if key in m:
                out[i] = table.get(str(m[key]).lower(), default)
        return out

    def signal(self, key: str, neutral: float, *, meta: bool = True) -> np.ndarray:
        """A per-row signal: ``extra[key]`` if the caller gave it, else ``meta[key]``."""
        if key in self.extra:
            return _finite(self.extra[key], neutral)
        if meta:
            return self.meta_number(key, neutral)
        return np.full(len(self.row_list), neutral)

    @cached_property
    def idle_days(self) -> np.ndarray:
        last = _finite(self._column(self.state.last_active), self.now)
        return np.maximum(self.now - last, 0.0) / DAY

    @cached_property
    def confidence(self) -> tuple[np.ndarray, np.ndarray]:
        """The decayed (mean, variance), as `Confidence.decay` computes them."""
        keep = np.exp(-_RATES[_clip(self.kind, 0, len(_RATES) - 1)] * self.idle_days)
        mu = _finite(self._column(self.state.mu), 0.0) * keep
        var = PRIOR_VAR + (np.maximum(_finite(self._column(self.state.var), PRIOR_VAR), 0.0)
                           - PRIOR_VAR) * keep
        return mu, var


Params = Mapping[str, Any]
FactorFn = Callable[[Inputs, Params], np.ndarray]


def relevance(x: Inputs, p: Params) -> np.ndarray:
    """Cosine in [−1, 1] as (cos + 1)/2 (``scale: cosine``), or a [0, 1] relevance as is."""
    r = _finite(x.relevance, 0.0)
    return _clip((r + 1.0) / 2.0 if p["scale"] == "cosine" else r, 0.0, 1.0)


def actr(x: Inputs, p: Params) -> np.ndarray:
    """``floor + (1 − floor)·sigmoid((B + offset)/width)`` over the base-level activation B."""
    flat, counts = x.history
    b = _base_level(x.created, flat, counts, x.access_count, x.now, p["decay"],
                    p["min_age_seconds"])
    z = _clip((b + p["offset"]) / p["width"], -500.0, 500.0)
    return p["floor"] + (1.0 - p["floor"]) / (1.0 + np.exp(-z))


def strength(x: Inputs, p: Params) -> np.ndarray:
    """``floor + (1 − floor)·s``, s = accesses/(accesses + half_accesses): reinforcement by use."""
    a = np.maximum(x.access_count, 0.0)
    return p["floor"] + (1.0 - p["floor"]) * a / (a + p["half_accesses"])


def confidence(x: Inputs, p: Params) -> np.ndarray:
    """``floor + (1 − floor)·clip(mu − doubt·sd)``: the decayed posterior mean, discounted by
    its standard deviation (a lower credible bound) — few observations count for less."""
    mu, var = x.confidence
    c = _clip(mu - p["doubt"] * np.sqrt(var), 0.0, 1.0)
    return p["floor"] + (1.0 - p["floor"]) * c


def surprise(x: Inputs, p: Params) -> np.ndarray:
    """``1 + gain·s``, s in [0, 1] from extra["surprise"] or meta["surprise"]."""
    return 1.0 + p["gain"] * _clip(x.signal("surprise", 0.0), 0.0, 1.0)


def arousal(x: Inputs, p: Params) -> np.ndarray:
    """``1 + gain·a``, the memory's own arousal meta["arousal"] in [0, 1] (flashbulb effect)."""
    return 1.0 + p["gain"] * _clip(x.meta_number("arousal", 0.0), 0.0, 1.0)


def mood_congruence(x: Inputs, p: Params) -> np.ndarray:
    """Bower (1981): ``1 + gain·v_q·v_m + arousal_gain·(1 − 2|a_q − a_m|)`` — memories whose
    stored valence (meta["valence"], [−1, 1]) agrees with the query's are boosted; the arousal
    term counts only for memories that store meta["arousal"]."""
    vq, aq = _affect(x.affect)[:2]
    vm = _clip(x.meta_number("valence", 0.0), -1.0, 1.0)
    am = x.meta_number("arousal", np.nan)
    align = np.where(np.isnan(am), 0.0, 1.0 - 2.0 * np.abs(aq - _clip(am, 0.0, 1.0)))
    return 1.0 + p["gain"] * vq * vm + p["arousal_gain"] * align


def frustration_escalation(x: Inputs, p: Params) -> np.ndarray:
    """A frustrated query (frustration, or negative valence times arousal, above
    ``threshold``) boosts the ``kinds`` that fix things (corrections, preferences, failures,
    approaches): ``1 + gain·e``, e rescaled from [threshold, 1] to [0, 1]."""
    v, a, f, _ = _affect(x.affect)
    e = max(f, max(0.0, -v) * a)
    t = p["threshold"]
    e = max(0.0, (e - t) / (1.0 - t)) if t < 1.0 else 0.0
    table = np.zeros(len(Kind), bool)
    table[[int(Kind[k.upper()]) for k in p["kinds"]]] = True
    boosted = table[_clip(x.kind, 0, len(Kind) - 1)]
    return np.where(boosted, 1.0 + p["gain"] * e, 1.0)


def status(x: Inputs, p: Params) -> np.ndarray:
    """Table lookup of meta["status"] (verified, active, observed, proposed); a missing or
    unknown status reads as ``default``."""
    values, default = p["values"], p["values"][p["default"]]
    return x.meta_lookup("status", values, default)


def epistemic(x: Inputs, p: Params) -> np.ndarray:
    """Table lookup of the memory's source (user, tool, model, autonomous); "user:alice"
    reads as "user"; no source or an unknown one reads as ``unknown``."""
    values, unknown, src = p["values"], p["unknown"], x.state.source
    memo: dict[str | None, float] = {}  # few distinct sources: look each up once
    out = np.empty(len(x.row_list))
    for i, r in enumerate(x.row_list):
        s = src[r]
        if s not in memo:
            low = (s or "").lower()
            memo[s] = values.get(low, values.get(low.split(":", 1)[0], unknown))
        out[i] = memo[s]
    return out


def kind(x: Inputs, p: Params) -> np.ndarray:
    """Table lookup of the memory's kind (correction/preference 1.3 ... episode 0.7)."""
    table = np.full(len(Kind), float(p["other"]))
    for label, value in p["values"].items():
        table[int(Kind[label.upper()])] = value
    return table[_clip(x.kind, 0, len(Kind) - 1)]


def realm_reliability(x: Inputs, p: Params) -> np.ndarray:
    """``1 + gain·(2r − 1)``, r in [0, 1] the realm's reliability: extra["realm_reliability"]
    (e.g. `ThompsonLearner.realm_reliability`), else the ``realms`` table, else 0.5 (neutral)."""
    if "realm_reliability" in x.extra:
        r = _finite(x.extra["realm_reliability"], 0.5)
    else:
        table, realm = p["realms"], x.state.realm
        r = np.array([table.get(realm[row] or "", 0.5) for row in x.row_list], np.float64)
    return 1.0 + p["gain"] * (2.0 * _clip(r, 0.0, 1.0) - 1.0)


def interference(x: Inputs, p: Params) -> np.ndarray:
    """``1/(1 + per_competitor·c)``, c = extra["competitors"] (near neighbours crowding it)."""
    c = np.maximum(x.signal("competitors", 0.0, meta=False), 0.0)
    return 1.0 / (1.0 + p["per_competitor"] * c)


def spacing(x: Inputs, p: Params) -> np.ndarray:
    """``floor + (1 − floor)/(1 + CV)`` of the intervals between presentations, for rows with
    at least ``min_accesses`` accesses (others 1.0). The creation is the first presentation
    when the whole history is kept; when older accesses were dropped, only the kept ones."""
    n = len(x.row_list)
    flat, counts = x.history
    count = x.access_count
    # Presentations: the kept accesses, and the creation unless older accesses were dropped.
    keep = (count <= counts).astype(np.int64)
    lens = keep + counts
    start = np.cumsum(lens) - lens
    seg = np.repeat(np.arange(n), lens)
    times = np.empty(int(lens.sum()))
    times[start[keep == 1]] = x.created[keep == 1]
    within = np.arange(len(flat)) - np.repeat(np.cumsum(counts) - counts, counts)
    times[np.repeat(start + keep, counts) + within] = flat
    times = _finite(times, 0.0)
    if (np.diff(times)[seg[1:] == seg[:-1]] < 0).any():  # rare (clock skew): sort per row
        order = np.lexsort((times, seg))
        times, seg = times[order], seg[order]
    flat = times
    same = seg[1:] == seg[:-1]
    gaps, gseg = np.diff(flat)[same], seg[1:][same]
    k = np.bincount(gseg, minlength=n).astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        s1 = np.bincount(gseg, weights=gaps, minlength=n)
        s2 = np.bincount(gseg, weights=gaps * gaps, minlength=n)
        mean = s1 / np.maximum(k, 1.0)
        sd = np.sqrt(np.maximum(s2 / np.maximum(k, 1.0) - mean * mean, 0.0))
        cv = _finite(np.where(mean > 0, sd / mean, 0.0), 0.0)
    value = p["floor"] + (1.0 - p["floor"]) / (1.0 + cv)
    return np.where((count >= p["min_accesses"]) & (k > 0), value, 1.0)


def prediction(x: Inputs, p: Params) -> np.ndarray:
    """``1 + gain·p``, p in [0, 1] = extra["prediction"] (predicted to be needed next)."""
    return 1.0 + p["gain"] * _clip(x.signal("prediction", 0.0, meta=False), 0.0, 1.0)


def surprise_domain(x: Inputs, p: Params) -> np.ndarray:
    """Outcomes that happened are boosted, expectations that proved wrong suppressed: a signed
    s in [−1, 1] from extra["surprise_domain"], else meta["surprise_domain"] through ``roles``
    (actual 1, expected 0, wrong_expected −1); ``1 + boost·s`` or ``1 + suppress·s``."""
    if "surprise_domain" in x.extra:
        s = _finite(x.extra["surprise_domain"], 0.0)
    else:
        s = x.meta_lookup("surprise_domain", p["roles"], 0.0)
    s = _clip(s, -1.0, 1.0)
    return np.where(s >= 0, 1.0 + p["boost"] * s, 1.0 + p["suppress"] * s)


def epistemic_debt(x: Inputs, p: Params) -> np.ndarray:
    """``1 + boost·d·u``: d in [0, 1] marks a memory of an uncertain domain
    (extra/meta "epistemic_debt"); u = 2·(1 − the query affect's confidence), clipped to
    [0, 2], so the seed's 1.1× holds at neutral confidence 0.5, a sure soul does not dig."""
    d = _clip(x.signal("epistemic_debt", 0.0), 0.0, 1.0)
    u = min(max(2.0 * (1.0 - _affect(x.affect)[3]), 0.0), 2.0)
    return 1.0 + p["boost"] * d * u


def integration_weight(x: Inputs, p: Params) -> np.ndarray:
    """The learned weight of the recall source that found the row, extra["integration"],
    used as the multiplier itself, clipped to [0, max] (missing: 1.0)."""
    return _clip(x.signal("integration", 1.0, meta=False), 0.0, p["max"])


def tier(x: Inputs, p: Params) -> np.ndarray:
    """Demotion over time: the row's tier (`memory.tier_of` of idle days and decayed
    confidence) through the table hot 1.0, warm 0.9, cool 0.75, cold 0.5."""
    table = np.array([p["values"][t.value] for t in TIERS], np.float64)
    return table[tier_index(x.idle_days, x.confidence[0])]


def _affect(affect: Affect) -> tuple[float, float, float, float]:
    """(valence, arousal, frustration, confidence), clipped, non-finite read as neutral."""
    def clip(v: float, lo: float, hi: float, neutral: float) -> float:
        v = _number(v, neutral)
        return min(max(v, lo), hi)
    return (clip(affect.valence, -1.0, 1.0, 0.0), clip(affect.arousal, 0.0, 1.0, 0.0),
            clip(affect.frustration, 0.0, 1.0, 0.0), clip(affect.confidence, 0.0, 1.0, 0.5))


@dataclass(frozen=True)
class FactorSpec:
    """A factor's function and the rule each numeric parameter must satisfy."""

    fn: FactorFn
    rules: Mapping[str, str]  # numeric param -> a name in RULES


RULES: dict[str, tuple[Callable[[float], bool], str]] = {
    "unit": (lambda v: 0.0 <= v <= 1.0, "must be in [0, 1]"),
    "unit_half": (lambda v: 0.0 <= v <= 0.5, "must be in [0, 0.5] (the factor stays >= 0)"),
    "unit_lt1": (lambda v: 0.0 <= v < 1.0, "must be in [0, 1)"),
    "open_unit": (lambda v: 0.0 < v < 1.0, "must be in (0, 1)"),
    "signed_unit": (lambda v: -1.0 <= v <= 1.0, "must be in [-1, 1]"),
    "pos": (lambda v: v > 0.0, "must be > 0"),
    "nonneg": (lambda v: v >= 0.0, "must be >= 0"),
    "real": (lambda v: True, "must be a finite number"),
}
_KINDS = frozenset(k.label for k in Kind)


def check_params(name: str, params: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Problems with a factor's (already type-checked) params, as (key path, what) pairs."""
    problems: list[tuple[str, str]] = []
    for key, rule in FACTORS[name].rules.items():
        ok, what = RULES[rule]
        if not ok(params[key]):
            problems.append((key, f"{what}, got {params[key]!r}"))
    tables = {"Status": ("values", "nonneg"), "Epistemic": ("values", "nonneg"),
              "Kind": ("values", "nonneg"), "Tier": ("values", "nonneg"),
              "RealmReliability": ("realms", "unit"), "SurpriseDomain": ("roles", "signed_unit")}
    if name in tables:
        key, rule = tables[name]
        ok, what = RULES[rule]
        problems += [(f"{key}.{k}", f"{what}, got {v!r}")
                     for k, v in params[key].items() if not ok(v)]
    if name == "Relevance" and params["scale"] not in ("cosine", "unit"):
        problems.append(("scale", f"must be 'cosine' or 'unit', got {params['scale']!r}"))
    if name == "Status" and params["default"] not in params["values"]:
        problems.append(("default", f"{params['default']!r} is not a status in values: "
                                    f"{', '.join(params['values'])}"))
    if name == "Tier" and set(params["values"]) != {t.value for t in Tier}:
        problems.append(("values", "must give exactly the tiers hot, warm, cool, cold"))
    named = (list(params["values"]) if name == "Kind"
             else list(params["kinds"]) if name == "FrustrationEscalation" else [])
    problems += [("values" if name == "Kind" else "kinds",
                  f"unknown kind {k!r}; the kinds are: {', '.join(sorted(_KINDS))}")
                 for k in named if k not in _KINDS]
    return problems


FACTORS: dict[str, FactorSpec] = {
    "Relevance": FactorSpec(relevance, {}),
    "ActR": FactorSpec(actr, {"decay": "open_unit", "min_age_seconds": "pos", "floor": "unit",
                              "offset": "real", "width": "pos"}),
    "Strength": FactorSpec(strength, {"floor": "unit", "half_accesses": "pos"}),
    "Confidence": FactorSpec(confidence, {"floor": "unit", "doubt": "nonneg"}),
    "Surprise": FactorSpec(surprise, {"gain": "nonneg"}),
    "Arousal": FactorSpec(arousal, {"gain": "nonneg"}),
    "MoodCongruence": FactorSpec(mood_congruence, {"gain": "unit_half", "arousal_gain": "unit_half"}),
    "FrustrationEscalation": FactorSpec(frustration_escalation,
                                        {"gain": "nonneg", "threshold": "unit_lt1"}),
    "Status": FactorSpec(status, {}),
    "Epistemic": FactorSpec(epistemic, {"unknown": "nonneg"}),
    "Kind": FactorSpec(kind, {"other": "nonneg"}),
    "RealmReliability": FactorSpec(realm_reliability, {"gain": "unit"}),
    "Interference": FactorSpec(interference, {"per_competitor": "nonneg"}),
    "Spacing": FactorSpec(spacing, {"floor": "unit", "min_accesses": "nonneg"}),
    "Prediction": FactorSpec(prediction, {"gain": "nonneg"}),
    "SurpriseDomain": FactorSpec(surprise_domain, {"boost": "nonneg", "suppress": "unit"}),
    "EpistemicDebt": FactorSpec(epistemic_debt, {"boost": "nonneg"}),
    "IntegrationWeight": FactorSpec(integration_weight, {"max": "nonneg"}),
    "Tier": FactorSpec(tier, {}),
}
