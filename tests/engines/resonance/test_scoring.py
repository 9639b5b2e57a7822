"""Scoring factors against hand-computed values, the weighted product, the veto, finiteness."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from soul.engines.resonance import ConfigError
from soul.engines.resonance.kernels.scoring import CORE, guard
from soul.engines.resonance.memory import DAY, Tier, parse_kind, tier_of
from soul.engines.resonance.resonate.scoring import Affect, Scorer, ScoringConfig
from soul.engines.resonance.resonate.scoring_cache import AccessHistories, MetaCache
from soul.engines.resonance.resonate.scoring_factors import FACTORS
from soul.engines.resonance.resonate.scoring_inputs import (
    TIERS,
    Inputs,
    base_level_activation,
    tier_index,
)
from soul.engines.resonance.store import ops
from soul.engines.resonance.store.state import ACCESS_HISTORY, State

NOW = 1_700_000_000.0


def make_state(specs: list[dict[str, Any]]) -> State:
    """A State built through its WAL ops, one memory per spec (times in seconds)."""
    state = State()
    for i, spec in enumerate(specs):
        row = ops.Row(
            id=f"m{i}", kind=int(parse_kind(spec.get("kind", "belief"))), flags=0,
            created=spec.get("created", NOW), mu=spec.get("mu", 0.7), var=spec.get("var", 0.04),
            n=spec.get("n", 0), text=f"memory number {i}", tags=(), realm=spec.get("realm"),
            source=spec.get("source"),
            meta=json.dumps(spec["meta"]) if "meta" in spec else None,
        )
        state.apply(ops.ADD, memoryview(ops.encode_add(row, np.zeros(4, np.float32))))
        for ts in spec.get("accesses", ()):
            state.apply(ops.ACCESS, memoryview(ops.encode_access([row.id], ts)))
    return state


def factor(name: str, specs: list[dict[str, Any]], *, relevance: Any = None,
           affect: Affect | None = None, extra: dict[str, Any] | None = None,
           **params: Any) -> np.ndarray:
    """The values of one factor alone for the given memories."""
    config = ScoringConfig.defaults().only(name)
    if params:
        config = config.with_factor(name, **params)
    state = make_state(specs)
    rows = np.arange(len(specs))
    rel = np.ones(len(specs)) if relevance is None else np.asarray(relevance, float)
    scored = Scorer(config=config).score(state, rows, rel, now=NOW, affect=affect, extra=extra)
    assert set(scored.factors) == {name}
    np.testing.assert_allclose(scored.final, scored.factors[name])
    return scored.factors[name]


def sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


# -- ACT-R ---------------------------------------------------------------------------------

def test_actr_exact_formula_on_a_known_history() -> None:
    spec = {"created": NOW - 10 * DAY, "accesses": [NOW - 5 * DAY, NOW - 1 * DAY]}
    b = math.log(10 ** -0.5 + 5 ** -0.5 + 1 ** -0.5)
    value = factor("ActR", [spec])
    assert value[0] == pytest.approx(0.3 + 0.7 * sigmoid((b + 1.0) / 1.5), rel=1e-12)


def test_actr_creation_alone_and_the_one_minute_floor() -> None:
    # Created this instant: the age is floored at one minute, not zero (infinite activation).
    fresh, old = factor("ActR", [{"created": NOW}, {"created": NOW - 100 * DAY}])
    b_fresh = math.log((60 / DAY) ** -0.5)
    assert fresh == pytest.approx(0.3 + 0.7 * sigmoid((b_fresh + 1) / 1.5))
    assert old == pytest.approx(0.3 + 0.7 * sigmoid((math.log(100 ** -0.5) + 1) / 1.5))
    assert fresh > old


def test_actr_decay_parameter_is_used() -> None:
    spec = {"created": NOW - 4 * DAY, "accesses": [NOW - 1 * DAY]}
    value = factor("ActR", [spec], decay=0.3)
    b = math.log(4 ** -0.3 + 1)
    assert value[0] == pytest.approx(0.3 + 0.7 * sigmoid((b + 1) / 1.5))


def exact_b(created: float, times: np.ndarray, now: float) -> float:
    ages = np.maximum((now - np.concatenate([[created], times])) / DAY, 60 / DAY)
    return float(np.log(np.sum(ages ** -0.5)))


# Petrov's approximation is exact when the dropped accesses were evenly spread; skewed
# histories bias it (measured at 2,000 accesses over a year: uniform 0.000, Poisson 0.003,
# front-loaded +0.15, back-loaded -0.38 in B; the factor moves by at most 0.117 per unit of B).
@pytest.mark.parametrize(("pattern", "tolerance"), [
    ("uniform", 0.005), ("poisson", 0.02), ("front_loaded", 0.2), ("back_loaded", 0.45)])
def test_petrov_approximation_is_close_to_the_exact_sum(pattern: str, tolerance: float) -> None:
    rng = np.random.default_rng(7)
    created = NOW - 365 * DAY
    n = 2000
    if pattern == "uniform":
        times = np.linspace(created + DAY, NOW - DAY, n)
    elif pattern == "poisson":
        times = np.sort(rng.uniform(created, NOW, n))
    else:  # most accesses early (front) or late (back) in the memory's life
        a, b = (1.0, 3.0) if pattern == "front_loaded" else (3.0, 1.0)
        times = np.sort(created + (NOW - created) * rng.beta(a, b, n))
    kept = [times[-ACCESS_HISTORY:].tolist()]
    approx = base_level_activation(np.array([created]), kept, np.array([float(n)]), NOW)[0]
    exact = exact_b(created, times, NOW)
    # Without the older accesses the estimate is far off.
    truncated = base_level_activation(np.array([created]), kept,
                                      np.array([float(ACCESS_HISTORY)]), NOW)[0]
    assert abs(truncated - exact) > 1.0
    assert abs(approx - exact) < tolerance


def test_petrov_used_through_the_state_when_history_overflows() -> None:
    created = NOW - 100 * DAY
    times = np.linspace(created + DAY, NOW - DAY, 200)
    value = factor("ActR", [{"created": created, "accesses": times.tolist()}])
    b = exact_b(created, times, NOW)
    assert value[0] == pytest.approx(0.3 + 0.7 * sigmoid((b + 1) / 1.5), abs=2e-3)


# -- the tables and simple factors ---------------------------------------------------------

def test_relevance_maps_cosine_or_takes_a_unit_relevance() -> None:
    specs = [{}, {}, {}, {}]
    np.testing.assert_allclose(factor("Relevance", specs, relevance=[-1, 0, 1, 0.3]),
                               [0.0, 0.5, 1.0, 0.65])
    np.testing.assert_allclose(factor("Relevance", specs, relevance=[-1, 0, 1.3, 0.3],
                                      scale="unit"), [0.0, 0.0, 1.3, 0.3])


def test_strength_saturates_with_observations_not_accesses() -> None:
    specs = [{"n": k} for k in (0, 5, 15)] + [{"accesses": [NOW - 10] * 15}]
    np.testing.assert_allclose(factor("Strength", specs), [0.5, 0.75, 0.5 + 0.5 * 15 / 20, 0.5])


def test_confidence_is_the_decayed_mean_discounted_by_its_deviation() -> None:
    specs = [{"kind": "belief", "mu": 0.9, "var": 0.01, "created": NOW - 10 * DAY},
             {"kind": "episode", "mu": 0.9, "var": 0.01, "created": NOW - 10 * DAY},
             {"kind": "belief", "mu": 0.9, "var": 0.09}]
    keep = math.exp(-0.03 * 10)
    mu_ep, var_ep = 0.9 * keep, 0.04 + (0.01 - 0.04) * keep
    np.testing.assert_allclose(factor("Confidence", specs), [
        0.5 + 0.5 * (0.9 - 0.5 * 0.1),
        0.5 + 0.5 * (mu_ep - 0.5 * math.sqrt(var_ep)),
        0.5 + 0.5 * (0.9 - 0.5 * 0.3),
    ])


def test_status_table_from_meta() -> None:
    statuses = ["verified", "active", "observed", "proposed", None, "bogus"]
    specs = [{"meta": {"status": s}} if s else {} for s in statuses]
    np.testing.assert_allclose(factor("Status", specs), [1.15, 1.0, 0.85, 0.65, 1.0, 1.0])


def test_epistemic_table_from_source() -> None:
    sources = ["user", "tool", "model", "autonomous", None, "user:alice", "Tool"]
    np.testing.assert_allclose(factor("Epistemic", [{"source": s} for s in sources]),
                               [1.0, 0.95, 0.85, 0.75, 1.0, 1.0, 0.95])


def test_kind_table() -> None:
    kinds = ["correction", "preference", "wisdom", "insight", "episode", "belief", "symbol"]
    np.testing.assert_allclose(factor("Kind", [{"kind": k} for k in kinds]),
                               [1.3, 1.3, 1.1, 1.05, 0.7, 1.0, 1.0])


def test_interference_penalises_crowding() -> None:
    value = factor("Interference", [{}, {}, {}], extra={"competitors": [0, 1, 3]})
    np.testing.assert_allclose(value, [1.0, 1 / 1.3, 1 / 1.9])
    np.testing.assert_allclose(factor("Interference", [{}]), [1.0])  # not given: neutral


def test_spacing_uses_the_cv_of_the_intervals() -> None:
    t0 = NOW - 30 * DAY
    irregular = {"created": t0, "accesses": [t0 + DAY, t0 + 2 * DAY, t0 + 4 * DAY]}
    regular = {"created": t0, "accesses": [t0 + DAY, t0 + 2 * DAY, t0 + 3 * DAY]}
    once = {"created": t0, "accesses": [t0 + 5 * DAY]}
    gaps = np.array([1.0, 1.0, 2.0])
    cv = gaps.std() / gaps.mean()
    np.testing.assert_allclose(factor("Spacing", [irregular, regular, once]),
                               [0.85 + 0.15 / (1 + cv), 1.0, 1.0])


def test_spacing_ignores_the_creation_when_older_accesses_were_dropped() -> None:
    # 20 daily accesses long after creation: only the 16 kept ones (all 1 day apart) count.
    t0 = NOW - 200 * DAY
    accesses = [NOW - (20 - i) * DAY for i in range(20)]
    assert factor("Spacing", [{"created": t0, "accesses": accesses}])[0] == pytest.approx(1.0)
    # With the whole history kept, the long first gap makes the spacing irregular.
    short = accesses[-10:]
    assert factor("Spacing", [{"created": t0, "accesses": short}])[0] < 0.9


def test_spacing_sorts_a_history_logged_out_of_order() -> None:
    # Writers' clocks can disagree: the kept history may not be in time order.
    t0 = NOW - 30 * DAY
    ordered = [t0 + DAY, t0 + 2 * DAY, t0 + 4 * DAY]
    shuffled = [ordered[2], ordered[0], ordered[1]]
    early = {"created": t0 + 3 * DAY, "accesses": ordered}  # accessed before its creation
    got = factor("Spacing", [{"created": t0, "accesses": ordered},
                             {"created": t0, "accesses": shuffled}, early])
    assert got[0] == pytest.approx(got[1])
    gaps = np.array([1.0, 1.0, 1.0])  # t0+1, +2, +3 (created), +4
    assert got[2] == pytest.approx(0.85 + 0.15 / (1 + gaps.std() / gaps.mean()))


def test_a_forgotten_rows_meta_is_not_read_from_the_cache() -> None:
    state = make_state([{"meta": {"status": "verified"}}])
    scorer = Scorer(config=ScoringConfig.defaults().only("Status"))
    assert scorer.score(state, np.array([0]), np.ones(1), now=NOW).final[0] == 1.15
    state.apply(ops.FORGET, memoryview(ops.encode_forget("m0", NOW)))
    assert scorer.score(state, np.array([0]), np.ones(1), now=NOW).final[0] == 1.0


def test_prediction_surprise_arousal_integration() -> None:
    assert factor("Prediction", [{}, {}], extra={"prediction": [0.5, 2.0]}).tolist() == \
        pytest.approx([1.15, 1.3])
    surprise = factor("Surprise", [{"meta": {"surprise": 1}}, {}, {}],
                      extra=None)
    np.testing.assert_allclose(surprise, [1.25, 1.0, 1.0])
    np.testing.assert_allclose(factor("Surprise", [{"meta": {"surprise": 1}}],
                                      extra={"surprise": [0.4]}), [1.1])  # extra wins
    np.testing.assert_allclose(factor("Arousal", [{"meta": {"arousal": 0.8}}, {}]), [1.12, 1.0])
    np.testing.assert_allclose(factor("IntegrationWeight", [{}, {}, {}],
                                      extra={"integration": [1.7, 5.0, -1.0]}), [1.7, 2.0, 0.0])
    np.testing.assert_allclose(factor("IntegrationWeight", [{}]), [1.0])


def test_mood_congruence_compares_valences() -> None:
    specs = [{"meta": {"valence": 0.5}}, {"meta": {"valence": -0.5}}, {},
             {"meta": {"valence": 0.5, "arousal": 0.7}}]
    value = factor("MoodCongruence", specs, affect=Affect(valence=0.8, arousal=0.7))
    np.testing.assert_allclose(value, [1.06, 0.94, 1.0, 1.06 + 0.05])
    np.testing.assert_allclose(factor("MoodCongruence", specs), [1.0, 1.0, 1.0, 1.05 * 0 + 1.0 +
                                                                 0.05 * (1 - 2 * 0.7)])


def test_frustration_escalation_boosts_kinds_that_fix_things() -> None:
    specs = [{"kind": k} for k in ("correction", "preference", "failure", "approach", "episode")]
    np.testing.assert_allclose(factor("FrustrationEscalation", specs,
                                      affect=Affect(frustration=1.0)),
                               [1.3, 1.3, 1.3, 1.3, 1.0])
    np.testing.assert_allclose(factor("FrustrationEscalation", specs[:1],
                                      affect=Affect(frustration=0.65)), [1.15])
    # Negative valence times arousal counts as frustration too.
    np.testing.assert_allclose(factor("FrustrationEscalation", specs[:1],
                                      affect=Affect(valence=-1.0, arousal=0.65)), [1.15])
    np.testing.assert_allclose(factor("FrustrationEscalation", specs,
                                      affect=Affect(frustration=0.2)), [1.0] * 5)


def test_realm_reliability_from_table_or_extra() -> None:
    specs = [{"realm": "work"}, {"realm": "chat"}, {"realm": "other"}, {}]
    value = factor("RealmReliability", specs, realms={"work": 1.0, "chat": 0.0})
    np.testing.assert_allclose(value, [1.15, 0.85, 1.0, 1.0])
    np.testing.assert_allclose(factor("RealmReliability", specs[:1],
                                      extra={"realm_reliability": [0.75]}), [1.075])


def test_surprise_domain_boosts_actuals_and_suppresses_wrong_expectations() -> None:
    roles = ["actual", "expected", "wrong_expected", None]
    specs = [{"meta": {"surprise_domain": r}} if r else {} for r in roles]
    np.testing.assert_allclose(factor("SurpriseDomain", specs), [1.2, 1.0, 0.6, 1.0])
    np.testing.assert_allclose(factor("SurpriseDomain", [{}], extra={"surprise_domain": [-0.5]}),
                               [0.8])


def test_epistemic_debt_scales_with_the_souls_uncertainty() -> None:
    specs = [{"meta": {"epistemic_debt": True}}, {}]
    np.testing.assert_allclose(factor("EpistemicDebt", specs), [1.1, 1.0])
    np.testing.assert_allclose(factor("EpistemicDebt", specs, affect=Affect(confidence=1.0)),
                               [1.0, 1.0])
    np.testing.assert_allclose(factor("EpistemicDebt", specs, affect=Affect(confidence=0.0)),
                               [1.2, 1.0])


def test_tier_demotes_over_time() -> None:
    specs = [{"created": NOW - d * DAY} for d in (0.5, 3, 10, 40)]
    specs.append({"mu": 0.05})  # faded confidence: cold at once
    np.testing.assert_allclose(factor("Tier", specs), [1.0, 0.9, 0.75, 0.5, 0.5])


def test_tier_index_matches_tier_of() -> None:
    idle = np.array([0, 0.99, 1, 6.9, 7, 29.9, 30, 100, 0.5, 3.0])
    conf = np.array([0.7, 0.7, 0.7, 0.7, 0.7, 0.7, 0.7, 0.7, 0.05, 0.1])
    got = [TIERS[i] for i in tier_index(idle, conf)]
    assert got == [tier_of(d, c) for d, c in zip(idle, conf, strict=True)]
    assert got[0] is Tier.HOT and got[-2] is Tier.COLD


# -- combination ---------------------------------------------------------------------------

def test_final_is_the_weighted_product() -> None:
    state = make_state([{"kind": "correction"}, {"kind": "episode"}, {"kind": "belief"}])
    rows, rel = np.arange(3), np.array([0.2, 0.8, 0.5])
    config = ScoringConfig.defaults().only("Relevance", "Kind")
    scored = Scorer(config=config).score(state, rows, rel, now=NOW)
    rel01 = (rel + 1) / 2
    kinds = np.array([1.3, 0.7, 1.0])
    np.testing.assert_allclose(scored.final, rel01 * kinds)
    heavy = config.with_factor("Kind", weight=2.0)
    np.testing.assert_allclose(Scorer(config=heavy).score(state, rows, rel, now=NOW).final,
                               rel01 * kinds ** 2)
    off = config.with_factor("Kind", weight=0.0)
    scored = Scorer(config=off).score(state, rows, rel, now=NOW)
    assert set(scored.factors) == {"Relevance"}
    np.testing.assert_allclose(scored.final, rel01)
    assert scored.explain(0) == {"Relevance": pytest.approx(0.6), "final": pytest.approx(0.6)}


def test_a_zero_factor_vetoes_whatever_the_boosts() -> None:
    state = make_state([{"kind": "correction", "meta": {"status": "verified", "arousal": 1}}])
    scored = Scorer().score(state, np.array([0]), np.array([-1.0]), now=NOW,
                            extra={"prediction": [1.0], "integration": [2.0]})
    assert scored.factors["Relevance"][0] == 0.0
    assert scored.final[0] == 0.0
    # A vetoing table entry works the same way.
    config = ScoringConfig.defaults().with_factor("Status", values={
        "verified": 0.0, "active": 1.0, "observed": 0.85, "proposed": 0.65})
    assert Scorer(config=config).score(state, np.array([0]), np.array([1.0]),
                                       now=NOW).final[0] == 0.0


def test_all_defaults_on_a_realistic_row() -> None:
    state = make_state([{"kind": "preference", "source": "user", "created": NOW - 2 * DAY,
                         "accesses": [NOW - DAY / 2]}])
    scored = Scorer().score(state, np.array([0]), np.array([0.6]), now=NOW)
    assert set(scored.factors) == set(f.name for f in ScoringConfig.defaults().factors)
    assert scored.final[0] == pytest.approx(np.prod(list(scored.factors.values())))
    assert scored.factors["Kind"][0] == 1.3 and scored.factors["Tier"][0] == 1.0


def test_the_relevance_scale_can_be_chosen_per_call() -> None:
    state = make_state([{}])
    scored = Scorer(config=ScoringConfig.defaults().only("Relevance")).score(
        state, np.array([0]), np.array([0.4]), now=NOW, relevance_scale="unit")
    assert scored.final[0] == pytest.approx(0.4)


def test_bad_calls_are_clear_errors() -> None:
    state = make_state([{}, {}])
    scorer = Scorer()
    with pytest.raises(ConfigError, match="one value per scored row"):
        scorer.score(state, np.arange(2), np.ones(2), extra={"competitors": [1.0]})
    with pytest.raises(ConfigError, match="did you mean 'competitors'"):
        scorer.score(state, np.arange(2), np.ones(2), extra={"competitor": [1.0, 2.0]})
    with pytest.raises(ConfigError, match="2 values for 1 rows"):
        scorer.score(state, np.arange(1), np.ones(2))
    with pytest.raises(ConfigError, match="row numbers"):
        scorer.score(state, np.array([5]), np.ones(1))
    assert scorer.score(state, np.array([], np.int64), np.array([])).final.shape == (0,)


# -- finiteness ----------------------------------------------------------------------------

_weird = st.one_of(st.floats(allow_nan=True, allow_infinity=True),
                   st.floats(-1e12, 1e12), st.just(0.0))
_meta_value = st.one_of(_weird, st.booleans(), st.text(max_size=5), st.none(),
                        st.integers(-10**20, 10**20))
_memory = st.fixed_dictionaries({
    "kind": st.sampled_from(["episode", "correction", "belief", "preference", "dream"]),
    "created": st.one_of(st.floats(NOW - 1e10, NOW + 1e6), _weird),
    "mu": _weird, "var": _weird,
    "accesses": st.lists(st.one_of(st.floats(NOW - 1e9, NOW + 1e5), _weird), max_size=40),
    "meta": st.dictionaries(st.sampled_from(["valence", "arousal", "surprise", "status",
                                             "surprise_domain", "epistemic_debt"]),
                            _meta_value, max_size=6),
    "source": st.sampled_from([None, "user", "tool", "x:y", ""]),
    "realm": st.sampled_from([None, "work", ""]),
})


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(memories=st.lists(_memory, min_size=1, max_size=6), data=st.data())
def test_scores_are_finite_for_any_input(memories: list[dict[str, Any]],
                                         data: st.DataObject) -> None:
    n = len(memories)
    arrays = st.lists(_weird, min_size=n, max_size=n)
    relevance = data.draw(arrays)
    extra = {k: data.draw(arrays) for k in data.draw(st.sets(st.sampled_from(
        ["competitors", "prediction", "surprise", "integration", "epistemic_debt",
         "surprise_domain", "realm_reliability"])))}
    affect = Affect(*data.draw(st.tuples(_weird, _weird, _weird, _weird)))
    now = data.draw(st.floats(NOW - 1e6, NOW + 1e9))
    weights = data.draw(st.lists(st.floats(0, 10), min_size=19, max_size=19))
    config = ScoringConfig.defaults()
    for f, w in zip(config.factors, weights, strict=True):
        config = config.with_factor(f.name, weight=w)
    scored = Scorer(config=config).score(make_state(memories), np.arange(n),
                                         np.array(relevance), now=now, affect=affect,
                                         extra=extra)
    assert np.isfinite(scored.final).all() and (scored.final >= 0).all()
    for name, values in scored.factors.items():
        assert np.isfinite(values).all() and (values >= 0).all(), name


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(memories=st.lists(_memory, min_size=1, max_size=8), data=st.data())
def test_final_is_the_weighted_log_sum_of_the_factors_in_order_bit_for_bit(
        memories: list[dict[str, Any]], data: st.DataObject) -> None:
    # The factors are combined as one table (issue 26); the final score must stay what adding
    # each factor's weighted log in turn gave, to the last bit (rankings tie-break on it).
    n = len(memories)
    relevance = np.array(data.draw(st.lists(_weird, min_size=n, max_size=n)))
    weights = data.draw(st.lists(st.sampled_from([0.0, 0.5, 1.0, 1.0, 2.0, 7.5]), min_size=19, max_size=19))
    config = ScoringConfig.defaults()
    for f, w in zip(config.factors, weights, strict=True):
        config = config.with_factor(f.name, weight=w)
    scored = Scorer(config=config).score(make_state(memories), np.arange(n), relevance, now=NOW)
    log_final = np.zeros(n)
    for f in config.factors:
        if f.enabled and f.weight != 0.0:
            with np.errstate(divide="ignore"):
                log_final += f.weight * np.log(scored.factors[f.name])
    assert np.array_equal(scored.final, np.exp(np.minimum(log_final, 700.0)))


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(memories=st.lists(_memory, min_size=1, max_size=8), data=st.data())
def test_the_fused_factor_kernel_gives_each_factors_own_values_bit_for_bit(
        memories: list[dict[str, Any]], data: st.DataObject) -> None:
    # combine computes Relevance, ActR, Strength, Confidence, Kind, Spacing and Tier in one
    # kernel call (kernels/scoring.py `core`, issue 26): each must be what its own factor
    # function (and kernel) gives, to the last bit, whichever of them are on.
    n = len(memories)
    relevance = np.array(data.draw(st.lists(_weird, min_size=n, max_size=n)))
    now = data.draw(st.floats(NOW - 1e6, NOW + 1e9))
    on = data.draw(st.sets(st.sampled_from(CORE), min_size=1))
    config = ScoringConfig.defaults().only(*on, "Epistemic")
    config = config.with_factor("Relevance", scale=data.draw(st.sampled_from(["cosine", "unit"])))
    config = config.with_factor("ActR", decay=data.draw(st.floats(0.05, 0.95)),
                                min_age_seconds=data.draw(st.floats(1.0, 1e5)))
    config = config.with_factor("Spacing", min_accesses=data.draw(st.sampled_from([0.0, 2.0, 5.0])))
    config = config.with_factor("Kind", other=data.draw(st.floats(0.0, 3.0)))
    state = make_state(memories)
    rows = np.arange(n)
    scored = Scorer(config=config).score(state, rows, relevance, now=now)
    assert set(scored.factors) == {*on, "Epistemic"}
    for name in on:
        own = FACTORS[name].fn(Inputs(state, rows, relevance, now, Affect(), {}),
                               config.factor(name).params)
        expected = np.array(np.broadcast_to(own, (1, n)), np.float64)
        guard(expected)  # what combine does to every factor's values
        assert np.array_equal(scored.factors[name], expected[0]), name


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(memories=st.lists(_memory, min_size=1, max_size=6), data=st.data())
def test_a_factor_without_its_signals_is_idle(memories: list[dict[str, Any]],
                                             data: st.DataObject) -> None:
    # combine skips a factor none of whose signals a row has when its declared idle value
    # is 1.0 (issue 26): the function must give exactly that value then, whatever the
    # affect, the other meta keys and the params
    n = len(memories)
    affect = Affect(*data.draw(st.tuples(_weird, _weird, _weird, _weird)))
    config = ScoringConfig.defaults()
    config = config.with_factor("Status", default=data.draw(st.sampled_from(
        ["verified", "active", "observed", "proposed"])))
    config = config.with_factor("IntegrationWeight", max=data.draw(st.sampled_from([0.5, 1.0, 2.0])))
    config = config.with_factor("RealmReliability", realms=data.draw(st.sampled_from(
        [{}, {"work": 0.9}])))
    for name, spec in FACTORS.items():
        if spec.idle is None:
            continue
        params = config.factor(name).params
        idle = spec.idle(params)
        rows = [{**m, "meta": {k: v for k, v in m["meta"].items() if k not in spec.signals}}
                for m in memories]
        extra = {k: [1.0] * n for k in data.draw(st.sets(st.sampled_from(
            ["competitors", "prediction", "surprise", "integration", "epistemic_debt",
             "surprise_domain", "realm_reliability"]))) if k not in spec.signals}
        value = spec.fn(Inputs(make_state(rows), np.arange(n), np.ones(n), NOW, affect, extra),
                        params)
        if idle is not None:
            assert isinstance(value, float) and value == idle, name


@pytest.mark.parametrize("seed", range(6))
def test_the_rows_columns_are_gathered_as_read_one_by_one(seed: int) -> None:
    # many rows close together are read through a copy of their range (issue 26), others
    # one value at a time: both must give each row's own values, in the rows' order
    rng = np.random.default_rng(seed)
    specs = [{"kind": str(rng.choice(["episode", "correction", "belief"])),
              "created": NOW - float(rng.uniform(0, 1e7)), "mu": float(rng.uniform(0, 1)),
              "n": int(rng.integers(0, 9)), "accesses": [NOW - 5.0] * int(rng.integers(0, 3))}
             for _ in range(300)]
    state = make_state(specs)
    for rows in (rng.permutation(300)[: int(rng.integers(1, 300))], np.arange(40, 80),
                 rng.choice(300, 20), np.array([7])):
        inputs = Inputs(state, np.asarray(rows, np.int64), np.ones(len(rows)), NOW, Affect(), {})
        want = [[column[r] for r in rows.tolist()] for column in (
            state.created, state.access_count, state.n, state.last_active, state.mu, state.var)]
        assert inputs.numbers.tolist() == want
        assert inputs.kind.tolist() == [state.kind[r] for r in rows.tolist()]
        assert inputs.kind.dtype == np.int64 and inputs.numbers.dtype == np.float64


def test_metas_after_a_write_decode_only_the_new_rows() -> None:
    # A conversation writes a memory between two queries; a query's candidates then hold
    # rows the Scorer's meta cache has decoded and the new ones. Only the new ones are
    # decoded (the others' dicts are the cached objects), and the metas read are those of
    # an uncached read: empty, undecodable and non-object metas read as none.
    metas = [{"meta": {"status": "verified", "n": i}} for i in range(6)]
    state = make_state([*metas, {}, {"meta": [1, 2]}])
    cache = MetaCache()

    def read(rows: list[int], with_cache: bool = True) -> list[tuple[int, dict[str, Any]]]:
        return Inputs(state, np.array(rows), np.ones(len(rows)), NOW, Affect(), {},
                      cache if with_cache else None).metas

    first = read([0, 1, 2, 6, 7])
    assert first == read([0, 1, 2, 6, 7], with_cache=False)
    assert [i for i, _ in first] == [0, 1, 2] and cache.decoded == 4  # row 6 has no meta
    row = ops.Row(id="m8", kind=int(parse_kind("belief")), flags=0, created=NOW, mu=0.7,
                  var=0.04, n=0, text="memory number 8", tags=(), realm=None, source=None,
                  meta="{not json")
    state.apply(ops.ADD, memoryview(ops.encode_add(row, np.zeros(4, np.float32))))
    rows = [3, 2, 8, 0, 6, 1]
    again = read(rows)
    assert again == read(rows, with_cache=False)
    assert [i for i, _ in again] == [0, 1, 3, 5]
    assert cache.decoded == 4 + 2  # rows 3 and 8
    by_row = {rows[i]: m for i, m in again}
    assert all(by_row[r] is dict(first)[p] for p, r in ((0, 0), (1, 1), (2, 2)))
    inputs = Inputs(state, np.array(rows), np.ones(len(rows)), NOW, Affect(), {}, cache)
    assert inputs.meta_keys == {"status", "n"} and cache.decoded == 6


def _metas_as_read_before(state: State, rows: list[int]) -> tuple[list, frozenset[str]]:
    """The metas and key set as Inputs read them before the key-set cache, uncached: each
    row's meta text decoded (none, undecodable, not an object or empty: no meta)."""
    out = []
    for i, r in enumerate(rows):
        text = state.meta[r]
        try:
            m = json.loads(text) if text else None
        except ValueError:
            m = None
        if isinstance(m, dict) and m:
            out.append((i, m))
    return out, frozenset().union(*(m for _, m in out))


