"""The scoring factors: one pure function per factor over the candidate rows' `Inputs`.

Every factor maps what is known about a row (its columns in the `State`, its `meta`, the
caller's per-row `extra` arrays, the query's `Affect`) to a finite value >= 0, where 1.0 is
neutral. `scoring.Scorer` combines them as a weighted product (docs/memory.md, "Scoring").
Missing information always gives the neutral value, so a field that never records, say,
arousal is scored exactly as if the Arousal factor were off. `FACTORS` maps each name to
its function and the rules its numeric parameters must satisfy (`check_params`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..memory import Kind, Tier
from .scoring_inputs import (
    TIERS,
    Inputs,
    base_level_flat,
    clip,
    finite_or,
    kernels,
)

__all__ = ["FACTORS", "RULES", "FactorSpec", "check_params", "kind_values", "tier_values"]


Params = Mapping[str, Any]
# A factor's value per row, or one float when it is the same for every row (a factor whose
# signal no row has is neutral: its one value costs no array).
Value = np.ndarray | float
FactorFn = Callable[[Inputs, Params], Value]
_TABLES: dict[tuple[int, str], tuple[Params, np.ndarray]] = {}


def _table(p: Params, name: str, build: Callable[[], np.ndarray]) -> np.ndarray:
    """A lookup table made from a factor's params, once per params object (a config's
    params never change: they are read-only)."""
    hit = _TABLES.get((id(p), name))
    if hit is None or hit[0] is not p:
        if len(_TABLES) > 256:
            _TABLES.clear()
        hit = _TABLES[(id(p), name)] = (p, build())
    return hit[1]


def relevance(x: Inputs, p: Params) -> np.ndarray:
    """Cosine in [−1, 1] as (cos + 1)/2 (``scale: cosine``), or (``scale: unit``) a fused
    relevance >= 0 as is — not capped at 1, so scores boosted past 1 keep their order."""
    out = np.empty(len(x.row_list))
    kernels().relevance(np.ascontiguousarray(x.relevance, np.float64), p["scale"] == "cosine", out)
    return out


def actr(x: Inputs, p: Params) -> np.ndarray:
    """``floor + (1 − floor)·sigmoid((B + offset)/width)`` over the base-level activation B."""
    flat, counts = x.history
    b = base_level_flat(x.created, flat, counts, x.access_count, x.now, p["decay"],
                    p["min_age_seconds"])
    kernels().sigmoid(b, float(p["offset"]), float(p["width"]), float(p["floor"]), b)
    return b


def strength(x: Inputs, p: Params) -> np.ndarray:
    """``floor + (1 − floor)·s``, s = n/(n + half_observations), n = the observations of the
    memory (merged near-duplicates, strengthen/feedback): reinforcement by evidence. Not by
    recall accesses — being retrieved is no evidence of being right, and counting it let the
    memories every query brings up crowd out the rest (LoCoMo dev, after two passes of
    questions: R@10 .747 counting accesses, .780 counting observations)."""
    out = np.empty(len(x.row_list))
    kernels().strength(x.observations, float(p["floor"]), float(p["half_observations"]), out)
    return out


def confidence(x: Inputs, p: Params) -> np.ndarray:
    """``floor + (1 − floor)·clip(mu − doubt·sd)``: the decayed posterior mean, discounted by
    its standard deviation (a lower credible bound) — few observations count for less."""
    mu, var = x.confidence
    out = np.empty(len(x.row_list))
    kernels().confidence(mu, var, float(p["floor"]), float(p["doubt"]), out)
    return out


def surprise(x: Inputs, p: Params) -> Value:
    """``1 + gain·s``, s in [0, 1] from extra["surprise"] or meta["surprise"]."""
    if not x.has("surprise"):
        return 1.0
    return 1.0 + p["gain"] * clip(x.signal("surprise", 0.0), 0.0, 1.0)


def arousal(x: Inputs, p: Params) -> Value:
    """``1 + gain·a``, the memory's own arousal meta["arousal"] in [0, 1] (flashbulb effect)."""
    if "arousal" not in x.meta_keys:
        return 1.0
    return 1.0 + p["gain"] * clip(x.meta_number("arousal", 0.0), 0.0, 1.0)


def mood_congruence(x: Inputs, p: Params) -> Value:
    """Bower (1981): ``1 + gain·v_q·v_m + arousal_gain·(1 − 2|a_q − a_m|)`` — memories whose
    stored valence (meta["valence"], [−1, 1]) agrees with the query's are boosted; the arousal
    term counts only for memories that store meta["arousal"]."""
    vq, aq = x.affect_values[:2]
    if "arousal" not in x.meta_keys and (vq == 0.0 or "valence" not in x.meta_keys):
        return 1.0
    vm = clip(x.meta_number("valence", 0.0), -1.0, 1.0)
    am = x.meta_number("arousal", np.nan)
    align = np.where(np.isnan(am), 0.0, 1.0 - 2.0 * np.abs(aq - clip(am, 0.0, 1.0)))
    return 1.0 + p["gain"] * vq * vm + p["arousal_gain"] * align


