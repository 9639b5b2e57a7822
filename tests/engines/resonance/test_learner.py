"""The Thompson learner: real Beta draws, convergence, credit, buckets, persistence."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import pytest

from soul.engines.resonance import ConfigError
from soul.engines.resonance.resonate.learner import (
    PARAMETERS,
    Draw,
    LearnerStateError,
    QueryFeatures,
    ThompsonLearner,
    UnknownDraw,
    query_features,
)

SHORT = QueryFeatures(length=20, terms=2, technical=False)
TECH = QueryFeatures(length=60, terms=6, technical=True)
SPREAD = list(PARAMETERS).index("spread_strength")


def test_arms_split_the_reference_ranges() -> None:
    learner = ThompsonLearner(seed=1)
    assert learner.values.shape == (7, 5)
    assert learner.values[SPREAD].tolist() == [0.2, 0.35, 0.5, 0.65, 0.8]
    for i, (lo, hi) in enumerate(PARAMETERS.values()):
        assert learner.values[i, 0] == lo and learner.values[i, -1] == hi
    assert PARAMETERS["semantic_weight"] == (0.4, 0.8) and PARAMETERS["hebbian"] == (0.01, 0.1)


def test_query_features_and_buckets() -> None:
    f = query_features("what did Caroline say about her sister?")
    assert f == QueryFeatures(length=39, terms=3, technical=False)
    assert f.bucket() == "short/plain"
    assert query_features("why does parse_kind raise ConfigError").technical
    assert query_features("the traceback from main.py").technical
    assert query_features("call spread() in kernels/graph").technical
    long = query_features(
        "how many times did Melanie go camping with her kids last summer near the lake")
    assert long.bucket() == "long/plain"
    assert QueryFeatures(10, 5, True).bucket() == "medium/technical"


def test_seeded_learners_are_reproducible() -> None:
    def run(seed: int) -> list[dict[str, float]]:
        learner = ThompsonLearner(seed=seed)
        out = []
        for i in range(30):
            d = learner.sample(SHORT if i % 2 else TECH)
            learner.feedback(d, useful=d.arms["inhibition"] == 2, position=i % 4)
            out.append(d.params)
        return out

    assert run(42) == run(42)
    assert run(42) != run(43)


def test_sample_takes_the_argmax_of_one_beta_draw_per_arm() -> None:
    a, b = ThompsonLearner(seed=9), ThompsonLearner(seed=9)
    for _ in range(20):
        draws = b.sample_posteriors(SHORT)
        d = a.sample(SHORT)
        assert [d.arms[n] for n in PARAMETERS] == draws.argmax(axis=1).tolist()
        assert d.params == {n: float(a.values[i, d.arms[n]]) for i, n in enumerate(PARAMETERS)}


def test_draws_follow_the_beta_posterior_moments() -> None:
    learner = ThompsonLearner(seed=3)
    d = Draw("x", SHORT.bucket(), {}, {n: 0 for n in PARAMETERS})
    for k in range(30):  # arm 0 of every parameter: 20 useful, 10 not
        learner.feedback(d, useful=k % 3 != 0)
    a, b = learner.posterior(SHORT)
    assert a[0, 0] == pytest.approx(22.0) and b[0, 0] == pytest.approx(12.0)
    assert a[0, 1] == b[0, 1] == 2.0
    samples = np.stack([learner.sample_posteriors(SHORT) for _ in range(20_000)])
    mean = a / (a + b)
    var = a * b / ((a + b) ** 2 * (a + b + 1))
    np.testing.assert_allclose(samples.mean(axis=0), mean, atol=0.005)
    np.testing.assert_allclose(samples.var(axis=0), var, rtol=0.06)
    # Beta(2, 2) has skewness 0; Beta(22, 12) is skewed left: the draws say so too.
    centred = samples[:, 0, 0] - samples[:, 0, 0].mean()
    assert (centred ** 3).mean() < 0
    assert samples.min() > 0.0 and samples.max() < 1.0


def test_converges_on_the_rewarded_arm() -> None:
    learner = ThompsonLearner(seed=0)
    picks = []
    for _ in range(400):
        d = learner.sample(SHORT)
        good = d.params["spread_strength"] == pytest.approx(0.65)
        learner.feedback(d, useful=good)
        picks.append(good)
    assert np.mean(picks[-100:]) > 0.9
    assert learner.best(SHORT)["spread_strength"] == pytest.approx(0.65)
    # Exploration happened early on: every arm was tried.
    a, b = learner.posterior(SHORT)
    assert ((a[SPREAD] + b[SPREAD]) > 4.0).all()


def test_position_discounts_the_reward() -> None:
    learner = ThompsonLearner(seed=0)
    d = learner.sample(SHORT)
    learner.feedback(d, useful=True, position=0)
    learner.feedback(d, useful=False, position=5)
    a, b = learner.posterior("*")
    arm = d.arms["spread_strength"]
    assert a[SPREAD, arm] == pytest.approx(3.0)
    assert b[SPREAD, arm] == pytest.approx(2.0 + 1 / (1 + 0.2 * 5))


def test_feedback_by_id_and_unknown_ids() -> None:
    learner = ThompsonLearner(seed=0)
    d = learner.sample(TECH)
    learner.feedback(d.id, useful=True, position=1)
    r = 1 / 1.2
    arm = d.arms["spread_strength"]
    assert learner.posterior("*")[0][SPREAD, arm] == pytest.approx(2.0 + r)
    # The bucket's own evidence (r) plus the global's, weighted by 1 - r/20 while it is sparse.
    assert learner.posterior(TECH)[0][SPREAD, arm] == pytest.approx(2.0 + r + (1 - r / 20) * r)
    with pytest.raises(UnknownDraw, match="no recent draw 'nope'"):
        learner.feedback("nope", useful=True)


def test_evidence_is_capped_by_scaling_both_down() -> None:
    learner = ThompsonLearner(seed=0, evidence_cap=50.0)
    d = Draw("x", SHORT.bucket(), {}, {n: 1 for n in PARAMETERS})
    for k in range(400):
        learner.feedback(d, useful=k % 4 != 0)
    for bucket in ("*", SHORT.bucket()):
        a, b = learner.posterior(bucket)
        assert a[SPREAD, 1] + b[SPREAD, 1] == pytest.approx(50.0)
        assert a[SPREAD, 1] / (a[SPREAD, 1] + b[SPREAD, 1]) == pytest.approx(0.75, abs=0.03)
    assert learner.rounds == 400


def test_buckets_learn_different_preferred_arms() -> None:
    learner = ThompsonLearner(seed=5)
    want = {SHORT.bucket(): 0.35, TECH.bucket(): 0.8}
    for i in range(800):
        f = SHORT if i % 2 else TECH
        d = learner.sample(f)
        learner.feedback(d, useful=d.params["spread_strength"] == pytest.approx(want[f.bucket()]))
    assert learner.best(SHORT)["spread_strength"] == pytest.approx(0.35)
    assert learner.best(TECH)["spread_strength"] == pytest.approx(0.8)
    picks = [learner.sample(TECH).params["spread_strength"] for _ in range(200)]
    assert np.mean(np.isclose(picks, 0.8)) > 0.8


def test_a_new_bucket_borrows_from_the_global_posterior() -> None:
    learner = ThompsonLearner(seed=5)
    d = Draw("x", SHORT.bucket(), {}, {n: 4 for n in PARAMETERS})
    for _ in range(30):
        learner.feedback(d, useful=True)
    new = QueryFeatures(200, 30, True)  # never seen: long/technical
    assert learner.best(new)["spread_strength"] == 0.8  # arm 4, learned elsewhere
    a, _ = learner.posterior(new)
    np.testing.assert_allclose(a, learner.posterior("*")[0])
    # SHORT has 30 units of its own evidence (>= 20): it stands alone.
    np.testing.assert_allclose(learner.posterior(SHORT)[0][SPREAD], [2, 2, 2, 2, 32])
    # Before any feedback, best() sits in the middle of each range.
    fresh = ThompsonLearner(seed=1).best(SHORT)
    assert fresh["spread_strength"] == 0.5 and fresh["basin_boost"] == 1.25


def test_realm_reliability_from_feedback() -> None:
    learner = ThompsonLearner(seed=0)
    d = learner.sample(SHORT)
    for _ in range(8):
        learner.feedback(d, useful=True, realm="work")
        learner.feedback(d, useful=False, realm="chat")
    r = learner.realm_reliability(["work", "chat", "other", None])
    np.testing.assert_allclose(r, [9 / 10, 1 / 10, 0.5, 0.5])


def test_save_load_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "learner.json"
    learner = ThompsonLearner(seed=2, path=path)
    for i in range(50):
        d = learner.sample(SHORT if i % 2 else TECH)
        learner.feedback(d, useful=d.arms["hebbian"] == 3, position=i % 3, realm="work")
    learner.save()
    assert not list(path.parent.glob(".*.tmp"))  # the temporary file was renamed away
    state = json.loads(path.read_text())
    assert state == learner.state() and state["rounds"] == 50
    back = ThompsonLearner.load(path, seed=7)
    assert back.state() == learner.state()
    assert back.best(TECH) == learner.best(TECH)
    # Two learners loaded with one seed draw alike.
    again = ThompsonLearner.load(path, seed=7)
    assert [back.sample(SHORT).params for _ in range(5)] == \
        [again.sample(SHORT).params for _ in range(5)]
    # A learner made with the path resumes from it.
    assert ThompsonLearner(path=path).state() == learner.state()


def test_bad_states_and_options(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "learner.json"
    path.write_text("{torn")
    with pytest.raises(LearnerStateError, match="cannot be read"):
        ThompsonLearner.load(path)
    caplog.set_level(logging.WARNING)
    fresh = ThompsonLearner(path=path)  # resumed? no: warned, fresh
    assert fresh.rounds == 0 and "starting fresh" in caplog.text
    ThompsonLearner(seed=0, arms=3).save(path)
    with pytest.raises(LearnerStateError, match="3 arms per parameter; this learner has 5"):
        ThompsonLearner(arms=5)._restore(json.loads(path.read_text()), str(path))
    assert ThompsonLearner.load(path).arms == 3
    state = json.loads(path.read_text())
    state["posteriors"]["*"]["hebbian"]["alpha"][0] = -1
    path.write_text(json.dumps(state))
    with pytest.raises(LearnerStateError, match="non-positive"):
        ThompsonLearner.load(path)
    with pytest.raises(ConfigError, match="at least 2 arms"):
        ThompsonLearner(arms=1)
    with pytest.raises(ConfigError, match="evidence_cap"):
        ThompsonLearner(evidence_cap=3.0)
    with pytest.raises(ConfigError, match="needs a path"):
        ThompsonLearner().save()