_META = st.one_of(st.none(), st.just("{not json"), st.just("[1, 2]"), st.just("{}"),
                  st.dictionaries(st.sampled_from(["session", "status", "arousal", "n"]),
                                  st.integers(0, 3), max_size=3).map(json.dumps))
# a conversation's life seen by one Scorer: memories written (with or without a meta),
# forgotten, and queries over some rows
_LIFE = st.lists(st.one_of(st.tuples(st.just("add"), _META),
                           st.tuples(st.just("catch up"), st.just(0)),  # a writer's, issue 26
                           st.tuples(st.just("forget"), st.integers(0, 12)),
                           st.tuples(st.just("query"), st.integers(0, 2**32))), max_size=60)


def _add_row(state: State, n: int, meta: Any) -> None:
    """Row `n` of a generated life: memory `m{n}` with `meta`."""
    row = ops.Row(id=f"m{n}", kind=int(parse_kind("belief")), flags=0, created=NOW, mu=0.7,
                  var=0.04, n=0, text=f"memory {n}", tags=(), realm=None, source=None, meta=meta)
    state.apply(ops.ADD, memoryview(ops.encode_add(row, np.zeros(4, np.float32))))


@settings(max_examples=150, deadline=None)
@given(_LIFE)
def test_cached_meta_keys_and_metas_are_an_uncached_reads(life: list) -> None:
    state, cache, n = State(), MetaCache(), 0
    for what, value in life:
        if what == "add":
            _add_row(state, n, value)
            n += 1
        elif what == "catch up":
            cache.catch_up(state)
        elif what == "forget" and value < n:
            state.apply(ops.FORGET, memoryview(ops.encode_forget(f"m{value}", NOW)))
        elif what == "query" and n:
            rng = np.random.default_rng(value)
            rows = rng.choice(n, int(rng.integers(1, n + 1)), replace=False).tolist()
            metas, keys = _metas_as_read_before(state, rows)
            inputs = Inputs(state, np.array(rows, np.int64), np.ones(len(rows)), NOW, Affect(),
                            {}, cache)
            if value % 2:  # the key set alone (most queries), or the metas first
                assert inputs.meta_keys == keys
            assert inputs.metas == metas
            assert inputs.meta_keys == keys