def frustration_escalation(x: Inputs, p: Params) -> Value:
    """A frustrated query (frustration, or negative valence times arousal, above
    ``threshold``) boosts the ``kinds`` that fix things (corrections, preferences, failures,
    approaches): ``1 + gain·e``, e rescaled from [threshold, 1] to [0, 1]."""
    v, a, f, _ = x.affect_values
    e = max(f, max(0.0, -v) * a)
    t = p["threshold"]
    e = max(0.0, (e - t) / (1.0 - t)) if t < 1.0 else 0.0
    if e == 0.0:
        return 1.0

    def build() -> np.ndarray:
        table = np.zeros(len(Kind), bool)
        table[[int(Kind[k.upper()]) for k in p["kinds"]]] = True
        return table

    boosted = _table(p, "kinds", build)[x.kind_index]
    return np.where(boosted, 1.0 + p["gain"] * e, 1.0)


def status(x: Inputs, p: Params) -> Value:
    """Table lookup of meta["status"] (verified, active, observed, proposed); a missing or
    unknown status reads as ``default``."""
    values, default = p["values"], p["values"][p["default"]]
    if "status" not in x.meta_keys:
        return float(default)
    return x.meta_lookup("status", values, default)


def epistemic(x: Inputs, p: Params) -> Value:
    """Table lookup of the memory's source (user, tool, model, autonomous); "user:alice"
    reads as "user"; no source or an unknown one reads as ``unknown``. The few distinct
    sources come back query after query: each row's is kept as a code, each code's value
    worked out once per params (`scoring_cache.SourceCodes`)."""
    values, unknown = p["values"], p["unknown"]

    def value_of(source: str | None) -> float:
        low = (source or "").lower()
        return float(values.get(low, values.get(low.split(":", 1)[0], unknown)))

    return x.sources.values(x.state, x.rows, p, value_of)


def kind(x: Inputs, p: Params) -> np.ndarray:
    """Table lookup of the memory's kind (correction/preference 1.3 ... episode 0.7)."""
    return _table(p, "values", lambda: kind_values(p))[x.kind_index]


def kind_values(p: Params) -> np.ndarray:
    """The Kind factor's value of each kind code (its params' ``values``, else ``other``)."""
    table = np.full(len(Kind), float(p["other"]))
    for label, value in p["values"].items():
        table[int(Kind[label.upper()])] = value
    return table


def realm_reliability(x: Inputs, p: Params) -> Value:
    """``1 + gain·(2r − 1)``, r in [0, 1] the realm's reliability: extra["realm_reliability"]
    (e.g. `ThompsonLearner.realm_reliability`), else the ``realms`` table, else 0.5 (neutral)."""
    if "realm_reliability" in x.extra:
        r = finite_or(x.extra["realm_reliability"], 0.5)
    else:
        table, realm = p["realms"], x.state.realm
        if not table:  # every realm reads 0.5: neutral
            return 1.0
        r = np.array([table.get(realm[row] or "", 0.5) for row in x.row_list], np.float64)
    return 1.0 + p["gain"] * (2.0 * clip(r, 0.0, 1.0) - 1.0)


def interference(x: Inputs, p: Params) -> Value:
    """``1/(1 + per_competitor·c)``, c = extra["competitors"] (near neighbours crowding it)."""
    if not x.has("competitors", meta=False):
        return 1.0
    c = np.maximum(x.signal("competitors", 0.0, meta=False), 0.0)
    return 1.0 / (1.0 + p["per_competitor"] * c)


def spacing(x: Inputs, p: Params) -> Value:
    """``floor + (1 − floor)/(1 + CV)`` of the intervals between presentations, for rows with
    at least ``min_accesses`` accesses (others 1.0). The creation is the first presentation
    when the whole history is kept; when older accesses were dropped, only the kept ones."""
    count = x.access_count
    if not (count >= p["min_accesses"]).any():  # no row has enough accesses: all neutral
        return 1.0
    flat, counts = x.history
    out = np.empty(len(x.row_list))
    kernels().spacing(x.created, flat, counts, count, float(p["floor"]), float(p["min_accesses"]), out)
    return out


def prediction(x: Inputs, p: Params) -> Value:
    """``1 + gain·p``, p in [0, 1] = extra["prediction"] (predicted to be needed next)."""
    if not x.has("prediction", meta=False):
        return 1.0
    return 1.0 + p["gain"] * clip(x.signal("prediction", 0.0, meta=False), 0.0, 1.0)


def surprise_domain(x: Inputs, p: Params) -> Value:
    """Outcomes that happened are boosted, expectations that proved wrong suppressed: a signed
    s in [−1, 1] from extra["surprise_domain"], else meta["surprise_domain"] through ``roles``
    (actual 1, expected 0, wrong_expected −1); ``1 + boost·s`` or ``1 + suppress·s``."""
    if not x.has("surprise_domain"):
        return 1.0
    if "surprise_domain" in x.extra:
        s = finite_or(x.extra["surprise_domain"], 0.0)
    else:
        s = x.meta_lookup("surprise_domain", p["roles"], 0.0)
    s = clip(s, -1.0, 1.0)
    return np.where(s >= 0, 1.0 + p["boost"] * s, 1.0 + p["suppress"] * s)