def test_a_writers_catch_up_reads_only_the_newest_metas_and_queries_read_the_rest(monkeypatch) -> None:
    # a bulk import's metas are not all decoded in the writer's thread (issue 26): the newest
    # `_CATCH_UP` are; a query that scores the others reads them then, with the same result
    from soul.engines.resonance.resonate import scoring_cache

    monkeypatch.setattr(scoring_cache, "_CATCH_UP", 2)
    state, cache = State(), MetaCache()
    _add_row(state, 0, '{"a": 1}')
    # a query has read this state: the cache is the state's, as a writer's catch-up finds it
    assert Inputs(state, np.array([0], np.int64), np.ones(1), NOW, Affect(), {}, cache).metas == [(0, {"a": 1})]
    for n in range(1, 6):
        _add_row(state, n, f'{{"b": {n}}}')
    before = cache.decoded
    cache.catch_up(state)
    assert cache.decoded == before + 2  # rows 4 and 5
    rows = list(range(6))
    metas, keys = _metas_as_read_before(state, rows)
    inputs = Inputs(state, np.array(rows, np.int64), np.ones(6), NOW, Affect(), {}, cache)
    assert inputs.metas == metas and inputs.meta_keys == keys
    assert cache.decoded == before + 5  # rows 1 to 3, by the query


# a conversation's accesses seen by one Scorer: memories written, touched (several at a
# time, past the kept history), forgotten, a writer's catch-up of some live rows (repeats
# included), and queries over some rows
_ACCESSES = st.lists(st.one_of(st.tuples(st.just("add"), st.just(0)),
                               st.tuples(st.just("touch"), st.integers(0, 2**32)),
                               st.tuples(st.just("forget"), st.integers(0, 4)),
                               st.tuples(st.just("catch up"), st.integers(0, 2**32)),  # a writer's
                               st.tuples(st.just("query"), st.integers(0, 2**32))), max_size=80)


@settings(max_examples=150, deadline=None)
@given(_ACCESSES)
def test_cached_access_histories_are_the_states_lists(life: list) -> None:
    # the access times the ACT-R and Spacing factors read: kept across queries by the
    # Scorer (re-read when a row's access count moved or it was forgotten), the same
    # floats, row by row, as a copy of each row's list made for the query
    state, histories, n, t = State(), AccessHistories(), 0, NOW
    for what, value in life:
        rng = np.random.default_rng(value)
        if what == "add":
            _add_row(state, n, None)
            n += 1
        elif what == "touch" and n:
            for _ in range(int(rng.integers(1, 20))):
                t += float(rng.uniform(0.5, 5000.0))
                ids = [f"m{r}" for r in rng.choice(n, int(rng.integers(1, n + 1)), replace=False)]
                state.apply(ops.ACCESS, memoryview(ops.encode_access(ids, t)))
        elif what == "forget" and value < n:
            state.apply(ops.FORGET, memoryview(ops.encode_forget(f"m{value}", NOW)))
        elif what == "catch up" and n:  # after a write that logged these rows' accesses
            alive = [r for r in range(n) if state.is_alive(r)]
            histories.catch_up(state, rng.choice(alive, int(rng.integers(0, len(alive) + 1))).tolist()
                               if alive else [])
        elif what == "query" and n:
            rows = rng.choice(n, int(rng.integers(1, n + 1)), replace=False)
            inputs = Inputs(state, rows, np.ones(len(rows)), NOW, Affect(), {}, None, histories)
            flat, counts = inputs.history
            want = [tuple(state.accessed.get(r, ())) for r in rows.tolist()]
            assert counts.tolist() == [len(h) for h in want]
            assert flat.dtype == np.float64 and flat.tolist() == [x for h in want for x in h]