def epistemic_debt(x: Inputs, p: Params) -> Value:
    """``1 + boost·d·u``: d in [0, 1] marks a memory of an uncertain domain
    (extra/meta "epistemic_debt"); u = 2·(1 − the query affect's confidence), clipped to
    [0, 2], so the seed's 1.1× holds at neutral confidence 0.5, a sure soul does not dig."""
    u = min(max(2.0 * (1.0 - x.affect_values[3]), 0.0), 2.0)
    if u == 0.0 or not x.has("epistemic_debt"):
        return 1.0
    d = clip(x.signal("epistemic_debt", 0.0), 0.0, 1.0)
    return 1.0 + p["boost"] * d * u


def integration_weight(x: Inputs, p: Params) -> Value:
    """The learned weight of the recall source that found the row, extra["integration"],
    used as the multiplier itself, clipped to [0, max] (missing: 1.0)."""
    if not x.has("integration", meta=False):
        return float(min(max(1.0, 0.0), p["max"]))
    return clip(x.signal("integration", 1.0, meta=False), 0.0, p["max"])


def tier(x: Inputs, p: Params) -> np.ndarray:
    """Demotion over time: the row's tier (`memory.tier_of` of idle days and decayed
    confidence) through the table hot 1.0, warm 0.9, cool 0.75, cold 0.5."""
    return _table(p, "values", lambda: tier_values(p))[x.tier]


def tier_values(p: Params) -> np.ndarray:
    """The Tier factor's value of each tier index (hot, warm, cool, cold)."""
    return np.array([p["values"][t.value] for t in TIERS], np.float64)


@dataclass(frozen=True)
class FactorSpec:
    """A factor's function and the rule each numeric parameter must satisfy. A factor that
    reads per-row signals names them (``signals``: keys of a row's meta or the caller's
    extra) with ``idle(params)``, the value it takes for every row when no row has any of
    them, whatever the affect (None: with these params it has a value even then): combine
    skips it when that value is 1.0 (test_a_factor_without_its_signals_is_idle pins each
    declaration against its function)."""

    fn: FactorFn
    rules: Mapping[str, str]  # numeric param -> a name in RULES
    signals: frozenset[str] = frozenset()
    idle: Callable[[Params], float | None] | None = None  # None from it: not idle then


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


def _one(p: Params) -> float:
    return 1.0


FACTORS: dict[str, FactorSpec] = {
    "Relevance": FactorSpec(relevance, {}),
    "ActR": FactorSpec(actr, {"decay": "open_unit", "min_age_seconds": "pos", "floor": "unit",
                              "offset": "real", "width": "pos"}),
    "Strength": FactorSpec(strength, {"floor": "unit", "half_observations": "pos"}),
    "Confidence": FactorSpec(confidence, {"floor": "unit", "doubt": "nonneg"}),
    "Surprise": FactorSpec(surprise, {"gain": "nonneg"}, frozenset({"surprise"}), _one),
    "Arousal": FactorSpec(arousal, {"gain": "nonneg"}, frozenset({"arousal"}), _one),
    "MoodCongruence": FactorSpec(mood_congruence,
                                 {"gain": "unit_half", "arousal_gain": "unit_half"},
                                 frozenset({"valence", "arousal"}), _one),
    "FrustrationEscalation": FactorSpec(frustration_escalation,
                                        {"gain": "nonneg", "threshold": "unit_lt1"}),
    "Status": FactorSpec(status, {}, frozenset({"status"}),
                         lambda p: float(p["values"][p["default"]])),
    "Epistemic": FactorSpec(epistemic, {"unknown": "nonneg"}),
    "Kind": FactorSpec(kind, {"other": "nonneg"}),
    "RealmReliability": FactorSpec(realm_reliability, {"gain": "unit"},
                                   frozenset({"realm_reliability"}),
                                   lambda p: None if p["realms"] else 1.0),
    "Interference": FactorSpec(interference, {"per_competitor": "nonneg"},
                               frozenset({"competitors"}), _one),
    "Spacing": FactorSpec(spacing, {"floor": "unit", "min_accesses": "nonneg"}),
    "Prediction": FactorSpec(prediction, {"gain": "nonneg"}, frozenset({"prediction"}), _one),
    "SurpriseDomain": FactorSpec(surprise_domain, {"boost": "nonneg", "suppress": "unit"},
                                 frozenset({"surprise_domain"}), _one),
    "EpistemicDebt": FactorSpec(epistemic_debt, {"boost": "nonneg"},
                                frozenset({"epistemic_debt"}), _one),
    "IntegrationWeight": FactorSpec(integration_weight, {"max": "nonneg"},
                                    frozenset({"integration"}),
                                    lambda p: float(min(max(1.0, 0.0), p["max"]))),
    "Tier": FactorSpec(tier, {}),
}