def test_access_histories_are_read_again_only_for_rows_touched_since() -> None:
    state = make_state([{"accesses": [NOW - 10.0 * i] * (i % 3)} for i in range(40)])
    histories = AccessHistories()

    def read(rows: list[int]) -> tuple[np.ndarray, np.ndarray]:
        return Inputs(state, np.array(rows), np.ones(len(rows)), NOW, Affect(), {}, None,
                      histories).history

    read(list(range(0, 40, 2)))
    assert histories.read_rows == 13  # every third row was never accessed: nothing to copy
    state.apply(ops.ACCESS, memoryview(ops.encode_access(["m4", "m31"], NOW)))
    flat, counts = read([4, 31, 6, 2])
    assert histories.read_rows == 13 + 2  # m4 was read and touched since, m31 never read
    assert counts.tolist() == [2, 2, 0, 2]
    assert flat.tolist() == [NOW - 40.0, NOW, NOW - 310.0, NOW, NOW - 20.0, NOW - 20.0]
    state.apply(ops.FORGET, memoryview(ops.encode_forget("m4", NOW)))  # its times go too
    flat, counts = read([4, 31])
    assert counts.tolist() == [0, 2] and flat.tolist() == [NOW - 310.0, NOW]


def test_a_full_history_table_starts_over_without_losing_the_rows_it_had_read(monkeypatch: pytest.MonkeyPatch) -> None:
    # the table keeps at most _SLOTS rows' times, then starts over; a query that fills it
    # mixes rows read before (still cached) with new ones: every row must read its own times
    from soul.engines.resonance.resonate import scoring_cache

    monkeypatch.setattr(scoring_cache, "_SLOTS", 8)
    state = make_state([{"accesses": [NOW - float(i)]} for i in range(12)])
    histories = AccessHistories()

    def read(rows: list[int]) -> list[list[float]]:
        flat, counts = Inputs(state, np.array(rows), np.ones(len(rows)), NOW, Affect(), {}, None,
                              histories).history
        out, at = [], 0
        for c in counts.tolist():
            out.append(flat[at:at + c].tolist())
            at += c
        return out

    assert read([0, 1, 2, 3, 4]) == [[NOW - float(i)] for i in range(5)]
    # rows 0-2 are cached; 5-9 are new and do not fit beside them: the table starts over
    assert read([0, 1, 2, 5, 6, 7, 8, 9]) == [[NOW - float(i)] for i in (0, 1, 2, 5, 6, 7, 8, 9)]
    assert read([3, 10, 11, 0]) == [[NOW - float(i)] for i in (3, 10, 11, 0)]


@pytest.mark.parametrize("seed", range(10))
def test_the_cache_kernels_are_their_numpy_forms(seed: int) -> None:
    # the scoring caches' bookkeeping runs as one kernel call each (issue 26: ~10 numpy calls
    # over a few hundred rows, cold in a turn): numpy's gathers, masks and bounds exactly
    from soul.engines.resonance.kernels.scoring import gather_histories, key_sets, stale_histories

    rng = np.random.default_rng(seed)
    n_rows, n = 500, int(rng.integers(0, 300))
    rows = rng.choice(n_rows, n, replace=False).astype(np.int64)
    seen = rng.integers(-1, 4, n_rows).astype(np.int64)
    counts = rng.integers(-1, 4, n).astype(np.float64)
    at = np.empty(n, np.int64)
    m = stale_histories(rows, counts, seen, at)
    assert at[:m].tolist() == np.flatnonzero(seen[rows] != counts).tolist()
    width = 17
    times = rng.uniform(0, 1e9, (64, width))
    kept = rng.integers(0, width + 1, 64).astype(np.int64)
    slot = rng.integers(0, 64, n_rows).astype(np.int64)
    flat, got = np.empty(n * width), np.empty(n, np.int64)
    size = gather_histories(rows, slot, kept, times, flat, got)
    want = times[slot[rows]][kept[slot[rows]][:, None] > np.arange(width)]
    assert got.tolist() == kept[slot[rows]].tolist() and flat[:size].tobytes() == want.tobytes()
    key_of = rng.integers(-1 if seed % 2 else 0, 6, n_rows).astype(np.int32)
    ids, unread = np.empty(n, np.int32), np.empty(n, np.int64)
    m, lo, hi = key_sets(key_of, rows, ids, unread)
    assert ids.tolist() == key_of[rows].tolist()
    assert unread[:m].tolist() == np.flatnonzero(key_of[rows] < 0).tolist()
    assert (lo, hi) == ((int(key_of[rows].min()), int(key_of[rows].max())) if n else (0, -1))


def test_the_scored_rows_columns_are_read_in_the_states_arrays(monkeypatch: pytest.MonkeyPatch) -> None:
    # the kind and numeric columns of the scored rows are gathered by one kernel call over
    # the State's own array('d'/'I') and bytearray columns (issue 26: a copy, frombuffer and
    # a gather per column): the values the boxed look-up per row reads
    from soul.engines.resonance.kernels import scoring as kernels

    rng = np.random.default_rng(3)
    state = make_state([{"created": NOW - float(rng.uniform(0, 1e6)), "n": int(rng.integers(0, 9)),
                         "mu": float(rng.uniform(0, 1)), "var": float(rng.uniform(0, 0.1)),
                         "kind": str(rng.choice(["belief", "episode", "correction"])),
                         "accesses": [NOW - float(rng.uniform(0, 1e5))] * int(rng.integers(0, 4))}
                        for _ in range(60)])
    rows = rng.choice(60, 40, replace=False)
    columns = (state.created, state.access_count, state.n, state.last_active, state.mu,
               state.var)
    want = np.array([[c[r] for r in rows.tolist()] for c in columns], np.float64)
    calls = []
    gather = kernels.gather_columns
    monkeypatch.setattr(kernels, "gather_columns", lambda *a: calls.append(1) or gather(*a))
    inputs = Inputs(state, rows, np.ones(40), NOW, Affect(), {})
    assert inputs.numbers.tobytes() == want.tobytes() and calls == [1]
    assert inputs.kind.tolist() == [state.kind[r] for r in rows.tolist()]
    state.created.append(NOW)  # no view of a column outlives the call: the State can grow


def test_the_source_codes_kept_across_queries_give_each_rows_own_source_value() -> None:
    # Epistemic reads each row's source as a code kept by the Scorer (issue 26: every
    # candidate's source looked up each query): per query, the table value of each row's
    # own source — new rows, forgotten rows (their source cleared: "unknown"), other params
    sources = ["user", "model", "user:alice", None, "tool", "Autonomous", "robot"]
    state = make_state([{"source": sources[i % len(sources)]} for i in range(40)])
    config = ScoringConfig.defaults().only("Epistemic")
    scorer = Scorer(config=config)
    params = config.factors[[f.name for f in config.factors].index("Epistemic")].params
    table = {**params["values"], "": params["unknown"]}

    def want(rows: list[int]) -> list[float]:
        out = []
        for r in rows:
            low = (state.source[r] or "").lower()
            out.append(float(table.get(low, table.get(low.split(":", 1)[0], params["unknown"]))))
        return out

    rng = np.random.default_rng(9)
    for step in range(12):
        if step == 4:
            state.apply(ops.FORGET, memoryview(ops.encode_forget("m1", NOW)))  # "model": gone
        if step == 8:
            state = make_state([{"source": "model"}] * 3)  # another state: codes start over
        rows = rng.choice(state.n_rows, int(rng.integers(1, state.n_rows + 1)), replace=False)
        got = scorer.score(state, rows, np.ones(len(rows)), now=NOW).factors["Epistemic"]
        assert got.tolist() == want(rows.tolist())
